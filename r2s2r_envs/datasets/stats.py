"""Normalization statistics: running per-dimension count, mean, M2, min and max, mergeable.

Stored with each dataset (``/stats/<name>`` attributes) and merged across datasets for a co-training
mixture, so sim and real samples are normalized with one set of statistics.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Literal, SupportsInt, cast

import numpy as np

NormalizeMode = Literal["standard", "minmax"]
NORMALIZE_MODES: tuple[str, ...] = ("standard", "minmax")

# Dimensions whose spread is below this are passed through unscaled (a constant joint, a one-hot that never changes).
_MIN_SPREAD = 1e-6


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunningStats:
    """Per-dimension statistics of a ``(n, d)`` array stream (Chan et al. parallel variance update).

    Attributes:
        count: number of rows seen.
        mean: per-dimension mean, float64 ``(d,)``.
        m2: per-dimension sum of squared deviations from the mean, float64 ``(d,)``.
        min: per-dimension minimum, float64 ``(d,)``.
        max: per-dimension maximum, float64 ``(d,)``.
    """

    count: int
    mean: np.ndarray
    m2: np.ndarray
    min: np.ndarray
    max: np.ndarray

    @classmethod
    def from_array(cls, x: np.ndarray) -> RunningStats:
        """Statistics of the rows of ``x`` (``(n, d)`` or ``(n,)``), with ``n >= 1``."""
        x = np.asarray(x, dtype=np.float64).reshape(len(x), -1)
        if len(x) == 0:
            raise ValueError("RunningStats.from_array needs at least one row")
        mean = x.mean(axis=0)
        return cls(
            count=len(x),
            mean=mean,
            m2=((x - mean) ** 2).sum(axis=0),
            min=x.min(axis=0),
            max=x.max(axis=0),
        )

    @property
    def std(self) -> np.ndarray:
        """Population standard deviation per dimension."""
        return np.sqrt(self.m2 / max(self.count, 1))

    def merge(self, other: RunningStats) -> RunningStats:
        """Statistics of the union of the two row sets."""
        if self.mean.shape != other.mean.shape:
            raise ValueError(f"cannot merge statistics of shapes {self.mean.shape} and {other.mean.shape}")
        n = self.count + other.count
        delta = other.mean - self.mean
        return RunningStats(
            count=n,
            mean=self.mean + delta * (other.count / n),
            m2=self.m2 + other.m2 + delta**2 * (self.count * other.count / n),
            min=np.minimum(self.min, other.min),
            max=np.maximum(self.max, other.max),
        )

    def to_attrs(self) -> dict[str, np.ndarray | int]:
        """The HDF5 attributes that store these statistics."""
        return {
            "count": int(self.count),
            "mean": self.mean,
            "m2": self.m2,
            "std": self.std,
            "min": self.min,
            "max": self.max,
        }

    @classmethod
    def from_attrs(cls, attrs: Mapping[str, object]) -> RunningStats:
        """Reads statistics written by :meth:`to_attrs`."""
        return cls(
            count=int(cast(SupportsInt, attrs["count"])),  # an integer, as to_attrs() writes it
            mean=np.asarray(attrs["mean"], dtype=np.float64),
            m2=np.asarray(attrs["m2"], dtype=np.float64),
            min=np.asarray(attrs["min"], dtype=np.float64),
            max=np.asarray(attrs["max"], dtype=np.float64),
        )


def merge_stats(stats: Sequence[Mapping[str, RunningStats]]) -> dict[str, RunningStats]:
    """Merges per-name statistics of several datasets; only names present in all of them are kept."""
    if not stats:
        return {}
    names = set(stats[0]).intersection(*[set(s) for s in stats[1:]])
    merged: dict[str, RunningStats] = {}
    for name in sorted(names):
        acc = stats[0][name]
        for s in stats[1:]:
            acc = acc.merge(s[name])
        merged[name] = acc
    return merged


class Normalizer:
    """Maps raw arrays to normalized ones and back, per named stream (``"actions"``, ``"obs/<key>"``).

    ``standard``: ``(x - mean) / std``. ``minmax``: affine map of ``[min, max]`` to ``[-1, 1]`` (what diffusion
    policies expect). Dimensions with (near) zero spread are only shifted, never divided by zero.

    Args:
        stats: statistics per stream name.
        mode: ``"standard"`` or ``"minmax"``.
    """

    def __init__(self, stats: Mapping[str, RunningStats], mode: NormalizeMode = "standard") -> None:
        if mode not in NORMALIZE_MODES:
            raise ValueError(f"unknown normalization mode {mode!r}; choose one of {NORMALIZE_MODES}")
        self.mode: NormalizeMode = mode
        self.stats: dict[str, RunningStats] = dict(stats)
        self._offset: dict[str, np.ndarray] = {}
        self._scale: dict[str, np.ndarray] = {}
        for name, s in self.stats.items():
            if mode == "standard":
                offset, spread = s.mean, s.std
            else:
                offset, spread = (s.max + s.min) / 2.0, (s.max - s.min) / 2.0
            scale = np.where(spread > _MIN_SPREAD, spread, 1.0)
            self._offset[name] = offset.astype(np.float32)
            self._scale[name] = scale.astype(np.float32)

    def __contains__(self, name: str) -> bool:
        return name in self.stats

    def normalize(self, name: str, x: np.ndarray) -> np.ndarray:
        """Normalizes ``x`` (last axis = the stream's dimensions) as float32."""
        return ((np.asarray(x, dtype=np.float32) - self._offset[name]) / self._scale[name]).astype(np.float32)

    def unnormalize(self, name: str, y: np.ndarray) -> np.ndarray:
        """Inverse of :meth:`normalize` (e.g. a policy's normalized action back to env units)."""
        return (np.asarray(y, dtype=np.float32) * self._scale[name] + self._offset[name]).astype(np.float32)
