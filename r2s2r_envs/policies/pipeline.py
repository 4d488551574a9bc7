"""The one observation/action pipeline shared by training and inference (numpy; no torch).

Training reads raw (unnormalized) batches from the dataset loaders, whose frame stacking and action chunks
define the layout (docs/datasets.md, "TrajectoryDataset"), and passes them through :class:`Pipeline`. At
inference :class:`FrameStacker` rebuilds the same frame stack from the env's observations (the first observation of
an episode repeated, as the loader pads a demo's start) and the same :class:`Pipeline` normalizes it and maps the
predicted chunk back to env units. The pipeline's statistics are the merged statistics stored with the training
datasets, saved with the checkpoint, so inference never needs the data.

Low-dimensional observations are normalized to zero mean and unit variance ("standard"); actions too by default,
so the data has the scale of a flow's Gaussian noise (``"minmax"``, [-1, 1] from the data's range, is the other
choice: with this data most actions sit near the middle of a wide range, so [-1, 1] leaves them far smaller than
the noise). Images are scaled to [0, 1] and never normalized.

Before normalization the low-dimensional observations pass through the pipeline's feature stage
(:mod:`r2s2r_envs.policies.features`): ``"raw"`` concatenates the keys and ``"proprio"`` the robot's own keys
(both normalized per key with the datasets' stored statistics), ``"task"`` computes hand-relative,
next-object-first features (normalized with statistics of the features over the training data, stored as
``"features"``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from r2s2r_envs.datasets.stats import NormalizeMode, Normalizer, RunningStats
from r2s2r_envs.policies.features import FEATURE_SETS, KEYWISE_SETS, make_features, proprio_keys, task_keys

OBS_NORMALIZATION: NormalizeMode = "standard"
ACTION_NORMALIZATION: NormalizeMode = "standard"


class PipelineError(ValueError):
    """An observation that does not fit the pipeline (missing key, wrong shape, not finite)."""


class Pipeline:
    """Normalization and layout of policy inputs and outputs.

    Args:
        obs_keys: low-dimensional observation keys, in the order they are concatenated.
        image_keys: image observation keys (``(H, W, 3)`` uint8), fed to a CNN encoder.
        obs_shapes: shape of every key's single observation (without frame axis).
        action_dim: action dimensions ``A``.
        frame_stack: observations per input ``F``.
        action_chunk: actions per prediction ``H``.
        stats: statistics per stream: ``"actions"`` and ``"obs/<key>"`` for every low-dimensional key (feature sets
            ``"raw"`` and ``"proprio"``) or ``"features"`` (feature set ``"task"``).
        action_low: lower bound of the env's actions (predictions are clipped to it), or ``None``.
        action_high: upper bound, or ``None``.
        features: the feature stage, one of :data:`~r2s2r_envs.policies.features.FEATURE_SETS`.
    """

    def __init__(
        self,
        *,
        obs_keys: Sequence[str],
        image_keys: Sequence[str],
        obs_shapes: Mapping[str, Sequence[int]],
        action_dim: int,
        frame_stack: int,
        action_chunk: int,
        stats: Mapping[str, RunningStats],
        action_low: Sequence[float] | None = None,
        action_high: Sequence[float] | None = None,
        obs_normalization: NormalizeMode = OBS_NORMALIZATION,
        action_normalization: NormalizeMode = ACTION_NORMALIZATION,
        features: str = "raw",
    ) -> None:
        if features not in FEATURE_SETS:
            raise PipelineError(f"unknown feature set {features!r}; choose one of {list(FEATURE_SETS)}")
        self.features = features
        self.obs_keys = list(obs_keys)
        self.image_keys = list(image_keys)
        self.obs_shapes = {k: tuple(int(s) for s in v) for k, v in obs_shapes.items()}
        self.action_dim = int(action_dim)
        self.frame_stack = int(frame_stack)
        self.action_chunk = int(action_chunk)
        self.stage = make_features(features, self.obs_keys, self.obs_shapes)
        names = ["actions", *self.stat_names]
        missing = [n for n in names if n not in stats]
        if missing:
            raise PipelineError(f"no normalization statistics for {missing}; the data has {sorted(stats)}")
        self.stats = {n: stats[n] for n in names}
        self.obs_normalization: NormalizeMode = obs_normalization
        self.action_normalization: NormalizeMode = action_normalization
        self._obs_norm = Normalizer({n: s for n, s in self.stats.items() if n != "actions"}, obs_normalization)
        self._action_norm = Normalizer({"actions": self.stats["actions"]}, action_normalization)
        self.action_low = None if action_low is None else np.asarray(action_low, dtype=np.float32)
        self.action_high = None if action_high is None else np.asarray(action_high, dtype=np.float32)

    @property
    def stat_names(self) -> list[str]:
        """The observation statistics the pipeline normalizes with (``"features"`` or ``"obs/<key>"``)."""
        return [f"obs/{k}" for k in self.obs_keys] if self.features in KEYWISE_SETS else ["features"]

    # -- sizes -------------------------------------------------------------------------------------

    @property
    def state_dim(self) -> int:
        """Width of the flattened low-dimensional input: ``F * sum(dims)``."""
        return self.frame_stack * self.stage.dim

    @property
    def chunk_dim(self) -> int:
        """Width of a flattened action chunk: ``H * A``."""
        return self.action_chunk * self.action_dim

    # -- training and inference share these ------------------------------------------------------

    def encode_obs(self, obs: Mapping[str, np.ndarray], *, scale_images: bool = True) -> dict[str, np.ndarray]:
        """Stacked raw observations ``{key: (B, F, ...)}`` to network inputs.

        Args:
            obs: the stacked observations.
            scale_images: scale camera frames to [0, 1] here; ``False`` leaves them uint8 (for a GPU, which
                receives a quarter of the bytes and divides by 255 itself).

        Returns:
            ``{"state": (B, F * D) float32}`` (normalized, keys concatenated per frame in ``obs_keys`` order)
            plus ``{"image/<key>": (B, F, H, W, 3) float32 in [0, 1]}`` for every image key.
        """
        if self.features not in KEYWISE_SETS:
            x = self._obs_norm.normalize("features", self.stage(obs))
            state = x.reshape(len(x), -1)
        else:
            parts = []
            for key in self.obs_keys:
                x = np.asarray(obs[key])
                parts.append(self._obs_norm.normalize(f"obs/{key}", x.reshape(*x.shape[:2], -1)))
            batch = parts[0].shape[0] if parts else len(next(iter(obs.values())))
            state = np.concatenate(parts, axis=-1).reshape(batch, -1) if parts else np.zeros((batch, 0), np.float32)
        out = {"state": state.astype(np.float32, copy=False)}
        for key in self.image_keys:
            frames = np.asarray(obs[key])
            out[f"image/{key}"] = np.asarray(frames, dtype=np.float32) / 255.0 if scale_images else frames
        return out

    def encode_actions(self, actions: np.ndarray) -> np.ndarray:
        """Raw action chunks ``(B, H, A)`` to normalized, flattened targets ``(B, H * A)``."""
        a = self._action_norm.normalize("actions", actions)
        return a.reshape(len(a), -1)

    def decode_actions(self, flat: np.ndarray) -> np.ndarray:
        """Normalized flattened chunks ``(B, H * A)`` to env actions ``(B, H, A)``, clipped to the action space."""
        a = self._action_norm.unnormalize("actions", np.asarray(flat).reshape(len(flat), self.action_chunk, -1))
        if self.action_low is not None and self.action_high is not None:
            a = np.clip(a, self.action_low, self.action_high)
        return a.astype(np.float32, copy=False)

    # -- serialization -----------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (statistics as float lists; float64 values round-trip exactly through JSON)."""
        return {
            "obs_keys": self.obs_keys,
            "image_keys": self.image_keys,
            "obs_shapes": {k: list(v) for k, v in self.obs_shapes.items()},
            "action_dim": self.action_dim,
            "frame_stack": self.frame_stack,
            "action_chunk": self.action_chunk,
            "obs_normalization": self.obs_normalization,
            "action_normalization": self.action_normalization,
            "features": self.features,
            "stats": {n: _stats_to_dict(s) for n, s in self.stats.items()},
            "action_low": None if self.action_low is None else self.action_low.tolist(),
            "action_high": None if self.action_high is None else self.action_high.tolist(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Pipeline:
        """Inverse of :meth:`to_dict`."""
        return cls(
            obs_keys=data["obs_keys"],
            image_keys=data["image_keys"],
            obs_shapes=data["obs_shapes"],
            action_dim=data["action_dim"],
            frame_stack=data["frame_stack"],
            action_chunk=data["action_chunk"],
            stats={n: _stats_from_dict(s) for n, s in data["stats"].items()},
            action_low=data.get("action_low"),
            action_high=data.get("action_high"),
            obs_normalization=data["obs_normalization"],
            action_normalization=data["action_normalization"],
            features=data.get("features", "raw"),  # checkpoints of version 1 had no feature stage
        )


class FrameStacker:
    """Builds the frame stack of the current step from an episode's observations, as the loader pads a demo.

    Args:
        pipeline: gives the keys, shapes and ``frame_stack``.
    """

    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline
        self.keys = [*pipeline.obs_keys, *pipeline.image_keys]
        self._frames: dict[str, list[np.ndarray]] = {}

    def reset(self) -> None:
        """Forgets the episode (the next observation is an episode's first)."""
        self._frames = {}

    def push(self, obs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Adds an observation and returns the stack ``{key: (1, F, ...)}`` ending with it.

        Raises:
            PipelineError: a key is missing, a shape differs from the training data, or a value is not finite.
        """
        if not isinstance(obs, Mapping):
            raise PipelineError(
                f"the policy expects a dict observation with keys {self.keys}, not a {type(obs).__name__}"
            )
        missing = [k for k in self.keys if k not in obs]
        if missing:
            raise PipelineError(f"observation lacks key(s) {missing}; the policy was trained on {self.keys}")
        F = self.pipeline.frame_stack
        for key in self.keys:
            x = np.asarray(obs[key])
            expected = self.pipeline.obs_shapes[key]
            if x.shape != expected:
                raise PipelineError(f"observation {key!r} has shape {x.shape}; the policy was trained on {expected}")
            if key in self.pipeline.obs_keys and not np.all(np.isfinite(x)):
                raise PipelineError(f"observation {key!r} is not finite: {x}")
            frames = self._frames.get(key)
            if frames is None:
                frames = self._frames[key] = [x] * F  # the episode's first observation, repeated
            else:
                frames.append(x)
                del frames[0]
        return {k: np.stack(self._frames[k])[None] for k in self.keys}


def feature_keys(features: str, available: Sequence[str]) -> list[str]:
    """The observation keys a feature stage reads, from those ``available`` (``"raw"``: all of them; ``"task"``: its
    keys, and ``object_visible`` where available; ``"proprio"``: the robot's own keys)."""
    if features == "raw":
        return list(available)
    return task_keys(available) if features == "task" else proprio_keys(available)


def weighted_merge(stats: Sequence[RunningStats], weights: Sequence[float]) -> RunningStats:
    """Statistics of a mixture of streams drawn with probabilities ``weights`` (normalized to sum 1).

    The mean is the weighted mean, the variance the mixture's (within plus between streams); ``count`` is the
    total count, so ``std`` is the mixture's standard deviation. Min and max are over every stream with weight.
    """
    w = np.asarray(weights, dtype=np.float64)
    if len(w) != len(stats) or len(w) == 0 or np.any(w < 0) or w.sum() <= 0:
        raise ValueError(f"need one non-negative weight per stream with a positive sum, got {list(weights)}")
    w = w / w.sum()
    means = np.stack([s.mean for s in stats])
    variances = np.stack([s.m2 / max(s.count, 1) for s in stats])
    mean = (w[:, None] * means).sum(axis=0)
    var = (w[:, None] * (variances + (means - mean) ** 2)).sum(axis=0)
    count = int(sum(s.count for s in stats))
    used = [s for s, wi in zip(stats, w) if wi > 0]
    return RunningStats(
        count=count,
        mean=mean,
        m2=var * count,
        min=np.min(np.stack([s.min for s in used]), axis=0),
        max=np.max(np.stack([s.max for s in used]), axis=0),
    )


def _stats_to_dict(s: RunningStats) -> dict[str, Any]:
    arrays = {"mean": s.mean, "m2": s.m2, "min": s.min, "max": s.max}
    return {"count": int(s.count), **{k: v.tolist() for k, v in arrays.items()}}


def _stats_from_dict(d: Mapping[str, Any]) -> RunningStats:
    return RunningStats(
        count=int(d["count"]),
        mean=np.asarray(d["mean"], dtype=np.float64),
        m2=np.asarray(d["m2"], dtype=np.float64),
        min=np.asarray(d["min"], dtype=np.float64),
        max=np.asarray(d["max"], dtype=np.float64),
    )
