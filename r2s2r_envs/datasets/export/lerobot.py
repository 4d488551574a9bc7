"""Export to LeRobot's v3.0 layout (docs/interop.md#lerobot): :func:`export_lerobot`.

``meta/info.json`` (features, fps, robot type, the dataset's provenance), ``meta/stats.json``, ``meta/tasks.parquet``,
``meta/episodes/...parquet``, ``data/...parquet`` and, for image observations, one mp4 per camera and file (episodes
concatenated, as LeRobot v3.0 stores them). Needs ``pyarrow`` (the ``interop`` extra); videos use the ffmpeg that
ships with ``imageio-ffmpeg``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from r2s2r_envs.datasets import schema
from r2s2r_envs.datasets.export.common import (
    INFO_KEY,
    VERIFICATION_TEXT,
    ExportError,
    ExportResult,
    ExportVerify,
    check_out,
    check_verify,
    demo_progress,
    staging,
)
from r2s2r_envs.datasets.export.lerobot_layout import (
    DATA_FILE_MB,
    DATA_PATH,
    EPISODES_PATH,
    FILES_PER_CHUNK,
    VIDEO_CODEC,
    VIDEO_FILE_MB,
    VIDEO_PATH,
    RollingFile,
    VideoFiles,
    action_component_names,
    component_names,
)
from r2s2r_envs.datasets.reader import DatasetFile, open_dataset
from r2s2r_envs.datasets.schema import NoCleanLabelsError
from r2s2r_envs.datasets.stats import RunningStats

#: The LeRobot dataset format version written (``codebase_version`` of ``meta/info.json``).
LEROBOT_CODEBASE_VERSION = "v3.0"
#: Frame rate of the exported episodes when the provenance does not give the control rate (lab datasets).
DEFAULT_FPS = 20
#: LeRobot's ``robot_type``: a Panda arm with a LEAP-like 16-joint hand (docs/task.md).
ROBOT_TYPE = "panda_leap_hand"
#: The task string of every PickSort episode (LeRobot's ``meta/tasks.parquet``).
TASK = "Pick each object from the moving conveyor belt and drop it into the bin of its category."
#: Quantiles LeRobot keeps in its statistics, with their names.
_QUANTILES = {"q01": 0.01, "q10": 0.10, "q50": 0.50, "q90": 0.90, "q99": 0.99}


def export_lerobot(
    path: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    fps: int | None = None,
    task: str = TASK,
    robot_type: str = ROBOT_TYPE,
    data_file_mb: float = DATA_FILE_MB,
    video_file_mb: float = VIDEO_FILE_MB,
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
    check_verify(verify)
    out = Path(out)
    check_out(out)
    start = time.perf_counter()
    with open_dataset(path, verify=verify) as f, staging(out) as tmp:
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
            for demo_id in demo_progress(f, progress, "export lerobot"):
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
        self._frame_files: RollingFile | None = None
        self._videos = {
            key: VideoFiles(root, f"observation.images.{key}", fps, video_file_bytes) for key in self.images
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
                    "video.codec": VIDEO_CODEC,
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
            self._frame_files = RollingFile(self.root, DATA_PATH, self.data_file_bytes, self.pq, table.schema)
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
            path = self.root / EPISODES_PATH.format(chunk_index=0, file_index=0)
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
            "chunks_size": FILES_PER_CHUNK,
            "data_files_size_in_mb": max(1, round(self.data_file_bytes / 2**20)),
            "video_files_size_in_mb": max(1, round(self.video_file_bytes / 2**20)),
            "fps": self.fps,
            "splits": {"train": f"0:{episodes}"},
            "data_path": DATA_PATH,
            "video_path": VIDEO_PATH if self.images else None,
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
            "source_verification": VERIFICATION_TEXT[self.verified],
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
