"""Identify the object estimator's fields (``envs.perception``) from the perception protocols' logs.

A simulator's estimator sees through one camera, the scene camera; ``identify`` calls :func:`fit_perception` last,
after every other stage, so the worlds those stages predict with perceive exactly.  Closed form or least squares
throughout, in this order (each step uses the ones before):

1. **Calibration** (``perception_static`` with ``sensing_rest`` and the push runs' rest): perceived minus
   simulated resting position e = w x (p - c) + o + (s - 1) h e_z, linear least squares in the camera's rotation
   error w (``object_pos_rotation``, about the scene camera's centre c), the offset o (``object_pos_offset``) and
   the size scale s (h: the object's centre height above the belt); t intervals.  The rotation is kept only when a
   Wald test finds it (else the fit is redone without it).
2. **Static noise, orientation noise, dropout, confusion** (``perception_static``, visible frames at rest): the
   pooled scatter about each object's mean (position, and the rotation vector of the orientation error), chi-square
   intervals; missed frames and wrong categories as binomial rates with Clopper-Pearson intervals.
3. **Delay and speed noise** (``perception_moving``): per run, the perceived track along the belt less the placed
   spot and the calibration error, a line in time over the first frames; its intercept is the distance the
   estimate trails the object, so the delay is intercept / speed (the run's own slope), with a t interval over runs.
   The scatter about a quadratic per object and axis, less the static scatter, per unit speed gives
   ``object_pos_noise_speed``.
4. **Occlusion** (``perception_occlusion``, and a grasp per category from ``lift``): the miss distance of the
   logged hand (at the image's time, the delay identified) from the scene camera's line of sight to the object
   (placed, or where the simulation puts it in a lift); ``hand_occlusion_radius`` is the radius that best
   separates hidden from visible frames (dropouts aside), ``object_pos_noise_occlusion`` the maximum-likelihood
   growth of the scatter with closeness in the sweeps (profile-likelihood interval).  A cell whose cameras see
   round the hand (several views) loses an object only in the hand; the radius found then says so.

An estimate whose 95% interval holds the nominal value (0) is reported at nominal, interval kept: a world then
perceives exactly unless the logs show otherwise.  A lab seen through several cameras (docs/lab.md#perception)
fits the one-camera model as well as it can; what it cannot reproduce is left in held-out validation.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from r2s2r_envs.envs.perception import rotation_matrix
from r2s2r_envs.grounding.logs import LogError, LogRun
from r2s2r_envs.grounding.replay import simulate_run
from r2s2r_envs.world import constants as C
from r2s2r_envs.world.builder import build_model, scene_layout
from r2s2r_envs.world.params import PERCEPTION_FIELDS, WorldParams, nominal

PERCEPTION_PROTOCOLS = ("perception_static", "perception_moving", "perception_occlusion")
#: Protocol -> the estimator fields it identifies (what ``fit_perception`` flags when the protocol is missing).
FIELDS_OF = {
    "perception_static": ("object_pos_rotation", "object_quat_noise", "object_dropout", "category_confusion"),
    "perception_moving": ("perception_delay", "object_pos_noise_speed"),
    "perception_occlusion": ("hand_occlusion_radius", "object_pos_noise_occlusion"),
}
RADIUS_MARGIN = 0.003  # widening of the occlusion radius's interval for the hand's measured position, m
NOISE_OCCLUSION_MAX = 0.1  # largest occlusion noise growth considered, m
#: Estimates below these are reported at 0: float32 logs resolve no finer (a noise-free world's scatter).
RESOLUTION = {"object_quat_noise": 1e-4, "object_pos_noise_speed": 1e-4, "object_pos_noise_occlusion": 1e-5}


@functools.lru_cache(maxsize=1)
def scene_camera_position() -> tuple[float, float, float]:
    """Centre of the scene camera, m (world frame): the one camera of a simulator's estimator."""
    pos = build_model(nominal(), 1).camera(C.SCENE_CAMERA).pos
    return float(pos[0]), float(pos[1]), float(pos[2])


def visible(run: LogRun) -> np.ndarray:
    """(T+1, N) bool: which objects the estimator saw at each step (all, in logs without ``object_visible``)."""
    n = np.asarray(run.obs["object_pos"]).shape[1] // 3
    if "object_visible" not in run.obs:
        return np.ones((run.steps + 1, n), dtype=bool)
    return np.asarray(run.obs["object_visible"]) > 0.5


def miss_distance(hand: np.ndarray, obj: np.ndarray, camera: Sequence[float]) -> np.ndarray:
    """Distance of each hand position (T, 3) from the segment camera -> object (3,), m, as the estimator
    measures it."""
    c = np.asarray(camera, dtype=float)
    ray = np.asarray(obj, dtype=float) - c
    to_hand = np.asarray(hand, dtype=float) - c
    t = np.clip(to_hand @ ray / max(float(ray @ ray), 1e-12), 0.0, 1.0)
    return np.linalg.norm(c + t[:, None] * ray - hand, axis=1)


def exact_perception(world: WorldParams) -> WorldParams:
    """``world`` with the estimator's fields at nominal: what it predicts is where the objects are."""
    exact = nominal()
    perfect: dict[str, Any] = {f: getattr(exact, f) for f in PERCEPTION_FIELDS}
    return dataclasses.replace(world, **perfect)


# ----------------------------------------------------------------------------------------------- results
@dataclasses.dataclass
class PerceptionFit:
    """What :func:`fit_perception` found.

    Attributes:
        values: Field -> (estimate, 95% interval: [low, high], per element for vectors).
        reasons: Field -> why it was not identified.
        details: Per step: method, estimates, residuals, runs used.
    """

    values: dict[str, tuple[Any, Any]] = dataclasses.field(default_factory=dict)
    reasons: dict[str, str] = dataclasses.field(default_factory=dict)
    details: dict[str, Any] = dataclasses.field(default_factory=dict)

    def set(self, field: str, value: Any, interval: Any) -> None:
        """Record an estimate; a scalar whose interval holds nominal 0, or below ``RESOLUTION``, is reported
        at 0."""
        if field in PERCEPTION_FIELDS and np.ndim(value) == 0:
            resolution = RESOLUTION.get(field, 0.0)
            low, high = max(float(interval[0]), 0.0), max(float(interval[1]), 0.0)  # the fields are >= 0
            if interval[0] <= 0.0 or value < resolution:
                value, low, high = 0.0, 0.0, max(high, resolution)
            interval = (low, high)
        self.values[field] = (float(value) if np.ndim(value) == 0 else value, interval)


def _t(dof: int) -> float:
    from scipy import stats

    return float(stats.t.ppf(0.975, max(dof, 1)))


def _chi2_sigma(ss: float, dof: int) -> tuple[float, float, float]:
    """Standard deviation from a sum of squares and its 95% chi-square interval."""
    from scipy import stats

    if dof <= 0:
        return 0.0, 0.0, math.inf
    return (
        math.sqrt(ss / dof),
        math.sqrt(ss / stats.chi2.ppf(0.975, dof)),
        math.sqrt(ss / stats.chi2.ppf(0.025, dof)),
    )


def _binomial(k: int, n: int) -> tuple[float, tuple[float, float]]:
    """Rate k / n with its Clopper-Pearson 95% interval."""
    from scipy import stats

    low = float(stats.beta.ppf(0.025, k, n - k + 1)) if k > 0 else 0.0
    high = float(stats.beta.ppf(0.975, k + 1, n - k)) if k < n else 1.0
    return k / n, (low, high)


# ------------------------------------------------------------------------------------------- 1. calibration
@dataclasses.dataclass
class RestPositions:
    """Resting objects: perceived and simulated (exact-perception) mean positions, m, one row per object."""

    measured: np.ndarray
    predicted: np.ndarray
    heights: np.ndarray  # predicted centre height above the belt, m


def rest_window(run: LogRun, settle: int) -> tuple[int, int]:
    """Control steps during which a run's placed objects rest untouched (settings ``rest_steps``, else from
    ``settle`` on)."""
    t0, t1 = run.settings.get("rest_steps", [settle, run.steps + 1])
    return int(t0), int(t1)


def rest_positions(runs: Sequence[LogRun], world: WorldParams, settle: int) -> RestPositions:
    """Mean perceived and predicted resting positions of every placed object of ``runs``, the prediction under
    ``world`` with exact perception, no offset and unit size."""
    base = dataclasses.replace(exact_perception(world), object_pos_offset=(0.0, 0.0, 0.0), object_size_scale=1.0)
    top = scene_layout().belt_top
    measured, predicted = [], []
    for run in runs:
        run.require(["object_pos"], "the perception offset")
        t0, t1 = rest_window(run, settle)
        pred = simulate_run(run, base)
        seen = visible(run)[t0:t1]
        logged = np.asarray(run.obs["object_pos"][t0:t1], dtype=float).reshape(t1 - t0, -1, 3)
        expected = np.asarray(pred["object_pos"][t0:t1], dtype=float).mean(axis=0).reshape(-1, 3)
        for i in range(len(run.setup.get("objects", []))):
            rows = seen[:, i] if seen[:, i].any() else np.ones(len(seen), dtype=bool)
            measured.append(logged[rows, i].mean(axis=0))
            predicted.append(expected[i])
    pred_arr = np.asarray(predicted).reshape(-1, 3)
    return RestPositions(np.asarray(measured).reshape(-1, 3), pred_arr, pred_arr[:, 2] - top)


def _calibration_design(rest: RestPositions, camera: Sequence[float], rotation: bool) -> np.ndarray:
    """Rows (x, y, z of every object) against [w (3, if ``rotation``), o (3), s - 1]."""
    d = rest.predicted - np.asarray(camera, dtype=float)
    n = len(d)
    rows = np.zeros((n, 3, 7))
    # w x d = (wy dz - wz dy, wz dx - wx dz, wx dy - wy dx)
    rows[:, 0, 1], rows[:, 0, 2] = d[:, 2], -d[:, 1]
    rows[:, 1, 2], rows[:, 1, 0] = d[:, 0], -d[:, 2]
    rows[:, 2, 0], rows[:, 2, 1] = d[:, 1], -d[:, 0]
    rows[:, 0, 3] = rows[:, 1, 4] = rows[:, 2, 5] = 1.0
    rows[:, 2, 6] = rest.heights
    design = rows.reshape(3 * n, 7)
    return design if rotation else design[:, 3:]


def fit_calibration(rest: RestPositions, camera: Sequence[float]) -> dict[str, Any]:
    """Least-squares calibration error field (rotation about ``camera``, offset) and size scale.

    Returns:
        ``rotation``, ``offset`` (3 each, m / rad), ``size_scale``, their 95% intervals (``*_interval``), whether the
        rotation was kept (``rotation_found``) and the fit's residual standard deviation (``residual_m``).
    """
    e = (rest.measured - rest.predicted).reshape(-1)
    spread = float(np.ptp(rest.heights)) if len(rest.heights) else 0.0
    out: dict[str, Any] = {"objects": len(rest.measured)}
    for with_rotation in (True, False):
        design = _calibration_design(rest, camera, with_rotation)
        if spread < 1e-3:  # one category: the size scale is not separable from the z offset
            design = design[:, :-1]
        dof = len(e) - design.shape[1]
        if dof < 1:
            raise ValueError(f"the calibration fit needs more placed objects than {design.shape[1] // 3 + 1}")
        coef, *_ = np.linalg.lstsq(design, e, rcond=None)
        resid = e - design @ coef
        s2 = float(resid @ resid) / dof
        cov = s2 * np.linalg.pinv(design.T @ design)
        half = _t(dof) * np.sqrt(np.clip(np.diag(cov), 0.0, None))
        if with_rotation:
            w, cw = coef[:3], cov[:3, :3]
            try:
                wald = float(w @ np.linalg.solve(cw, w)) if s2 > 0 else (math.inf if np.any(w != 0) else 0.0)
            except np.linalg.LinAlgError:
                wald = 0.0
            out["rotation_wald"] = wald
            if wald > 7.815:  # chi-square, 3 degrees of freedom, 95%
                out.update(rotation=coef[:3], rotation_half=half[:3], rotation_found=True)
                coef, half = coef[3:], half[3:]
                break
            continue
        out.update(rotation=np.zeros(3), rotation_half=half[:0], rotation_found=False)
    out["offset"], out["offset_half"] = coef[:3], half[:3]
    out["size_scale"] = 1.0 + float(coef[3]) if len(coef) > 3 else None
    out["size_scale_half"] = float(half[3]) if len(coef) > 3 else None
    out["residual_m"] = math.sqrt(s2)
    return out


def calibration_error(
    points: np.ndarray, rotation: Sequence[float] | np.ndarray, offset: Sequence[float] | np.ndarray
) -> np.ndarray:
    """The simulated estimator's calibration error at ``points`` (n, 3), m: (R - I)(p - c) + o."""
    c = np.asarray(scene_camera_position())
    a = rotation_matrix([float(v) for v in rotation]) - np.eye(3)
    return (np.asarray(points, dtype=float) - c) @ a.T + np.asarray(offset, dtype=float)


# ------------------------------------------------------------------------------- 2. static noise and rates
def _quat_error(q: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Rotation vectors (n, 3) of q * conj(ref) (quaternions w x y z)."""
    w1, v1 = q[:, 0], q[:, 1:]
    w2, v2 = ref[:, 0], -ref[:, 1:]
    w = w1 * w2 - np.sum(v1 * v2, axis=1)
    v = w1[:, None] * v2 + w2[:, None] * v1 + np.cross(v1, v2)
    sign = np.where(w < 0, -1.0, 1.0)
    w, v = w * sign, v * sign[:, None]
    norm = np.linalg.norm(v, axis=1)
    angle = 2.0 * np.arctan2(norm, w)
    scale = np.where(norm > 1e-12, angle / np.maximum(norm, 1e-12), 2.0)
    return v * scale[:, None]


def fit_static(runs: Sequence[LogRun], settle: int) -> dict[str, Any]:
    """Position and orientation scatter at rest, dropout and category confusion rates."""
    ss_pos = ss_rot = 0.0
    dof_pos = dof_rot = 0
    missed = frames = confused = seen_frames = 0
    for run in runs:
        run.require(["object_pos", "object_quat", "object_category"], "the object estimator fit")
        t0, t1 = rest_window(run, settle)
        seen = visible(run)[t0:t1]
        pos = np.asarray(run.obs["object_pos"][t0:t1], dtype=float).reshape(t1 - t0, -1, 3)
        quat = np.asarray(run.obs["object_quat"][t0:t1], dtype=float).reshape(t1 - t0, -1, 4)
        cats = np.asarray(run.obs["object_category"][t0:t1], dtype=float).reshape(t1 - t0, -1, 3).argmax(axis=2)
        for i, obj in enumerate(run.setup.get("objects", [])):
            rows = seen[:, i]
            frames += len(rows)
            missed += int((~rows).sum())
            if rows.sum() < 2:
                continue
            p = pos[rows, i]
            ss_pos += float(np.sum((p - p.mean(axis=0)) ** 2))
            dof_pos += 3 * (len(p) - 1)
            q = quat[rows, i] * np.where(quat[rows, i] @ quat[rows, i][0] < 0, -1.0, 1.0)[:, None]
            mean_q = q.mean(axis=0)
            rv = _quat_error(q, np.tile(mean_q / np.linalg.norm(mean_q), (len(q), 1)))
            ss_rot += float(np.sum(rv**2))
            dof_rot += 3 * (len(q) - 1)
            seen_frames += int(rows.sum())
            confused += int(np.sum(cats[rows, i] != C.CATEGORIES.index(obj["category"])))
    return {
        "pos_noise": _chi2_sigma(ss_pos, dof_pos),
        "quat_noise": _chi2_sigma(ss_rot, dof_rot),
        "dropout": _binomial(missed, frames) if frames else None,
        "confusion": _binomial(confused, seen_frames) if seen_frames else None,
        "frames": frames,
    }


# ----------------------------------------------------------------------------------- 3. delay, speed noise
def fit_moving(
    runs: Sequence[LogRun],
    rotation: Sequence[float] | np.ndarray,
    offset: Sequence[float] | np.ndarray,
    static_sigma: tuple[float, float, float],
    world: WorldParams,
) -> dict[str, Any]:
    """Delay from the perceived tracks' intercepts, speed noise from their scatter (see the module docstring)."""
    delays, speeds = [], []
    se_reg = []
    tracks = []
    for run in runs:
        run.require(["object_pos"], "the perception delay fit")
        seen = visible(run)
        pos = np.asarray(run.obs["object_pos"], dtype=float).reshape(run.steps + 1, -1, 3)
        t = np.arange(run.steps + 1) * run.control_dt
        objects = run.setup.get("objects", [])
        placed = np.array(
            [
                [o["position"][0], o["position"][1], scene_layout().belt_top + _half_height(o["category"])]
                for o in objects
            ]
        )
        bias = calibration_error(placed, rotation, offset)
        t0, t1 = run.settings.get("intercept_steps", [5, 45])  # as excitation.INTERCEPT_STEPS
        ys, ts = [], []
        for i in range(len(objects)):
            rows = np.flatnonzero(seen[t0:t1, i]) + t0
            ys.append(pos[rows, i, 1] - placed[i, 1] - bias[i, 1])
            ts.append(t[rows])
        tracks.append((run, pos, seen, t))
        y, tt = np.concatenate(ys), np.concatenate(ts)
        if len(y) < 4:
            continue
        design = np.stack([np.ones(len(tt)), tt], axis=1)
        coef, *_ = np.linalg.lstsq(design, y, rcond=None)
        resid = y - design @ coef
        speed = -float(coef[1])
        if speed <= 1e-4:
            raise LogError(
                f"run {run.name!r} (perception_moving): the perceived objects do not ride the belt (-y); the protocol "
                "places them on the running belt (set-up 'belt': true)"
            )
        cov = float(resid @ resid) / max(len(y) - 2, 1) * np.linalg.inv(design.T @ design)
        delays.append(float(coef[0]) / speed)
        speeds.append(speed)
        se_reg.append(math.sqrt(cov[0, 0]) / speed)
    if not delays:
        return {}
    delay = float(np.mean(delays))
    # Scatter about the simulated track (at the image time), less a quadratic per axis: the belt's fluctuation
    # is smooth, and what the simulator reproduces of the objects' motion is not perception noise.
    ss, dof = 0.0, 0
    exact = exact_perception(world)
    for run, pos, seen, t in tracks:
        sim = np.asarray(simulate_run(run, exact)["object_pos"], dtype=float)
        sim = _delayed(sim, run.control_dt, max(delay, 0.0)).reshape(pos.shape)
        for i in range(pos.shape[1]):
            every = np.flatnonzero(seen[:, i])
            if len(every) > 4 and i < len(run.setup.get("objects", [])):
                design = np.stack([np.ones(len(every)), t[every], t[every] ** 2], axis=1)
                e = pos[every, i] - sim[every, i]
                coef, *_ = np.linalg.lstsq(design, e, rcond=None)
                ss += float(np.sum((e - design @ coef) ** 2))
                dof += 3 * (len(every) - 3)
    half = _t(len(delays) - 1) * float(np.std(delays, ddof=1)) / math.sqrt(len(delays)) if len(delays) > 1 else math.inf
    half = max(half, 1.96 * math.sqrt(float(np.sum(np.square(se_reg)))) / len(se_reg))
    speed = float(np.mean(speeds))
    moving = _chi2_sigma(ss, dof)
    k = (moving[0] - static_sigma[0]) / speed
    k_low, k_high = (moving[1] - static_sigma[2]) / speed, (moving[2] - static_sigma[1]) / speed
    return {
        "delay": (delay, (delay - half, delay + half)),
        "delay_per_run_s": delays,
        "speed_m_s": speed,
        "moving_noise_m": moving[0],
        "noise_speed": (max(k, 0.0), (k_low, k_high)),
    }


def _half_height(category: str) -> float:
    size = scene_layout().object_half_sizes[category]
    return float(size[0] if category == "ball" else size[2])


# ------------------------------------------------------------------------------------------- 4. occlusion
def _delayed(signal: np.ndarray, dt: float, delay: float) -> np.ndarray:
    """``signal`` (T, k) as it was ``delay`` s earlier: linear interpolation, and before the first row the first
    step's trend carried back (as the estimator's history starts)."""
    t = np.arange(len(signal)) * dt
    shifted = t - delay
    out = np.stack([np.interp(shifted, t, signal[:, j]) for j in range(signal.shape[1])], axis=1)
    early = shifted < 0.0
    if early.any() and len(signal) > 1:
        out[early] = signal[0] + (signal[1] - signal[0]) * (shifted[early, None] / dt)
    return out


def fit_occlusion(
    runs: Sequence[LogRun],
    delay: float,
    size_scale: float,
    static_sigma: float,
    camera: Sequence[float],
    lifts: Sequence[tuple[LogRun, np.ndarray]] = (),
) -> dict[str, Any]:
    """Occlusion radius (best separation of hidden and visible frames) and the noise growth with closeness.

    ``lifts``: lift runs with their object's simulated (exact-perception) positions (T+1, 3): the hand at and
    around a grasped object, where a cell's cameras lose it, classified too."""
    from scipy.optimize import minimize_scalar

    misses, hidden, errors = [], [], []
    for run in runs:
        run.require(["object_pos", "eef_pos", "object_visible"], "the hand occlusion fit")
        obj = run.setup["objects"][0]
        centre = np.array(
            [
                obj["position"][0],
                obj["position"][1],
                scene_layout().belt_top + size_scale * _half_height(obj["category"]),
            ]
        )
        hand = _delayed(np.asarray(run.obs["eef_pos"], dtype=float), run.control_dt, delay)
        m = miss_distance(hand, centre, camera)
        seen = visible(run)[:, 0]
        pos = np.asarray(run.obs["object_pos"], dtype=float)[:, :3]
        misses.append(m)
        hidden.append(~seen)
        errors.append((pos, seen))
    for run, track in lifts:
        hand = _delayed(np.asarray(run.obs["eef_pos"], dtype=float), run.control_dt, delay)
        obj_at = _delayed(np.asarray(track, dtype=float), run.control_dt, delay)
        misses.append(np.array([miss_distance(hand[k : k + 1], obj_at[k], camera)[0] for k in range(len(hand))]))
        hidden.append(~visible(run)[:, 0])
    m, h = np.concatenate(misses), np.concatenate(hidden)
    order = np.argsort(m)
    m_sorted, h_sorted = m[order], h[order]
    # errors(r) for r between consecutive miss distances: visible frames below r plus hidden frames at or above.
    cuts = np.concatenate([[0.0], (m_sorted[:-1] + m_sorted[1:]) / 2.0, [m_sorted[-1] + 1e-3]])
    vis_below = np.concatenate([[0], np.cumsum(~h_sorted)])
    hid_above = int(h_sorted.sum()) - np.concatenate([[0], np.cumsum(h_sorted)])
    wrong = vis_below + hid_above
    best = np.flatnonzero(wrong == wrong.min())
    lo_i, hi_i = int(best[0]), int(best[-1])
    low = float(m_sorted[lo_i - 1]) if lo_i > 0 else 0.0  # the range of radii that classify best
    high = float(m_sorted[hi_i]) if hi_i < len(m_sorted) else float(cuts[-1])
    radius = 0.0 if low == 0.0 else 0.5 * (low + high)
    out: dict[str, Any] = {
        "radius": (radius, (max(low - RADIUS_MARGIN, 0.0), high + RADIUS_MARGIN)),
        "misclassified_frames": int(wrong.min()),
        "frames": len(m),
    }
    if radius <= 0.0:
        return out
    # Scatter about the object's mean where the hand is far (closeness 0), against closeness.
    resid, close = [], []
    for (pos, seen), miss in zip(errors, misses[: len(errors)]):
        closeness = np.clip(2.0 - miss / radius, 0.0, 1.0)
        far = seen & (closeness == 0.0)
        if far.sum() < 2:
            continue
        e = pos[seen] - pos[far].mean(axis=0)
        resid.append(e)
        close.append(np.repeat(closeness[seen, None], 3, axis=1))
    if not resid:
        return out
    e2, c = np.concatenate(resid).ravel() ** 2, np.concatenate(close).ravel()
    if static_sigma <= 0.0 and not np.any(e2[c > 0] > 1e-12):
        out["noise_occlusion"] = (0.0, (0.0, 0.0))
        return out
    floor = max(static_sigma, 1e-5)

    def nll(k: float) -> float:
        s = floor + k * c
        return float(np.sum(np.log(s) + e2 / (2.0 * s * s)))

    best_k = minimize_scalar(nll, bounds=(0.0, NOISE_OCCLUSION_MAX), method="bounded", options={"xatol": 1e-6}).x
    grid = np.linspace(0.0, NOISE_OCCLUSION_MAX, 401)
    profile = np.array([nll(k) for k in grid]) - nll(best_k)
    inside = grid[profile <= 1.92]
    low_k = float(inside.min()) if len(inside) else float(best_k)
    high_k = float(inside.max()) if len(inside) else float(best_k)
    out["noise_occlusion"] = (float(best_k), (min(low_k, best_k), max(high_k, best_k)))
    out["close_samples"] = int(np.sum(c > 0) // 3)
    return out


# ------------------------------------------------------------------------------------------------- all
def fit_perception(
    static: Sequence[LogRun],
    moving: Sequence[LogRun],
    occlusion: Sequence[LogRun],
    rest: Sequence[LogRun],
    world: WorldParams,
    settle: int,
    lifts: Sequence[LogRun] = (),
) -> PerceptionFit:
    """Fit the estimator's fields from the perception runs (fitting split) and ``world`` (every other stage's
    result); ``rest``: further runs with objects resting at measured spots (``sensing_rest``, push), pooled into
    the calibration; ``lifts``: lift runs (with ``object_visible``) whose grasps the occlusion fit classifies too."""
    result = PerceptionFit()
    camera = scene_camera_position()
    for protocol, runs in zip(PERCEPTION_PROTOCOLS, (static, moving, occlusion)):
        if not runs:
            for field in FIELDS_OF[protocol]:
                result.reasons[field] = f"no {protocol} runs in the logs"
    rotation, offset = np.zeros(3), np.asarray(world.object_pos_offset, dtype=float)
    size_scale = world.object_size_scale
    static_sigma = (world.object_pos_noise, world.object_pos_noise, world.object_pos_noise)
    if static:
        cal = fit_calibration(rest_positions(list(static) + list(rest), world, settle), camera)
        rotation, offset = np.asarray(cal["rotation"]), np.asarray(cal["offset"])
        result.values["object_pos_offset"] = (
            offset.tolist(),
            [(float(o - h), float(o + h)) for o, h in zip(offset, cal["offset_half"])],
        )
        if cal["rotation_found"]:
            result.values["object_pos_rotation"] = (
                rotation.tolist(),
                [(float(w - h), float(w + h)) for w, h in zip(rotation, cal["rotation_half"])],
            )
        else:
            result.values["object_pos_rotation"] = ([0.0, 0.0, 0.0], [(0.0, 0.0)] * 3)
        if cal["size_scale"] is not None:
            size_scale = float(np.clip(cal["size_scale"], 0.5, 2.0))
            half = cal["size_scale_half"]
            result.values["object_size_scale"] = (size_scale, (cal["size_scale"] - half, cal["size_scale"] + half))
        stats_ = fit_static(static, settle)
        static_sigma = stats_["pos_noise"]
        result.set("object_quat_noise", stats_["quat_noise"][0], stats_["quat_noise"][1:])
        for field, key in (("object_dropout", "dropout"), ("category_confusion", "confusion")):
            if stats_[key] is not None:
                result.set(field, stats_[key][0], stats_[key][1])
        result.details["calibration"] = {
            "method": "perceived minus simulated resting positions, least squares in the scene camera's rotation "
            "error, the offset and the size scale (Wald test for the rotation); t intervals",
            **{k: np.asarray(v).tolist() if isinstance(v, np.ndarray) else v for k, v in cal.items()},
        }
        result.details["static"] = {
            "pos_noise_m": static_sigma[0],
            "quat_noise_rad": stats_["quat_noise"][0],
            "dropout": stats_["dropout"],
            "confusion": stats_["confusion"],
            "frames": stats_["frames"],
            "runs": [r.name for r in static],
        }
    delay = 0.0
    if moving:
        mv = fit_moving(moving, rotation, offset, static_sigma, world)
        if not mv:
            for field in FIELDS_OF["perception_moving"]:
                result.reasons[field] = "no visible frames in the perception_moving runs"
        else:
            result.set("perception_delay", *mv["delay"])
            delay = float(result.values["perception_delay"][0])
            result.set("object_pos_noise_speed", *mv["noise_speed"])
            result.details["moving"] = {
                "method": "intercept of the perceived track along the belt / speed; scatter about a quadratic less "
                "the static scatter, per unit speed",
                **{k: v for k, v in mv.items() if k not in ("delay", "noise_speed")},
                "runs": [r.name for r in moving],
            }
    if occlusion:
        exact = exact_perception(world)
        tracks = [
            (run, np.asarray(simulate_run(run, exact)["object_pos"], dtype=float)[:, :3])
            for run in lifts
            if "object_visible" in run.obs and "eef_pos" in run.obs
        ]
        oc = fit_occlusion(occlusion, delay, size_scale, static_sigma[0], camera, tracks)
        result.set("hand_occlusion_radius", *oc["radius"])
        if "noise_occlusion" in oc:
            result.set("object_pos_noise_occlusion", *oc["noise_occlusion"])
        elif result.values["hand_occlusion_radius"][0] == 0.0:
            result.reasons["object_pos_noise_occlusion"] = "the hand hides nothing (hand_occlusion_radius 0)"
        else:
            result.reasons["object_pos_noise_occlusion"] = "no visible frames with the hand far from the object"
        result.details["occlusion"] = {
            "method": "radius separating hidden from visible frames by the hand's miss distance from the scene "
            "camera's line of sight (at the image time); noise growth with closeness by maximum likelihood",
            **{k: v for k, v in oc.items() if k not in ("radius", "noise_occlusion")},
            "runs": [r.name for r in occlusion] + [r.name for r, _ in tracks],
        }
    for field in result.values:
        result.reasons.pop(field, None)
    return result
