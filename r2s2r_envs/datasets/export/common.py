"""What the exports share: the result, the errors, the source verification, the output folder written through a
staging folder, the progress bar."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from r2s2r_envs.datasets.reader import DatasetFile
from r2s2r_envs.datasets.schema import DatasetError

#: How an export verifies its source before writing: every hash (``"full"``), or every hash but the arrays'.
ExportVerify = Literal["full", "quick"]
EXPORT_VERIFY_MODES: tuple[str, ...] = ("full", "quick")
#: Top-level key of ``meta/info.json`` (LeRobot) and of the description (Minari) that holds this package's provenance
#: of the export.
INFO_KEY = "r2s2r"


class ExportError(DatasetError):
    """An export that cannot be done as asked (unknown format, output folder in the way, a missing dependency);
    the message names the problem and what is accepted."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExportResult:
    """What an export wrote.

    Attributes:
        format: ``"lerobot"`` or ``"minari"``.
        out: the output folder.
        episodes: episodes written (one per demo).
        frames: frames (transitions) written.
        seconds: wall time of the export.
        source_sha256: content hash of the exported file.
        dataset_id: the Minari dataset id (``None`` for LeRobot).
    """

    format: str
    out: Path
    episodes: int
    frames: int
    seconds: float
    source_sha256: str
    dataset_id: str | None = None


#: What ``source_verification`` says in an export's provenance, per verify mode.
VERIFICATION_TEXT = {
    "full": "full: every hash of the source, its arrays' included, was recomputed and matched before export",
    "quick": "quick: the arrays' hashes were not recomputed (--verify quick); run r2s2r datasets verify on the source",
}


def check_verify(verify: object) -> None:
    """Refuses a verify mode other than :data:`EXPORT_VERIFY_MODES`, naming them."""
    if verify not in EXPORT_VERIFY_MODES:
        raise ExportError(
            f"verify={verify!r} is not an export verification; choose one of {list(EXPORT_VERIFY_MODES)} (an export "
            "always checks its source before writing)"
        )


def check_out(out: Path) -> None:
    """Refuses an output that is a file or a folder that is not empty."""
    if out.exists() and not out.is_dir():
        raise ExportError(f"--out {out} is a file; the export writes a folder: give a new or empty folder")
    if out.is_dir() and any(out.iterdir()):
        raise ExportError(
            f"--out {out} exists and is not empty; the export writes a new folder: give a new or empty folder "
            "(nothing was written)"
        )


@contextlib.contextmanager
def staging(out: Path) -> Iterator[Path]:
    """A hidden folder beside ``out`` to write into, renamed to ``out`` when the block succeeds, removed otherwise."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.exporting-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        yield tmp
        check_out(out)  # nothing appeared there meanwhile
        if out.is_dir():
            out.rmdir()
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def demo_progress(f: DatasetFile, progress: bool, desc: str) -> Iterator[int]:
    """The file's demo ids, with a progress bar when ``progress``."""
    from tqdm.auto import tqdm

    with tqdm(f.demo_ids, unit="demo", disable=not progress, desc=desc, dynamic_ncols=True) as bar:
        yield from bar
