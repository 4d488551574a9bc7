"""Identification stages of the objects (``grounding.identify``): 6. mass per category from lifts, 7. friction
from pushes; each from measured joint torques with minus without the object, matched by the simulated
difference (``grounding.replay.simulate_run``)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from r2s2r_envs.grounding.identify_common import FitState, replace_element, t_quantile
from r2s2r_envs.grounding.logs import LogRun, LogSet
from r2s2r_envs.grounding.replay import simulate_run
from r2s2r_envs.world import constants as C
from r2s2r_envs.world.builder import scene_layout
from r2s2r_envs.world.params import WorldParams


# --------------------------------------------------------------------------------------- 6. object mass
def _held_mask(object_pos: np.ndarray, threshold: float) -> np.ndarray:
    return np.asarray(object_pos, dtype=float)[:, 2] > threshold


def _pair_difference(
    run: LogRun, ref: LogRun, world: WorldParams, held_above: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(measured torque difference, simulated difference, mask of held steps) for a with/without-object pair."""
    run.require(["arm_torque", "object_pos"], "the object mass fit")
    ref.require(["arm_torque"], "the object mass fit")
    measured = np.asarray(run.obs["arm_torque"], float) - np.asarray(ref.obs["arm_torque"], float)
    pred = simulate_run(run, world)
    pred_ref = simulate_run(ref, world)
    simulated = np.asarray(pred["arm_torque"], float) - np.asarray(pred_ref["arm_torque"], float)
    logged_held = _held_mask(run.obs["object_pos"][:, :3], held_above)
    if "object_visible" in run.obs:  # a hidden object keeps its last estimate (on the belt): trust the prediction
        logged_held |= np.asarray(run.obs["object_visible"])[:, 0] <= 0.5
    held = logged_held & _held_mask(pred["object_pos"][:, :3], held_above)
    # Only while the arm moves: at rest, joint friction holds an undetermined share of the load.
    t0, t1 = run.settings.get("mass_steps", [0, run.steps + 1])
    window = np.zeros(len(held), dtype=bool)
    window[t0:t1] = True
    held &= window
    if held.sum() < 5:
        return None
    return measured, simulated, held


def fit_mass(logs: LogSet, fit: FitState, quick: bool) -> None:
    runs = logs.by_protocol("lift")
    refs = {r.name: r for r in logs.by_protocol("lift_empty")}
    world = fit.world()
    held_above = scene_layout().belt_top + 0.08
    masses, lows, highs = list(world.object_mass), [0.0] * 3, [0.0] * 3
    detail: dict[str, Any] = {}
    missing = []
    for c, category in enumerate(C.CATEGORIES):
        found = [(r, refs.get(r.settings.get("reference", ""))) for r in runs if r.settings.get("category") == category]
        pairs = [(r, ref) for r, ref in found if ref is not None]
        m0 = world.object_mass[c]
        num = den = 0.0
        estimates, used = [], []
        resid_all = []
        for run, ref in pairs:
            w0 = world
            w1 = replace_element("object_mass", c)(world, 1.5 * m0)
            a = _pair_difference(run, ref, w0, held_above)
            b = _pair_difference(run, ref, w1, held_above)
            if a is None or b is None:
                continue
            measured, sim0, held = a
            _, sim1, held1 = b
            mask = held & held1
            slope = ((sim1 - sim0)[mask] / (0.5 * m0)).ravel()  # d(torque difference)/d(mass), N*m/kg
            target = (measured - sim0)[mask].ravel()
            num += float(np.sum(slope * target))
            den += float(np.sum(slope * slope))
            estimates.append(m0 + float(np.sum(slope * target) / np.sum(slope * slope)))
            used.append(run.name)
            resid_all.append((target, slope))
        if den <= 0:
            missing.append(category)
            lows[c], highs[c] = -math.inf, math.inf
            detail[category] = "no lift in which the object was held (in the logs and in the simulation)"
            continue
        m = m0 + num / den
        # Residual spread over time is correlated: use per-run estimates when there are several, else the
        # regression standard error with an effective sample size from the lag-1 autocorrelation.
        res = np.concatenate([t - s * (m - m0) for t, s in resid_all])
        rho = float(np.corrcoef(res[:-1], res[1:])[0, 1]) if len(res) > 3 else 0.0
        n_eff = max(len(res) * (1 - rho) / (1 + rho), 2.0)
        se_reg = math.sqrt(float(res @ res) / max(len(res) - 1, 1) / den * len(res) / n_eff)
        half = t_quantile(int(n_eff) - 1) * se_reg  # within the runs; the piece-to-piece spread is added below
        masses[c], lows[c], highs[c] = max(m, 1e-3), m - half, m + half
        detail[category] = {"estimate_kg": m, "per_run_kg": estimates, "runs": used, "rho": rho, "n_eff": n_eff}
    # Objects differ from piece to piece: the spread of per-run estimates, pooled over categories as a relative
    # spread, sets the interval of each category's mean (t interval on the pooled degrees of freedom).
    rel, dof = [], 0
    for category in C.CATEGORIES:
        runs_c = detail.get(category)
        if isinstance(runs_c, dict) and len(runs_c["per_run_kg"]) >= 2:
            e = np.asarray(runs_c["per_run_kg"])
            rel.extend(((e - e.mean()) / e.mean()).tolist())
            dof += len(e) - 1
    if dof > 0:
        s_rel = math.sqrt(float(np.sum(np.square(rel))) / dof)
        for c, category in enumerate(C.CATEGORIES):
            runs_c = detail.get(category)
            if isinstance(runs_c, dict):
                half = t_quantile(dof) * s_rel * masses[c] / math.sqrt(len(runs_c["per_run_kg"]))
                lows[c], highs[c] = min(lows[c], masses[c] - half), max(highs[c], masses[c] + half)
        detail["relative_spread"] = {"std": s_rel, "dof": dof}
    if len(missing) == 3:
        fit.flag("object_mass", "no usable lift runs (an object held in the lab and in the simulation)")
        return
    fit.set("object_mass", masses, list(zip(lows, highs)))
    fit.details["mass"] = {
        "method": "measured joint torques with minus without the object, matched by the simulated difference "
        "(linear in the mass) over the steps the object is held",
        **detail,
    }


# ------------------------------------------------------------------------------------- 7. object friction
FRICTION_GRID = (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.5, 2.0)


def _parabola_min(grid: np.ndarray, cost: np.ndarray, best: int) -> tuple[float, float]:
    """Minimum of the parabola through the best grid point and its neighbours, and its curvature a in
    cost = a (x - x_min)^2 + c."""
    x, y = grid[best - 1 : best + 2], cost[best - 1 : best + 2]
    a, b, _ = np.polyfit(x, y, 2)
    if a <= 0:
        return float(grid[best]), 0.0
    return float(np.clip(-b / (2 * a), x[0], x[-1])), float(a)


def fit_friction(logs: LogSet, fit: FitState, quick: bool) -> None:
    runs = logs.by_protocol("push")
    refs = {r.name: r for r in logs.by_protocol("push_empty")}
    pairs = [(r, refs[r.settings["reference"]]) for r in runs if r.settings.get("reference") in refs]
    if not pairs:
        fit.flag("object_friction", "no push runs (with their push_empty references) in the logs")
        return
    world = fit.world()
    grid = np.asarray(FRICTION_GRID)
    sse = np.zeros(len(grid))
    blocks: list[tuple[np.ndarray, list[np.ndarray]]] = []
    for run, ref in pairs:
        run.require(["arm_torque"], "the object friction fit")
        ref.require(["arm_torque"], "the object friction fit")
        t0, t1 = run.settings.get("push_steps", [0, run.steps])
        measured = (np.asarray(run.obs["arm_torque"], float) - np.asarray(ref.obs["arm_torque"], float))[t0:t1]
        simulated = []
        for mu in grid:
            w = dataclasses.replace(world, object_friction=float(mu))
            diff = np.asarray(simulate_run(run, w)["arm_torque"], float) - np.asarray(
                simulate_run(ref, w)["arm_torque"], float
            )
            simulated.append(diff[t0:t1])
        blocks.append((measured, simulated))
        sse += np.array([np.sum((measured - s) ** 2) for s in simulated])
    best = int(np.argmin(sse))
    if best in (0, len(grid) - 1):
        fit.flag("object_friction", f"the push cost is smallest at the edge of the grid {list(FRICTION_GRID)}")
        return
    mu_hat, curvature = _parabola_min(grid, sse, best)
    # Noise level of the torque difference at the nearest grid point, inflated for its autocorrelation.
    res = np.concatenate([(m - s[best]).ravel() for m, s in blocks])
    rho = float(np.corrcoef(res[:-1], res[1:])[0, 1]) if len(res) > 3 else 0.0
    rho = min(max(rho, 0.0), 0.95)
    s2 = float(res @ res) / max(len(res) - 1, 1) * (1 + rho) / (1 - rho)
    half = math.sqrt(3.84 * s2 / curvature) if curvature > 0 else math.inf
    # Objects differ from piece to piece: with several pushes, the spread of their own estimates counts too.
    per_run = []
    for m, sims in blocks:
        cost = np.array([np.sum((m - s) ** 2) for s in sims])
        k = int(np.argmin(cost))
        if 0 < k < len(grid) - 1:
            per_run.append(_parabola_min(grid, cost, k)[0])
    if len(per_run) >= 2:
        half = max(half, t_quantile(len(per_run) - 1) * float(np.std(per_run, ddof=1)) / math.sqrt(len(per_run)))
    fit.set("object_friction", mu_hat, (max(mu_hat - half, 0.0), mu_hat + half))
    fit.details["friction"] = {
        "method": "measured joint torques pushing a bar along a bar minus pushing nothing, matched by the "
        "simulated difference over a friction grid (parabolic refinement, profile interval)",
        "grid": list(FRICTION_GRID),
        "sse": sse.round(4).tolist(),
        "runs": [r.name for r, _ in pairs],
        "per_run": per_run,
    }
