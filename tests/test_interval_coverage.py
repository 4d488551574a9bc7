"""experiments/interval_coverage.py: the simulated ablation has the committed cells' means, the contrasts are the
report's, and the recorded coverage is what the README quotes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments"))
import interval_coverage  # noqa: E402

RECORD = ROOT / "experiments" / "interval-coverage"


def test_contrasts_are_the_reports_kinds():
    kinds = interval_coverage.contrasts()
    assert {k: len(v) for k, v in kinds.items()} == {
        "cell mean": 9,
        "paired difference": 20,
        "main effect": 6,
        "interaction": 3,
    }
    for kind in ("paired difference", "main effect", "interaction"):
        for name, weights in kinds[kind].items():
            assert sum(weights.values()) == pytest.approx(0.0), name  # a contrast: a constant cancels


def test_simulated_cells_have_the_committed_means():
    cells = interval_coverage.committed_cells()
    assert len(cells) == 9 and all(x.shape == (5, 100) for x in cells.values())
    model = interval_coverage.build_model(cells, 1.7, 1.1)
    for key, x in cells.items():
        mean = interval_coverage.population_mean(model.mu[key], model.seed_sd[key], 1.7, 1.1)
        assert mean == pytest.approx(x.mean(), abs=1e-6), key
    drawn = model.draw(np.random.default_rng(0), 3, 100)
    assert all(x.shape == (3, 100) and set(np.unique(x)) <= {0.0, 1.0} for x in drawn.values())


def test_seed_t_by_hand():
    cells = {"a": np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]])}  # per-seed means 0.5, 1, 0
    low, high = interval_coverage.seed_t(cells, {"a": 1.0})
    half = 4.302652729911275 * 0.5 / 3**0.5  # t(0.975, 2) * sd / sqrt(3)
    assert (low, high) == pytest.approx((0.5 - half, 0.5 + half))


def test_record_backs_the_readme():
    record = json.loads((RECORD / "coverage.json").read_text())
    readme = (RECORD / "README.md").read_text()
    for seeds in ("3", "5"):
        for kind in ("cell mean", "paired difference", "main effect", "interaction"):
            new = record["coverage"][seeds]["t2"][kind]
            assert 0.93 <= new["coverage"] <= 0.97  # the goal, as the README says it is met
            assert f"**{100 * new['coverage']:.1f}**" in readme
