"""One check for the keys of a mapping and one for a named choice, with one form of message.

Every reader of a config, file or argument refuses what it does not know the same way: the message names the bad
key (or value), where it was found and what is accepted, and the error type is the reader's own (``KeyError`` for a
config, a file's error class for a file), so callers catch what they caught before.

Example:
    >>> check_keys({"belt_sped": 0.1}, ["belt_speed"], what="WorldParams field")
    Traceback (most recent call last):
    ...
    KeyError: "unknown WorldParams field(s) ['belt_sped']; valid: ['belt_speed']"
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any, TypeVar

T = TypeVar("T")


def check_keys(
    keys: Iterable[Any],
    allowed: Iterable[Any],
    *,
    what: str,
    where: str = "",
    required: Iterable[Any] = (),
    error: type[Exception] = KeyError,
) -> None:
    """Refuse a key outside ``allowed``, then a ``required`` key that is absent.

    Args:
        keys: The keys found (a mapping, or any collection of names).
        allowed: The keys accepted, in the order the message lists them.
        what: What one key is, for the message (``"lab key"``, ``"WorldParams field"``).
        where: Where the keys were found (a file, an entry of it); the message starts with it.
        required: The keys that must be present (a subset of ``allowed``).
        error: The exception class to raise.

    Raises:
        error: ``{where}: unknown {what}(s) [...]; valid: [...]`` for unknown keys (sorted), else
            ``{where}: missing {what}(s) [...]; required: [...]`` (and ``optional: [...]``) for absent ones.
    """
    found = list(keys)
    valid = list(allowed)
    head = f"{where}: " if where else ""
    unknown = sorted(set(found) - set(valid), key=str)
    if unknown:
        raise error(f"{head}unknown {what}(s) {unknown}; valid: {valid}")
    needed = list(required)
    missing = [k for k in needed if k not in found]
    if missing:
        optional = [k for k in valid if k not in needed]
        extra = f", optional: {optional}" if optional else ""
        raise error(f"{head}missing {what}(s) {missing}; required: {needed}{extra}")


def check_choice(
    value: T, choices: Collection[Any], *, what: str, where: str = "", error: type[Exception] = ValueError
) -> T:
    """``value`` when it is one of ``choices``.

    Raises:
        error: ``{where}: unknown {what} {value!r}; valid: [...]`` (``where`` as for :func:`check_keys`).
    """
    try:
        ok = value in choices
    except TypeError:  # an unhashable value is no key of a dict or set
        ok = False
    if not ok:
        head = f"{where}: " if where else ""
        raise error(f"{head}unknown {what} {value!r}; valid: {list(choices)}")
    return value


__all__ = ["check_choice", "check_keys"]
