"""The visual-gap figure: how far a simulator's images are from the lab's, under a fixed image encoder
(docs/grounding.md#appearance).

The encoder is shipped code, deterministic and downloads nothing: an image is reduced to 64 x 64 pixels, passed
through two layers of random convolutions (16 filters of 5 x 5 then 32 of 3 x 3, both stride 2, ReLU) whose weights
come from a fixed seed (:data:`ENCODER_SEED`), and pooled (the mean over the image and over each quarter of it);
the embedding also holds each channel's 8-bin histogram.  The figure is the Euclidean distance between the centroid
(mean embedding) of the lab's frames and that of the simulator's frames of the same set-ups, per camera.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

#: Seed of the encoder's weights: changing it changes every figure.
ENCODER_SEED = 20261207
_SIDE = 64


@lru_cache(maxsize=1)
def _weights() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(ENCODER_SEED)
    first = rng.standard_normal((16, 5, 5, 3)) / np.sqrt(5 * 5 * 3)
    second = rng.standard_normal((32, 3, 3, 16)) / np.sqrt(3 * 3 * 16)
    return first, second


def _conv(x: np.ndarray, w: np.ndarray, stride: int) -> np.ndarray:
    # Valid convolution of (H, W, C) by (F, k, k, C) at ``stride``, as a product of patches.
    k = w.shape[1]
    h = (x.shape[0] - k) // stride + 1
    wd = (x.shape[1] - k) // stride + 1
    rows = np.arange(h)[:, None] * stride + np.arange(k)[None, :]
    cols = np.arange(wd)[:, None] * stride + np.arange(k)[None, :]
    patches = x[rows[:, None, :, None], cols[None, :, None, :]]  # (h, wd, k, k, C)
    return np.maximum(np.tensordot(patches, w, axes=([2, 3, 4], [1, 2, 3])), 0.0)


def _resize(image: np.ndarray) -> np.ndarray:
    x = np.asarray(image, dtype=np.float64) / 255.0
    h, w = x.shape[:2]
    ys = (np.arange(_SIDE + 1) * h) // _SIDE
    xs = (np.arange(_SIDE + 1) * w) // _SIDE
    out = np.empty((_SIDE, _SIDE, 3))
    for i in range(_SIDE):
        band = x[ys[i] : max(ys[i + 1], ys[i] + 1)].mean(axis=0)
        for j in range(_SIDE):
            out[i, j] = band[xs[j] : max(xs[j + 1], xs[j] + 1)].mean(axis=0)
    return out


def embed(image: np.ndarray) -> np.ndarray:
    """The embedding of one (H, W, 3) uint8 image: pooled random-convolution features and colour histograms."""
    x = _resize(image)
    first, second = _weights()
    f = _conv(_conv(x, first, 2), second, 2)
    h, w = f.shape[:2]
    pooled = [f.mean(axis=(0, 1))]
    for a in (slice(0, h // 2), slice(h // 2, h)):
        for b in (slice(0, w // 2), slice(w // 2, w)):
            pooled.append(f[a, b].mean(axis=(0, 1)))
    hist = [np.histogram(x[..., c], bins=8, range=(0.0, 1.0))[0] / x[..., c].size for c in range(3)]
    return np.concatenate([*pooled, *hist])


def centroid(images: Sequence[np.ndarray]) -> np.ndarray:
    """The mean embedding of ``images``."""
    return np.mean([embed(image) for image in images], axis=0)


def gap(lab: Sequence[np.ndarray], sim: Sequence[np.ndarray]) -> float:
    """The visual-gap figure: distance between the centroids of the lab's and the simulator's images."""
    return float(np.linalg.norm(centroid(lab) - centroid(sim)))


__all__ = ["ENCODER_SEED", "centroid", "embed", "gap"]
