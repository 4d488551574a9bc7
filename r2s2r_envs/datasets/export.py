"""Export of datasets to the formats other tools read: LeRobot (v3.0 layout) and Minari (docs/interop.md).

Both exports stream: demos are read from the HDF5 file one at a time and written out before the next is read, so
memory stays bounded by about one demo's arrays (twice: as read and as converted) plus the output writer's buffers,
whatever the number of demos. Each export is written into a hidden staging folder beside the output and renamed into
place only when complete: a failed or interrupted export leaves nothing under the output name (and removes its
staging folder).

* :func:`export_lerobot`: ``meta/info.json`` (features, fps, robot type, the dataset's provenance), ``meta/stats.json``,
  ``meta/tasks.parquet``, ``meta/episodes/...parquet``, ``data/...parquet`` and, for image observations, one mp4 per
  camera and file (episodes concatenated, as LeRobot v3.0 stores them). Needs ``pyarrow`` (the ``interop`` extra);
  videos use the ffmpeg that ships with ``imageio-ffmpeg``.
* :func:`export_minari`: a Minari dataset (``Dict`` observation space, one episode per demo), through Minari's own
  ``create_dataset_from_buffers``. Needs ``minari`` (the ``interop`` extra).

Example:
    r2s2r datasets export ungrounded-1000.hdf5 --format lerobot --out ungrounded-1000-lerobot
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import time
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np

from r2s2r_envs.datasets import schema
from r2s2r_envs.datasets.reader import DatasetFile, open_dataset
from r2s2r_envs.datasets.schema import DatasetError, NoCleanLabelsError
from r2s2r_envs.datasets.stats import RunningStats

#: How an export verifies its source before writing: every hash (``"full"``), or every hash but the arrays'.
ExportVerify = Literal["full", "quick"]
EXPORT_VERIFY_MODES: tuple[str, ...] = ("full", "quick")
#: A Minari dataset id: ``[namespace/...]name-vN`` of letters, digits, ``_`` and ``-`` (no ``..``, no leading ``/``).
MINARI_ID_RE = re.compile(r"(?:[A-Za-z0-9_][-\w]*/)*[A-Za-z0-9_][-\w]*-v\d+", re.ASCII)
#: Formats :func:`export_dataset` writes.
EXPORT_FORMATS: tuple[str, ...] = ("lerobot", "minari")
#: The LeRobot dataset format version written (``codebase_version`` of ``meta/info.json``).
LEROBOT_CODEBASE_VERSION = "v3.0"
#: Frame rate of the exported episodes when the provenance does not give the control rate (lab datasets).
DEFAULT_FPS = 20
#: LeRobot's ``robot_type``: a Panda arm with a LEAP-like 16-joint hand (docs/task.md).
ROBOT_TYPE = "panda_leap_hand"
#: The task string of every PickSort episode (LeRobot's ``meta/tasks.parquet``).
TASK = "Pick each object from the moving conveyor belt and drop it into the bin of its category."
#: Top-level key of ``meta/info.json`` that holds this package's provenance of the export.
INFO_KEY = "r2s2r"
#: Quantiles LeRobot keeps in its statistics, with their names.
_QUANTILES = {"q01": 0.01, "q10": 0.10, "q50": 0.50, "q90": 0.90, "q99": 0.99}
# LeRobot's own defaults for file sizes and files per chunk folder.
_DATA_FILE_MB = 100
_VIDEO_FILE_MB = 200
_FILES_PER_CHUNK = 1000
_DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
_VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
_EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
# Video encoding: H.264 in yuv420p (decoded by PyAV and torchcodec alike), a key frame every 2 frames so that a
# reader seeking to any timestamp decodes at most one frame before it.
_VIDEO_CODEC = "h264"
_VIDEO_PARAMS = ["-g", "2", "-crf", "18", "-preset", "fast"]


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
        options: passed to :func:`export_lerobot` or :func:`export_minari`.

    Raises:
        ExportError: an unknown format, an output folder that is not empty, a missing optional dependency.
        DatasetError: the file is not a readable dataset (another schema version, damaged, ...).
    """
    if format not in EXPORT_FORMATS:
        raise ExportError(f"unknown export format {format!r}; choose one of {list(EXPORT_FORMATS)}")
    _check_verify(verify)
    fn = export_lerobot if format == "lerobot" else export_minari
    return fn(path, out, progress=progress, verify=verify, **options)


# -- LeRobot ---------------------------------------------------------------------------------------


def export_lerobot(
    path: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    fps: int | None = None,
    task: str = TASK,
    robot_type: str = ROBOT_TYPE,
    data_file_mb: float = _DATA_FILE_MB,
    video_file_mb: float = _VIDEO_FILE_MB,
    progress: bool = True,
    verify: ExportVerify = "full",
) -> ExportResult:
    """Writes a dataset file as a LeRobot v3.0 dataset folder (docs/interop.md#lerobot).

    Every demo becomes an episode; every step a frame with ``observation.state`` (the low-dimensional observations
    concatenated in key order, components named ``<key>.<joint or index>``), each low-dimensional key on its own as
    ``observation.<key>``, images as videos ``observation.images.<key>``, ``action`` (the demonstrator's clean labels,
    what to learn), ``action.executed`` (the executed actions, what replay runs), ``next.reward`` and ``next.done``,
    plus LeRobot's index columns. ``meta/info.json`` carries the source's content hash, domain, env id, env
    arguments and provenance under the key ``"r2s2r"``. Simulator states are not exported (replay needs the HDF5).

    Args:
        path: the HDF5 dataset.
        out: the output folder; it must not exist or be empty.
        fps: frames per second (default: the provenance's control rate, else :data:`DEFAULT_FPS`).
        task: the task string of every episode.
        robot_type: LeRobot's ``robot_type``.
        data_file_mb: start a new data parquet file past this size (uncompressed table bytes).
        video_file_mb: start a new mp4 file past this size.
        progress: show a progress bar.
        verify: how the file is verified before anything is written (see :func:`export_dataset`).

    Raises:
        ExportError: the output folder is not empty, ``fps`` is not a whole number >= 1, or pyarrow is missing.
        DatasetError: the file is not a readable dataset.
    """
    pa, pq = _import_pyarrow()
    if fps is not None and (not float(fps).is_integer() or fps < 1):
        raise ExportError(f"fps must be a whole number of frames per second, at least 1; got {fps!r}")
    _check_verify(verify)
    out = Path(out)
    _check_out(out)
    start = time.perf_counter()
    with open_dataset(path, verify=verify) as f, _staging(out) as tmp:
        writer = _LeRobotWriter(
            f,
            tmp,
            pa=pa,
            pq=pq,
            fps=fps if fps is not None else _control_rate(f.provenance),
            task=task,
            robot_type=robot_type,
            verified=verify,
            data_file_bytes=int(data_file_mb * 2**20),
            video_file_bytes=int(video_file_mb * 2**20),
        )
        try:
            for demo_id in _progress(f, progress, "export lerobot"):
                writer.add_episode(demo_id)
        finally:
            writer.close()
        writer.write_meta()
        frames, episodes, source = writer.frames, writer.episodes, f.content_hash
    return ExportResult(
        format="lerobot",
        out=out,
        episodes=episodes,
        frames=frames,
        seconds=time.perf_counter() - start,
        source_sha256=source,
    )


class _LeRobotWriter:
    """Streams the demos of an open file into a LeRobot v3.0 folder (see :func:`export_lerobot`)."""

    def __init__(
        self,
        f: DatasetFile,
        root: Path,
        *,
        pa: Any,
        pq: Any,
        fps: int,
        task: str,
        robot_type: str,
        verified: ExportVerify,
        data_file_bytes: int,
        video_file_bytes: int,
    ) -> None:
        self.f, self.root, self.pa, self.pq = f, root, pa, pq
        self.fps, self.task, self.robot_type, self.verified = int(fps), task, robot_type, verified
        self.data_file_bytes, self.video_file_bytes = data_file_bytes, video_file_bytes
        spec = f.obs_spec()
        self.low_dim = [k for k, (shape, dtype) in spec.items() if schema.is_low_dim(shape, dtype)]
        self.images = [k for k, (shape, dtype) in spec.items() if len(shape) == 3 and dtype == np.uint8]
        self.dims = {k: int(np.prod(spec[k][0], dtype=np.int64)) for k in self.low_dim}
        try:
            self.label_array: str | None = f.label_array()
        except NoCleanLabelsError:
            self.label_array = None  # an older noise-injected file: only the executed actions exist
        self.features = self._features(spec)
        self.stats: dict[str, RunningStats] = {}
        self.quantiles: dict[str, np.ndarray] = {}
        self.episodes = 0
        # Episode metadata is written in batches, so that it too takes bounded memory.
        self._episode_rows: list[dict[str, Any]] = []
        self._episodes_writer: Any = None
        self.frames = 0
        self._frame_files: _RollingFile | None = None
        self._videos = {
            key: _VideoFiles(root, f"observation.images.{key}", fps, video_file_bytes) for key in self.images
        }

    # -- features ----------------------------------------------------------------------------------

    def _features(self, spec: Mapping[str, tuple[tuple[int, ...], np.dtype]]) -> dict[str, dict[str, Any]]:
        feats: dict[str, dict[str, Any]] = {}
        names = [n for k in self.low_dim for n in component_names(k, self.dims[k])]
        if self.low_dim:
            feats["observation.state"] = {"dtype": "float32", "shape": [len(names)], "names": names}
        for key in self.low_dim:
            feats[f"observation.{key}"] = {
                "dtype": "float32",
                "shape": [self.dims[key]],
                "names": component_names(key, self.dims[key]),
            }
        for key in self.images:
            h, w, c = spec[key][0]
            feats[f"observation.images.{key}"] = {
                "dtype": "video",
                "shape": [h, w, c],
                "names": ["height", "width", "channels"],
                "info": {
                    "video.height": h,
                    "video.width": w,
                    "video.codec": _VIDEO_CODEC,
                    "video.pix_fmt": "yuv420p",
                    "video.is_depth_map": False,
                    "video.fps": self.fps,
                    "video.channels": c,
                    "has_audio": False,
                },
            }
        action_dim = self.f.action_dim
        action_names = action_component_names(action_dim, self.f.env_args.get("env_kwargs", {}))
        feats["action"] = {"dtype": "float32", "shape": [action_dim], "names": action_names}
        if self.label_array is not None:
            feats["action.executed"] = {"dtype": "float32", "shape": [action_dim], "names": action_names}
        feats["next.reward"] = {"dtype": "float32", "shape": [1], "names": None}
        feats["next.done"] = {"dtype": "bool", "shape": [1], "names": None}
        for name, dtype in (
            ("timestamp", "float32"),
            ("frame_index", "int64"),
            ("episode_index", "int64"),
            ("index", "int64"),
            ("task_index", "int64"),
        ):
            feats[name] = {"dtype": dtype, "shape": [1], "names": None}
        return feats

    # -- episodes ----------------------------------------------------------------------------------

    def add_episode(self, demo_id: int) -> None:
        f, pa = self.f, self.pa
        episode = self.episodes
        n = f.demo_length(demo_id)
        obs = {k: f.read(demo_id, f"obs/{k}").reshape(n, -1).astype(np.float32, copy=False) for k in self.low_dim}
        executed = f.read(demo_id, "actions")
        action = executed if self.label_array in (None, "actions") else f.read(demo_id, self.label_array)
        columns: dict[str, np.ndarray] = {}
        if self.low_dim:
            columns["observation.state"] = np.concatenate([obs[k] for k in self.low_dim], axis=1)
        for key in self.low_dim:
            columns[f"observation.{key}"] = obs[key]
        columns["action"] = action
        if self.label_array is not None:
            columns["action.executed"] = executed
        columns["next.reward"] = f.read(demo_id, "rewards").astype(np.float32, copy=False)
        columns["next.done"] = f.read(demo_id, "dones").astype(bool)
        frame_index = np.arange(n, dtype=np.int64)
        columns["timestamp"] = (frame_index / self.fps).astype(np.float32)
        columns["frame_index"] = frame_index
        columns["episode_index"] = np.full(n, episode, dtype=np.int64)
        columns["index"] = frame_index + self.frames
        columns["task_index"] = np.zeros(n, dtype=np.int64)
        for name, arr in columns.items():
            if name != "observation.state":  # its statistics are its keys', concatenated (write_meta)
                self._add_stats(name, arr)

        arrays, fields = [], []
        for name, arr in columns.items():
            if arr.ndim == 2:
                flat = pa.array(np.ascontiguousarray(arr).reshape(-1))
                values = pa.FixedSizeListArray.from_arrays(flat, arr.shape[1])
            else:
                values = pa.array(arr)
            arrays.append(values)
            fields.append(pa.field(name, values.type, nullable=False))
        table = pa.Table.from_arrays(arrays, schema=pa.schema(fields))
        if self._frame_files is None:
            self._frame_files = _RollingFile(self.root, _DATA_PATH, self.data_file_bytes, self.pq, table.schema)
        chunk, file = self._frame_files.write(table)

        row: dict[str, Any] = {
            "episode_index": episode,
            "tasks": [self.task],
            "length": n,
            "data/chunk_index": chunk,
            "data/file_index": file,
            "dataset_from_index": self.frames,
            "dataset_to_index": self.frames + n,
        }
        for key in self.images:
            frames = f.read(demo_id, f"obs/{key}")
            self._add_image_stats(f"observation.images.{key}", frames)
            row.update(self._videos[key].write(frames))
            del frames
        attrs = f.demo_attrs(demo_id)
        row["meta/episodes/chunk_index"] = 0
        row["meta/episodes/file_index"] = 0
        row["r2s2r/demo_id"] = int(demo_id)
        row["r2s2r/seed"] = int(attrs.get("seed", -1))
        row["r2s2r/success"] = bool(attrs.get("success", False))
        row["r2s2r/episode_return"] = float(attrs.get("episode_return", float(np.sum(columns["next.reward"]))))
        row["r2s2r/demo_sha256"] = str(attrs.get("sha256", ""))
        self._episode_rows.append(row)
        if len(self._episode_rows) >= _EPISODE_ROWS_PER_WRITE:
            self._write_episode_rows()
        self.episodes += 1
        self.frames += n

    def _write_episode_rows(self) -> None:
        if not self._episode_rows:
            return
        if self._episodes_writer is None:
            table = self.pa.Table.from_pylist(self._episode_rows)
            path = self.root / _EPISODES_PATH.format(chunk_index=0, file_index=0)
            path.parent.mkdir(parents=True, exist_ok=True)
            self._episodes_writer = self.pq.ParquetWriter(path, table.schema, compression="snappy")
        else:
            table = self.pa.Table.from_pylist(self._episode_rows, schema=self._episodes_writer.schema)
        self._episodes_writer.write_table(table)
        self._episode_rows.clear()

    def _add_stats(self, name: str, arr: np.ndarray) -> None:
        x = arr.reshape(len(arr), -1)
        if x.dtype.kind != "f":  # flags and indices
            x = x.astype(np.float64)
        # In slices of rows: the float64 temporaries of RunningStats stay small beside the demo's arrays.
        for i in range(0, len(x), _STATS_ROWS):
            new = RunningStats.from_array(x[i : i + _STATS_ROWS])
            old = self.stats.get(name)
            self.stats[name] = new if old is None else old.merge(new)
        # Quantiles cannot be merged exactly in bounded memory: like LeRobot's own aggregation of episode
        # statistics, the dataset's are the frame-weighted mean of the episodes'.
        q = np.quantile(x, list(_QUANTILES.values()), axis=0) * len(x)
        self.quantiles[name] = q if name not in self.quantiles else self.quantiles[name] + q

    def _add_image_stats(self, name: str, frames: np.ndarray) -> None:
        # Per channel, in [0, 1] (what LeRobot's loader returns for a video frame).
        x = frames.reshape(-1, frames.shape[-1]).astype(np.float32) / 255.0
        self._add_stats(name, x)

    def close(self) -> None:
        self._write_episode_rows()
        if self._episodes_writer is not None:
            self._episodes_writer.close()
            self._episodes_writer = None
        if self._frame_files is not None:
            self._frame_files.close()
        for videos in self._videos.values():
            videos.close()

    # -- metadata ----------------------------------------------------------------------------------

    def write_meta(self) -> None:
        pa, pq = self.pa, self.pq
        meta = self.root / "meta"
        meta.mkdir(parents=True, exist_ok=True)
        episodes = self.episodes
        info = {
            "codebase_version": LEROBOT_CODEBASE_VERSION,
            "robot_type": self.robot_type,
            "total_episodes": episodes,
            "total_frames": self.frames,
            "total_tasks": 1,
            "chunks_size": _FILES_PER_CHUNK,
            "data_files_size_in_mb": max(1, round(self.data_file_bytes / 2**20)),
            "video_files_size_in_mb": max(1, round(self.video_file_bytes / 2**20)),
            "fps": self.fps,
            "splits": {"train": f"0:{episodes}"},
            "data_path": _DATA_PATH,
            "video_path": _VIDEO_PATH if self.images else None,
            "features": self.features,
            INFO_KEY: self._provenance(),
        }
        (meta / "info.json").write_text(json.dumps(info, indent=4) + "\n")
        (meta / "stats.json").write_text(json.dumps(self._stats_json(), indent=4) + "\n")
        # tasks.parquet: pandas reads it back with the task string as its index (what LeRobot expects).
        tasks = pa.table({"task_index": pa.array([0], pa.int64()), "task": pa.array([self.task], pa.string())})
        tasks = tasks.replace_schema_metadata({b"pandas": json.dumps(_PANDAS_TASKS_METADATA).encode()})
        pq.write_table(tasks, meta / "tasks.parquet")

    def _provenance(self) -> dict[str, Any]:
        f = self.f
        return {
            "source_content_sha256": f.content_hash,
            "source_verification": _VERIFICATION_TEXT[self.verified],
            "source_schema_version": f.schema_version,
            "domain": f.domain,
            "env_id": f.env_id,
            "env_kwargs": f.env_args.get("env_kwargs", {}),
            "action": (
                f"action holds the demonstrator's clean labels ({self.label_array}); action.executed the executed "
                "actions"
                if self.label_array is not None
                else "action holds the executed actions (the file stores no clean labels: noise was injected)"
            ),
            "action_noise": f.action_noise,
            "obs_keys": self.low_dim + self.images,
            "states": "not exported (replay needs the HDF5 file)" if f.has_states else "none (a lab dataset)",
            "provenance": f.provenance,
            "generation": f.generation,
        }

    def _stats_json(self) -> dict[str, dict[str, list[Any]]]:
        out: dict[str, dict[str, list[Any]]] = {}
        keys = [f"observation.{k}" for k in self.low_dim]
        if keys and all(k in self.stats for k in keys):
            parts = [self.stats[k] for k in keys]
            self.stats["observation.state"] = RunningStats(
                count=parts[0].count,
                **{field: np.concatenate([getattr(p, field) for p in parts]) for field in ("mean", "m2", "min", "max")},
            )
            self.quantiles["observation.state"] = np.concatenate([self.quantiles[k] for k in keys], axis=1)
        for name, stats in self.stats.items():
            shape = self._stats_shape(name)
            entry = {
                "min": stats.min.reshape(shape).tolist(),
                "max": stats.max.reshape(shape).tolist(),
                "mean": stats.mean.reshape(shape).tolist(),
                "std": stats.std.reshape(shape).tolist(),
                "count": [int(stats.count)],
            }
            q = self.quantiles[name] / stats.count
            for i, qname in enumerate(_QUANTILES):
                entry[qname] = q[i].reshape(shape).tolist()
            out[name] = entry
        return out

    def _stats_shape(self, name: str) -> tuple[int, ...]:
        feature = self.features[name]
        if feature["dtype"] == "video":
            return (feature["shape"][2], 1, 1)  # per channel, as LeRobot's (C, 1, 1)
        return tuple(feature["shape"])


_STATS_ROWS = 64  # rows per slice of the statistics' computation
_EPISODE_ROWS_PER_WRITE = 256  # rows of meta/episodes per parquet row group

_PANDAS_TASKS_METADATA = {
    "index_columns": ["task"],
    "column_indexes": [],
    "columns": [
        {"name": name, "field_name": name, "pandas_type": pandas_type, "numpy_type": numpy_type, "metadata": None}
        for name, pandas_type, numpy_type in (("task_index", "int64", "int64"), ("task", "unicode", "object"))
    ],
    "creator": {"library": "r2s2r_envs"},
    "pandas_version": "2.0.0",
}


class _RollingFile:
    """Parquet files under a ``chunk-XXX/file-YYY`` template, a new one past ``limit`` bytes (uncompressed)."""

    def __init__(self, root: Path, template: str, limit: int, pq: Any, schema: Any) -> None:
        self.root, self.template, self.limit, self.pq, self.schema = root, template, limit, pq, schema
        self.chunk, self.file, self.size = 0, 0, 0
        self._writer: Any = None

    def write(self, table: Any) -> tuple[int, int]:
        if self._writer is not None and self.size > 0 and self.size + table.nbytes > self.limit:
            self._writer.close()
            self._writer = None
            self.chunk, self.file = _next_file(self.chunk, self.file)
            self.size = 0
        if self._writer is None:
            path = self.root / self.template.format(chunk_index=self.chunk, file_index=self.file)
            path.parent.mkdir(parents=True, exist_ok=True)
            self._writer = self.pq.ParquetWriter(path, self.schema, compression="snappy")
        self._writer.write_table(table)  # one row group per episode
        self.size += table.nbytes
        return self.chunk, self.file

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


class _VideoFiles:
    """mp4 files of one camera, episodes concatenated; a new file once the current one passes ``limit`` bytes."""

    def __init__(self, root: Path, key: str, fps: int, limit: int) -> None:
        self.root, self.key, self.fps, self.limit = root, key, fps, limit
        self.chunk, self.file, self.frames = 0, 0, 0
        self._path: Path | None = None
        self._gen: Any = None

    def write(self, frames: np.ndarray) -> dict[str, Any]:
        import imageio_ffmpeg

        if self._gen is not None and self._path is not None and _size(self._path) > self.limit:
            self._close_file()
            self.chunk, self.file = _next_file(self.chunk, self.file)
        if self._gen is None:
            h, w = frames.shape[1:3]
            name = _VIDEO_PATH.format(video_key=self.key, chunk_index=self.chunk, file_index=self.file)
            self._path = self.root / name
            self._path.parent.mkdir(parents=True, exist_ok=True)
            self._gen = imageio_ffmpeg.write_frames(
                str(self._path),
                (w, h),
                fps=self.fps,
                codec="libx264",
                pix_fmt_in="rgb24",
                pix_fmt_out="yuv420p",
                macro_block_size=1,
                ffmpeg_log_level="error",
                output_params=list(_VIDEO_PARAMS),
            )
            self._gen.send(None)
            self.frames = 0
        start = self.frames
        for frame in frames:
            self._gen.send(np.ascontiguousarray(frame))
        self.frames += len(frames)
        prefix = f"videos/{self.key}"
        return {
            f"{prefix}/chunk_index": self.chunk,
            f"{prefix}/file_index": self.file,
            f"{prefix}/from_timestamp": start / self.fps,
            f"{prefix}/to_timestamp": self.frames / self.fps,
        }

    def _close_file(self) -> None:
        if self._gen is not None:
            self._gen.close()
            self._gen = None

    def close(self) -> None:
        self._close_file()


def _next_file(chunk: int, file: int) -> tuple[int, int]:
    return (chunk + 1, 0) if file + 1 >= _FILES_PER_CHUNK else (chunk, file + 1)


def component_names(key: str, dim: int) -> list[str]:
    """Names of the components of a low-dimensional observation, ``<key>.<joint>`` where the joints are known
    (arm and hand joints, end-effector position), else ``<key>.<index>``."""
    from r2s2r_envs.world import constants as C

    known: dict[str, tuple[str, ...]] = {
        "arm_qpos": C.ARM_JOINTS,
        "arm_qvel": C.ARM_JOINTS,
        "hand_qpos": C.HAND_JOINTS,
        "hand_qvel": C.HAND_JOINTS,
        "eef_pos": ("x", "y", "z"),
    }
    parts = known.get(key)
    if parts is None or len(parts) != dim:
        parts = tuple(str(i) for i in range(dim))
    return [f"{key}.{_short(p)}" for p in parts]


def action_component_names(dim: int, env_kwargs: Mapping[str, Any]) -> list[str]:
    """Names of the action components: task-space control (docs/task.md#action) is the TCP displacement and rotation
    then the 16 finger targets; anything else ``action.<index>``."""
    from r2s2r_envs.world import constants as C

    mode = env_kwargs.get("control_mode", "task")
    tcp = ("tcp_dx", "tcp_dy", "tcp_dz", "tcp_rx", "tcp_ry", "tcp_rz")
    if mode == "task" and dim == len(tcp) + len(C.HAND_JOINTS):
        return [*tcp, *(f"finger.{_short(j)}" for j in C.HAND_JOINTS)]
    if mode == "joint" and dim == len(C.ARM_JOINTS) + len(C.HAND_JOINTS):
        return [*(f"arm.{_short(j)}" for j in C.ARM_JOINTS), *(f"finger.{_short(j)}" for j in C.HAND_JOINTS)]
    return [f"action.{i}" for i in range(dim)]


# -- Minari ----------------------------------------------------------------------------------------


def export_minari(
    path: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    dataset_id: str | None = None,
    progress: bool = True,
    verify: ExportVerify = "full",
) -> ExportResult:
    """Writes a dataset file as a Minari dataset, under ``out`` used as Minari's datasets folder
    (``MINARI_DATASETS_PATH=out``; docs/interop.md#minari).

    Each demo is an episode: ``observations`` a dict of the stored keys (``T + 1`` steps: the demo's ``obs`` and its
    last ``next_obs``), ``actions`` the demonstrator's clean labels (the executed actions where the file has none),
    ``rewards``, ``terminations`` and ``truncations`` from the demo's outcome; ``seed`` the env seed. The observation
    space is a ``Dict`` of ``Box`` spaces built from the file (images as ``uint8`` boxes, stored unencoded), the action
    space PickSort's ``Box(-1, 1)``. The dataset's description holds this package's provenance of the export as JSON.

    Args:
        path: the HDF5 dataset.
        out: the folder to hold the Minari dataset (``out/<dataset_id>/``); it must not exist or be empty.
        dataset_id: Minari id (default ``r2s2r/<file stem>-v0``).
        progress: show a progress bar.
        verify: how the file is verified before anything is written (see :func:`export_dataset`).

    Raises:
        ExportError: the output folder is not empty, ``dataset_id`` is not a Minari id, or minari is missing.
        DatasetError: the file is not a readable dataset.
    """
    try:
        import minari
        from gymnasium import spaces
        from minari.data_collector import EpisodeBuffer
    except ImportError as exc:
        raise ExportError(
            f"--format minari needs the minari package ({exc}); install the interop extra: "
            "pip install 'r2s2r_envs[interop]'"
        ) from None
    _check_verify(verify)
    # Absolute: Minari joins MINARI_DATASETS_PATH with paths it already joined with it, which breaks a relative one.
    out = Path(out).absolute()
    _check_out(out)
    dataset_id = f"r2s2r/{_id_part(Path(path).stem)}-v0" if dataset_id is None else dataset_id
    _check_dataset_id(dataset_id)
    start = time.perf_counter()
    with open_dataset(path, verify=verify) as f, _staging(out) as tmp:
        spec = f.obs_spec()
        obs_space = spaces.Dict(
            {
                key: spaces.Box(0, 255, shape, np.uint8)
                if dtype == np.uint8
                else spaces.Box(-np.inf, np.inf, shape, np.float32)
                for key, (shape, dtype) in spec.items()
            }
        )
        action_space = spaces.Box(-1.0, 1.0, (f.action_dim,), np.float32)
        try:
            label_array = f.label_array()
        except NoCleanLabelsError:
            label_array = "actions"
        counts = {"frames": 0}

        def episodes() -> Iterator[Any]:
            for demo_id in _progress(f, progress, "export minari"):
                demo = f.demo(demo_id, states=False)
                n = demo.num_samples
                observations = {
                    key: np.concatenate([demo.obs[key], demo.next_obs[key][-1:]]).astype(spec[key][1], copy=False)
                    for key in spec
                }
                actions = demo.actions if label_array == "actions" else demo.action_labels
                terminations = np.zeros(n, dtype=bool)
                truncations = np.zeros(n, dtype=bool)
                terminations[-1] = bool(demo.attrs.get("terminated", False))
                truncations[-1] = bool(demo.attrs.get("truncated", False)) or not terminations[-1]
                seed = int(demo.attrs.get("seed", -1))
                counts["frames"] += n
                yield EpisodeBuffer(
                    id=None,
                    seed=seed if seed >= 0 else None,
                    observations=observations,
                    actions=np.asarray(actions, dtype=np.float32),
                    rewards=np.asarray(demo.rewards, dtype=np.float64),
                    terminations=terminations,
                    truncations=truncations,
                    infos={},
                )
                del demo, observations

        provenance = {
            "source_content_sha256": f.content_hash,
            "source_verification": _VERIFICATION_TEXT[verify],
            "source_schema_version": f.schema_version,
            "domain": f.domain,
            "env_id": f.env_id,
            "env_kwargs": f.env_args.get("env_kwargs", {}),
            "actions": label_array,
            "provenance": f.provenance,
        }
        with _minari_root(tmp), warnings.catch_warnings():
            # Minari warns of every optional field left unset (code permalink, author email, eval env, env spec).
            warnings.filterwarnings("ignore", category=UserWarning, module=r"minari\.")
            dataset = minari.create_dataset_from_buffers(
                dataset_id=dataset_id,
                buffer=episodes(),  # consumed one episode at a time by Minari's storage
                env=None,
                observation_space=obs_space,
                action_space=action_space,
                algorithm_name=str((f.provenance.get("demonstrator") or {}).get("name", "unknown")),
                description=f"Exported by r2s2r_envs from {Path(path).name}. {INFO_KEY}: " + json.dumps(provenance),
                author="r2s2r_envs",
                requirements=["r2s2r_envs"],
                jpeg_encoding=False,
            )
            total = int(dataset.total_episodes)
        source = f.content_hash
    return ExportResult(
        format="minari",
        out=out,
        episodes=total,
        frames=counts["frames"],
        seconds=time.perf_counter() - start,
        source_sha256=source,
        dataset_id=dataset_id,
    )


@contextlib.contextmanager
def _minari_root(root: Path) -> Iterator[None]:
    """Points Minari at ``root`` for the duration (Minari finds its datasets through ``MINARI_DATASETS_PATH``)."""
    before = os.environ.get("MINARI_DATASETS_PATH")
    os.environ["MINARI_DATASETS_PATH"] = str(root)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("MINARI_DATASETS_PATH", None)
        else:
            os.environ["MINARI_DATASETS_PATH"] = before


def _id_part(stem: str) -> str:
    """A file stem as a Minari dataset name: lower case, ``[a-z0-9-]`` only."""
    text = "".join(c if c.isalnum() else "-" for c in stem.lower()).strip("-")
    return text or "dataset"


def _check_dataset_id(dataset_id: object) -> None:
    """Refuses a Minari id that is not ``[namespace/...]name-vN``: Minari makes its folders from the id, so ``..``
    or a leading ``/`` would write outside ``--out``, and an id without ``-vN`` fails inside Minari."""
    if not isinstance(dataset_id, str) or MINARI_ID_RE.fullmatch(dataset_id) is None:
        raise ExportError(
            f"--dataset-id {dataset_id!r} is not a Minari dataset id: give [NAMESPACE/]NAME-vVERSION of letters, "
            "digits, '_' and '-' (e.g. r2s2r/ungrounded-1000-v0); the id names folders under --out, so it cannot "
            "hold '..', '.' or start with '/'"
        )


# -- shared ----------------------------------------------------------------------------------------

#: What ``source_verification`` says in an export's provenance, per verify mode.
_VERIFICATION_TEXT = {
    "full": "full: every hash of the source, its arrays' included, was recomputed and matched before export",
    "quick": "quick: the arrays' hashes were not recomputed (--verify quick); run r2s2r datasets verify on the source",
}


def _check_verify(verify: object) -> None:
    if verify not in EXPORT_VERIFY_MODES:
        raise ExportError(
            f"verify={verify!r} is not an export verification; choose one of {list(EXPORT_VERIFY_MODES)} (an export "
            "always checks its source before writing)"
        )


def _check_out(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise ExportError(f"--out {out} is a file; the export writes a folder: give a new or empty folder")
    if out.is_dir() and any(out.iterdir()):
        raise ExportError(
            f"--out {out} exists and is not empty; the export writes a new folder: give a new or empty folder "
            "(nothing was written)"
        )


@contextlib.contextmanager
def _staging(out: Path) -> Iterator[Path]:
    """A hidden folder beside ``out`` to write into, renamed to ``out`` when the block succeeds, removed otherwise."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.exporting-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        yield tmp
        _check_out(out)  # nothing appeared there meanwhile
        if out.is_dir():
            out.rmdir()
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _progress(f: DatasetFile, progress: bool, desc: str) -> Iterator[int]:
    from tqdm.auto import tqdm

    with tqdm(f.demo_ids, unit="demo", disable=not progress, desc=desc, dynamic_ncols=True) as bar:
        yield from bar


def _control_rate(provenance: Mapping[str, Any]) -> int:
    """Frames per second: the world's control rate where the provenance gives it, else :data:`DEFAULT_FPS`."""
    world = provenance.get("world") or {}
    hz = (world.get("control") or {}).get("control_hz") if isinstance(world, Mapping) else None
    if isinstance(hz, (int, float)) and hz > 0 and float(hz).is_integer():
        return int(hz)
    return DEFAULT_FPS


def _import_pyarrow() -> tuple[Any, Any]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ExportError(
            f"--format lerobot needs pyarrow ({exc}); install the interop extra: pip install 'r2s2r_envs[interop]'"
        ) from None
    return pa, pq


def _short(name: str) -> str:
    """A MuJoCo joint name without its model prefix (``arm/joint1`` -> ``joint1``)."""
    return name.rsplit("/", 1)[-1]


def _size(path: Path) -> int:
    """Bytes of a file on disk so far (0 before ffmpeg has created it)."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
