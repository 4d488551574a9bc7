"""The LeRobot v3.0 layout's parts: the path templates and file sizes, the parquet and mp4 files that roll over to a new
file past a size, and the names of the features' components."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

# LeRobot's own defaults for file sizes and files per chunk folder.
DATA_FILE_MB = 100
VIDEO_FILE_MB = 200
FILES_PER_CHUNK = 1000
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
# Video encoding: H.264 in yuv420p (decoded by PyAV and torchcodec alike), a key frame every 2 frames so that a
# reader seeking to any timestamp decodes at most one frame before it.
VIDEO_CODEC = "h264"
VIDEO_PARAMS = ["-g", "2", "-crf", "18", "-preset", "fast"]


class RollingFile:
    """Parquet files under a ``chunk-XXX/file-YYY`` template, a new one past ``limit`` bytes (uncompressed)."""

    def __init__(self, root: Path, template: str, limit: int, pq: Any, schema: Any) -> None:
        self.root, self.template, self.limit, self.pq, self.schema = root, template, limit, pq, schema
        self.chunk, self.file, self.size = 0, 0, 0
        self._writer: Any = None

    def write(self, table: Any) -> tuple[int, int]:
        if self._writer is not None and self.size > 0 and self.size + table.nbytes > self.limit:
            self._writer.close()
            self._writer = None
            self.chunk, self.file = next_file(self.chunk, self.file)
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


class VideoFiles:
    """mp4 files of one camera, episodes concatenated; a new file once the current one passes ``limit`` bytes."""

    def __init__(self, root: Path, key: str, fps: int, limit: int) -> None:
        self.root, self.key, self.fps, self.limit = root, key, fps, limit
        self.chunk, self.file, self.frames = 0, 0, 0
        self._path: Path | None = None
        self._gen: Any = None

    def write(self, frames: np.ndarray) -> dict[str, Any]:
        import imageio_ffmpeg

        if self._gen is not None and self._path is not None and file_size(self._path) > self.limit:
            self._close_file()
            self.chunk, self.file = next_file(self.chunk, self.file)
        if self._gen is None:
            h, w = frames.shape[1:3]
            name = VIDEO_PATH.format(video_key=self.key, chunk_index=self.chunk, file_index=self.file)
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
                output_params=list(VIDEO_PARAMS),
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


def next_file(chunk: int, file: int) -> tuple[int, int]:
    return (chunk + 1, 0) if file + 1 >= FILES_PER_CHUNK else (chunk, file + 1)


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
    return [f"{key}.{short_name(p)}" for p in parts]


def action_component_names(dim: int, env_kwargs: Mapping[str, Any]) -> list[str]:
    """Names of the action components: task-space control (docs/task.md#action) is the TCP displacement and rotation
    then the 16 finger targets; anything else ``action.<index>``."""
    from r2s2r_envs.world import constants as C

    mode = env_kwargs.get("control_mode", "task")
    tcp = ("tcp_dx", "tcp_dy", "tcp_dz", "tcp_rx", "tcp_ry", "tcp_rz")
    if mode == "task" and dim == len(tcp) + len(C.HAND_JOINTS):
        return [*tcp, *(f"finger.{short_name(j)}" for j in C.HAND_JOINTS)]
    if mode == "joint" and dim == len(C.ARM_JOINTS) + len(C.HAND_JOINTS):
        return [*(f"arm.{short_name(j)}" for j in C.ARM_JOINTS), *(f"finger.{short_name(j)}" for j in C.HAND_JOINTS)]
    return [f"action.{i}" for i in range(dim)]


def short_name(name: str) -> str:
    """A MuJoCo joint name without its model prefix (``arm/joint1`` -> ``joint1``)."""
    return name.rsplit("/", 1)[-1]


def file_size(path: Path) -> int:
    """Bytes of a file on disk so far (0 before ffmpeg has created it)."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
