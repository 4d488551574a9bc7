"""Identification stages of what the sensors and the camera report (``grounding.identify``): 1. sensor noise at
rest, 2. the perception offset and the object size, 3. the belt as the perceived objects ride it, 8. the object
estimator (with ``grounding.perception_fit``)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from r2s2r_envs.grounding import perception_fit
from r2s2r_envs.grounding.identify_common import FitState, t_quantile
from r2s2r_envs.grounding.logs import LogError, LogRun, LogSet
from r2s2r_envs.mappings import check_keys
from r2s2r_envs.world.builder import scene_layout
from r2s2r_envs.world.params import SENSOR_NOISE_FIELDS, WorldParams

SETTLE_STEPS = 20  # control steps (1 s) after reset before objects and robot count as at rest

_SIGNALS: dict[str, tuple[str, ...]] = {
    "joint_pos_noise": ("arm_qpos", "hand_qpos"),
    "joint_vel_noise": ("arm_qvel", "hand_qvel"),
    "eef_pos_noise": ("eef_pos",),
    "object_pos_noise": ("object_pos",),
    "object_vel_noise": ("object_vel",),
    "arm_torque_noise": ("arm_torque",),
    "finger_current_noise": ("finger_current",),
}
# A new sensor noise field must get its signals here (an import-time error, caught by the tests).
check_keys(
    _SIGNALS,
    SENSOR_NOISE_FIELDS,
    what="sensor noise field",
    where="grounding.identify_sensing",
    required=SENSOR_NOISE_FIELDS,
    error=RuntimeError,
)
#: Noise level field -> observation keys (and, for object velocities, only the linear part), one entry per
#: ``world.params.SENSOR_NOISE_FIELDS`` in its order.
NOISE_SIGNALS: dict[str, tuple[str, ...]] = {field: _SIGNALS[field] for field in SENSOR_NOISE_FIELDS}


def _settled(run: LogRun, key: str) -> np.ndarray:
    return np.asarray(run.obs[key][SETTLE_STEPS:], dtype=np.float64)


def _chi2_interval(ss: float, dof: int) -> tuple[float, float]:
    from scipy import stats

    if dof <= 0:
        return 0.0, math.inf
    return math.sqrt(ss / stats.chi2.ppf(0.975, dof)), math.sqrt(ss / stats.chi2.ppf(0.025, dof))


# --------------------------------------------------------------------------------------------- 1. sensing
def fit_sensing(runs: list[LogRun], fit: FitState) -> None:
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


def fit_offset_and_size(runs: list[LogRun], fit: FitState) -> None:
    if not runs:
        fit.flag("object_pos_offset", "no sensing_rest runs in the logs")
        fit.flag("object_size_scale", "no sensing_rest runs in the logs")
        return
    diffs, heights = _rest_differences(runs, fit.world())
    n = len(diffs)
    offset, low, high = np.zeros(3), np.zeros(3), np.zeros(3)
    for axis in (0, 1):
        d = diffs[:, axis]
        half = t_quantile(n - 1) * d.std(ddof=1) / math.sqrt(n) if n > 1 else math.inf
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
        half = t_quantile(dof) * np.sqrt(np.diag(cov))
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


def fit_belt(runs: list[LogRun], fit: FitState, quick: bool) -> None:
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


# --------------------------------------------------------------------------------------- 8. perception
def fit_object_estimator(logs: LogSet, fit: FitState) -> None:
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
