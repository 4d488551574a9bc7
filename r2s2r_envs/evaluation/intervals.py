"""Intervals for figures averaged over training seeds and shared evaluation episodes (docs/ablation.md#analysis).

A policy trained with seed ``s`` and evaluated on episode ``e`` scores ``x[s, e]`` (1 for a success, or a sort
accuracy). Seeds and episodes are both samples: a new training run and a new set of protocol episodes would give
other figures. Every policy of a comparison faces the same episodes, and cells trained with the same seed list are
paired by seed. For such a crossed design the mean's variance has three parts (a two-way random-effects model;
the Hoeffding decomposition of any exchangeable array, so it holds for 0/1 successes too)::

    Var(mean) = var_seed / S + var_episode / E + var_residual / (S * E)

Each part is estimated from the ANOVA mean squares of the ``(S, E)`` matrix (unbiased, whatever the data's
distribution; an estimate below the residual part alone is raised to it), the interval is a t-interval with
Satterthwaite's degrees of freedom (close to ``S - 1`` when seeds dominate: the small-sample correction), and a
contrast of cells (a difference, an effect, an interaction) is analysed as one matrix, the weighted sum of its
cells, so the episodes' shared difficulty cancels exactly as it does in the data. The coverage of these intervals
was measured by simulation (experiments/interval-coverage/README.md).

:func:`mean_interval` makes one cell's interval on the logit scale (it stays in [0, 1]). Also here:
:func:`minimum_detectable_difference`, :func:`seeds_needed` ("how many seeds to detect d points"),
:func:`holm` (multiplicity), :func:`heterogeneity` (may an effect be pooled over methods) and
:func:`column_mdd` (a leaderboard column's minimum detectable difference from per-seed success rates).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy import stats

#: The interval method's name, written into every report that uses it (reports without it used the bootstrap).
METHOD = "seed-paired t (two-way random effects, Satterthwaite df)"
#: Interval method version: 1 was the crossed percentile bootstrap, 2 is this module's t-interval.
METHOD_VERSION = 2
#: The protocol's minimum of training seeds per method and cell (docs/leaderboard.md): a seed-level interval
#: needs at least three; the leaderboard flags rows under it.
MIN_TRAINING_SEEDS = 3
#: Degrees of freedom that make a t quantile a normal one (binomial episode noise, known variance).
_NORMAL_DF = 1e6


@dataclasses.dataclass(frozen=True, kw_only=True)
class Components:
    """Variance components of a ``(seeds, episodes)`` matrix (a cell, or a contrast of cells).

    Attributes:
        seed: between-seed variance (one training run's mean minus the population's), >= 0.
        episode: between-episode variance (an episode's difficulty), >= 0.
        residual: the rest (seed x episode interaction and episode noise), >= 0.
    """

    seed: float
    episode: float
    residual: float

    def variance(self, seeds: int, episodes: int) -> float:
        """Variance of the mean of a ``(seeds, episodes)`` matrix with these components."""
        _check_counts(seeds, episodes)
        return self.seed / seeds + self.episode / episodes + self.residual / (seeds * episodes)

    def df(self, seeds: int, episodes: int) -> float:
        """Satterthwaite degrees of freedom of the variance estimate at ``seeds`` x ``episodes``."""
        _check_counts(seeds, episodes)
        # The expected values of the scaled mean squares that estimate variance(), as contrast_interval uses them.
        n = seeds * episodes
        parts: list[tuple[float, int]] = []
        if seeds > 1:
            parts.append(((episodes * self.seed + self.residual) / n, seeds - 1))
        if episodes > 1:
            parts.append(((seeds * self.episode + self.residual) / n, episodes - 1))
        if seeds > 1 and episodes > 1:
            parts.append((-self.residual / n, (seeds - 1) * (episodes - 1)))
        return _satterthwaite(parts)

    def to_dict(self) -> dict[str, float]:
        return {"seed": self.seed, "episode": self.episode, "residual": self.residual}


def _check_counts(seeds: int, episodes: int) -> None:
    if int(seeds) != seeds or int(episodes) != episodes or seeds < 1 or episodes < 1:
        raise ValueError(f"seeds and episodes must be whole numbers >= 1, got seeds={seeds!r}, episodes={episodes!r}")


def _as_matrix(x: Any, name: str) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] < 1 or a.shape[1] < 1:
        raise ValueError(f"{name} must be a (seeds, episodes) matrix with at least one of each, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} holds non-finite values (NaN or inf); only finite scores are accepted")
    return a


def _mean_squares(x: np.ndarray) -> tuple[float, float, float]:
    """``(MS_seed, MS_episode, MS_residual)`` of the additive two-way fit; NaN where a factor has one level."""
    s, e = x.shape
    grand = x.mean()
    rows, cols = x.mean(axis=1), x.mean(axis=0)
    ms_seed = e * float(((rows - grand) ** 2).sum()) / (s - 1) if s > 1 else math.nan
    ms_episode = s * float(((cols - grand) ** 2).sum()) / (e - 1) if e > 1 else math.nan
    if s > 1 and e > 1:
        resid = x - rows[:, None] - cols[None, :] + grand
        ms_residual = float((resid**2).sum()) / ((s - 1) * (e - 1))
    else:
        ms_residual = math.nan
    return ms_seed, ms_episode, ms_residual


def components(x: Any) -> Components:
    """The variance components of one ``(seeds, episodes)`` matrix (ANOVA estimates, clipped at zero).

    With one seed the seed component cannot be told from the residual and is reported as 0 (likewise the episode
    component with one episode).

    Raises:
        ValueError: not a finite 2-D matrix.
    """
    a = _as_matrix(x, "x")
    s, e = a.shape
    ms_seed, ms_episode, ms_residual = _mean_squares(a)
    residual = ms_residual if s > 1 and e > 1 else (ms_episode if s == 1 and e > 1 else ms_seed if e == 1 else 0.0)
    residual = 0.0 if math.isnan(residual) else residual
    seed = max(0.0, (ms_seed - residual) / e) if s > 1 and e > 1 else 0.0
    episode = max(0.0, (ms_episode - residual) / s) if s > 1 and e > 1 else 0.0
    return Components(seed=seed, episode=episode, residual=max(0.0, residual))


def _satterthwaite(terms: Sequence[tuple[float, int]]) -> float:
    """Degrees of freedom of ``sum(a_i)`` where each ``a_i`` is a scaled mean square with ``df_i``."""
    total = sum(a for a, _ in terms)
    denominator = sum(a * a / d for a, d in terms if d > 0)
    if total <= 0 or denominator <= 0:
        return float(max((d for _, d in terms), default=1))
    return max(1.0, total * total / denominator)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Interval:
    """A contrast of cell means with its t-interval.

    Attributes:
        estimate: the contrast of the cell means.
        low, high: the interval's bounds.
        se: its standard error.
        df: Satterthwaite degrees of freedom of ``se``.
        p_value: two-sided p-value of "the contrast is zero".
        confidence: the interval's confidence level.
        seeds: seeds per cell (the smallest when they differ); episodes: episodes per cell.
        paired_seeds: whether the cells were paired by seed (same seed count everywhere).
        seed_noise: False with one seed per cell: the interval then covers episode noise only.
    """

    estimate: float
    low: float
    high: float
    se: float
    df: float
    p_value: float
    confidence: float
    seeds: int
    episodes: int
    paired_seeds: bool
    seed_noise: bool

    def to_dict(self) -> dict[str, Any]:
        """The JSON form the ablation report keeps (``ci95`` is ``[low, high]``)."""
        return {
            "estimate": self.estimate,
            "ci95": [self.low, self.high],
            "se": self.se,
            "df": self.df,
            "p_value": self.p_value,
            "mdd": minimum_detectable_difference(self.se, self.df),
            "n_seeds": self.seeds,
            "n_episodes": self.episodes,
            "paired_seeds": self.paired_seeds,
            "seed_noise": self.seed_noise,
            "method": METHOD,
        }


def contrast_interval(cells: Mapping[Any, Any], weights: Mapping[Any, float], *, confidence: float = 0.95) -> Interval:
    """A weighted sum of cell means with its t-interval over seeds and shared episodes.

    Args:
        cells: per cell, a ``(seeds, episodes)`` matrix, rows in training-seed order. Cells of one number of
            episodes share them (episode ``e`` is the same protocol episode in each); when every weighted cell has
            the same number of seeds, rows are paired by seed (row ``k`` of each was trained with the same seed).
        weights: the contrast, e.g. ``{"FullyGrounded": 1, "Ungrounded": -1}``; zero weights are ignored.
        confidence: two-sided confidence level in (0, 1).

    Raises:
        ValueError: a weighted cell missing from ``cells`` (the message names it and the cells there are), no
            non-zero weight, a non-finite weight, a bad matrix, or a confidence outside (0, 1).
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    used = {k: float(w) for k, w in weights.items() if w != 0}
    if not used:
        raise ValueError(f"weights {dict(weights)!r} hold no non-zero weight; a contrast needs at least one")
    if not all(math.isfinite(w) for w in used.values()):
        raise ValueError(f"weights must be finite numbers, got {dict(weights)!r}")
    missing = [k for k in used if k not in cells]
    if missing:
        raise ValueError(f"cells {missing!r} are weighted but not given; cells given: {list(cells)!r}")
    x = {k: _as_matrix(cells[k], f"cell {k!r}") for k in used}
    shapes = {a.shape for a in x.values()}
    estimate = float(sum(w * x[k].mean() for k, w in used.items()))
    seeds = min(a.shape[0] for a in x.values())
    episodes = min(a.shape[1] for a in x.values())
    if len(shapes) == 1:
        d = np.asarray(sum(w * x[k] for k, w in used.items()))
        terms = _paired_terms(d)
        paired = True
        floor = _residual_floor({"d": d}, {"d": 1.0})
    else:
        terms = _unpaired_terms(x, used)
        paired = False
        floor = _residual_floor(x, used)
    variance = sum(a for a, _ in terms)
    if variance < floor[0]:
        variance, df = floor
    else:
        df = _satterthwaite(terms)
    se = math.sqrt(max(0.0, variance))
    if se == 0.0:
        p = 1.0 if estimate == 0.0 else 0.0
        low = high = estimate
    else:
        p = float(2.0 * stats.t.sf(abs(estimate) / se, df))
        half = float(stats.t.ppf(0.5 + confidence / 2.0, df)) * se
        low, high = estimate - half, estimate + half
    return Interval(
        estimate=estimate,
        low=low,
        high=high,
        se=se,
        df=df,
        p_value=min(1.0, p),
        confidence=confidence,
        seeds=seeds,
        episodes=episodes,
        paired_seeds=paired and seeds > 1,
        seed_noise=seeds > 1,
    )


def mean_interval(x: Any, *, confidence: float = 0.95) -> Interval:
    """One cell's mean with its interval: :func:`contrast_interval` of the cell, then, for scores in [0, 1] (success,
    sort accuracy), made on the logit scale (delta method) and mapped back, so that it stays inside [0, 1] and is
    asymmetric near 0 and 1, where a symmetric interval undercovers (experiments/interval-coverage/README.md).
    A cell whose scores are all 0 or all 1 gets the binomial standard error of half a success (or failure).

    Raises:
        ValueError: as :func:`contrast_interval`.
    """
    a = _as_matrix(x, "x")
    found = contrast_interval({"c": a}, {"c": 1.0}, confidence=confidence)
    if a.min() < 0.0 or a.max() > 1.0:
        return found
    n = a.size
    m = min(max(found.estimate, 0.5 / n), 1.0 - 0.5 / n)
    se = found.se if found.se > 0 else math.sqrt(m * (1 - m) / n)
    q = float(stats.t.ppf(0.5 + confidence / 2.0, found.df))
    center, half = math.log(m / (1 - m)), q * se / (m * (1 - m))
    low, high = 1 / (1 + math.exp(-(center - half))), 1 / (1 + math.exp(-(center + half)))
    return dataclasses.replace(found, low=min(low, found.estimate), high=max(high, found.estimate), se=se)


def _paired_terms(d: np.ndarray) -> list[tuple[float, int]]:
    """Scaled mean squares whose sum estimates the variance of ``d.mean()``, with their degrees of freedom."""
    s, e = d.shape
    ms_seed, ms_episode, ms_residual = _mean_squares(d)
    n = s * e
    terms: list[tuple[float, int]] = []
    if s > 1:
        terms.append((ms_seed / n, s - 1))
    if e > 1:
        terms.append((ms_episode / n, e - 1))
    if s > 1 and e > 1:
        terms.append((-ms_residual / n, (s - 1) * (e - 1)))
    return terms


def _unpaired_terms(x: Mapping[Any, np.ndarray], used: Mapping[Any, float]) -> list[tuple[float, int]]:
    """As :func:`_paired_terms` when seeds are not paired: each cell's seed and residual terms, and one episode term
    per group of cells sharing their episodes (same count)."""
    terms: list[tuple[float, int]] = []
    groups: dict[int, list[Any]] = {}
    for k, a in x.items():
        groups.setdefault(a.shape[1], []).append(k)
        s, e = a.shape
        ms_seed, _, ms_residual = _mean_squares(a)
        w2 = used[k] ** 2
        if s > 1:
            terms.append((w2 * ms_seed / (s * e), s - 1))
            if e > 1:
                terms.append((-w2 * ms_residual / (s * e), (s - 1) * (e - 1)))
    for e, keys in groups.items():
        if e > 1:
            m = sum(used[k] * x[k].mean(axis=0) for k in keys)
            terms.append((float(np.var(m, ddof=1)) / e, e - 1))
    return terms


def _residual_floor(x: Mapping[Any, np.ndarray], used: Mapping[Any, float]) -> tuple[float, float]:
    """The variance the mean would have from the residual alone (and its df): the estimate never goes below it."""
    total, df = 0.0, 0
    for k, a in x.items():
        s, e = a.shape
        if s > 1 and e > 1:
            total += used[k] ** 2 * _mean_squares(a)[2] / (s * e)
            df += (s - 1) * (e - 1)
    return total, float(max(df, 1))


def minimum_detectable_difference(se: float, df: float, *, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest true contrast a two-sided level-``alpha`` t-test detects with probability ``power``:
    ``(t(1 - alpha/2, df) + t(power, df)) * se`` (the usual approximation to the noncentral t).

    Raises:
        ValueError: ``se`` negative or not finite, ``df`` not positive, ``alpha`` or ``power`` outside (0, 1).
    """
    if not (math.isfinite(se) and se >= 0):
        raise ValueError(f"se must be a finite number >= 0, got {se!r}")
    if not df > 0:
        raise ValueError(f"df must be > 0, got {df!r}")
    if not (0 < alpha < 1 and 0 < power < 1):
        raise ValueError(f"alpha and power must be in (0, 1), got alpha={alpha!r}, power={power!r}")
    return float((stats.t.ppf(1 - alpha / 2, df) + stats.t.ppf(power, df)) * se)


def design_mdd(comps: Components, seeds: int, episodes: int, *, alpha: float = 0.05, power: float = 0.8) -> float:
    """The minimum detectable contrast at ``seeds`` x ``episodes`` for a contrast with variance components
    ``comps`` (e.g. :func:`difference_components` of a table's cells)."""
    se = math.sqrt(comps.variance(seeds, episodes))
    return minimum_detectable_difference(se, comps.df(seeds, episodes), alpha=alpha, power=power)


def seeds_needed(
    difference: float,
    comps: Components,
    episodes: int,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    max_seeds: int = 1000,
) -> int | None:
    """How many training seeds (per cell) detect a true contrast of ``difference`` with probability ``power`` at
    two-sided level ``alpha``, with ``episodes`` shared episodes and variance components ``comps``.

    Returns:
        The smallest such number of seeds (at least 2: one seed cannot estimate seed noise), or ``None`` when more
        than ``max_seeds`` would be needed (the episode noise alone may already exceed ``difference``).

    Raises:
        ValueError: ``difference`` not a finite number > 0, or bad ``episodes``, ``alpha``, ``power``.
    """
    if not (isinstance(difference, (int, float)) and math.isfinite(difference) and difference > 0):
        raise ValueError(f"difference must be a finite number > 0 (a fraction: 0.03 for 3 points), got {difference!r}")
    _check_counts(1, episodes)
    for seeds in range(2, max_seeds + 1):
        if design_mdd(comps, seeds, episodes, alpha=alpha, power=power) <= difference:
            return seeds
    return None


def difference_components(cells: Mapping[Any, Any]) -> Components | None:
    """Variance components of the paired difference between two cells, averaged over every pair of ``cells``
    with the same shape (``None`` with fewer than two such cells): what :func:`design_mdd` and
    :func:`seeds_needed` take to speak for "any two cells of this table"."""
    mats = [_as_matrix(v, f"cell {k!r}") for k, v in cells.items()]
    found: list[Components] = []
    for i in range(len(mats)):
        for j in range(i + 1, len(mats)):
            if mats[i].shape == mats[j].shape:
                found.append(components(mats[i] - mats[j]))
    if not found:
        return None
    return Components(
        seed=float(np.mean([c.seed for c in found])),
        episode=float(np.mean([c.episode for c in found])),
        residual=float(np.mean([c.residual for c in found])),
    )


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error control), in the order given.

    Raises:
        ValueError: a p-value outside [0, 1] or not a number.
    """
    p = [float(x) for x in p_values]
    bad = [x for x in p if not 0.0 <= x <= 1.0]
    if bad:
        raise ValueError(f"p-values must be numbers in [0, 1], got {bad!r}")
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    return adjusted


def heterogeneity(cells_by_method: Mapping[str, Mapping[Any, Any]], weights: Mapping[Any, float]) -> dict[str, Any]:
    """Does an effect differ between methods? The test that decides whether it may be pooled over them.

    Two methods: the t-test of the difference of their effects (one contrast over both methods' cells, paired by
    seed and episode like any other). More: Cochran's Q over the per-method effects and standard errors (which
    ignores the shared episodes: conservative for pooling).

    Returns:
        ``{"test", "statistic", "p_value", "methods"}``.

    Raises:
        ValueError: fewer than two methods, or a method missing a weighted cell.
    """
    methods = list(cells_by_method)
    if len(methods) < 2:
        raise ValueError(f"heterogeneity needs at least two methods, got {methods!r}")
    if len(methods) == 2:
        a, b = methods
        cells = {(m, v): x for m in methods for v, x in cells_by_method[m].items()}
        w = {**{(a, v): c for v, c in weights.items()}, **{(b, v): -c for v, c in weights.items()}}
        diff = contrast_interval(cells, w)
        return {
            "test": "t-test of the difference between the two methods' effects",
            "statistic": diff.estimate,
            "p_value": diff.p_value,
            "methods": methods,
        }
    found = [contrast_interval(cells_by_method[m], weights) for m in methods]
    if any(f.se == 0 for f in found):
        q, p = math.inf, 0.0 if len({f.estimate for f in found}) > 1 else 1.0
    else:
        w_ = [1 / f.se**2 for f in found]
        mean = sum(wi * f.estimate for wi, f in zip(w_, found)) / sum(w_)
        q = sum(wi * (f.estimate - mean) ** 2 for wi, f in zip(w_, found))
        p = float(stats.chi2.sf(q, len(found) - 1))
    return {"test": "Cochran's Q over the methods' effects", "statistic": q, "p_value": p, "methods": methods}


def column_mdd(
    success_rates: Sequence[Sequence[float]], *, episodes: int, alpha: float = 0.05, power: float = 0.8
) -> float | None:
    """A leaderboard column's minimum detectable difference between two rows of its typical seed count.

    Args:
        success_rates: per row, the success rate of each training seed in this column.
        episodes: episodes per seed; used when no row has two seeds (then only episode noise is known, from the
            binomial variance at the column's mean rate, and the figure is a lower bound).

    Returns:
        The difference in success rate (a fraction), or ``None`` without any row.
    """
    rows = [[float(x) for x in r] for r in success_rates if len(r)]
    if not rows:
        return None
    _check_counts(1, episodes)
    multi = [r for r in rows if len(r) > 1]
    n = int(np.median([len(r) for r in rows]))
    if multi:
        df = sum(len(r) - 1 for r in multi)
        pooled = sum(float(np.var(r, ddof=1)) * (len(r) - 1) for r in multi) / df
        se = math.sqrt(2 * pooled / n)
        return minimum_detectable_difference(se, df, alpha=alpha, power=power)
    p = float(np.mean([x for r in rows for x in r]))
    se = math.sqrt(2 * max(p * (1 - p), 1.0 / episodes) / (n * episodes))
    return minimum_detectable_difference(se, _NORMAL_DF, alpha=alpha, power=power)
