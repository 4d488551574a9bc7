"""One mapping validator (r2s2r_envs.mappings): unknown keys and missing ones refused with one form of message,
naming the bad key, where it was and what is accepted, with the caller's exception type."""

from __future__ import annotations

import pytest

from r2s2r_envs.mappings import check_choice, check_keys


class FileError(ValueError):
    pass


def test_known_keys_pass():
    check_keys({"a": 1}, ["a", "b"], what="key")
    check_keys(("b", "a"), ("a", "b"), what="name", required=("a",))
    check_keys({}, ["a"], what="key")


def test_unknown_keys_are_named_sorted_with_the_valid_ones_in_their_order():
    with pytest.raises(KeyError) as err:
        check_keys({"z": 1, "y": 2, "b": 3}, ["b", "a"], what="lab key")
    assert err.value.args[0] == "unknown lab key(s) ['y', 'z']; valid: ['b', 'a']"


def test_where_leads_and_the_callers_error_type_is_raised():
    with pytest.raises(FileError, match=r"^f\.json: datasets\[0\]: unknown field\(s\) \['x'\]; valid: \['name'\]$"):
        check_keys({"x": 1}, ["name"], what="field", where="f.json: datasets[0]", error=FileError)


def test_missing_keys_list_the_required_and_optional_ones():
    with pytest.raises(KeyError) as err:
        check_keys({"name": "x"}, ["name", "world", "operator"], what="key", where="lab", required=["name", "world"])
    assert err.value.args[0] == "lab: missing key(s) ['world']; required: ['name', 'world'], optional: ['operator']"
    with pytest.raises(ValueError, match=r"missing key\(s\) \['b'\]; required: \['a', 'b'\]$"):
        check_keys({"a": 1}, ["a", "b"], what="key", required=["a", "b"], error=ValueError)


def test_unknown_keys_come_before_missing_ones():
    with pytest.raises(KeyError, match="unknown key"):
        check_keys({"x": 1}, ["a"], what="key", required=["a"])


def test_keys_of_mixed_types_are_sorted_as_text():
    with pytest.raises(KeyError, match=r"\[1, 'x'\]"):
        check_keys({1: 0, "x": 0}, ["a"], what="key")


def test_check_choice_returns_the_value_or_names_the_valid_ones():
    assert check_choice("dev", ("dev", "test"), what="split") == "dev"
    assert check_choice("b", {"a": 1, "b": 2}, what="condition") == "b"
    with pytest.raises(ValueError, match=r"^unknown split 'val'; valid: \['dev', 'test'\]$"):
        check_choice("val", ("dev", "test"), what="split")
    with pytest.raises(FileError, match=r"unknown condition \[1\]; valid: \['a'\]"):
        check_choice([1], {"a": 1}, what="condition", error=FileError)  # unhashable: not a key, no TypeError


def test_check_choice_names_where_the_value_was():
    with pytest.raises(FileError, match=r"^setup objects\[0\]: unknown category 'cone'; valid: \['cube', 'ball'\]$"):
        check_choice("cone", ("cube", "ball"), what="category", where="setup objects[0]", error=FileError)
