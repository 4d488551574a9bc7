"""The result file's published JSON Schema, its validation (with ``jsonschema``) and reading older versions.

A result file (docs/protocol.md#results-json, docs/leaderboard.md#schema) is checked against
``r2s2r_envs/evaluation/result_schema.json`` before anything trusts it.  Errors name the first offending field
(``result.records[3].env_seed: expected integer, got '7'``) and what the schema accepts there.  Files of schema
version 1 (written by r2s2r_envs 0.2 before the benchmark fields existed) are checked against their own schema,
``result_schema_v1.json``, and upgraded on reading: no policy failures, and a method section built from the
policy record.  Version 2 files (before the evaluation conditions and seed splits) are checked against
``result_schema_v2.json`` and read as one nominal condition, split ``legacy`` at base seed 271828 (else
``custom``).  Other versions are refused with a message naming the ones this package reads.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

import jsonschema
from jsonschema.exceptions import best_match

from r2s2r_envs._version import __version__
from r2s2r_envs.mappings import check_keys

#: Version of the result file format written by ``EvaluationResult.to_json``.
RESULT_SCHEMA_VERSION = 3
#: Versions this package reads (older ones are upgraded on reading).
READABLE_SCHEMA_VERSIONS = (1, 2, 3)
#: The ``format`` field of a result file.
RESULT_FORMAT = "r2s2r_envs.evaluation_result"
_SCHEMA_FILES = {1: "result_schema_v1.json", 2: "result_schema_v2.json", 3: "result_schema.json"}


class ResultSchemaError(ValueError):
    """A result file or dict that is not a valid evaluation result of a schema version this package reads."""


@cache
def result_schema(version: int = RESULT_SCHEMA_VERSION) -> dict[str, Any]:
    """The JSON Schema of a result file of ``version`` (the current one by default), as shipped in the package.

    Raises:
        ValueError: a version this package has no schema for.
    """
    if version not in _SCHEMA_FILES:
        raise ValueError(f"no result schema for version {version!r}; versions: {sorted(_SCHEMA_FILES)}")
    return json.loads(resources.files("r2s2r_envs.evaluation").joinpath(_SCHEMA_FILES[version]).read_text())


#: Keys of a result's ``method`` section (docs/leaderboard.md#schema): how the policy was made.  Read from the
#: published schema (its ``$defs.method.required``); a checkpoint's metadata carries the same keys
#: (``r2s2r_envs.policies.checkpoint.METADATA_KEYS`` is this tuple).
METHOD_KEYS: tuple[str, ...] = tuple(result_schema()["$defs"]["method"]["required"])


def _is_integer(checker: Any, value: Any) -> bool:
    # JSON Schema's "integer" accepts 3.0; a result holds integers as integers.
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(checker: Any, value: Any) -> bool:
    # Strict JSON has no NaN or infinity; a result holds finite numbers only.
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine_many(
        {"integer": _is_integer, "number": _is_number}
    ),
)


@cache
def _validator(version: int) -> Any:
    schema = result_schema(version)
    jsonschema.Draft202012Validator.check_schema(schema)
    return _Validator(schema)


def _field(path: Any) -> str:
    return "result" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def _message(error: jsonschema.ValidationError) -> str:
    """One line naming the field and what the schema accepts there."""
    where, kind, rule, value = _field(error.absolute_path), error.validator, error.validator_value, error.instance
    if kind == "type":
        types = [rule] if isinstance(rule, str) else list(rule)
        return f"{where}: expected {' or '.join(types)}, got {value!r}"
    if kind == "required":
        missing = [k for k in rule if k not in value]
        return f"{where}: missing key(s) {missing}; required: {list(rule)}"
    if kind == "additionalProperties" and rule is False:
        try:
            check_keys(value, sorted(error.schema.get("properties", {})), what="key", where=where, error=ValueError)
        except ValueError as exc:
            return str(exc)
    if kind in ("minimum", "maximum"):
        return f"{where}: expected {'>=' if kind == 'minimum' else '<='} {rule}, got {value!r}"
    if kind in ("minItems", "maxItems"):
        return f"{where}: expected {'at least' if kind == 'minItems' else 'at most'} {rule} items, got {len(value)}"
    if kind == "const":
        return f"{where}: expected {rule!r}, got {value!r}"
    if kind == "enum":
        return f"{where}: expected one of {rule}, got {value!r}"
    return f"{where}: {error.message}"


def check_version(data: Any) -> int:
    """The ``schema_version`` of a result dict, after checking it is a result of a version this package reads.

    Raises:
        ResultSchemaError: not a result (``format``), or a version this package does not read.
    """
    if not isinstance(data, Mapping) or data.get("format") != RESULT_FORMAT:
        found = data.get("format") if isinstance(data, Mapping) else type(data).__name__
        raise ResultSchemaError(f"not an r2s2r_envs evaluation result: format is {found!r}, expected {RESULT_FORMAT!r}")
    version = data.get("schema_version")
    if isinstance(version, bool) or version not in READABLE_SCHEMA_VERSIONS:
        readable = " and ".join(str(v) for v in READABLE_SCHEMA_VERSIONS)
        raise ResultSchemaError(
            f"unsupported evaluation result schema_version {version!r}: r2s2r_envs {__version__} reads "
            f"schema_version {readable} (a result from another version of the package needs that version to read it)"
        )
    return int(version)


def validate_result(data: Any) -> int:
    """Check a result dict against the schema of its version (and that the lab's provenance holds no physics).

    Returns:
        The result's schema version.

    Raises:
        ResultSchemaError: names the first offending field, e.g. ``result.records[3].env_seed``, and what the
            schema accepts there; an unsupported ``schema_version`` is refused before anything else.
    """
    version = check_version(data)
    provenance = data.get("provenance")
    if isinstance(provenance, Mapping) and provenance.get("domain") == "real":
        if "world_params" in provenance or "world" in provenance:
            raise ResultSchemaError(
                "result.provenance of the lab (domain 'real') holds physics ('world_params' or "
                "'world'); the lab must only disclose its name"
            )
    error = best_match(_validator(version).iter_errors(data))
    if error is not None:
        raise ResultSchemaError(_message(error))
    return version


def validate_method(method: Any) -> None:
    """Check a result's ``method`` section alone (before an evaluation starts, so a bad one fails at once).

    Raises:
        ResultSchemaError: names the offending key, e.g. ``result.method.real_fraction: expected <= 1``.
    """
    schema = {**result_schema(), "$ref": "#/$defs/method"}
    for key in ("required", "properties", "additionalProperties", "type", "title", "description"):
        schema.pop(key, None)
    error = best_match(_Validator(schema).iter_errors(method))
    if error is not None:
        raise ResultSchemaError(_message(error).replace("result", "result.method", 1))


__all__ = [
    "METHOD_KEYS",
    "READABLE_SCHEMA_VERSIONS",
    "RESULT_FORMAT",
    "RESULT_SCHEMA_VERSION",
    "ResultSchemaError",
    "check_version",
    "result_schema",
    "validate_method",
    "validate_result",
]
