"""torch wrappers of the dataset loaders (needs the ``torch`` extra: ``pip install r2s2r_envs[torch]``).

* :class:`TorchTrajectoryDataset`: a map-style ``torch.utils.data.Dataset`` over a
  :class:`~r2s2r_envs.datasets.loaders.TrajectoryDataset`; samples are dicts of tensors, collated by
  PyTorch's default collate.
* :class:`TorchCoTrainingDataset`: an ``IterableDataset`` yielding whole mixed batches from a
  :class:`~r2s2r_envs.datasets.mixture.CoTrainingMixture`; use ``DataLoader(ds, batch_size=None)``.
  Each DataLoader worker draws from its own random stream.

Example:
    >>> ds = TrajectoryDataset("sim.hdf5", frame_stack=2, action_chunk=8, normalize="minmax")  # doctest: +SKIP
    >>> loader = torch.utils.data.DataLoader(TorchTrajectoryDataset(ds), batch_size=256, shuffle=True)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

try:
    import torch
    from torch.utils.data import Dataset, IterableDataset, get_worker_info
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "r2s2r_envs.datasets.torch_data needs torch; install the extra: pip install 'r2s2r_envs[torch]' "
        "(the numpy loaders in r2s2r_envs.datasets.loaders work without it)"
    ) from exc

from r2s2r_envs.datasets.loaders import Batch, TrajectoryDataset
from r2s2r_envs.datasets.mixture import CoTrainingMixture
from r2s2r_envs.datasets.stats import Normalizer


def to_torch(batch: Batch) -> dict[str, Any]:
    """Converts a (nested) numpy batch to tensors without copying where possible."""
    out: dict[str, Any] = {}
    for key, value in batch.items():
        out[key] = to_torch(value) if isinstance(value, dict) else torch.as_tensor(np.asarray(value))
    return out


class TorchTrajectoryDataset(Dataset):
    """Map-style torch dataset over a :class:`TrajectoryDataset`.

    Args:
        dataset: the numpy dataset (already in memory).
        normalizer: overrides the dataset's own normalizer (e.g. a mixture's merged one).
    """

    def __init__(self, dataset: TrajectoryDataset, normalizer: Normalizer | None = None) -> None:
        self.dataset = dataset
        self.normalizer = normalizer

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int | list[int]) -> dict[str, Any]:
        """One sample as tensors (obs ``(F, ...)``, actions ``(H, A)``, masks, domain).

        Given a list of indices, returns the whole batch at once (vectorized, much faster): use
        ``DataLoader(ds, sampler=BatchSampler(RandomSampler(ds), batch_size, drop_last=False), batch_size=None)``.
        """
        if isinstance(index, (list, tuple, np.ndarray)):
            return to_torch(self.dataset.get_batch(np.asarray(index), normalizer=self.normalizer))
        batch = self.dataset.get_batch(np.array([int(index)]), normalizer=self.normalizer)
        return to_torch(_first(batch))


class TorchCoTrainingDataset(IterableDataset):
    """Yields mixed batches (tensors) from a :class:`CoTrainingMixture`.

    Args:
        mixture: the mixture (its ``real_fraction`` sets the expected real share of each batch).
        batch_size: samples per batch.
        num_batches: batches per epoch (per DataLoader worker); ``None`` for an endless stream.
        seed: base seed; worker ``w`` of epoch ``e`` draws from ``SeedSequence(seed, spawn_key=(e, w))``.
    """

    def __init__(
        self, mixture: CoTrainingMixture, batch_size: int, num_batches: int | None = None, seed: int = 0
    ) -> None:
        self.mixture = mixture
        self.batch_size = int(batch_size)
        self.num_batches = num_batches
        self.seed = int(seed)
        self._epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Changes the random stream for the next iteration."""
        self._epoch = int(epoch)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        info = get_worker_info()
        worker = 0 if info is None else info.id
        rng = np.random.default_rng(np.random.SeedSequence(self.seed, spawn_key=(self._epoch, worker)))
        count = 0
        while self.num_batches is None or count < self.num_batches:
            yield to_torch(self.mixture.sample(self.batch_size, rng))
            count += 1


def _first(batch: Batch) -> Batch:
    return {k: _first(v) if isinstance(v, dict) else v[0] for k, v in batch.items()}
