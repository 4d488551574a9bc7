"""Cached camera features of a frozen encoder: computed once per frame of the training data, then gathered per batch
(needs torch).

A run whose ``image_encoder`` is frozen (:data:`~r2s2r_envs.policies.config.FROZEN_ENCODERS`, e.g. the
``cpu-image-cached`` recipe's ``sim-pose``) loads its datasets without the camera frames; :func:`extract` then reads
each demo's frames from the file, a demo at a time, and passes them through the frozen encoder in batches without
gradients. What stays in memory is one float32 feature vector per frame and camera (:class:`FrameFeatures`; 64
numbers a camera for ``sim-pose``, 512 bytes a frame for both cameras, against 24,576 bytes of uint8 frames), and a
training step gathers a batch's frame stacks from it (:class:`CachedBatches`): what the policy trains is the MLP over
the proprioception and these features and its head, at the speed of a state policy.

The features are the frozen encoder's of the frames as recorded: the random-shift augmentation cannot move pixels
that are no longer there, so a frozen encoder runs with ``image_shift=0`` (``check_config`` refuses another value).
At inference nothing is cached: the policy's encoder holds the frozen weights (its checkpoint carries a copy) and
computes the features of the live frames, the same function (a batch of frames rounds differently from one frame,
by about 1e-6).

A batch's inputs are ``"state"`` and ``"feature/<camera>"`` ``(B, F * out_dim)`` (the frames' features, oldest
first), which :class:`~r2s2r_envs.policies.models.Encoder` reads in place of ``"image/<camera>"``.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from r2s2r_envs.datasets.loaders import TrajectoryDataset
from r2s2r_envs.datasets.mixture import CoTrainingMixture
from r2s2r_envs.datasets.reader import open_dataset
from r2s2r_envs.datasets.stats import Normalizer
from r2s2r_envs.policies.batches import ResidentBatches, batch_tensors
from r2s2r_envs.policies.config import FROZEN_ENCODERS, ConfigError, FrozenEncoder, TrainConfig
from r2s2r_envs.policies.data import DatasetRef
from r2s2r_envs.policies.pipeline import Pipeline
from r2s2r_envs.policies.vision import FrameEncoder, image_encoder

#: Frames passed through the frozen encoder at a time while extracting (bounded memory, fast convolutions).
EXTRACT_CHUNK = 256


def frozen_encoder(config: TrainConfig) -> FrozenEncoder | None:
    """The frozen encoder a run's features are cached from (``None`` for a run that trains its encoder)."""
    return FROZEN_ENCODERS.get(config.image_encoder) if config.encoder == "cnn" else None


def check_cameras(frozen: FrozenEncoder, refs: Sequence[DatasetRef], image_keys: Sequence[str]) -> None:
    """Every dataset has the cameras ``image_keys`` as frames of the size the frozen encoder was trained on.

    Raises:
        ConfigError: naming the dataset, the camera and what the encoder expects.
    """
    expected = (frozen.image_size, frozen.image_size, 3)
    for ref in refs:
        for key in image_keys:
            shape = ref.obs_spec.get(key)
            if shape is None:
                cameras = sorted(k for k, s in ref.obs_spec.items() if len(s) == 3)
                raise ConfigError(
                    f"{ref.path} has no camera {key!r} (its cameras: {cameras}); the frozen {frozen.name} encoder "
                    f"reads {list(frozen.cameras)} at {frozen.image_size} px: record the data with obs_mode 'rgb' or "
                    f"'state+rgb' and image_size {frozen.image_size}"
                )
            if tuple(shape) != expected:
                raise ConfigError(
                    f"{ref.path}: camera {key!r} has frames of shape {tuple(shape)}; the frozen {frozen.name} "
                    f"encoder was trained on {expected} (record the data with image_size {frozen.image_size})"
                )


@dataclasses.dataclass(frozen=True, kw_only=True)
class FrameFeatures:
    """A frozen encoder's features of every frame of one loaded dataset, in the loader's demo order.

    Attributes:
        tables: per camera, ``(transitions, out_dim)`` float32: row ``starts[demo] + step`` is that frame's.
        starts: the first row of each demo, by demo id.
        frame_stack: frames per sample (the loader's).
    """

    tables: dict[str, np.ndarray]
    starts: dict[int, int]
    frame_stack: int

    @property
    def nbytes(self) -> int:
        """Bytes of the feature tables."""
        return int(sum(t.nbytes for t in self.tables.values()))

    def rows(self, demo_id: np.ndarray, step: np.ndarray) -> np.ndarray:
        """``(B, F)`` table rows of the frame stacks of samples at ``step`` of ``demo_id``: as the loader stacks
        frames, the demo's first frame repeated before its start."""
        first = np.array([self.starts[int(d)] for d in demo_id], dtype=np.int64)
        offsets = np.arange(-(self.frame_stack - 1), 1, dtype=np.int64)
        return first[:, None] + np.maximum(np.asarray(step, dtype=np.int64)[:, None] + offsets, 0)

    def stacked(self, demo_id: np.ndarray, step: np.ndarray) -> dict[str, np.ndarray]:
        """Per camera, the ``(B, F * out_dim)`` features of the samples' frame stacks, oldest frame first."""
        rows = self.rows(demo_id, step)
        return {k: t[rows].reshape(len(rows), -1) for k, t in self.tables.items()}


@torch.no_grad()
def extract(
    path: str | os.PathLike[str], demo_ids: Sequence[int], cameras: Mapping[str, FrameEncoder], frame_stack: int
) -> FrameFeatures:
    """The features of every frame of the demos ``demo_ids`` of the file ``path`` (in that order), each camera's
    through its frozen encoder: frames read a demo at a time, scaled to [0, 1] as the pipeline scales them, encoded
    :data:`EXTRACT_CHUNK` at a time without gradients."""
    with open_dataset(path, verify="none") as f:  # the loader verified the file
        lengths = [f.demo_length(int(i)) for i in demo_ids]
        spec = f.obs_spec()
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        tables = {k: np.empty((int(sum(lengths)), cam.out_dim), dtype=np.float32) for k, cam in cameras.items()}
        frames = {k: np.empty((max(lengths), *spec[k][0]), dtype=spec[k][1]) for k in cameras}
        for demo, start, n in zip(demo_ids, starts, lengths):
            for key, camera in cameras.items():
                f.read_into(int(demo), f"obs/{key}", frames[key][:n])
                for s in range(0, n, EXTRACT_CHUNK):
                    chunk = np.asarray(frames[key][s : min(n, s + EXTRACT_CHUNK)], dtype=np.float32) / 255.0
                    x = torch.from_numpy(chunk).permute(0, 3, 1, 2)
                    tables[key][start + s : start + s + len(chunk)] = camera.encode(x).numpy()
    return FrameFeatures(
        tables=tables, starts={int(d): int(s) for d, s in zip(demo_ids, starts)}, frame_stack=frame_stack
    )


class FeatureDataset:
    """A loaded dataset (without its frames) with its :class:`FrameFeatures`: ``get_batch`` adds the samples'
    stacked features as ``batch["features"]`` (``{camera: (B, F * out_dim)}``); for the validation batches."""

    def __init__(self, dataset: TrajectoryDataset, features: FrameFeatures) -> None:
        if sum(len(t) for t in features.tables.values()) != len(features.tables) * dataset.num_transitions:
            raise ValueError(f"{dataset.path}: the feature tables do not cover the loaded transitions")
        self.dataset = dataset
        self.features = features

    def __len__(self) -> int:
        return len(self.dataset)

    def get_batch(self, indices: np.ndarray | Sequence[int], *, normalizer: Normalizer | None = None) -> dict[str, Any]:
        """:meth:`TrajectoryDataset.get_batch` plus ``"features"``."""
        batch = self.dataset.get_batch(indices, normalizer=normalizer)
        batch["features"] = self.features.stacked(batch["demo_id"], batch["step"])
        return batch


def cached_batch_tensors(
    pipeline: Pipeline, batch: dict[str, Any], device: torch.device | str = "cpu"
) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor]:
    """:func:`~r2s2r_envs.policies.batches.batch_tensors` of a :class:`FeatureDataset` batch: the state through the
    (frameless) pipeline, the cached features as ``"feature/<camera>"``."""
    inputs, target, weight = batch_tensors(pipeline, batch, device)
    for key, value in batch["features"].items():
        inputs[f"feature/{key}"] = torch.from_numpy(value).to(device)
    return inputs, target, weight


class CachedBatches(ResidentBatches):
    """:class:`~r2s2r_envs.policies.batches.ResidentBatches` with cached camera features: the state, targets and
    masks of every sample encoded once, every frame's features in one table per camera, and per sample the table
    rows of its frame stack; a batch is a gather (the same samples as the state path draws).

    Args:
        mixture: the training mixture over the loaded datasets (without frames).
        pipeline: the pipeline without cameras (the state input).
        features: each dataset's :class:`FrameFeatures`, in the mixture's order.
        device: where the tensors live.
    """

    def __init__(
        self,
        mixture: CoTrainingMixture,
        pipeline: Pipeline,
        features: Sequence[FrameFeatures],
        device: torch.device,
        chunk: int = 8192,
    ) -> None:
        super().__init__(mixture, pipeline, device, chunk)
        keys = list(features[0].tables)
        rows, offset = [], 0
        for d, table in zip(mixture.datasets, features):
            for start in range(0, len(d), chunk):
                batch = d.get_batch(np.arange(start, min(start + chunk, len(d))))
                rows.append(torch.from_numpy(offset + table.rows(batch["demo_id"], batch["step"])))
            offset += len(next(iter(table.tables.values())))
        self.rows = torch.cat(rows).to(device)
        self.tables = {k: torch.from_numpy(np.concatenate([t.tables[k] for t in features])).to(device) for k in keys}

    @property
    def feature_bytes(self) -> int:
        """Bytes of the cached feature tables."""
        return int(sum(t.numel() * t.element_size() for t in self.tables.values()))

    def gather(self, index: torch.Tensor) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor, torch.Tensor]:
        inputs, target, weight, domain = super().gather(index)
        rows = self.rows.index_select(0, index)
        for key, table in self.tables.items():
            inputs[f"feature/{key}"] = table[rows].reshape(len(index), -1)
        return inputs, target, weight, domain


@dataclasses.dataclass(frozen=True, kw_only=True)
class FeatureCache:
    """What a run with a frozen encoder trains on (:func:`build_cache`).

    Attributes:
        frozen: the encoder.
        pipeline: the policy's pipeline, cameras included (what the checkpoint records and inference runs).
        state_pipeline: the same without cameras (what encodes the loaded, frameless batches).
        features: each training dataset's :class:`FrameFeatures`.
        held_out: the validation datasets with their features.
        extract_time_s: seconds spent extracting.
        frames: frames encoded (per camera).
    """

    frozen: FrozenEncoder
    pipeline: Pipeline
    state_pipeline: Pipeline
    features: list[FrameFeatures]
    held_out: list[FeatureDataset]
    extract_time_s: float
    frames: int

    @property
    def nbytes(self) -> int:
        """Bytes of the training data's feature tables (the validation demos' apart)."""
        return sum(f.nbytes for f in self.features)

    def log(self) -> dict[str, Any]:
        """The training log's ``frozen_encoder`` entry."""
        return {
            "name": self.frozen.name,
            "sha256": self.frozen.sha256,
            "cameras": list(self.pipeline.image_keys),
            "frames_encoded": self.frames,
            "extract_time_s": self.extract_time_s,
            "feature_bytes": self.nbytes,
        }


def build_cache(
    config: TrainConfig,
    frozen: FrozenEncoder,
    refs: Sequence[DatasetRef],
    datasets: Sequence[TrajectoryDataset],
    held_out: Sequence[tuple[DatasetRef, TrajectoryDataset]],
    state_pipeline: Pipeline,
) -> FeatureCache:
    """Extracts the frozen encoder's features of every frame the run trains and validates on.

    Args:
        config: the run (its ``image_keys``, ``frame_stack`` and ``threads``).
        frozen: the frozen encoder.
        refs: the training datasets, in the order of ``datasets``.
        datasets: the loaded training datasets (without frames).
        held_out: the validation datasets and their files.
        state_pipeline: the pipeline built over ``datasets`` (without cameras).
    """
    torch.set_num_threads(config.threads)
    cameras = {k: image_encoder(frozen.name, camera=k) for k in config.image_keys}
    t0 = time.perf_counter()
    features = [extract(r.path, d.demo_ids, cameras, config.frame_stack) for r, d in zip(refs, datasets)]
    validation = [FeatureDataset(d, extract(r.path, d.demo_ids, cameras, config.frame_stack)) for r, d in held_out]
    frames = sum(d.num_transitions for d in datasets) + sum(d.num_transitions for _, d in held_out)
    shape = (frozen.image_size, frozen.image_size, 3)
    layout = state_pipeline.to_dict()
    pipeline = Pipeline.from_dict(
        {
            **layout,
            "image_keys": list(config.image_keys),
            "obs_shapes": {**layout["obs_shapes"], **{k: list(shape) for k in config.image_keys}},
        }
    )
    return FeatureCache(
        frozen=frozen,
        pipeline=pipeline,
        state_pipeline=state_pipeline,
        features=features,
        held_out=validation,
        extract_time_s=time.perf_counter() - t0,
        frames=frames,
    )
