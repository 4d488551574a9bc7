"""Do the ablation's 95% intervals hold? Their coverage, measured by simulation on the committed cells' structure.

Data are simulated like the committed full ablation (experiments/ablation-cpu/): nine lab cells (real-only, and
`flow` and `flow-cfg-adda` co-trained on each of four variants), S training seeds per cell, 100 protocol episodes
shared by every cell. Episode ``e`` of seed ``s`` in cell ``c`` succeeds with probability
``logistic(mu_c + a_cs + b_e + g_ce)``: ``a_cs`` the seed's skill (sd per cell, from the committed per-seed
results), ``b_e`` the episode's difficulty shared by every cell, ``g_ce`` its cell-specific part. ``mu_c`` and the
two episode sds are calibrated so that the simulated cells have the committed cells' means and episode variance
components (per cell and of the paired differences). Each replicate draws new seeds and new episodes; the truth is
the population mean over both. Measured, per interval kind (cell means, paired differences, main effects, the
interaction) at 3 and at 5 seeds: the share of 95% intervals that hold the truth, for

- ``t2`` (the new method, :mod:`r2s2r_envs.evaluation.intervals`): a t-interval over seeds and shared episodes
  (``contrast_interval``; for a cell mean ``mean_interval``, the same on the logit scale),
- ``bootstrap`` (the old, ``r2s2r_envs.ablation.analysis.bootstrap_contrast``): seeds resampled per cell, one
  shared episode resample (fewer replicates: it is slow),
- ``seed_t``: a plain t-interval over per-seed means (episodes treated as fixed).

Example (about 5 CPU-minutes)::

    python experiments/interval_coverage.py --json experiments/interval-coverage/coverage.json
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from r2s2r_envs.ablation.analysis import EFFECTS, bootstrap_contrast
from r2s2r_envs.ablation.specs import LAB_ENV_ID
from r2s2r_envs.ablation.store import Store
from r2s2r_envs.ablation.tasks import read_result
from r2s2r_envs.evaluation import intervals

RECORD = Path(__file__).resolve().parent / "ablation-cpu"
METHODS = ("flow", "flow-cfg-adda")
VARIANTS = ("Ungrounded", "WorldGrounded", "BehaviorGrounded", "FullyGrounded")
REAL_ONLY = ("flow", "real-only")


def committed_cells(root: Path = RECORD) -> dict[tuple[str, str], np.ndarray]:
    """The committed lab success matrices ``(seeds, episodes)`` of the nine cells: the record's evaluations in the
    lab (``store/eval/<key>/``, each policy named by its ``task.json``), one row per training seed in seed order."""
    store = Store(root)
    rows: dict[tuple[str, str, str], dict[int, list[float]]] = {}
    for done in sorted((root / "store" / "eval").glob("*/task.json")):
        config = json.loads(done.read_text())["config"]
        if config["env_id"] != LAB_ENV_ID:
            continue
        p = config["policy"]
        cell = (p["method"], p["variant"] or REAL_ONLY[1], f"{p['real_fraction']:g}")
        records = read_result(store, done.parent.name).records
        rows.setdefault(cell, {})[int(p["seed"])] = [float(r.is_success) for r in records]
    cells = {}
    for method, variant, rf in [(m, v, "0.224") for m in METHODS for v in VARIANTS] + [(*REAL_ONLY, "1")]:
        by_seed = rows[(method, variant, rf)]
        cells[(method, variant)] = np.array([by_seed[s] for s in sorted(by_seed)])
    return cells


def contrasts() -> dict[str, dict[str, dict[tuple[str, str], float]]]:
    """Every interval the report draws, by kind: cell means, paired differences, main effects, interactions."""
    keys = [(m, v) for m in METHODS for v in VARIANTS]
    out: dict[str, dict[str, dict[tuple[str, str], float]]] = {"cell mean": {}, "paired difference": {}}
    for k in [*keys, REAL_ONLY]:
        out["cell mean"][f"{k[0]}/{k[1]}"] = {k: 1.0}
    for m in METHODS:
        for v in VARIANTS:
            out["paired difference"][f"{m}/{v} - real-only"] = {(m, v): 1.0, REAL_ONLY: -1.0}
        for i, a in enumerate(VARIANTS):
            for b in VARIANTS[i + 1 :]:
                out["paired difference"][f"{m}/{b} - {a}"] = {(m, b): 1.0, (m, a): -1.0}
    out["main effect"] = {}
    out["interaction"] = {}
    for name in ("world", "behavior", "interaction"):
        kind = "interaction" if name == "interaction" else "main effect"
        for m in METHODS:
            out[kind][f"{name}, {m}"] = {(m, v): w for v, w in EFFECTS[name].items()}
        out[kind][f"{name}, all methods"] = {(m, v): w / 2 for m in METHODS for v, w in EFFECTS[name].items()}
    return out


class Model:
    """The generative model: logit-normal success per (cell, seed, episode)."""

    def __init__(self, mu: dict, seed_sd: dict, shared_sd: float, cell_sd: float):
        self.mu, self.seed_sd, self.shared_sd, self.cell_sd = mu, seed_sd, shared_sd, cell_sd

    def draw(self, rng: np.random.Generator, seeds: int, episodes: int) -> dict[tuple[str, str], np.ndarray]:
        b = rng.normal(0, self.shared_sd, episodes)
        out = {}
        for k, mu in self.mu.items():
            a = rng.normal(0, self.seed_sd[k], (seeds, 1))
            g = rng.normal(0, self.cell_sd, episodes)
            p = 1 / (1 + np.exp(-(mu + a + b + g)))
            out[k] = (rng.random((seeds, episodes)) < p).astype(np.float64)
        return out


#: Gauss-Hermite nodes and weights: E[f(Z)] for a standard normal Z as a weighted sum.
_NODES, _WEIGHTS = np.polynomial.hermite.hermgauss(80)


def population_mean(mu: float, seed_sd: float, shared_sd: float, cell_sd: float) -> float:
    """E[p] over seeds and episodes: the logistic of a normal with the three sds, by Gauss-Hermite quadrature."""
    sd = math.sqrt(seed_sd**2 + shared_sd**2 + cell_sd**2)
    values = 1 / (1 + np.exp(-(mu + sd * math.sqrt(2) * _NODES)))
    return float(np.sum(_WEIGHTS * values) / math.sqrt(math.pi))


def solve_mu(target: float, seed_sd: float, shared_sd: float, cell_sd: float) -> float:
    lo, hi = -10.0, 10.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if population_mean(mid, seed_sd, shared_sd, cell_sd) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def build_model(cells: dict, shared_sd: float, cell_sd: float) -> Model:
    seed_sd = {}
    mu = {}
    for k, x in cells.items():
        m = float(np.clip(x.mean(), 0.02, 0.98))
        # Delta method: a seed-level sd on the probability scale over the logistic's slope there.
        seed_sd[k] = math.sqrt(intervals.components(x).seed) / (m * (1 - m))
        mu[k] = solve_mu(m, seed_sd[k], shared_sd, cell_sd)
    return Model(mu, seed_sd, shared_sd, cell_sd)


def episode_targets(cells: dict) -> tuple[float, float]:
    """Mean episode component of a cell and of a paired difference of two co-trained cells of one method."""
    per_cell = float(np.mean([intervals.components(x).episode for x in cells.values()]))
    diffs = [
        intervals.components(cells[(m, a)] - cells[(m, b)]).episode
        for m in METHODS
        for i, a in enumerate(VARIANTS)
        for b in VARIANTS[i + 1 :]
    ]
    return per_cell, float(np.mean(diffs))


def calibrate(cells: dict, rng: np.random.Generator) -> tuple[float, float, dict]:
    """The shared and cell-specific episode sds (logit scale) whose simulated components match the committed."""
    target = episode_targets(cells)
    best: tuple[float, float, float] = (math.inf, 0.0, 0.0)
    grid = [0.0, 0.5, 0.8, 1.1, 1.4, 1.7, 2.0]
    for shared in grid:
        for own in grid:
            model = build_model(cells, shared, own)
            sims = [episode_targets(model.draw(rng, 5, 100)) for _ in range(20)]
            got = np.mean(sims, axis=0)
            err = float(np.sum((np.log(got + 1e-4) - np.log(np.array(target) + 1e-4)) ** 2))
            if err < best[0]:
                best = (err, shared, own)
    return best[1], best[2], {"per_cell": target[0], "paired_difference": target[1]}


def seed_t(cells: dict, weights: dict) -> tuple[float, float]:
    """A t-interval over the contrast's per-seed means (seeds paired; episodes treated as fixed)."""
    d = sum(w * cells[k].mean(axis=1) for k, w in weights.items())
    n = len(d)
    half = float(stats.t.ppf(0.975, n - 1)) * float(np.std(d, ddof=1)) / math.sqrt(n)
    return float(d.mean()) - half, float(d.mean()) + half


def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = np.random.default_rng(args.seed)
    cells = committed_cells()
    shared_sd, cell_sd, targets = calibrate(cells, rng)
    model = build_model(cells, shared_sd, cell_sd)
    truth_cell = {k: population_mean(model.mu[k], model.seed_sd[k], shared_sd, cell_sd) for k in model.mu}
    kinds = contrasts()
    truth = {
        kind: {n: sum(w * truth_cell[k] for k, w in ws.items()) for n, ws in named.items()}
        for kind, named in kinds.items()
    }
    out: dict[str, Any] = {}
    for seeds in args.seeds:
        hits: dict[str, dict[str, dict[str, list[float]]]] = {
            m: {kind: {n: [] for n in named} for kind, named in kinds.items()} for m in ("t2", "seed_t", "bootstrap")
        }
        # Widths are compared on the simulations every method saw (the old method's first ones).
        widths: dict[str, dict[str, list[float]]] = {m: {kind: [] for kind in kinds} for m in hits}
        for rep in range(args.replicates):
            data = model.draw(rng, seeds, args.episodes)
            old = rep < args.bootstrap_replicates
            for kind, named in kinds.items():
                for name, weights in named.items():
                    t = truth[kind][name]
                    new = (
                        intervals.mean_interval(data[next(iter(weights))])
                        if kind == "cell mean"
                        else intervals.contrast_interval(data, weights)
                    )
                    found = {
                        "t2": (new.low, new.high),
                        "seed_t": seed_t(data, weights),
                    }
                    if old:
                        b = bootstrap_contrast(data, weights, replicates=args.bootstrap_draws, seed=rep)
                        found["bootstrap"] = tuple(b["ci95"])
                    for method, (low, high) in found.items():
                        hits[method][kind][name].append(float(low <= t <= high))
                        if old:
                            widths[method][kind].append(high - low)
        out[str(seeds)] = {
            method: {
                kind: {
                    "coverage": float(np.mean([h for v in by_name.values() for h in v])),
                    "min": min(float(np.mean(v)) for v in by_name.values()),
                    "max": max(float(np.mean(v)) for v in by_name.values()),
                    "per_contrast": {n: float(np.mean(v)) for n, v in by_name.items()},
                    "simulations": len(next(iter(by_name.values()))),
                    "mean_width_points": 100 * float(np.mean(widths[method][kind])),
                    "width_simulations": len(widths[method][kind]) // len(by_name),
                }
                for kind, by_name in per_kind.items()
            }
            for method, per_kind in hits.items()
        }
    return {
        "model": {
            "record": "experiments/ablation-cpu/store/eval (lab success, rf 0.224 and real-only)",
            "episodes": args.episodes,
            "shared_episode_sd_logit": shared_sd,
            "cell_episode_sd_logit": cell_sd,
            "episode_component_targets": targets,
            "cells": {
                f"{k[0]}/{k[1]}": {"mean": truth_cell[k], "mu_logit": model.mu[k], "seed_sd_logit": model.seed_sd[k]}
                for k in model.mu
            },
        },
        "coverage": out,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[3, 5], help="training seeds per cell")
    parser.add_argument("--episodes", type=int, default=100, help="shared episodes per cell")
    parser.add_argument("--replicates", type=int, default=2000, help="simulated ablations per seed count")
    parser.add_argument("--bootstrap-replicates", type=int, default=200, help="of those, how many the old method sees")
    parser.add_argument("--bootstrap-draws", type=int, default=1000, help="bootstrap draws per old interval")
    parser.add_argument("--seed", type=int, default=0, help="the simulation's random seed")
    parser.add_argument("--json", type=Path, default=None, help="where to write the record")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    record = run(args)
    record["config"] = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    record["wall_time_s"] = time.perf_counter() - start
    record["machine"] = {"python": platform.python_version(), "processor": platform.processor() or platform.machine()}
    for seeds, by_method in record["coverage"].items():
        for method, by_kind in by_method.items():
            cov = ", ".join(
                f"{kind} {100 * v['coverage']:.1f}% ({100 * v['min']:.0f}-{100 * v['max']:.0f}; width "
                f"{v['mean_width_points']:.1f})"
                for kind, v in by_kind.items()
            )
            print(f"{seeds} seeds, {method}: {cov}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
