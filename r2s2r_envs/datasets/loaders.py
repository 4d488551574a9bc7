"""Training loaders without torch: an in-memory, vectorized sequence dataset over one file.

A sample at step ``t`` of a demo holds the observations of steps ``t - F + 1 .. t`` (frame stacking,
``F = frame_stack``) and the actions of steps ``t .. t + H - 1`` (an action chunk, ``H = action_chunk``),
the layout diffusion and ACT-style policies train on. Near the start of a demo missing frames repeat the
first observation; near the end missing actions repeat the last one (or are zero), and masks say which
entries are padding. Arrays are read straight into one preallocated array per key, so memory is the size
of the data loaded plus small index arrays.

A sample's ``actions`` are the executed actions (``labels="executed"``, the default) or the demonstrator's clean
actions before noise injection (``labels="clean"``: the file's ``action_labels``; docs/datasets.md, "Noise
injection").

For torch, wrap it with :class:`r2s2r_envs.datasets.torch_data.TorchTrajectoryDataset`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from r2s2r_envs.datasets.reader import VerifyMode, open_dataset
from r2s2r_envs.datasets.schema import DOMAINS, EmptyDatasetError
from r2s2r_envs.datasets.stats import NormalizeMode, Normalizer, RunningStats
from r2s2r_envs.mappings import check_keys

ActionPadding = Literal["edge", "zero"]
ActionLabels = Literal["executed", "clean"]
#: What a sample's ``actions`` can be: the executed actions, or the demonstrator's clean ones (``action_labels``).
ACTION_LABEL_MODES: tuple[str, ...] = ("executed", "clean")
#: Integer domain labels in batches (``batch["domain"]``).
DOMAIN_LABELS: dict[str, int] = {"sim": 0, "real": 1}

Batch = dict[str, Any]


class TrajectoryDataset:
    """Samples with frame stacks and action chunks from one dataset file, held in memory.

    Args:
        path: the dataset file.
        obs_keys: observation keys to load (default: all low-dimensional keys; images only when named).
        frame_stack: observations per sample, ending at the sample's step (``F >= 1``).
        action_chunk: actions per sample, starting at the sample's step (``H >= 1``).
        pad_frame_stack: include samples whose frame stack reaches before the demo start (first frame
            repeated). Otherwise the first ``F - 1`` steps of each demo are not sample positions.
        pad_action_chunk: include samples whose chunk reaches past the demo end. Otherwise the last
            ``H - 1`` steps of each demo are not sample positions.
        action_padding: ``"edge"`` repeats the last action, ``"zero"`` writes zeros (the mask tells either way).
        filter_key: load only the demos under ``mask/<filter_key>`` (e.g. ``"train"``).
        demo_ids: load only these demos (applied after ``filter_key``).
        load_next_obs: also load ``next_obs`` (``batch["next_obs"]``, same stacking as ``obs``).
        normalize: ``None`` (raw), ``"standard"`` or ``"minmax"``, using the statistics stored with the file
            (over all its demos) for low-dimensional observations and actions.
        verify: content-hash check at open (``"full"``, ``"quick"``, ``"none"``).
        domain: override the domain stored in the file (``"real"`` or ``"sim"``).
        labels: what a sample's ``actions`` are. ``"executed"`` (default): the actions as executed, consistent with
            the next observations (what replay runs). ``"clean"``: the demonstrator's own actions before noise
            injection (the file's ``action_labels``), the labels to learn from noise-injected demos; the dataset's
            ``stats["actions"]`` are then those of the labels, so normalization fits what is trained on. A file of
            schema version 1 or 2 (no ``action_labels``) made without action noise gives its actions, which are
            clean.

    Raises:
        DatasetError: if the file is unusable (see :func:`~r2s2r_envs.datasets.reader.open_dataset`).
        NoCleanLabelsError: ``labels="clean"`` for a file of schema version 1 or 2 whose actions contain injected
            noise (a :class:`~r2s2r_envs.datasets.schema.DatasetError`; the message says how to regenerate it).
        KeyError: for an unknown observation or filter key (the message lists those available).
        ValueError: for invalid settings.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        obs_keys: Sequence[str] | None = None,
        frame_stack: int = 1,
        action_chunk: int = 1,
        pad_frame_stack: bool = True,
        pad_action_chunk: bool = True,
        action_padding: ActionPadding = "edge",
        filter_key: str | None = None,
        demo_ids: Sequence[int] | None = None,
        load_next_obs: bool = False,
        normalize: NormalizeMode | None = None,
        verify: VerifyMode = "full",
        domain: str | None = None,
        labels: ActionLabels = "executed",
    ) -> None:
        if labels not in ACTION_LABEL_MODES:
            raise ValueError(
                f"labels must be one of {ACTION_LABEL_MODES} ('executed': the actions as executed; 'clean': the "
                f"demonstrator's actions before noise injection), got {labels!r}"
            )
        if frame_stack < 1 or action_chunk < 1:
            raise ValueError(f"frame_stack and action_chunk must be >= 1, got {frame_stack}, {action_chunk}")
        if action_padding not in ("edge", "zero"):
            raise ValueError(f"action_padding must be 'edge' or 'zero', got {action_padding!r}")
        if domain is not None and domain not in DOMAINS:
            raise ValueError(f"domain must be one of {DOMAINS}, got {domain!r}")
        self.frame_stack = int(frame_stack)
        self.action_chunk = int(action_chunk)
        self.pad_frame_stack = pad_frame_stack
        self.pad_action_chunk = pad_action_chunk
        self.action_padding: ActionPadding = action_padding
        self.labels: ActionLabels = labels

        with open_dataset(path, verify=verify) as f:
            # Before anything is loaded: an old file of noisy actions has no clean labels to give.
            action_array = "actions" if labels == "executed" else f.label_array()
            self.path = f.path
            self.provenance: dict[str, Any] = f.provenance
            self.content_hash: str = f.content_hash
            self.env_id: str = f.env_id
            self.domain: str = domain or f.domain
            spec = f.obs_spec()
            if obs_keys is None:
                obs_keys = [k for k, (shape, dtype) in spec.items() if len(shape) <= 1]
            check_keys(obs_keys, sorted(spec), what="observation key", where=str(f.path))
            self.obs_keys: list[str] = list(obs_keys)
            ids = f.demo_ids
            if filter_key is not None:
                masks = f.masks()
                if filter_key not in masks:
                    raise KeyError(f"{f.path}: no filter key {filter_key!r}; the file has {sorted(masks)}")
                ids = masks[filter_key]
            if demo_ids is not None:
                wanted = set(int(i) for i in demo_ids)
                ids = [i for i in ids if i in wanted]
            if not ids:
                raise EmptyDatasetError(
                    f"{f.path}: no demos selected (filter_key={filter_key!r}, demo_ids={demo_ids!r})"
                )
            self.demo_ids: list[int] = list(ids)
            lengths = np.array([f.demo_length(i) for i in ids], dtype=np.int64)
            total = int(lengths.sum())
            starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])

            self._obs: dict[str, np.ndarray] = {}
            self._next_obs: dict[str, np.ndarray] = {}
            for key in self.obs_keys:
                shape, dtype = spec[key]
                self._obs[key] = np.empty((total, *shape), dtype=dtype)
                if load_next_obs:
                    self._next_obs[key] = np.empty((total, *shape), dtype=dtype)
            self._actions = np.empty((total, f.action_dim), dtype=np.float32)
            for demo_id, s, n in zip(ids, starts, lengths):
                sl = slice(int(s), int(s + n))
                for key in self.obs_keys:
                    f.read_into(demo_id, f"obs/{key}", self._obs[key][sl])
                    if load_next_obs:
                        f.read_into(demo_id, f"next_obs/{key}", self._next_obs[key][sl])
                f.read_into(demo_id, action_array, self._actions[sl])
            stored = f.stats()
            # "actions": the statistics of what a sample's actions are (the labels' with labels="clean").
            self.stats: dict[str, RunningStats] = {"actions": stored[action_array]} if action_array in stored else {}
            self.stats.update(
                (name, s)
                for name, s in stored.items()
                if name.startswith("obs/") and name[len("obs/") :] in self.obs_keys
            )

        # Per transition: its demo's first and last index, its demo position.
        demo_of = np.repeat(np.arange(len(ids)), lengths)
        self._first = starts[demo_of]
        self._last = (starts + lengths - 1)[demo_of]
        self._demo_id_of = np.asarray(ids, dtype=np.int64)[demo_of]
        step = np.arange(total) - self._first
        ok = np.ones(total, dtype=bool)
        if not pad_frame_stack:
            ok &= step >= self.frame_stack - 1
        if not pad_action_chunk:
            ok &= (self._last - np.arange(total)) >= self.action_chunk - 1
        self._index = np.flatnonzero(ok).astype(np.int64)
        if len(self._index) == 0:
            raise EmptyDatasetError(
                f"{self.path}: no sample positions: every demo is shorter than frame_stack - 1 + action_chunk "
                f"({self.frame_stack} - 1 + {self.action_chunk}) with padding off"
            )
        self._frame_offsets = np.arange(-(self.frame_stack - 1), 1, dtype=np.int64)
        self._chunk_offsets = np.arange(self.action_chunk, dtype=np.int64)
        self.normalizer: Normalizer | None = Normalizer(self.stats, normalize) if normalize else None
        self._domain_label = DOMAIN_LABELS[self.domain]

    # -- size --------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return int(len(self._index))

    @property
    def num_demos(self) -> int:
        """Demos loaded."""
        return len(self.demo_ids)

    @property
    def num_transitions(self) -> int:
        """Transitions loaded (sample positions may be fewer without padding)."""
        return int(len(self._actions))

    @property
    def nbytes(self) -> int:
        """Bytes held by the loaded arrays."""
        arrays = [*self._obs.values(), *self._next_obs.values(), self._actions]
        return int(sum(a.nbytes for a in arrays))

    def sample_spec(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """Shape (without batch axis) and dtype of every array in a sample, e.g. ``"obs/arm_qpos"``."""
        spec: dict[str, tuple[tuple[int, ...], np.dtype]] = {}
        for key, arr in self._obs.items():
            dtype = np.dtype(np.float32) if self._normalizes(key) else arr.dtype
            spec[f"obs/{key}"] = ((self.frame_stack, *arr.shape[1:]), dtype)
        spec["actions"] = ((self.action_chunk, self._actions.shape[1]), np.dtype(np.float32))
        return spec

    # -- access ------------------------------------------------------------------------------------

    def get_batch(self, indices: np.ndarray | Sequence[int], *, normalizer: Normalizer | None = None) -> Batch:
        """Gathers samples (vectorized).

        Args:
            indices: sample indices in ``[0, len(self))``.
            normalizer: overrides the dataset's own normalizer (a mixture passes its merged one).

        Returns:
            ``{"obs": {key: (B, F, ...)}, "actions": (B, H, A) float32, "action_mask": (B, H) bool (true =
            real action), "obs_mask": (B, F) bool (true = real frame), "domain": (B,) int64 (1 real, 0 sim),
            "demo_id": (B,) int64, "step": (B,) int64}`` and ``"next_obs"`` when loaded.
        """
        idx = np.asarray(indices, dtype=np.int64)
        if idx.ndim != 1:
            raise ValueError(f"indices must be 1-D, got shape {idx.shape}")
        if len(idx) and (idx.min() < 0 or idx.max() >= len(self._index)):
            raise IndexError(f"sample index out of range [0, {len(self._index)})")
        t = self._index[idx]
        first = self._first[t]
        last = self._last[t]
        frames = t[:, None] + self._frame_offsets
        obs_mask = frames >= first[:, None]
        frames = np.maximum(frames, first[:, None])
        chunk = t[:, None] + self._chunk_offsets
        action_mask = chunk <= last[:, None]
        chunk = np.minimum(chunk, last[:, None])
        norm = normalizer if normalizer is not None else self.normalizer

        batch: Batch = {"obs": {k: self._take(k, arr, frames, norm) for k, arr in self._obs.items()}}
        if self._next_obs:
            batch["next_obs"] = {k: self._take(k, arr, frames, norm) for k, arr in self._next_obs.items()}
        actions = self._actions[chunk]
        if norm is not None and "actions" in norm:
            actions = norm.normalize("actions", actions)
        if self.action_padding == "zero":
            actions[~action_mask] = 0.0
        batch["actions"] = actions
        batch["action_mask"] = action_mask
        batch["obs_mask"] = obs_mask
        batch["domain"] = np.full(len(idx), self._domain_label, dtype=np.int64)
        batch["demo_id"] = self._demo_id_of[t]
        batch["step"] = t - first
        return batch

    def __getitem__(self, index: int) -> Batch:
        """One sample: like :meth:`get_batch` without the batch axis."""
        return _unbatch(self.get_batch(np.array([int(index)])))

    def sample(self, batch_size: int, rng: np.random.Generator) -> Batch:
        """A batch of samples drawn uniformly with replacement."""
        return self.get_batch(rng.integers(0, len(self), size=batch_size))

    # -- internals ---------------------------------------------------------------------------------

    def _normalizes(self, key: str) -> bool:
        return self.normalizer is not None and f"obs/{key}" in self.normalizer

    def _take(self, key: str, arr: np.ndarray, frames: np.ndarray, norm: Normalizer | None) -> np.ndarray:
        out = arr[frames]
        if norm is not None and f"obs/{key}" in norm:
            out = norm.normalize(f"obs/{key}", out)
        return out


def _unbatch(batch: Batch) -> Batch:
    out: Batch = {}
    for key, value in batch.items():
        out[key] = _unbatch(value) if isinstance(value, dict) else value[0]
    return out
