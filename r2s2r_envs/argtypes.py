"""What the ``r2s2r`` subcommands share: argument types (argparse ``type=`` callables) and exit codes."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

#: Exit codes of every ``r2s2r`` subcommand: done; the command ran but failed (or, for ``course check``, the answer
#: is wrong); bad usage or input, reported before any work; interrupted by Ctrl-C (128 + SIGINT).
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def positive_int(text: str) -> int:
    """An integer >= 1 (argparse reports anything else as a usage error)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    """An integer >= 0 (argparse reports anything else as a usage error)."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def json_object(text: str) -> dict[str, Any]:
    """A JSON object given on the command line (argparse reports anything else as a usage error)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON ({exc}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object like '{{\"num_objects\": 1}}', got {text!r}")
    return value


def check_output_file(path: str | os.PathLike[str], *, option: str, suffix: str | None = None) -> Path:
    """Refuse, before any work, an output file that could not be written at the end of a run.

    Args:
        path: The file to write.
        option: The option that names it, for messages (``"--out"``).
        suffix: The suffix the file must have (``".json"``, ``".mp4"``), or None.

    Returns:
        The path.

    Raises:
        ValueError: the path is a folder, has another suffix, lies below a file, or its folder is not writable;
            the message names the option, the path and what is accepted.
    """
    path = Path(path)
    where = f"{option} {path}"
    if suffix is not None and path.suffix.lower() != suffix:
        raise ValueError(f"{where}: the file must end in {suffix}")
    if path.is_dir():
        raise ValueError(f"{where} is a folder; give a file name (e.g. {path / ('out' + (suffix or ''))})")
    folder = path.parent
    while not folder.exists():  # the nearest existing folder: it must take the folders still to make
        folder = folder.parent
    if not folder.is_dir():
        raise ValueError(f"{where}: {folder} is a file, so nothing can be written below it")
    if not os.access(folder, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise ValueError(f"{where}: not writable (no write permission in {folder})")
    return path
