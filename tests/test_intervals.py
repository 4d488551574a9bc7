"""The intervals of the paired, seed-level design (r2s2r_envs.evaluation.intervals): hand-computed cases, the
properties the ablation relies on (pairing cancels shared noise, a small-sample t quantile), the power helpers,
Holm's correction and the heterogeneity test, and their refusals of bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from r2s2r_envs.evaluation import intervals


def test_one_cell_with_seed_differences_only_is_a_t_interval_over_seed_means():
    # Seeds differ by a constant on every episode; episodes differ by a constant on every seed: no residual.
    seed_level = np.array([0.2, 0.5, 0.3, 0.6])
    episode_level = np.array([0.0, 0.1, -0.1])
    x = seed_level[:, None] + episode_level[None, :]
    found = intervals.contrast_interval({"c": x}, {"c": 1.0})
    # Var(mean) = var(seed means)/4 + var(episode means)/3 with the ANOVA estimates, no residual to subtract.
    variance = np.var(seed_level, ddof=1) / 4 + np.var(episode_level, ddof=1) / 3
    assert found.estimate == pytest.approx(x.mean())
    assert found.se == pytest.approx(math.sqrt(variance))
    a, b = np.var(seed_level, ddof=1) / 4, np.var(episode_level, ddof=1) / 3
    assert found.df == pytest.approx((a + b) ** 2 / (a * a / 3 + b * b / 2))
    half = stats.t.ppf(0.975, found.df) * found.se
    assert (found.low, found.high) == pytest.approx((x.mean() - half, x.mean() + half))
    assert found.paired_seeds and found.seed_noise


def test_shared_episode_difficulty_cancels_in_a_paired_difference():
    rng = np.random.default_rng(3)
    difficulty = rng.normal(0, 1, 50)
    seed_a, seed_b = rng.normal(0, 0.1, (4, 1)), rng.normal(0, 0.1, (4, 1))
    a = 1.0 + seed_a + difficulty
    b = 0.0 + seed_b + difficulty
    diff = intervals.contrast_interval({"a": a, "b": b}, {"a": 1, "b": -1})
    # The difficulty (sd 1, far larger than the seeds' 0.1) is gone from the difference's standard error.
    assert diff.estimate == pytest.approx(1.0 + float(seed_a.mean() - seed_b.mean()))
    assert diff.se < 0.1
    assert intervals.contrast_interval({"a": a}, {"a": 1}).se > 0.1


def test_a_constant_difference_has_no_spread_and_p_zero():
    base = np.random.default_rng(0).random((3, 8))
    found = intervals.contrast_interval({"a": base + 0.5, "b": base}, {"a": 1.0, "b": -1.0})
    assert found.estimate == pytest.approx(0.5) and (found.low, found.high) == pytest.approx((0.5, 0.5))
    assert found.p_value == pytest.approx(0.0, abs=1e-12)


def test_few_seeds_widen_the_interval_through_the_t_quantile():
    rng = np.random.default_rng(1)
    x = rng.normal(0, 1, (2, 1)) + rng.normal(0, 0.01, (2, 200))
    found = intervals.contrast_interval({"c": x}, {"c": 1.0})
    # Two seeds dominate: about one degree of freedom, a quantile near 12.7 rather than 1.96.
    assert found.df < 1.5
    assert (found.high - found.low) / (2 * found.se) > 10


def test_cells_of_different_seed_counts_are_analysed_unpaired():
    rng = np.random.default_rng(2)
    a, b = rng.random((3, 10)), rng.random((5, 10))
    found = intervals.contrast_interval({"a": a, "b": b}, {"a": 1, "b": -1})
    assert not found.paired_seeds and found.seeds == 3
    assert found.estimate == pytest.approx(a.mean() - b.mean()) and found.low < found.estimate < found.high


def test_one_seed_covers_episode_noise_only():
    x = np.array([[1.0, 0.0, 1.0, 1.0, 0.0, 1.0]])
    found = intervals.contrast_interval({"c": x}, {"c": 1.0})
    assert not found.seed_noise
    assert found.se == pytest.approx(np.std(x, ddof=1) / math.sqrt(6))
    assert found.df == 5


def test_interval_is_calibrated_on_normal_data():
    # Coverage of the cell mean on simulated crossed data with a known mean: near 95% (not a timing, a frequency).
    rng = np.random.default_rng(7)
    hits = 0
    trials = 400
    for _ in range(trials):
        x = rng.normal(0, 0.3, (4, 1)) + rng.normal(0, 0.2, (1, 30)) + rng.normal(0, 0.5, (4, 30))
        found = intervals.contrast_interval({"c": x}, {"c": 1.0})
        hits += found.low <= 0.0 <= found.high
    assert 0.91 <= hits / trials <= 0.99


@pytest.mark.parametrize(
    ("cells", "weights", "needle"),
    [
        ({"a": np.zeros((2, 3))}, {"b": 1.0}, "cells ['b'] are weighted but not given"),
        ({"a": np.zeros((2, 3))}, {"a": 0.0}, "no non-zero weight"),
        ({"a": np.zeros(3)}, {"a": 1.0}, "(seeds, episodes) matrix"),
        ({"a": np.array([[0.0, np.nan]])}, {"a": 1.0}, "non-finite"),
        ({"a": np.zeros((2, 3))}, {"a": math.inf}, "finite numbers"),
    ],
)
def test_bad_contrasts_are_refused_by_name(cells, weights, needle):
    with pytest.raises(ValueError, match=needle.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        intervals.contrast_interval(cells, weights)


def test_mdd_and_seeds_needed_agree():
    comps = intervals.Components(seed=0.002, episode=0.0005, residual=0.1)
    mdd5 = intervals.design_mdd(comps, 5, 100)
    assert mdd5 == pytest.approx(
        (stats.t.ppf(0.975, comps.df(5, 100)) + stats.t.ppf(0.8, comps.df(5, 100))) * math.sqrt(comps.variance(5, 100))
    )
    assert intervals.design_mdd(comps, 10, 100) < mdd5 < intervals.design_mdd(comps, 3, 100)
    n = intervals.seeds_needed(mdd5, comps, 100)
    assert n is not None and n <= 5
    assert intervals.design_mdd(comps, n, 100) <= mdd5 < intervals.design_mdd(comps, n - 1, 100)
    # Episode noise alone: 0.0005 / 100 gives an se of 0.22 points; a 0.5-point difference needs more episodes.
    assert intervals.seeds_needed(0.005, comps, 100) is None
    assert intervals.seeds_needed(0.005, comps, 10_000) is not None
    with pytest.raises(ValueError, match="difference must be a finite number > 0"):
        intervals.seeds_needed(-1.0, comps, 100)
    with pytest.raises(ValueError, match="alpha and power must be in"):
        intervals.minimum_detectable_difference(0.01, 4, power=1.5)


def test_difference_components_of_a_table():
    base = np.arange(12.0).reshape(3, 4)
    comps = intervals.difference_components({"a": base, "b": base + 1, "c": np.zeros((2, 4))})
    assert comps == intervals.Components(seed=0.0, episode=0.0, residual=0.0)  # a - b is constant; c has no pair
    assert intervals.difference_components({"a": base}) is None


def test_holm_by_hand():
    assert intervals.holm([0.01, 0.04, 0.03, 0.5]) == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert intervals.holm([]) == []
    with pytest.raises(ValueError, match=r"p-values must be numbers in \[0, 1\]"):
        intervals.holm([0.2, 1.2])


def test_heterogeneity_tells_differing_methods_apart():
    rng = np.random.default_rng(5)

    def method(effect):
        noise = rng.normal(0, 0.02, (4, 40))
        return {"U": noise, "F": noise[::-1] + effect + rng.normal(0, 0.02, (4, 40))}

    same = intervals.heterogeneity({"m1": method(0.1), "m2": method(0.1)}, {"U": -1, "F": 1})
    differ = intervals.heterogeneity({"m1": method(0.1), "m2": method(-0.1)}, {"U": -1, "F": 1})
    assert differ["p_value"] < 1e-6 < same["p_value"]
    three = intervals.heterogeneity({"m1": method(0.1), "m2": method(0.1), "m3": method(-0.2)}, {"U": -1, "F": 1})
    assert three["test"].startswith("Cochran") and three["p_value"] < 1e-6
    with pytest.raises(ValueError, match="at least two methods"):
        intervals.heterogeneity({"m1": method(0.1)}, {"U": -1, "F": 1})


def test_column_mdd_from_seed_rates_and_from_episodes_alone():
    rows = [[0.8, 0.9, 0.85], [0.5, 0.6, 0.55]]
    pooled = np.mean([np.var(r, ddof=1) for r in rows])
    want = (stats.t.ppf(0.975, 4) + stats.t.ppf(0.8, 4)) * math.sqrt(2 * pooled / 3)
    assert intervals.column_mdd(rows, episodes=100) == pytest.approx(want)
    one_seed = intervals.column_mdd([[0.5], [0.7]], episodes=100)
    assert one_seed == pytest.approx((1.959964 + 0.841621) * math.sqrt(2 * 0.24 / 100), rel=1e-4)
    assert intervals.column_mdd([], episodes=100) is None


def test_mean_interval_stays_in_the_unit_interval_and_leans_away_from_the_bound():
    x = np.ones((3, 20))
    x[0, 0] = 0.0  # one failure in 60 episodes
    found = intervals.mean_interval(x)
    assert 0.0 < found.low < found.estimate < found.high <= 1.0
    assert found.high - found.estimate < found.estimate - found.low  # asymmetric near 1
    perfect = intervals.mean_interval(np.ones((3, 20)))
    assert perfect.high == 1.0 and 0.8 < perfect.low < 1.0  # all successes: still an interval, not a point
    scores = np.array([[2.0, 3.0], [4.0, 5.0]])  # not in [0, 1]: the linear interval, unchanged
    linear = intervals.contrast_interval({"c": scores}, {"c": 1.0})
    assert intervals.mean_interval(scores) == linear
