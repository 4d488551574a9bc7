"""The one JSON reader for every file the suite reads: bounded size and depth, strict JSON, the file named.

Python's ``json`` recurses once per nesting level, so a 100,000-deep file raises a raw ``RecursionError``; it
accepts ``NaN`` and ``Infinity``, which are not JSON, and keeps the last of two equal keys without a word.
``read_json`` and ``loads`` refuse all of these with a ``JSONFileError`` (a ``ValueError``) that names the file
and the limit (docs/guide.md#files-the-suite-reads):

* size: at most ``MAX_BYTES`` (64 MiB) unless the caller allows more;
* nesting: at most ``MAX_DEPTH`` (64) levels of arrays and objects, checked before parsing;
* strict JSON: no ``NaN`` / ``Infinity`` / ``-Infinity``, no key twice in one object, UTF-8 text.

A file whose name ends in ``.gz`` is read as gzip-compressed JSON (the size limit holds for the text it expands
to); ``gzip_bytes`` writes that form deterministically (result files in records, the shipped behavior models).

Grounding files, lab configs, world presets, course answers, result files, dataset specs and attributes, lab
logs, behavior models and checkpoints' ``config.json`` read through it.  Writers turn their data into plain JSON
with ``plain_json``.

Files the suite writes and reads back (checkpoints' ``config.json``, result files, behavior models, grounding
files written by ``r2s2r sysid``) carry a hash of their own content, ``content_sha256``: the SHA-256 of the
file's JSON object without that field, serialized canonically (``canonical_json``: sorted keys, no spaces, ASCII).
``with_content_hash`` adds it; ``check_content_hash`` verifies it when present and refuses a mismatch, so a
flipped byte that leaves valid JSON is still detected.  A file without the field (an older file, one written by
hand) is read as before.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import os
import re
import struct
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

#: Largest file read by default, bytes (the largest file the suite writes, a result file, is far smaller).
MAX_BYTES = 64 * 1024 * 1024
#: Deepest nesting of arrays and objects accepted (the suite's own files nest at most 8 levels).
MAX_DEPTH = 64

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)


class JSONFileError(ValueError):
    """A JSON file or text the suite refuses: unreadable, too large, too deep, or not strict JSON."""


def _depth(text: str) -> int:
    """Deepest nesting of arrays and objects in ``text`` (brackets inside strings do not count)."""
    code = np.frombuffer(_STRING.sub('""', text).encode("utf-8", "replace"), dtype=np.uint8)
    step = np.isin(code, (ord("["), ord("{"))).astype(np.int64) - np.isin(code, (ord("]"), ord("}")))
    return int(np.cumsum(step).max(initial=0))


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON value (a number must be finite)")


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"key {key!r} appears twice in one object")
        out[key] = value
    return out


def loads(text: str | bytes, *, what: str = "JSON text", max_depth: int = MAX_DEPTH, max_bytes: int = MAX_BYTES) -> Any:
    """Parse strict JSON within the size and depth limits.

    Args:
        text: The JSON text (bytes are decoded as UTF-8).
        what: What the text is, for messages (a file path, ``"attribute 'settings' of run.hdf5"``).
        max_depth: Deepest nesting of arrays and objects accepted.
        max_bytes: Longest text accepted, bytes.

    Raises:
        JSONFileError: too long, too deep, not UTF-8 or not strict JSON (NaN, Infinity, a repeated key).
    """
    size = len(text) if isinstance(text, bytes) else len(text.encode("utf-8", "replace"))
    if size > max_bytes:
        raise JSONFileError(f"{what}: {size} bytes; at most {max_bytes} bytes are read")
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JSONFileError(f"{what}: not UTF-8 text ({exc})") from None
    depth = _depth(text)
    if depth > max_depth:
        raise JSONFileError(f"{what}: nested {depth} levels deep; at most {max_depth} levels are accepted")
    try:
        return json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=_refuse_duplicates)
    except json.JSONDecodeError as exc:
        raise JSONFileError(f"{what}: not valid JSON ({exc})") from None
    except (ValueError, RecursionError) as exc:
        raise JSONFileError(f"{what}: not strict JSON ({exc})") from None


#: The suffix of a gzip-compressed file (``NAME.json.gz``).
GZIP_SUFFIX = ".gz"


def is_compressed(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` names a gzip-compressed file (``*.gz``)."""
    return os.fspath(path).endswith(GZIP_SUFFIX)


def gzip_bytes(data: bytes) -> bytes:
    """``data`` gzip-compressed (level 9), the same bytes for the same data: the header holds no file name and
    modification time 0 (``gunzip``, ``zcat`` and :mod:`gzip` read it)."""
    # The header written out (RFC 1952), not left to gzip.compress: its fields then hold whatever the Python version
    # puts there; these do not change. ID1 ID2, deflate, no flags, MTIME 0, XFL 2 (best compression), OS unknown.
    header = b"\x1f\x8b\x08\x00" + struct.pack("<I", 0) + b"\x02\xff"
    deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    body = deflate.compress(data) + deflate.flush()
    return header + body + struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)


def read_text_bytes(path: str | os.PathLike[str], *, max_bytes: int = MAX_BYTES) -> bytes:
    """A file's bytes, a ``*.gz`` file decompressed, at most ``max_bytes + 1`` of them (a longer text is then refused
    by the JSON reader, whatever the compressed size).

    Raises:
        OSError: the file is missing or cannot be read.
        JSONFileError: a ``*.gz`` file that is not gzip data, is cut short or fails its checksum.
    """
    path = Path(path)
    with path.open("rb") as fh:
        if not is_compressed(path):
            return fh.read(max_bytes + 1)
        try:
            with gzip.GzipFile(fileobj=fh, mode="rb") as gz:
                return gz.read(max_bytes + 1)
        except (OSError, EOFError, zlib.error) as exc:  # BadGzipFile is an OSError
            raise JSONFileError(f"{path}: not readable gzip data ({exc}); the file is damaged or cut short") from None


def read_json(path: str | os.PathLike[str], *, max_depth: int = MAX_DEPTH, max_bytes: int = MAX_BYTES) -> Any:
    """Read a JSON file (``*.json``, or gzip-compressed ``*.json.gz``) within the size and depth limits (``loads``),
    naming the file in every error.

    Raises:
        JSONFileError: missing, a directory, unreadable, damaged gzip data, too large, too deep or not strict JSON.
    """
    path = Path(path)
    if not path.exists():
        raise JSONFileError(f"{path}: no such file")
    if not path.is_file():
        raise JSONFileError(f"{path}: not a file (a JSON file is expected)")
    try:
        if not is_compressed(path) and (size := path.stat().st_size) > max_bytes:
            raise JSONFileError(f"{path}: {size} bytes; at most {max_bytes} bytes are read")
        raw = read_text_bytes(path, max_bytes=max_bytes)
    except OSError as exc:
        raise JSONFileError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    return loads(raw, what=str(path), max_depth=max_depth, max_bytes=max_bytes)


#: The field holding a file's hash of its own content (``content_sha256`` of the rest of its JSON object).
CONTENT_HASH_FIELD = "content_sha256"


class ContentHashError(JSONFileError):
    """A file's content does not match the ``content_sha256`` it records: changed or damaged since written."""


def canonical_json(value: Any) -> str:
    """``value`` as canonical JSON text: sorted keys, ``,`` and ``:`` without spaces, ASCII, strict (no NaN)."""
    return json.dumps(plain_json(value), sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def content_sha256(data: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of ``data``'s canonical JSON without its ``content_sha256`` field."""
    body = {k: v for k, v in data.items() if k != CONTENT_HASH_FIELD}
    return hashlib.sha256(canonical_json(body).encode("ascii")).hexdigest()


def with_content_hash(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` (a JSON object) with ``content_sha256``, the hash of the rest, as its last field."""
    body = {k: v for k, v in data.items() if k != CONTENT_HASH_FIELD}
    return {**body, CONTENT_HASH_FIELD: content_sha256(body)}


def _one_character_off(key: str, name: str) -> bool:
    return len(key) == len(name) and sum(a != b for a, b in zip(key, name)) == 1


def check_content_hash(data: Any, what: str, *, fix: str) -> Any:
    """Verify ``data``'s ``content_sha256`` when it has one; return ``data`` without the field.

    Args:
        data: a file's parsed JSON (anything else than an object, or an object without the field, is returned
            as it is: the file's own checks judge it).
        what: the file, for the message.
        fix: what to do about a mismatch (``"retrain or restore it"``).

    Raises:
        ContentHashError: the field is present but not the hash of the rest of the object, or a key one character
            off its name (a flipped byte there) stands in its place.
    """
    if not isinstance(data, dict):
        return data
    if CONTENT_HASH_FIELD not in data:
        near = [k for k in data if _one_character_off(k, CONTENT_HASH_FIELD)]
        if near:  # a flipped byte in the field's name would otherwise make the file read as one without a hash
            raise ContentHashError(
                f"{what}: it has the key {near[0]!r} where {CONTENT_HASH_FIELD!r} is expected: the file was changed "
                f"or damaged after it was written; {fix}"
            )
        return data
    recorded = data[CONTENT_HASH_FIELD]
    body = {k: v for k, v in data.items() if k != CONTENT_HASH_FIELD}
    actual = content_sha256(body)
    if recorded != actual:
        raise ContentHashError(
            f"{what}: its content does not match the {CONTENT_HASH_FIELD} it records ({recorded!r}; the content "
            f"has {actual}): the file was changed or damaged after it was written; {fix}"
        )
    return body


def plain_json(value: Any, where: str | None = None) -> Any:
    """``value`` as plain JSON data for writing: mappings with string keys, lists for tuples and arrays, Python
    numbers for numpy scalars, and None for a non-finite float (strict JSON has no NaN); anything else as it is.

    With ``where`` (what ``value`` is, for messages) it is checked instead: a path becomes its string and an object
    with a ``to_dict()`` method its dict, and a non-finite number or any other object raises ``TypeError`` naming
    ``where`` and the key or index within it (result files write what they record this way).
    """
    if isinstance(value, Mapping):
        if where is None:
            return {str(k): plain_json(v) for k, v in value.items()}
        return {str(k): plain_json(v, f"{where}[{k!r}]") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        if where is None:
            return [plain_json(v) for v in value]
        return [plain_json(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if hasattr(value, "tolist"):
        return plain_json(value.tolist(), where)
    if isinstance(value, float) and not math.isfinite(value):
        if where is None:
            return None
        raise TypeError(f"{where} is {value!r}; strict JSON holds finite numbers only")
    if where is None or value is None or isinstance(value, (bool, str, int, float)):
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return plain_json(to_dict(), where)
    raise TypeError(
        f"{where}: a {type(value).__name__} cannot be written as JSON; use JSON data (numbers, strings, lists, "
        "dicts) or an object with a to_dict() method"
    )


__all__ = [
    "CONTENT_HASH_FIELD",
    "GZIP_SUFFIX",
    "MAX_BYTES",
    "MAX_DEPTH",
    "ContentHashError",
    "JSONFileError",
    "canonical_json",
    "check_content_hash",
    "content_sha256",
    "gzip_bytes",
    "is_compressed",
    "loads",
    "plain_json",
    "read_json",
    "read_text_bytes",
    "with_content_hash",
]
