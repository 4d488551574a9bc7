"""Identification stages of the actuators (``grounding.identify``): 4. control latency and the finger servos, 5.
the arm joints' damping, armature and friction loss; both by ``mujoco.sysid.optimize`` on batched rollouts of the
logged commands (``grounding.replay.JointRollout``)."""

from __future__ import annotations

import dataclasses
import io
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from r2s2r_envs.grounding.identify_common import FitState, replace_element, replace_field
from r2s2r_envs.grounding.logs import LogRun
from r2s2r_envs.grounding.replay import JointRollout
from r2s2r_envs.world.params import WorldParams

LATENCY_GRID_S = 0.01
LATENCY_MAX_S = 0.2
PHYSICS_DT = 0.002  # the scene's physics time step, s: the resolution of the actuator delay


# -------------------------------------------------------------------------------- 4./5. joint-mode fits
def _weights(fit: FitState) -> dict[str, float]:
    """Residual scale per signal: the identified noise level, floored so a perfect sensor cannot dominate."""
    floors = {"arm_qpos": 1e-3, "hand_qpos": 5e-3, "arm_torque": 0.2, "finger_current": 0.01}
    noise = {
        "arm_qpos": fit.values.get("joint_pos_noise", 0.0),
        "hand_qpos": fit.values.get("joint_pos_noise", 0.0),
        "arm_torque": fit.values.get("arm_torque_noise", 0.0),
        "finger_current": fit.values.get("finger_current_noise", 0.0),
    }
    return {k: max(float(noise[k]), floors[k]) for k in floors}


def _residuals(
    rollouts: list[JointRollout], worlds: list[WorldParams], signals: dict[str, Sequence[int] | None], scale: dict
) -> np.ndarray:
    """(n_residuals, len(worlds)) scaled prediction errors over all runs."""
    cols: list[list[np.ndarray]] = [[] for _ in worlds]
    for jr in rollouts:
        preds = jr.predict(worlds)
        for b, pred in enumerate(preds):
            for key, idx in signals.items():
                meas = np.asarray(jr.run.obs[key], dtype=float)
                p = pred[key]
                if idx is not None:
                    meas, p = meas[:, idx], p[:, idx]
                cols[b].append(((p - meas) / scale[key]).ravel())
    return np.stack([np.concatenate(c) for c in cols], axis=1)


def _profile_latency(
    rollouts: list[JointRollout], world: WorldParams, grid: np.ndarray, signals: dict, scale: dict
) -> tuple[np.ndarray, np.ndarray]:
    worlds = [dataclasses.replace(world, control_latency=float(g)) for g in grid]
    r = _residuals(rollouts, worlds, signals, scale)
    return grid, np.sum(r * r, axis=0)


def _sysid_fit(
    rollouts: list[JointRollout],
    world: WorldParams,
    params: dict[str, tuple[Callable[[WorldParams, float], WorldParams], float, float, float]],
    signals: dict,
    scale: dict,
    max_iters: int,
) -> tuple[dict[str, float], dict[str, tuple[float, float]], dict[str, Any]]:
    """Fit scalar parameters with ``mujoco.sysid.optimize``; intervals from ``calculate_intervals``.

    ``params``: name -> (apply(world, value) -> world, initial value, lower bound, upper bound).
    """
    from mujoco import sysid

    names = list(params)
    pdict = sysid.ParameterDict()
    for name in names:
        _, x0, lo, hi = params[name]
        pdict.add(sysid.Parameter(name, nominal=float(np.clip(x0, lo, hi)), min_value=lo, max_value=hi))

    def worlds_for(x: np.ndarray) -> list[WorldParams]:
        x = np.atleast_2d(np.asarray(x, dtype=float).T).T  # (n, k)
        out = []
        for col in x.T:
            w = world
            for name, value in zip(names, col):
                # The optimizer may return a bound missed by a rounding error (-3e-17 for a bound of 0): clip.
                w = params[name][0](w, min(max(float(value), params[name][2]), params[name][3]))
            out.append(w)
        return out

    def residual_fn(x: np.ndarray, _params: Any) -> tuple[list[np.ndarray], None, None]:
        r = _residuals(rollouts, worlds_for(x), signals, scale)
        return [r if np.ndim(x) == 2 else r[:, 0]], None, None

    x0 = pdict.as_vector()
    r0 = residual_fn(x0, pdict)[0][0]
    log = io.StringIO()  # the optimizer's per-iteration lines go to details, not to stdout
    opt, result = sysid.optimize(
        pdict, residual_fn, optimizer="mujoco", verbose=False, max_iters=max_iters, eps=1e-4, x_scale="jac", output=log
    )
    x = np.clip(opt.as_vector(), [params[n][2] for n in names], [params[n][3] for n in names])
    r_star = residual_fn(x, opt)[0][0]
    jac = np.asarray(result.jac) if result.jac is not None else None
    if jac is None or jac.shape != (len(r_star), len(names)):
        from mujoco import minimize

        jac, _ = minimize.jacobian_fd(
            lambda z: residual_fn(z, opt)[0][0], x.reshape(-1, 1), r_star.reshape(-1, 1), np.float64(1e-4), 0
        )
    _, half = sysid.calculate_intervals([r_star], jac)
    estimates = dict(zip(names, map(float, x)))
    intervals = {n: (float(v - h), float(v + h)) for n, v, h in zip(names, x, half)}
    info = {
        "method": "mujoco.sysid.optimize (Gauss-Newton, finite differences through mujoco.rollout); "
        "mujoco.sysid.calculate_intervals",
        "cost_initial": float(r0 @ r0),
        "cost_final": float(r_star @ r_star),
        "residuals": len(r_star),
        "rms_scaled_residual": float(np.sqrt(np.mean(r_star**2))),
        "optimizer_log": log.getvalue().strip().splitlines()[-1:] if log.getvalue() else [],
    }
    return estimates, intervals, info


def fit_latency_and_fingers(runs: list[LogRun], fit: FitState, quick: bool, workers: int) -> None:
    fields = ("control_latency", "finger_kp", "finger_kv", "finger_force_limit")
    if not runs:
        for f in fields:
            fit.flag(f, "no finger_steps or latency runs in the logs")
        return
    for run in runs:
        run.require(["hand_qpos", "finger_current"], "the finger servo and latency fit")
    # One delay buffer for every candidate, read with linear interpolation: the latency becomes continuous.
    rollouts = [JointRollout(r, nthread=workers, max_latency=LATENCY_MAX_S) for r in runs]
    scale = _weights(fit)
    signals = {"hand_qpos": None, "finger_current": None}
    world = fit.world()
    # Start from the best latency of a coarse grid at the current gains (one batch of rollouts per run).
    coarse = np.arange(0.0, LATENCY_MAX_S + 1e-9, LATENCY_GRID_S)
    grid, cost = _profile_latency(rollouts, world, coarse, signals, scale)
    start = float(grid[np.argmin(cost)])
    params = {
        "control_latency": (replace_field("control_latency"), max(start, 0.005), 0.0, LATENCY_MAX_S),
        "finger_kp": (replace_field("finger_kp"), world.finger_kp, 0.2, 40.0),
        "finger_kv": (replace_field("finger_kv"), world.finger_kv, 1e-3, 1.0),
        "finger_force_limit": (replace_field("finger_force_limit"), world.finger_force_limit, 0.05, 10.0),
    }
    est, ivals, info = _sysid_fit(rollouts, world, params, signals, scale, max_iters=8 if quick else 12)
    for name in fields:
        low, high = ivals[name]
        if name == "control_latency":  # the simulator holds commands for whole physics steps
            low, high = max(low - PHYSICS_DT, 0.0), high + PHYSICS_DT
        fit.set(name, est[name], (low, high))
    fit.details["latency_and_fingers"] = {
        **info,
        "latency_start": {"grid_s": grid.round(4).tolist(), "cost": cost.round(3).tolist()},
        "runs": [r.name for r in runs],
        "scale": scale,
    }


def fit_arm(runs: list[LogRun], fit: FitState, quick: bool, workers: int) -> None:
    fields = ("arm_damping", "arm_armature", "arm_frictionloss")
    if not runs:
        for f in fields:
            fit.flag(f, "no arm_steps or arm_chirp runs in the logs")
        return
    scale = _weights(fit)
    world = fit.world()
    values = {f: list(getattr(world, f)) for f in fields}
    lows = {f: [0.0] * 7 for f in fields}
    highs = {f: [0.0] * 7 for f in fields}
    per_joint: dict[str, Any] = {}
    bounds = {"arm_damping": (0.0, 30.0), "arm_armature": (0.005, 3.0), "arm_frictionloss": (0.0, 10.0)}
    for j in range(7):
        mine = [r for r in runs if r.settings.get("joint") == j + 1]
        if quick:  # one run per joint: steps where there is one
            mine = sorted(mine, key=lambda r: r.protocol != "arm_steps")[:1]
        if not mine:
            for f in fields:
                lows[f][j], highs[f][j] = -math.inf, math.inf
            per_joint[f"joint{j + 1}"] = "no runs exciting this joint: kept at nominal"
            continue
        for r in mine:
            r.require(["arm_qpos", "arm_torque"], "the arm joint fit")
        rollouts = [JointRollout(r, nthread=workers) for r in mine]
        params = {f"{f}[{j}]": (replace_element(f, j), values[f][j], *bounds[f]) for f in fields}
        est, ivals, info = _sysid_fit(
            rollouts, world, params, {"arm_qpos": [j], "arm_torque": [j]}, scale, max_iters=2 if quick else 5
        )
        for f in fields:
            name = f"{f}[{j}]"
            values[f][j] = est[name]
            lows[f][j], highs[f][j] = ivals[name]
            world = replace_element(f, j)(world, est[name])
        per_joint[f"joint{j + 1}"] = {**info, "runs": [r.name for r in mine], "estimates": est}
    for f in fields:
        fit.set(f, values[f], list(zip(lows[f], highs[f])))
    fit.details["arm"] = per_joint
