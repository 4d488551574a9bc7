"""Output paths checked before a run: a run of minutes must not end in a file that cannot be written."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


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
    # Permissions do not tell everything (root passes os.access; /proc, a read-only mount or a full quota refuse
    # anyway): make and drop a nameless file where the output or its first missing folder will go.
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as e:
        raise ValueError(f"{where}: not writable (a file cannot be made in {folder}: {e.strerror or e})") from None
    return path


__all__ = ["check_output_file"]
