"""Identify a ``WorldParams`` from lab logs: one parameter group at a time, from the protocol that exposes it.

docs/lab_logs.md lists the protocols and what each exposes.  The stages, in order (each uses the world found by
the stages before it):

1. **Sensing** (``sensing_rest``): each noise level is the pooled standard deviation of a signal that does not
   move (robot and objects at rest), with a chi-square 95% interval.
2. **Perception offset and object size** (``sensing_rest``): perceived minus simulated resting positions of
   objects placed at measured spots; x and y are the mean difference, z a regression on the categories' nominal
   half-heights (slope: ``object_size_scale`` - 1, intercept: the z offset), with t intervals.
3. **Belt** (``belt_ride``): the perceived object velocities, averaged over the objects riding together, give the
   belt speed and its Ornstein-Uhlenbeck fluctuation, fitted with white measurement noise by the exact Gaussian
   likelihood (a Kalman filter); Wald intervals from the Hessian, and a likelihood-ratio test of whether any
   fluctuation is distinguishable from the noise.
4. **Latency and finger servos** (``finger_steps``, ``latency``): latency, finger ``kp``, ``kv`` and force limit
   together by ``mujoco.sysid.optimize``, every candidate rolled out through ``mujoco.rollout``, intervals by
   ``mujoco.sysid.calculate_intervals``.  The simulator's actuator delay holds each command for whole physics
   steps (a cost flat between them, with no gradient); the fit reads one delay buffer with linear interpolation
   instead, which makes the latency continuous, and starts from the best latency of a coarse grid.
5. **Arm joints** (``arm_steps``, ``arm_chirp``): per joint, damping, armature and friction loss by
   ``mujoco.sysid.optimize`` on joint angle and measured torque.
6. **Object mass** (``lift`` minus ``lift_empty``): measured joint torques with minus without the object, matched
   by the simulated difference (linear in the mass), per category.
7. **Object friction** (``push`` minus ``push_empty``): the same for the force of pushing a bar along a bar
   stacked on it.
8. **Object estimator** (``perception_static``, ``perception_moving``, ``perception_occlusion``): the camera's
   calibration (refitting stage 2's offset and size with a rotation), delay, noise growth, dropout, confusion and
   occlusion radius, in closed form or by least squares (``grounding.perception_fit``).  Last, so that every stage
   before predicts with exact perception.  Where ``object_visible`` is logged, the sensing, belt and mass stages
   read an object only when the estimator saw it (a missed object's estimate is an old one, held).

Parameters the logs do not constrain are kept at nominal and listed in ``not_identifiable`` with the reason.
The lab's unmodeled effects (docs/lab.md#effects) bias some of these fits; docs/lab_logs.md says how much.
"""

from __future__ import annotations

import dataclasses
import io
import logging
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from r2s2r_envs.grounding import perception_fit
from r2s2r_envs.grounding.log_checks import check_logs
from r2s2r_envs.grounding.logs import LogError, LogRun, LogSet
from r2s2r_envs.grounding.replay import JointRollout, make_sim_env, simulate_run
from r2s2r_envs.world import constants as C
from r2s2r_envs.world.builder import scene_layout
from r2s2r_envs.world.params import WorldParams, nominal

logger = logging.getLogger(__name__)

SETTLE_STEPS = 20  # control steps (1 s) after reset before objects and robot count as at rest
LATENCY_GRID_S = 0.01
LATENCY_MAX_S = 0.2
PHYSICS_DT = 0.002  # the scene's physics time step, s: the resolution of the actuator delay

#: Noise level field -> observation keys (and, for object velocities, only the linear part).
NOISE_SIGNALS: dict[str, tuple[str, ...]] = {
    "joint_pos_noise": ("arm_qpos", "hand_qpos"),
    "joint_vel_noise": ("arm_qvel", "hand_qvel"),
    "eef_pos_noise": ("eef_pos",),
    "object_pos_noise": ("object_pos",),
    "object_vel_noise": ("object_vel",),
    "arm_torque_noise": ("arm_torque",),
    "finger_current_noise": ("finger_current",),
}

#: Why the fields kept at nominal by design are not fitted.
KEPT_NOMINAL = {
    "arm_kp": "kept at the datasheet value: in joint mode a servo gain error is indistinguishable from a "
    "low-level controller that executes only part of each command (an unmodeled effect, docs/lab.md#effects); "
    "fitting kp would absorb that effect into a parameter that then misleads task-space control",
    "arm_kv": "kept at the datasheet value: confounded with arm_damping (both resist joint velocity) and with the "
    "low-level controller's command gain",
    "arm_force_limit": "kept at the datasheet value: the excitation saturates it only on large steps, where the "
    "limit and the armature trade off; a real team takes it from the drive's datasheet",
}


def inert_fields(world: WorldParams) -> set[str]:
    """Fields whose value has no effect in ``world``, so a grounding needs no estimate of them: the belt's
    fluctuation time when the belt does not fluctuate (``belt_speed_fluctuation`` 0, as identified when no
    fluctuation stands out of the measurement noise)."""
    return {"belt_fluctuation_time"} if world.belt_speed_fluctuation == 0.0 else set()


@dataclasses.dataclass
class Identification:
    """The result of ``identify``.

    Attributes:
        world: Every ``WorldParams`` field: identified ones at their estimate, the rest at nominal.
        intervals: Field -> 95% [low, high] (elementwise lists for vector fields; [value, value] for fields kept
            at nominal, infinite bounds where the data gives none).
        identified: Fields fitted from the logs.
        not_identifiable: Field -> why it was kept at nominal.
        details: Per stage: estimates, method, residuals, runs used.
        wall_time_s: Time ``identify`` took, s.
    """

    world: WorldParams
    intervals: dict[str, list]
    identified: list[str]
    not_identifiable: dict[str, str]
    details: dict[str, Any]
    wall_time_s: float


class _Fit:
    """Accumulates estimates, intervals and reasons while the stages run."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.intervals: dict[str, list] = {}
        self.reasons: dict[str, str] = {}
        self.details: dict[str, Any] = {}

    def set(self, field: str, value: Any, interval: Sequence) -> None:
        self.values[field] = value
        self.intervals[field] = (
            [list(map(float, iv)) for iv in interval] if np.ndim(value) else list(map(float, interval))
        )
        self.reasons.pop(field, None)

    def flag(self, field: str, reason: str) -> None:
        if field not in self.values:
            self.reasons.setdefault(field, reason)  # the first, most specific reason stays

    def world(self, base: WorldParams | None = None) -> WorldParams:
        w = base or nominal()
        values: dict[str, Any] = {k: tuple(v) if np.ndim(v) else float(v) for k, v in self.values.items()}
        return dataclasses.replace(w, **values)


def _settled(run: LogRun, key: str) -> np.ndarray:
    return np.asarray(run.obs[key][SETTLE_STEPS:], dtype=np.float64)


def _chi2_interval(ss: float, dof: int) -> tuple[float, float]:
    from scipy import stats

    if dof <= 0:
        return 0.0, math.inf
    return math.sqrt(ss / stats.chi2.ppf(0.975, dof)), math.sqrt(ss / stats.chi2.ppf(0.025, dof))


def _t(dof: int) -> float:
    from scipy import stats

    return float(stats.t.ppf(0.975, max(dof, 1)))


# --------------------------------------------------------------------------------------------- 1. sensing
def _fit_sensing(runs: list[LogRun], fit: _Fit) -> None:
    if not runs:
        for field in NOISE_SIGNALS:
            fit.flag(field, "no sensing_rest runs in the logs")
        return
    detail = {}
    for field, keys in NOISE_SIGNALS.items():
        ss, dof = 0.0, 0
        present = [k for k in keys if all(k in r.obs for r in runs)]
        if not present:
            fit.flag(field, f"the logs lack the signal(s) {list(keys)}")
            continue
        for run in runs:
            for key in present:
                x = _settled(run, key)
                if key == "object_vel":
                    x = x.reshape(len(x), -1, 6)[:, :, :3].reshape(len(x), -1)
                for rows, block in _visible_blocks(run, key, x):
                    # Remove each channel's mean and linear drift (a slowly settling posture is not noise).
                    t = np.flatnonzero(rows).astype(float)
                    design = np.stack([np.ones_like(t), t - t.mean()], axis=1)
                    coef, *_ = np.linalg.lstsq(design, block, rcond=None)
                    resid = block - design @ coef
                    ss += float(np.sum(resid**2))
                    dof += resid.size - 2 * block.shape[1]
        sigma = math.sqrt(ss / dof)
        fit.set(field, sigma, _chi2_interval(ss, dof))
        detail[field] = {"estimate": sigma, "dof": dof, "signals": present}
    fit.details["sensing"] = {"method": "pooled standard deviation at rest, chi-square interval", **detail}


def _visible_blocks(run: LogRun, key: str, x: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """(rows, x[rows]) blocks of a settled signal that hold fresh measurements: the whole signal, or for object
    keys in logs where the estimator missed an object, each object's seen rows (a held estimate repeats)."""
    every = np.ones(len(x), dtype=bool)
    if not key.startswith("object_") or "object_visible" not in run.obs:
        return [(every, x)]
    seen = np.asarray(run.obs["object_visible"][SETTLE_STEPS:]) > 0.5
    if seen.all():
        return [(every, x)]
    per = x.shape[1] // seen.shape[1]
    return [(seen[:, i], x[seen[:, i], i * per : (i + 1) * per]) for i in range(seen.shape[1]) if seen[:, i].sum() > 2]


# ----------------------------------------------------------------------------- 2. offset and object size
def _rest_differences(runs: list[LogRun], world: WorldParams) -> tuple[np.ndarray, np.ndarray]:
    """Perceived minus predicted (offset-free, unit size) mean resting position per placed object, and each
    object's predicted centre height above the belt (a stacked object stands higher: a longer lever on the
    size scale)."""
    rest = perception_fit.rest_positions(runs, world, SETTLE_STEPS)
    return rest.measured - rest.predicted, rest.heights


def _fit_offset_and_size(runs: list[LogRun], fit: _Fit) -> None:
    if not runs:
        fit.flag("object_pos_offset", "no sensing_rest runs in the logs")
        fit.flag("object_size_scale", "no sensing_rest runs in the logs")
        return
    diffs, heights = _rest_differences(runs, fit.world())
    n = len(diffs)
    offset, low, high = np.zeros(3), np.zeros(3), np.zeros(3)
    for axis in (0, 1):
        d = diffs[:, axis]
        half = _t(n - 1) * d.std(ddof=1) / math.sqrt(n) if n > 1 else math.inf
        offset[axis], low[axis], high[axis] = d.mean(), d.mean() - half, d.mean() + half
    # z: resting height grows with the object's size, so regress on the nominal half-heights.
    design = np.stack([np.ones(n), heights], axis=1)
    coef, *_ = np.linalg.lstsq(design, diffs[:, 2], rcond=None)
    resid = diffs[:, 2] - design @ coef
    dof = n - 2
    spread = np.ptp(heights)
    if dof < 1 or spread < 1e-3:
        fit.flag("object_size_scale", "the placed objects do not span enough heights (needs >= 2 categories)")
        offset[2] = float(np.mean(diffs[:, 2]))
        low[2], high[2] = -math.inf, math.inf
    else:
        s2 = float(resid @ resid) / dof
        cov = s2 * np.linalg.inv(design.T @ design)
        half = _t(dof) * np.sqrt(np.diag(cov))
        offset[2], low[2], high[2] = coef[0], coef[0] - half[0], coef[0] + half[0]
        scale = 1.0 + coef[1]
        fit.set("object_size_scale", float(np.clip(scale, 0.5, 2.0)), (scale - half[1], scale + half[1]))
    fit.set("object_pos_offset", offset.tolist(), list(zip(low, high)))
    fit.details["offset_and_size"] = {
        "method": "perceived minus simulated resting positions; z regressed on the objects' centre heights above "
        "the belt (slope: size scale - 1, intercept: z offset)",
        "objects": n,
        "differences_m": diffs.round(5).tolist(),
    }


# --------------------------------------------------------------------------------------------- 3. belt
def _belt_speed_series(runs: list[LogRun]) -> list[np.ndarray]:
    series = []
    for run in runs:
        run.require(["object_vel", "object_pos"], "the belt speed")
        # Objects that slide with the belt; a ball rolls and follows speed changes only partly.
        riding = [i for i, o in enumerate(run.setup.get("objects", [])) if o["category"] != "ball"]
        if not riding:
            raise LogError(f"run {run.name!r}: belt_ride needs a cube or a bar riding the belt")
        vel = np.asarray(run.obs["object_vel"], dtype=float).reshape(run.steps + 1, -1, 6)[:, riding, 1]
        pos = np.asarray(run.obs["object_pos"], dtype=float).reshape(run.steps + 1, -1, 3)[:, riding]
        on_belt = np.all(pos[:, :, 2] > scene_layout().belt_top - 0.02, axis=1)
        # From the reset on (the belt starts at its nominal speed there); objects riding together share the belt.
        if "object_visible" in run.obs and not np.all(np.asarray(run.obs["object_visible"])[:, riding] > 0.5):
            # A missed object's estimate is held (repeats): average the seen ones; none seen is a gap (NaN).
            seen = (np.asarray(run.obs["object_visible"])[:, riding] > 0.5)[on_belt]
            v = np.where(seen, vel[on_belt], 0.0)
            count = seen.sum(axis=1)
            speed = np.where(count > 0, -v.sum(axis=1) / np.maximum(count, 1), np.nan)
        else:
            speed = -vel[on_belt].mean(axis=1)
        series.append(speed)
    return series


def _ou_nll(theta: np.ndarray, series: list[np.ndarray], dt: float) -> float:
    """Negative log-likelihood of belt speed series under an Ornstein-Uhlenbeck fluctuation plus white
    measurement noise (an exact Kalman filter).  ``theta``: (speed m/s, log relative std, log time s, log noise
    m/s)."""
    v0, sf, tau, sn = theta[0], math.exp(theta[1]), math.exp(theta[2]), math.exp(theta[3])
    a = math.exp(-dt / tau)
    q = (v0 * sf) ** 2 * (1.0 - a * a)
    p0 = 0.0  # the fluctuation starts at zero at reset (in the simulator and the lab alike)
    r = sn * sn
    nll = 0.0
    for y in series:
        x, p = 0.0, p0
        for value in (y - v0).tolist():
            if value != value:  # a gap (no object seen): predict only
                x, p = a * x, a * a * p + q
                continue
            s = p + r
            innovation = value - x
            nll += 0.5 * (math.log(2.0 * math.pi * s) + innovation * innovation / s)
            k = p / s
            x, p = x + k * innovation, (1.0 - k) * p
            x, p = a * x, a * a * p + q
    return nll


def _hessian(f: Callable[[np.ndarray], float], x: np.ndarray, h: float = 1e-3) -> np.ndarray:
    n = len(x)
    hess = np.zeros((n, n))
    for i in range(n):
        for j in range(i, n):
            e_i, e_j = np.eye(n)[i] * h, np.eye(n)[j] * h
            value = (f(x + e_i + e_j) - f(x + e_i - e_j) - f(x - e_i + e_j) + f(x - e_i - e_j)) / (4 * h * h)
            hess[i, j] = hess[j, i] = value
    return hess


def _fit_belt(runs: list[LogRun], fit: _Fit, quick: bool) -> None:
    from scipy.optimize import minimize

    fields = ("belt_speed", "belt_speed_fluctuation", "belt_fluctuation_time")
    if not runs:
        for f in fields:
            fit.flag(f, "no belt_ride runs in the logs")
        return
    dt = runs[0].control_dt
    series = _belt_speed_series(runs)
    allv = np.concatenate(series)
    allv = allv[np.isfinite(allv)]
    v0 = float(allv.mean())
    sd = float(allv.std()) + 1e-9
    # Coordinates of order one: relative speed offset, log relative fluctuation, log time, log noise.
    to_theta = lambda x: np.array([v0 * (1.0 + x[0]), x[1], x[2], x[3]])  # noqa: E731
    nll = lambda x: _ou_nll(to_theta(x), series, dt)  # noqa: E731
    bounds = [(-0.5, 0.5), (math.log(1e-4), math.log(0.5)), (math.log(0.05), math.log(50.0)), (math.log(1e-6), 0.0)]
    starts = [np.array([0.0, math.log(max(sd / v0, 2e-4)), math.log(t0), math.log(sd)]) for t0 in (0.3, 1.5)]
    best = min((minimize(nll, x0, method="L-BFGS-B", bounds=bounds) for x0 in starts), key=lambda r: r.fun)
    x_hat = best.x
    theta = to_theta(x_hat)
    # Without fluctuation: only the speed and the measurement noise (likelihood-ratio test of the fluctuation).
    flat = minimize(
        lambda x: nll(np.array([x[0], math.log(1e-4), 0.0, x[1]])),
        np.array([0.0, math.log(sd)]),
        method="L-BFGS-B",
        bounds=[bounds[0], bounds[3]],
    )
    significant = 2.0 * (flat.fun - best.fun) > 3.84
    hess = _hessian(nll, x_hat)
    try:
        cov = np.linalg.inv(hess)
        se = np.sqrt(np.clip(np.diag(cov), 0.0, np.inf))
        se[0] *= v0  # back to m/s
    except np.linalg.LinAlgError:
        se = np.full(4, np.inf)
    z = 1.959964
    speed = float(theta[0])
    fit.set("belt_speed", speed, (speed - z * se[0], speed + z * se[0]))
    fluct, tau = math.exp(theta[1]), math.exp(theta[2])
    if significant and np.all(np.isfinite(se[1:3])):
        fit.set("belt_speed_fluctuation", fluct, (fluct * math.exp(-z * se[1]), fluct * math.exp(z * se[1])))
        fit.set("belt_fluctuation_time", tau, (tau * math.exp(-z * se[2]), tau * math.exp(z * se[2])))
    else:
        upper = fluct * math.exp(z * se[1]) if np.isfinite(se[1]) else math.inf
        fit.set("belt_speed_fluctuation", 0.0, (0.0, max(upper, 0.0)))
        fit.flag(
            "belt_fluctuation_time",
            "no belt speed fluctuation distinguishable from measurement noise (likelihood-ratio test), so its "
            "time constant is not constrained",
        )
    fit.details["belt"] = {
        "method": "exact Gaussian likelihood (Kalman filter) of the mean perceived object velocity: belt speed, "
        "Ornstein-Uhlenbeck fluctuation and white measurement noise; Wald intervals from the Hessian",
        "runs": len(runs),
        "samples": int(len(allv)),
        "measurement_noise_m_s": math.exp(theta[3]),
        "fluctuation_significant": bool(significant),
    }


# -------------------------------------------------------------------------------- 4./5. joint-mode fits
def _weights(fit: _Fit) -> dict[str, float]:
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


def _replace(field: str) -> Callable[[WorldParams, float], WorldParams]:
    def apply(w: WorldParams, v: float) -> WorldParams:
        changes: dict[str, Any] = {field: v}
        return dataclasses.replace(w, **changes)

    return apply


def _replace_element(field: str, k: int) -> Callable[[WorldParams, float], WorldParams]:
    def apply(w: WorldParams, v: float) -> WorldParams:
        values = list(getattr(w, field))
        values[k] = v
        changes: dict[str, Any] = {field: tuple(values)}
        return dataclasses.replace(w, **changes)

    return apply


def _fit_latency_and_fingers(runs: list[LogRun], fit: _Fit, quick: bool, workers: int) -> None:
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
        "control_latency": (_replace("control_latency"), max(start, 0.005), 0.0, LATENCY_MAX_S),
        "finger_kp": (_replace("finger_kp"), world.finger_kp, 0.2, 40.0),
        "finger_kv": (_replace("finger_kv"), world.finger_kv, 1e-3, 1.0),
        "finger_force_limit": (_replace("finger_force_limit"), world.finger_force_limit, 0.05, 10.0),
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


def _fit_arm(runs: list[LogRun], fit: _Fit, quick: bool, workers: int) -> None:
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
        params = {f"{f}[{j}]": (_replace_element(f, j), values[f][j], *bounds[f]) for f in fields}
        est, ivals, info = _sysid_fit(
            rollouts, world, params, {"arm_qpos": [j], "arm_torque": [j]}, scale, max_iters=2 if quick else 5
        )
        for f in fields:
            name = f"{f}[{j}]"
            values[f][j] = est[name]
            lows[f][j], highs[f][j] = ivals[name]
            world = _replace_element(f, j)(world, est[name])
        per_joint[f"joint{j + 1}"] = {**info, "runs": [r.name for r in mine], "estimates": est}
    for f in fields:
        fit.set(f, values[f], list(zip(lows[f], highs[f])))
    fit.details["arm"] = per_joint


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


def _fit_mass(logs: LogSet, fit: _Fit, quick: bool) -> None:
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
            w1 = _replace_element("object_mass", c)(world, 1.5 * m0)
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
        half = _t(int(n_eff) - 1) * se_reg  # within the runs; the piece-to-piece spread is added below
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
                half = _t(dof) * s_rel * masses[c] / math.sqrt(len(runs_c["per_run_kg"]))
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


def _fit_friction(logs: LogSet, fit: _Fit, quick: bool) -> None:
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
        half = max(half, _t(len(per_run) - 1) * float(np.std(per_run, ddof=1)) / math.sqrt(len(per_run)))
    fit.set("object_friction", mu_hat, (max(mu_hat - half, 0.0), mu_hat + half))
    fit.details["friction"] = {
        "method": "measured joint torques pushing a bar along a bar minus pushing nothing, matched by the "
        "simulated difference over a friction grid (parabolic refinement, profile interval)",
        "grid": list(FRICTION_GRID),
        "sse": sse.round(4).tolist(),
        "runs": [r.name for r, _ in pairs],
        "per_run": per_run,
    }


# --------------------------------------------------------------------------------------- 8. perception
def _fit_perception(logs: LogSet, fit: _Fit) -> None:
    static, moving, occlusion = (logs.by_protocol(p) for p in perception_fit.PERCEPTION_PROTOCOLS)
    if not (static or moving or occlusion):
        for fields in perception_fit.FIELDS_OF.values():
            for field in fields:
                fit.flag(
                    field, "no perception runs (perception_static, perception_moving, perception_occlusion) in the logs"
                )
        return
    rest = logs.by_protocol("sensing_rest") + logs.by_protocol("push")
    lifts: dict[str, LogRun] = {}
    for run in logs.by_protocol("lift"):  # one grasp per category: the hand at the object
        lifts.setdefault(str(run.settings.get("category")), run)
    found = perception_fit.fit_perception(
        static, moving, occlusion, rest, fit.world(), SETTLE_STEPS, lifts=list(lifts.values()) if occlusion else []
    )
    for field, (value, interval) in found.values.items():
        fit.set(field, value, interval)
    for field, reason in found.reasons.items():
        fit.flag(field, reason)
    fit.details["perception"] = {
        "method": "object estimator: calibration field and size by least squares, delay from perceived tracks' "
        "intercepts on the running belt, noise growth, dropout and confusion rates, occlusion radius by "
        "classifying hidden frames (grounding.perception_fit)",
        **found.details,
    }


# --------------------------------------------------------------------------------------------- identify
def identify(logs: LogSet, *, quick: bool = False, workers: int = 1) -> Identification:
    """Fit a ``WorldParams`` to the fitting runs of ``logs`` (the held-out runs are left for validation).

    Args:
        logs: Lab logs (``grounding.logs.read_logs``).
        quick: Fewer optimizer iterations and bootstrap draws (a reduced budget for tests).
        workers: Threads for ``mujoco.rollout``.

    Returns:
        The identified world with 95% intervals, the fields fitted and those kept at nominal with the reason.

    Raises:
        LogError: the logs are not fit for identification (``grounding.log_checks.check_logs``: no fitting runs,
            non-finite values, wrong shapes, missing signals, settings or references; each named with its run
            and stage).
    """
    if not isinstance(logs, LogSet):
        raise TypeError(f"identify needs a LogSet (grounding.logs.read_logs), got {type(logs).__name__}")
    check_logs(logs, validation=False)  # every problem the stages would meet, before any fitting
    start = time.perf_counter()
    fit = _Fit()
    stages = {}

    def stage(name: str, fn: Callable[[], None]) -> None:
        t0 = time.perf_counter()
        fn()
        stages[name] = round(time.perf_counter() - t0, 3)
        logger.info("identify: %s done in %.1f s", name, stages[name])

    rest = logs.by_protocol("sensing_rest")
    stage("sensing", lambda: _fit_sensing(rest, fit))
    # Objects rest untouched in the sensing runs and at the start of the push runs (a bar stacked on a bar).
    stage("offset_and_size", lambda: _fit_offset_and_size(rest + logs.by_protocol("push"), fit))
    stage("belt", lambda: _fit_belt(logs.by_protocol("belt_ride"), fit, quick))
    fingers = logs.by_protocol("finger_steps") + logs.by_protocol("latency")
    if quick and logs.by_protocol("finger_steps"):  # the finger steps alone expose all four
        fingers = logs.by_protocol("finger_steps")
    stage("latency_and_fingers", lambda: _fit_latency_and_fingers(fingers, fit, quick, workers))
    arm = logs.by_protocol("arm_steps") + logs.by_protocol("arm_chirp")
    stage("arm", lambda: _fit_arm(arm, fit, quick, workers))
    stage("mass", lambda: _fit_mass(logs, fit, quick))
    stage("friction", lambda: _fit_friction(logs, fit, quick))
    # Last: every stage before predicts with exact perception (an object the hand holds stays where it is).
    stage("perception", lambda: _fit_perception(logs, fit))

    for field, reason in KEPT_NOMINAL.items():
        fit.flag(field, reason)
    world = fit.world()
    intervals: dict[str, list] = {}
    for field in WorldParams.field_names():
        if field in fit.intervals:
            intervals[field] = fit.intervals[field]
        else:
            value = getattr(world, field)
            intervals[field] = [[v, v] for v in value] if isinstance(value, tuple) else [value, value]
            fit.flag(field, "not exposed by any protocol in the logs")
    fit.details["stage_time_s"] = stages
    return Identification(
        world=world,
        intervals=intervals,
        identified=[f for f in WorldParams.field_names() if f in fit.values],
        not_identifiable={f: r for f, r in fit.reasons.items() if f not in fit.values},
        details=fit.details,
        wall_time_s=time.perf_counter() - start,
    )


__all__ = ["Identification", "identify", "make_sim_env"]
