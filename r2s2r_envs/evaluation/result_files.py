"""Result files on disk: the JSON text ``r2s2r evaluate`` writes (``*.json``), or that same text gzip-compressed
(``*.json.gz``, what a committed record keeps: ``r2s2r ablation --export-record``).  Every reader of a result file
goes through :func:`read_result_file` (or :func:`read_result_data` for the raw JSON), which takes either form; the
compressed form reads as exactly the bytes it was made from, so its ``content_sha256`` is checked as a plain file's.

The compressed form is deterministic (:func:`gzip_bytes`: no file name, modification time 0), so the same result
always makes the same file, and a record exported twice does not change.
"""

from __future__ import annotations

import gzip
import os
import struct
import zlib
from pathlib import Path
from typing import Any

from r2s2r_envs.evaluation.results import EvaluationResult
from r2s2r_envs.evaluation.schema import ResultSchemaError
from r2s2r_envs.safe_json import MAX_BYTES, JSONFileError, loads, read_json

#: The suffix a compressed file adds to its JSON file's name.
GZIP_SUFFIX = ".gz"
#: Names a result file may end in: plain JSON, or that JSON gzip-compressed.
RESULT_SUFFIXES = (".json", ".json" + GZIP_SUFFIX)


def is_compressed(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` names a compressed file (``*.gz``)."""
    return os.fspath(path).endswith(GZIP_SUFFIX)


def result_files(folder: str | os.PathLike[str]) -> list[Path]:
    """Every path under ``folder`` (recursively) named like a result file (:data:`RESULT_SUFFIXES`), sorted."""
    return sorted(p for p in Path(folder).rglob("*") if p.name.endswith(RESULT_SUFFIXES))


def gzip_bytes(data: bytes) -> bytes:
    """``data`` gzip-compressed (level 9), the same bytes for the same data: the header holds no file name and
    modification time 0 (``gunzip``, ``zcat`` and :mod:`gzip` read it)."""
    # The header written out (RFC 1952), not left to gzip.compress: its fields then hold whatever the Python version
    # puts there; these do not change. ID1 ID2, deflate, no flags, MTIME 0, XFL 2 (best compression), OS unknown.
    header = b"\x1f\x8b\x08\x00" + struct.pack("<I", 0) + b"\x02\xff"
    deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    body = deflate.compress(data) + deflate.flush()
    return header + body + struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)


def read_result_bytes(path: str | os.PathLike[str], *, max_bytes: int = MAX_BYTES) -> bytes:
    """The JSON text of a result file as bytes; a ``*.gz`` file decompressed, at most ``max_bytes + 1`` of it (a
    longer text is then refused by the JSON reader, whatever the compressed size).

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


def read_result_head(path: str | os.PathLike[str], size: int) -> bytes:
    """The first ``size`` bytes of a result file's JSON text, as far as they can be read: of a damaged ``*.gz``
    file, the text before the damage (empty when the file cannot be opened)."""
    path = Path(path)
    try:
        with path.open("rb") as fh:
            if not is_compressed(path):
                return fh.read(size)
            # zlib directly, fed a little at a time: it hands over what it decompressed before the damage (gzip's
            # reader raises for a cut-off or corrupt stream and keeps that text back).
            unzip = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out = bytearray()
            while len(out) < size and (chunk := fh.read(4096)):
                try:
                    out += unzip.decompress(chunk, size - len(out))
                except zlib.error:
                    break  # damaged: what came before
            return bytes(out[:size])
    except OSError:
        return b""


def read_result_data(path: str | os.PathLike[str]) -> Any:
    """The JSON of a result file, ``*.json`` or ``*.json.gz``, with the suite's bounded, strict reader
    (:func:`r2s2r_envs.safe_json.read_json`); not yet checked as a result (:func:`read_result_file` does that).

    Raises:
        JSONFileError: missing, not a file, unreadable, damaged gzip data, too large, too deep or not strict JSON;
            the message names the file.
    """
    path = Path(path)
    if not is_compressed(path):
        return read_json(path)
    if not path.exists():
        raise JSONFileError(f"{path}: no such file")
    if not path.is_file():
        raise JSONFileError(f"{path}: not a file (a result file is expected)")
    try:
        raw = read_result_bytes(path)
    except OSError as exc:
        raise JSONFileError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    return loads(raw, what=str(path))


def read_result_file(path: str | os.PathLike[str]) -> EvaluationResult:
    """The :class:`~r2s2r_envs.evaluation.results.EvaluationResult` in a result file, ``*.json`` or
    ``*.json.gz``, checked as :meth:`~r2s2r_envs.evaluation.results.EvaluationResult.from_json` checks it (schema,
    ``content_sha256``, records against the summary).

    Raises:
        OSError: the file is missing or cannot be read.
        ResultSchemaError: not JSON (or damaged gzip data), or not a valid result; the message names the file.
    """
    try:
        raw = read_result_bytes(path)
    except JSONFileError as exc:
        raise ResultSchemaError(str(exc)) from None
    try:
        return EvaluationResult.from_json(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ResultSchemaError(f"{path}: not UTF-8 text ({exc}); an evaluation result is JSON text") from None
    except ResultSchemaError as exc:
        raise ResultSchemaError(f"{path}: {exc}") from None


__all__ = [
    "GZIP_SUFFIX",
    "RESULT_SUFFIXES",
    "gzip_bytes",
    "is_compressed",
    "read_result_bytes",
    "read_result_data",
    "read_result_file",
    "read_result_head",
    "result_files",
]
