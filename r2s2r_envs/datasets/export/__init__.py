"""Export of datasets to the formats other tools read: LeRobot (v3.0 layout) and Minari (docs/interop.md).

Both exports stream: demos are read from the HDF5 file one at a time and written out before the next is read, so
memory stays bounded by about one demo's arrays (twice: as read and as converted) plus the output writer's buffers,
whatever the number of demos. Each export is written into a hidden staging folder beside the output and renamed into
place only when complete: a failed or interrupted export leaves nothing under the output name (and removes its
staging folder).

One module per format, each behind the registry :data:`EXPORTERS` that :func:`export_dataset` reads:

* :func:`~r2s2r_envs.datasets.export.lerobot.export_lerobot` (:mod:`.lerobot`, the layout's parts in
  :mod:`.lerobot_layout`): ``meta/info.json`` (features, fps, robot type, the dataset's provenance),
  ``meta/stats.json``, ``meta/tasks.parquet``, ``meta/episodes/...parquet``, ``data/...parquet`` and, for image
  observations, one mp4 per camera and file (episodes concatenated, as LeRobot v3.0 stores them). Needs ``pyarrow``
  (the ``interop`` extra); videos use the ffmpeg that ships with ``imageio-ffmpeg``.
* :func:`~r2s2r_envs.datasets.export.minari.export_minari` (:mod:`.minari`): a Minari dataset (``Dict`` observation
  space, one episode per demo), through Minari's own ``create_dataset_from_buffers``. Needs ``minari`` (the
  ``interop`` extra).

What they share (the result, the errors, the verification, the staging folder) is in :mod:`.common`.

Example:
    r2s2r datasets export ungrounded-1000.hdf5 --format lerobot --out ungrounded-1000-lerobot
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from r2s2r_envs.datasets.export.common import (
    EXPORT_VERIFY_MODES,
    INFO_KEY,
    ExportError,
    ExportResult,
    ExportVerify,
    check_verify,
)
from r2s2r_envs.datasets.export.lerobot import (
    DEFAULT_FPS,
    LEROBOT_CODEBASE_VERSION,
    ROBOT_TYPE,
    TASK,
    export_lerobot,
)
from r2s2r_envs.datasets.export.lerobot_layout import action_component_names, component_names
from r2s2r_envs.datasets.export.minari import MINARI_ID_RE, export_minari

#: The exporter of each format: ``exporter(path, out, *, progress, verify, **options)`` returns an
#: :class:`ExportResult`. A format is a module with one such function, added here.
EXPORTERS: dict[str, Callable[..., ExportResult]] = {"lerobot": export_lerobot, "minari": export_minari}
#: Formats :func:`export_dataset` writes.
EXPORT_FORMATS: tuple[str, ...] = tuple(EXPORTERS)

__all__ = [
    "DEFAULT_FPS",
    "EXPORTERS",
    "EXPORT_FORMATS",
    "EXPORT_VERIFY_MODES",
    "INFO_KEY",
    "LEROBOT_CODEBASE_VERSION",
    "MINARI_ID_RE",
    "ROBOT_TYPE",
    "TASK",
    "ExportError",
    "ExportResult",
    "ExportVerify",
    "action_component_names",
    "component_names",
    "export_dataset",
    "export_lerobot",
    "export_minari",
]


def export_dataset(
    path: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    format: str,
    progress: bool = True,
    verify: ExportVerify = "full",
    **options: Any,
) -> ExportResult:
    """Exports a dataset file to ``format`` (one of :data:`EXPORT_FORMATS`) under ``out``.

    Args:
        path: the HDF5 dataset.
        out: the output folder; it must not exist or be empty.
        format: ``"lerobot"`` or ``"minari"``.
        progress: show a progress bar (one step per demo).
        verify: how the file is verified before anything is written (:func:`~r2s2r_envs.datasets.reader.open_dataset`):
            ``"full"`` (default) recomputes every hash, the arrays' included, so an array edited in place (its HDF5
            checksum rewritten with it) is refused; ``"quick"`` skips the arrays' hashes and is recorded as such in
            the output (``source_verification``).
        options: passed to the format's exporter (:data:`EXPORTERS`: :func:`export_lerobot`, :func:`export_minari`).

    Raises:
        ExportError: an unknown format, an output folder that is not empty, a missing optional dependency.
        DatasetError: the file is not a readable dataset (another schema version, damaged, ...).
    """
    exporter = EXPORTERS.get(format)
    if exporter is None:
        raise ExportError(f"unknown export format {format!r}; choose one of {list(EXPORT_FORMATS)}")
    check_verify(verify)
    return exporter(path, out, progress=progress, verify=verify, **options)
