"""Result files on disk: the JSON text ``r2s2r evaluate`` writes (``*.json``), or that same text gzip-compressed
(``*.json.gz``, what a committed record keeps: ``r2s2r ablation --export-record``).  Every reader of a result file
goes through :func:`read_result_file` (or :func:`read_result_data` for the raw JSON), which takes either form; the
compressed form reads as exactly the bytes it was made from, so its ``content_sha256`` is checked as a plain file's.

The compressed form is deterministic (:func:`gzip_bytes`: no file name, modification time 0), so the same result
always makes the same file, and a record exported twice does not change.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path
from typing import Any

from r2s2r_envs.evaluation.results import EvaluationResult
from r2s2r_envs.evaluation.schema import ResultSchemaError
from r2s2r_envs.safe_json import (
    GZIP_SUFFIX,
    MAX_BYTES,
    JSONFileError,
    gzip_bytes,
    is_compressed,
    read_json,
    read_text_bytes,
)

#: Names a result file may end in: plain JSON, or that JSON gzip-compressed.
RESULT_SUFFIXES = (".json", ".json" + GZIP_SUFFIX)


def result_files(folder: str | os.PathLike[str]) -> list[Path]:
    """Every path under ``folder`` (recursively) named like a result file (:data:`RESULT_SUFFIXES`), sorted."""
    return sorted(p for p in Path(folder).rglob("*") if p.name.endswith(RESULT_SUFFIXES))


def read_result_bytes(path: str | os.PathLike[str], *, max_bytes: int = MAX_BYTES) -> bytes:
    """The JSON text of a result file as bytes (:func:`r2s2r_envs.safe_json.read_text_bytes`)."""
    return read_text_bytes(path, max_bytes=max_bytes)


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
    return read_json(path)


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
