"""Co-training mixtures of real and simulated datasets, driven by ``real_fraction``.

``real_fraction`` is the expected share of each training batch drawn from real data. (Papers disagree
on what "alpha" means, sim weight in one and real weight in another, hence the explicit name.) Within a
domain, samples are drawn uniformly over all samples of that domain's datasets, so a dataset's share of
its domain is proportional to its size.

:func:`suggest_real_fraction` gives the range of the mixing rule in docs/concepts.md ("real_fraction"): with
``N`` real and ``M`` simulated demos and ``M / N > 5``, a real weight between the natural share ``N / (N + M)``
and ``sqrt(N / M)``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Literal

import numpy as np

from r2s2r_envs.datasets.loaders import Batch, TrajectoryDataset
from r2s2r_envs.datasets.stats import NormalizeMode, Normalizer, merge_stats

Composition = Literal["bernoulli", "stratified"]
COMPOSITIONS: tuple[str, ...] = ("bernoulli", "stratified")

# Below this sim-to-real ratio the mixing rule does not apply (docs/concepts.md, "real_fraction").
_RULE_MIN_SIM_TO_REAL = 5.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class RealFractionSuggestion:
    """A suggested range for ``real_fraction``.

    Attributes:
        low: lower end: the natural share ``N / (N + M)`` (what uniform sampling over all demos gives).
        high: upper end: ``sqrt(N / M)`` when the rule applies, else equal to ``low``.
        rule_applies: whether ``M / N > 5``, the regime the rule was derived for.
        note: one sentence explaining the range.
    """

    low: float
    high: float
    rule_applies: bool
    note: str

    def __iter__(self) -> Iterator[float]:
        """Allows ``low, high = suggest_real_fraction(n, m)``."""
        return iter((self.low, self.high))


def suggest_real_fraction(n_real: int, n_sim: int) -> RealFractionSuggestion:
    """Suggests a ``real_fraction`` range from the number of real and simulated demos.

    The mixing rule (docs/concepts.md, "real_fraction"): with ``N`` real and ``M`` simulated demonstrations and
    ``M / N > 5``, weight real data between ``N / (N + M)`` and ``sqrt(N / M)``; e.g. 50 real and 1,000 sim give
    0.048 to 0.22. Outside that regime only the natural share is returned.

    Args:
        n_real: number of real demonstrations ``N`` (at least 1).
        n_sim: number of simulated demonstrations ``M`` (at least 0).

    Returns:
        The range and whether the rule applies.

    Raises:
        ValueError: for negative counts or no real demos.
    """
    if n_real < 1 or n_sim < 0:
        raise ValueError(f"need n_real >= 1 and n_sim >= 0, got n_real={n_real}, n_sim={n_sim}")
    natural = n_real / (n_real + n_sim)
    if n_sim / n_real > _RULE_MIN_SIM_TO_REAL:
        high = math.sqrt(n_real / n_sim)
        note = (
            f"M/N = {n_sim / n_real:.1f} > 5: weight real data between the natural share N/(N+M) = {natural:.3f} "
            f"and sqrt(N/M) = {high:.3f}"
        )
        return RealFractionSuggestion(low=natural, high=high, rule_applies=True, note=note)
    note = (
        f"M/N = {n_sim / n_real:.1f} <= 5: the rule is for M/N > 5; the natural share N/(N+M) = {natural:.3f} "
        "is the neutral choice"
    )
    return RealFractionSuggestion(low=natural, high=natural, rule_applies=False, note=note)


def draw_domains(
    batch_size: int, real_fraction: float, rng: np.random.Generator, composition: Composition = "bernoulli"
) -> np.ndarray:
    """Draws which batch entries come from real data.

    Args:
        batch_size: entries per batch.
        real_fraction: expected share of real entries.
        rng: the random generator.
        composition: ``"bernoulli"``: each entry is real with probability ``real_fraction`` (the real
            count is Binomial). ``"stratified"``: ``floor(real_fraction * B)`` real entries plus one more with
            probability equal to the remainder (same expectation, minimal variance), at random positions.

    Returns:
        A boolean ``(batch_size,)`` array, true for real entries.
    """
    if composition == "bernoulli":
        return rng.random(batch_size) < real_fraction
    if composition == "stratified":
        exact = real_fraction * batch_size
        n_real = int(math.floor(exact)) + int(rng.random() < exact - math.floor(exact))
        is_real = np.zeros(batch_size, dtype=bool)
        is_real[rng.permutation(batch_size)[:n_real]] = True
        return is_real
    raise ValueError(f"unknown composition {composition!r}; choose one of {COMPOSITIONS}")


class CoTrainingMixture:
    """Batches mixing real and simulated datasets with a set expected real share.

    Args:
        datasets: the datasets; each is tagged with its domain (``dataset.domain``, from the file's
            provenance or the ``domain=`` override of :class:`TrajectoryDataset`).
        real_fraction: expected share of each batch drawn from real data, in ``[0, 1]``.
        normalize: ``None``, ``"standard"`` or ``"minmax"`` using statistics merged over all datasets, so real
            and sim samples share one normalization. ``None`` keeps each dataset's own setting.
        composition: see :func:`draw_domains`.
        seed: seed of the mixture's random generator.

    Raises:
        ValueError: if ``real_fraction`` is outside ``[0, 1]``, a domain it needs has no dataset, or the
            datasets disagree on observation keys, shapes, frame stack, action chunk or what their actions are
            (``labels``: executed or clean, the training targets of one mixture mean one thing).
    """

    def __init__(
        self,
        datasets: Sequence[TrajectoryDataset],
        real_fraction: float,
        *,
        normalize: NormalizeMode | None = None,
        composition: Composition = "bernoulli",
        seed: int | None = None,
    ) -> None:
        if not datasets:
            raise ValueError("a mixture needs at least one dataset")
        if not 0.0 <= real_fraction <= 1.0:
            raise ValueError(f"real_fraction must be in [0, 1], got {real_fraction}")
        if composition not in COMPOSITIONS:
            raise ValueError(f"unknown composition {composition!r}; choose one of {COMPOSITIONS}")
        self.datasets = list(datasets)
        self.real_fraction = float(real_fraction)
        self.composition: Composition = composition
        self.rng = np.random.default_rng(seed)
        _check_compatible(self.datasets)

        domains = [d.domain for d in self.datasets]
        self._real = [i for i, d in enumerate(domains) if d == "real"]
        self._sim = [i for i, d in enumerate(domains) if d == "sim"]
        if self.real_fraction > 0 and not self._real:
            raise ValueError(f"real_fraction={real_fraction} needs a real dataset; the domains are {domains}")
        if self.real_fraction < 1 and not self._sim:
            raise ValueError(f"real_fraction={real_fraction} needs a sim dataset; the domains are {domains}")
        self.normalizer: Normalizer | None = (
            Normalizer(merge_stats([d.stats for d in self.datasets]), normalize) if normalize else None
        )

    @property
    def content_hashes(self) -> dict[str, str]:
        """Content hash of every dataset in the mixture, by file path (what a results row should cite)."""
        return {str(d.path): d.content_hash for d in self.datasets}

    @property
    def num_real_samples(self) -> int:
        """Sample positions over the real datasets."""
        return int(sum(len(self.datasets[i]) for i in self._real))

    @property
    def num_sim_samples(self) -> int:
        """Sample positions over the simulated datasets."""
        return int(sum(len(self.datasets[i]) for i in self._sim))

    def suggestion(self) -> RealFractionSuggestion:
        """:func:`suggest_real_fraction` for the demos in this mixture."""
        n_real = sum(self.datasets[i].num_demos for i in self._real)
        n_sim = sum(self.datasets[i].num_demos for i in self._sim)
        return suggest_real_fraction(n_real, n_sim)

    def draw(self, batch_size: int, rng: np.random.Generator | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Draws the composition of one batch without reading data.

        Returns:
            ``(dataset_index, sample_index)``, each ``(batch_size,)``: which dataset and which of its samples
            fills each batch entry.
        """
        rng = self.rng if rng is None else rng
        is_real = draw_domains(batch_size, self.real_fraction, rng, self.composition)
        which = np.empty(batch_size, dtype=np.int64)
        local = np.empty(batch_size, dtype=np.int64)
        for members, mask in ((self._real, is_real), (self._sim, ~is_real)):
            n = int(mask.sum())
            if n == 0:
                continue
            sizes = np.array([len(self.datasets[i]) for i in members], dtype=np.int64)
            # Uniform over the pooled samples of the domain.
            flat = rng.integers(0, int(sizes.sum()), size=n)
            bounds = np.cumsum(sizes)
            member = np.searchsorted(bounds, flat, side="right")
            which[mask] = np.asarray(members, dtype=np.int64)[member]
            local[mask] = flat - np.concatenate([[0], bounds[:-1]])[member]
        return which, local

    def sample(self, batch_size: int, rng: np.random.Generator | None = None) -> Batch:
        """One mixed batch (keys as :meth:`TrajectoryDataset.get_batch`; ``batch["domain"]`` is 1 for real)."""
        which, local = self.draw(batch_size, rng)
        parts: list[tuple[np.ndarray, Batch]] = []
        for i in np.unique(which):
            pos = np.flatnonzero(which == i)
            parts.append((pos, self.datasets[int(i)].get_batch(local[pos], normalizer=self.normalizer)))
        return _scatter(parts, batch_size)

    def batches(self, batch_size: int, num_batches: int | None = None) -> Iterator[Batch]:
        """Yields mixed batches (forever if ``num_batches`` is ``None``)."""
        count = 0
        while num_batches is None or count < num_batches:
            yield self.sample(batch_size)
            count += 1


def _scatter(parts: list[tuple[np.ndarray, Batch]], batch_size: int) -> Batch:
    """Assembles per-dataset sub-batches into one batch at the given positions."""
    template = parts[0][1]

    def assemble(getter: Callable[[Batch], np.ndarray]) -> np.ndarray:
        first = getter(template)
        out = np.empty((batch_size, *first.shape[1:]), dtype=first.dtype)
        for pos, sub in parts:
            out[pos] = getter(sub)
        return out

    batch: Batch = {}
    for key, value in template.items():
        if isinstance(value, dict):
            batch[key] = {k: assemble(lambda b, key=key, k=k: b[key][k]) for k in value}
        else:
            batch[key] = assemble(lambda b, key=key: b[key])
    return batch


def _check_compatible(datasets: Sequence[TrajectoryDataset]) -> None:
    ref = datasets[0]
    ref_spec = ref.sample_spec()
    for d in datasets[1:]:
        for attr in ("frame_stack", "action_chunk", "obs_keys", "labels"):
            if getattr(d, attr) != getattr(ref, attr):
                raise ValueError(
                    f"datasets disagree on {attr}: {ref.path} has {getattr(ref, attr)!r}, "
                    f"{d.path} has {getattr(d, attr)!r}"
                )
        spec = d.sample_spec()
        for name, (shape, _dtype) in ref_spec.items():
            if spec[name][0] != shape:
                raise ValueError(
                    f"datasets disagree on the shape of {name}: {ref.path} {shape}, {d.path} {spec[name][0]}"
                )
