"""Held-out validation of a grounding: how well the identified world predicts lab runs it was not fitted to.

Three parts, all from what a real team has (the logs and the lab's outcomes; docs/grounding.md#validation):

1. **Prediction error per signal group.**  Each held-out run's commands are replayed open loop in the nominal
   and in the grounded world (:func:`r2s2r_envs.grounding.replay.simulate_run`); the normalized RMSE of the
   predicted against the logged observations is reported per signal group:

   | group | signal | samples |
   |---|---|---|
   | arm joints | ``arm_qpos`` | every step |
   | fingers | ``hand_qpos`` | every step |
   | objects on the belt | ``object_pos`` | steps at which the logged object rests on the belt |
   | held objects | ``object_pos`` | steps at which the logged object is lifted near the hand |

   NRMSE = sqrt(SSE / SST): the squared error summed over the group's samples and channels, over the logged
   signal's variation about its per-channel mean (0: perfect; 1: no better than predicting the mean).  The
   reduction is ``100 * (1 - grounded / nominal)`` percent.
2. **Unmodeled effects the logs show**: what is left in the grounded residual that no world parameter explains:
   its white-noise level per group (from first differences) against the sensor noise the grounded world
   models, its mean (a bias), a residual delay of the arm (the time shift that best aligns prediction and log)
   and the jitter of the observation timestamps.
3. **Planner success** (optional, slow): the scripted planner over the fixed protocol's first episodes in the
   nominal sim, the grounded sim and the lab, with Wilson intervals, failure causes and how much of the
   nominal sim's gap to the lab the grounding closes.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from r2s2r_envs.behavior import make_demonstrator
from r2s2r_envs.world import constants as C
from r2s2r_envs.world.builder import scene_layout
from r2s2r_envs.world.params import WorldParams, nominal

#: The signal groups of the NRMSE table, in table order.
SIGNAL_GROUPS = ("arm joints", "fingers", "objects on the belt", "held objects")
#: Observation key each group reads.
GROUP_KEYS = {
    "arm joints": "arm_qpos",
    "fingers": "hand_qpos",
    "objects on the belt": "object_pos",
    "held objects": "object_pos",
}
#: Sensor-noise field of the world that models each group's measurement noise.
GROUP_NOISE_FIELDS = {
    "arm joints": "joint_pos_noise",
    "fingers": "joint_pos_noise",
    "objects on the belt": "object_pos_noise",
    "held objects": "object_pos_noise",
}
#: Unit of each group's signal.
GROUP_UNITS = {"arm joints": "rad", "fingers": "rad", "objects on the belt": "m", "held objects": "m"}
# Classification margins of logged object positions, m: an object rests on the belt within REST_MARGIN of its
# resting height and BELT_MARGIN of the belt's edges; it is held when lifted more than LIFT_MARGIN above its
# resting height and within HELD_RADIUS of the TCP.
REST_MARGIN = 0.02
BELT_MARGIN = 0.02
LIFT_MARGIN = 0.02
HELD_RADIUS = 0.12
#: Largest time shift tried when estimating the arm's residual delay, control steps.
MAX_DELAY_STEPS = 4

#: ``simulate(run, world) -> {key: (T+1, ...) array}``: the noise-free prediction of a logged run.
Simulate = Callable[[Any, WorldParams], dict[str, np.ndarray]]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Validation:
    """The validation of one grounding.

    Attributes:
        nrmse: Group -> ``{"nominal", "grounded", "reduction_percent", "samples"}`` (None where the held-out runs
            have no sample of the group).
        unmodeled: What the grounded residual shows (see :func:`unmodeled_effects`), or None.
        planner: The planner success table (see :func:`planner_success`), or None when not computed.
        runs: Names of the held-out runs used.
        predictions: Run name -> ``{"nominal": obs, "grounded": obs}`` (for plots; not written to files).
    """

    nrmse: dict[str, dict[str, Any]]
    unmodeled: dict[str, Any] | None = None
    planner: dict[str, Any] | None = None
    runs: tuple[str, ...] = ()
    predictions: Mapping[str, Mapping[str, dict[str, np.ndarray]]] = dataclasses.field(
        default_factory=dict, repr=False, compare=False
    )

    def to_dict(self) -> dict[str, Any]:
        """The ``validation`` entry of a grounding file."""
        return {
            "nrmse": self.nrmse,
            "planner": self.planner,
            "unmodeled": self.unmodeled,
            "heldout_runs": list(self.runs),
        }

    def with_planner(self, planner: dict[str, Any] | None) -> Validation:
        return dataclasses.replace(self, planner=planner)

    def format(self) -> str:
        """The tables as text (what ``r2s2r sysid`` prints)."""
        parts = [format_nrmse_table(self.nrmse, len(self.runs))]
        if self.unmodeled is not None:
            parts.append(format_unmodeled(self.unmodeled))
        if self.planner is not None:
            parts.append(format_planner_table(self.planner))
        return "\n\n".join(parts)


# ---------------------------------------------------------------------- signal groups
def group_masks(obs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per group, a boolean mask over the group key's samples, classified from the *logged* observations (objects
    only where the estimator saw them, when ``object_visible`` is logged).

    Returns:
        Group -> mask: (T+1,) for the joint groups; (T+1, N) over objects for the object groups.  Groups whose key
        the run lacks are left out.
    """
    masks: dict[str, np.ndarray] = {}
    for group in ("arm joints", "fingers"):
        key = GROUP_KEYS[group]
        if key in obs:
            masks[group] = np.ones(len(obs[key]), dtype=bool)
    if "object_pos" not in obs:
        return masks
    layout = scene_layout()
    pos = np.asarray(obs["object_pos"], dtype=float).reshape(len(obs["object_pos"]), -1, 3)
    n = pos.shape[1]
    heights = np.array([_half_height(layout, c) for c in C.CATEGORIES])
    if "object_category" in obs:
        onehot = np.asarray(obs["object_category"], dtype=float).reshape(len(pos), n, 3)
        half = onehot @ heights
    else:
        half = np.full(pos.shape[:2], heights.max())
    rest = layout.belt_top + half
    z = pos[..., 2]
    on_belt = (np.abs(pos[..., 0] - layout.belt_center_x) <= layout.belt_half_width + BELT_MARGIN) & (
        np.abs(z - rest) <= REST_MARGIN
    )
    lifted = z > rest + LIFT_MARGIN
    if "eef_pos" in obs:
        eef = np.asarray(obs["eef_pos"], dtype=float)[:, None, :]
        lifted &= np.linalg.norm(pos - eef, axis=-1) <= HELD_RADIUS
    if "object_visible" in obs:  # a missed object's estimate is a held old one: no measurement of it
        seen = np.asarray(obs["object_visible"]) > 0.5
        on_belt &= seen
        lifted &= seen
    masks["objects on the belt"] = on_belt
    masks["held objects"] = lifted
    return masks


def _half_height(layout: Any, category: str) -> float:
    size = layout.object_half_sizes[category]
    return float(size[0] if category == "ball" else size[2])


def _group_samples(group: str, mask: np.ndarray, array: np.ndarray) -> np.ndarray:
    """The group's samples of ``array`` as (samples, channels)."""
    a = np.asarray(array, dtype=float)
    if mask.ndim == 1:
        return a[mask].reshape(int(mask.sum()), int(np.prod(a.shape[1:])))
    return a.reshape(len(a), mask.shape[1], 3)[mask]


# ---------------------------------------------------------------------- NRMSE
def nrmse(predicted: Sequence[np.ndarray], logged: Sequence[np.ndarray], noise_std: float = 0.0) -> float | None:
    """sqrt(SSE / SST) over lists of (samples, channels) arrays pooled together (None without samples).

    SST sums the logged samples' squared deviations from their per-channel means over all arrays.  A logged
    signal without variation gives ``inf`` unless the prediction is exact (then 0).  With ``noise_std`` > 0 the
    expected contribution of white measurement noise of that standard deviation (samples x channels x
    noise_std^2) is taken out of both sums: the error *beyond the sensor noise*, which no noise-free prediction
    can remove.
    """
    logged = [np.asarray(x, dtype=float) for x in logged if len(x)]
    predicted = [np.asarray(x, dtype=float) for x in predicted if len(x)]
    if not logged:
        return None
    y = np.concatenate(logged)
    p = np.concatenate(predicted)
    floor = y.size * float(noise_std) ** 2
    sse = max(float(np.sum((p - y) ** 2)) - floor, 0.0)
    sst = max(float(np.sum((y - y.mean(axis=0)) ** 2)) - floor, 0.0)
    if sst == 0.0:
        return 0.0 if sse == 0.0 else math.inf
    return math.sqrt(sse / sst)


def reduction_percent(nominal_error: float | None, grounded_error: float | None) -> float | None:
    """``100 * (1 - grounded / nominal)``: how much of the nominal error the grounding removes."""
    if nominal_error is None or grounded_error is None or not nominal_error > 0 or math.isinf(nominal_error):
        return None
    return 100.0 * (1.0 - grounded_error / nominal_error)


def validate(
    runs: Sequence[Any],
    grounded: WorldParams,
    *,
    simulate: Simulate | None = None,
    baseline: WorldParams | None = None,
) -> Validation:
    """NRMSE per signal group of the nominal and the grounded world on held-out runs, and the unmodeled effects.

    Args:
        runs: Held-out ``LogRun``s (:mod:`r2s2r_envs.grounding.logs`), e.g. ``read_logs(dir).heldout``.
        grounded: The identified world.
        simulate: ``simulate(run, world)`` predictions (default :func:`r2s2r_envs.grounding.replay.simulate_run`).
        baseline: The world to compare against (default: the nominal world).

    Raises:
        ValueError: no runs.
    """
    if not runs:
        raise ValueError("validation needs at least one held-out run; the log directory has none (split 'heldout')")
    if simulate is None:
        from r2s2r_envs.grounding.replay import simulate_run

        simulate = simulate_run
    baseline = baseline if baseline is not None else nominal()
    pooled: dict[str, dict[str, list[np.ndarray]]] = {
        g: {"logged": [], "nominal": [], "grounded": []} for g in SIGNAL_GROUPS
    }
    predictions: dict[str, dict[str, dict[str, np.ndarray]]] = {}
    for run in runs:
        pred = {"nominal": simulate(run, baseline), "grounded": simulate(run, grounded)}
        predictions[run.name] = pred
        for group, mask in group_masks(run.obs).items():
            key = GROUP_KEYS[group]
            pooled[group]["logged"].append(_group_samples(group, mask, run.obs[key]))
            for which in ("nominal", "grounded"):
                pooled[group][which].append(_group_samples(group, mask, pred[which][key]))
    table: dict[str, dict[str, Any]] = {}
    for group in SIGNAL_GROUPS:
        p = pooled[group]
        samples = int(sum(len(x) for x in p["logged"]))
        e_nom = nrmse(p["nominal"], p["logged"])
        e_gnd = nrmse(p["grounded"], p["logged"])
        # The same noise floor for both worlds: the grounded world's identified noise level of that sensor.
        noise = float(getattr(grounded, GROUP_NOISE_FIELDS[group]))
        b_nom = nrmse(p["nominal"], p["logged"], noise)
        b_gnd = nrmse(p["grounded"], p["logged"], noise)
        table[group] = {
            "nominal": e_nom,
            "grounded": e_gnd,
            "reduction_percent": reduction_percent(e_nom, e_gnd),
            "samples": samples,
            "beyond_noise": {
                "noise_std": noise,
                "nominal": b_nom,
                "grounded": b_gnd,
                "reduction_percent": reduction_percent(b_nom, b_gnd),
            },
        }
    unmodeled = unmodeled_effects(runs, {n: p["grounded"] for n, p in predictions.items()}, grounded)
    return Validation(nrmse=table, unmodeled=unmodeled, runs=tuple(r.name for r in runs), predictions=predictions)


# ---------------------------------------------------------------------- unmodeled effects
def unmodeled_effects(
    runs: Sequence[Any], predictions: Mapping[str, Mapping[str, np.ndarray]], grounded: WorldParams
) -> dict[str, Any]:
    """What the grounded residual (logged minus predicted) of the held-out runs shows.

    Returns:
        ``residual`` per group: ``noise`` (white-noise standard deviation of the residual, estimated from its
        first differences as std(diff) / sqrt(2), in the group's unit), ``modeled_noise`` (the grounded world's
        noise field for that sensor), ``unmodeled_noise`` (sqrt of the excess variance, 0 when the model covers
        it), ``bias`` (mean residual per channel); ``residual_delay_s`` (the shift of the arm's prediction that
        best matches the logs, s, positive: the lab lags the grounded sim; sub-step by parabolic interpolation)
        and ``timestamp_jitter_s`` (standard deviation and largest deviation of observation intervals from their
        median, s).
    """
    residual: dict[str, dict[str, Any]] = {}
    diffs: dict[str, list[np.ndarray]] = {g: [] for g in SIGNAL_GROUPS}
    levels: dict[str, list[np.ndarray]] = {g: [] for g in SIGNAL_GROUPS}
    for run in runs:
        pred = predictions[run.name]
        for group, mask in group_masks(run.obs).items():
            key = GROUP_KEYS[group]
            r = np.asarray(run.obs[key], dtype=float) - np.asarray(pred[key], dtype=float)
            levels[group].append(_group_samples(group, mask, r))
            # First differences only between consecutive samples that both belong to the group.
            if mask.ndim == 1:
                both = mask[1:] & mask[:-1]
                d = np.diff(r, axis=0)[both]
            else:
                both = mask[1:] & mask[:-1]
                d = np.diff(r.reshape(len(r), mask.shape[1], 3), axis=0)[both]
            diffs[group].append(d.reshape(len(d), 3 if mask.ndim > 1 else r.shape[1]))
    for group in SIGNAL_GROUPS:
        if not levels[group] or not sum(len(x) for x in levels[group]) or not sum(len(x) for x in diffs[group]):
            continue
        d = np.concatenate(diffs[group])
        noise = float(np.sqrt(np.mean(d**2) / 2.0))
        modeled = float(getattr(grounded, GROUP_NOISE_FIELDS[group]))
        bias = np.concatenate(levels[group]).mean(axis=0)
        residual[group] = {
            "noise": noise,
            "modeled_noise": modeled,
            "unmodeled_noise": math.sqrt(max(noise**2 - modeled**2, 0.0)),
            "bias": [float(b) for b in bias[:3]] if group in ("objects on the belt", "held objects") else None,
            "rms": float(np.sqrt(np.mean(np.concatenate(levels[group]) ** 2))),
            "unit": GROUP_UNITS[group],
        }
    return {
        "residual": residual,
        "residual_delay_s": residual_delay(runs, predictions),
        "timestamp_jitter_s": timestamp_jitter(runs),
    }


def residual_delay(
    runs: Sequence[Any], predictions: Mapping[str, Mapping[str, np.ndarray]], key: str = "arm_qpos"
) -> float | None:
    """The time shift of the predicted ``key`` that best matches the logs, s (positive: the logs lag).

    Tries shifts of -``MAX_DELAY_STEPS``..``MAX_DELAY_STEPS`` control steps over all runs together and refines
    the best by a parabola through its neighbours.  None without a moving signal.
    """
    shifts = range(-MAX_DELAY_STEPS, MAX_DELAY_STEPS + 1)
    sse = np.zeros(len(shifts))
    dts = []
    moving = False
    for run in runs:
        if key not in run.obs:
            continue
        y = np.asarray(run.obs[key], dtype=float)
        p = np.asarray(predictions[run.name][key], dtype=float)
        if len(y) <= 2 * MAX_DELAY_STEPS + 1:
            continue
        moving = moving or bool(np.ptp(y, axis=0).max() > 1e-3)
        dts.append(float(np.median(np.diff(run.timestamps))))
        core = slice(MAX_DELAY_STEPS, len(y) - MAX_DELAY_STEPS)
        for j, k in enumerate(shifts):
            # A shift k > 0 compares the log at t with the prediction at t - k: the lab lagging by k steps.
            shifted = p[MAX_DELAY_STEPS - k : len(p) - MAX_DELAY_STEPS - k]
            sse[j] += float(np.sum((y[core] - shifted) ** 2))
    if not dts or not moving:
        return None
    j = int(np.argmin(sse))
    offset = 0.0
    if 0 < j < len(sse) - 1:
        a, b, c = sse[j - 1], sse[j], sse[j + 1]
        denominator = a - 2.0 * b + c
        if denominator > 0:
            offset = 0.5 * (a - c) / denominator
    return float((shifts[j] + offset) * float(np.median(dts)))


def timestamp_jitter(runs: Sequence[Any]) -> dict[str, float] | None:
    """Standard deviation and largest absolute deviation of observation intervals from their median, s."""
    intervals = [np.diff(np.asarray(r.timestamps, dtype=float)) for r in runs if len(r.timestamps) > 1]
    if not intervals:
        return None
    all_intervals = np.concatenate(intervals)
    deviation = all_intervals - np.median(all_intervals)
    return {
        "median_interval": float(np.median(all_intervals)),
        "std": float(np.std(deviation)),
        "max_abs": float(np.max(np.abs(deviation))),
    }


# ---------------------------------------------------------------------- planner success
def planner_success(
    grounded: WorldParams,
    *,
    lab: Any = None,
    episodes: int = 100,
    base_seed: int | None = None,
    workers: int = 1,
    progress: bool = False,
) -> dict[str, Any]:
    """The scripted planner's success in the nominal sim, the grounded sim and the lab, on the same episodes.

    Args:
        grounded: The identified world.
        lab: The lab to compare with (``PickSort-Real-v0``'s ``lab`` argument: a shipped name or a file);
            None: the default lab.
        episodes: Episodes per env (the fixed protocol's first ``episodes``).
        base_seed: Base seed (default: the fixed protocol's ``EVALUATION_BASE_SEED``).
        workers: Worker processes per evaluation.
        progress: Show progress bars.

    Returns:
        ``rows`` (``nominal``, ``grounded``, ``lab``: success rate, Wilson 95% interval, failure causes, sort
        accuracy), ``gap`` (nominal and grounded success minus the lab's, points, and the share of the nominal
        gap the grounding closes, percent), ``episodes``, ``base_seed``, the lab's identity.
    """
    from r2s2r_envs.evaluation.protocol import EVALUATION_BASE_SEED, evaluate

    seed = EVALUATION_BASE_SEED if base_seed is None else int(base_seed)
    planner = functools.partial(make_demonstrator, name="scripted")  # the lab's own demonstrator is a person
    envs: dict[str, tuple[str, dict[str, Any]]] = {
        "nominal": ("PickSort-Ungrounded-v0", {}),
        "grounded": ("PickSort-Ungrounded-v0", {"world": grounded.to_dict()}),
        "lab": ("PickSort-Real-v0", {} if lab is None else {"lab": str(lab)}),
    }
    rows: dict[str, dict[str, Any]] = {}
    lab_identity = None
    for name, (env_id, kwargs) in envs.items():
        result = evaluate(
            env_id, planner, episodes=episodes, base_seed=seed, env_kwargs=kwargs, workers=workers, progress=progress
        )
        s = result.summary
        rows[name] = {
            "env_id": env_id,
            "success_rate": s["success_rate"],
            "success_rate_ci95": list(s["success_rate_ci95"]),
            "sort_accuracy": s["sort_accuracy"],
            "failure_causes": dict(s["failure_causes"]),
        }
        if name == "lab":
            lab_identity = result.provenance.get("lab")
    lab_rate = rows["lab"]["success_rate"]
    gap_nominal = 100.0 * (rows["nominal"]["success_rate"] - lab_rate)
    gap_grounded = 100.0 * (rows["grounded"]["success_rate"] - lab_rate)
    closed = None if gap_nominal == 0 else 100.0 * (1.0 - abs(gap_grounded) / abs(gap_nominal))
    return {
        "episodes": int(episodes),
        "base_seed": seed,
        "demonstrator": "scripted",
        "lab": lab_identity,
        "rows": rows,
        "gap": {"nominal_points": gap_nominal, "grounded_points": gap_grounded, "closed_percent": closed},
    }


# ---------------------------------------------------------------------- text
def _num(value: float | None, fmt: str = ".3f") -> str:
    if value is None:
        return "n/a"
    return "inf" if math.isinf(value) else format(value, fmt)


def format_nrmse_table(table: Mapping[str, Mapping[str, Any]], n_runs: int | None = None) -> str:
    """The NRMSE table as text."""
    runs = f" over {n_runs} held-out runs" if n_runs is not None else ""
    lines = [
        f"Held-out prediction error{runs} (NRMSE = sqrt(SSE/SST); 0 perfect, 1 = predicting the mean)",
        f"  {'signal group':22s} {'nominal':>9s} {'grounded':>9s} {'reduction':>10s} {'samples':>8s}   "
        "beyond the sensor noise: nominal, grounded, reduction",
    ]
    for group, row, beyond in nrmse_rows(table):
        lines.append(
            f"  {group:22s} {_num(row['nominal']):>9s} {_num(row['grounded']):>9s} "
            f"{percent_text(row['reduction_percent']):>10s} {row['samples']:>8d}   "
            f"{_num(beyond.get('nominal')):>9s} {_num(beyond.get('grounded')):>9s} "
            f"{percent_text(beyond.get('reduction_percent')):>10s}"
        )
    return "\n".join(lines)


def nrmse_rows(table: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, Mapping[str, Any], Mapping[str, Any]]]:
    """``(group, row, its beyond-noise part or {})`` of each signal group the NRMSE table has, in
    :data:`SIGNAL_GROUPS` order: the rows of its text (:func:`format_nrmse_table`) and HTML (the report) forms."""
    rows = [(group, table.get(group)) for group in SIGNAL_GROUPS]
    return [(group, row, row.get("beyond_noise") or {}) for group, row in rows if row is not None]


def percent_text(value: float | None) -> str:
    """A percentage to the unit (``"42%"``), ``"n/a"`` for ``None``."""
    return "n/a" if value is None else f"{value:.0f}%"


def format_unmodeled(unmodeled: Mapping[str, Any]) -> str:
    """The unmodeled effects as text."""
    lines = ["Left after grounding (held-out residual: logged minus grounded prediction)"]
    for group, r in unmodeled.get("residual", {}).items():
        unit = r["unit"]
        bias = "" if r.get("bias") is None else f", mean {[round(b * 1000, 1) for b in r['bias']]} m{unit}"
        lines.append(
            f"  {group:22s} noise {_num(r['noise'], '.2g')} {unit} (modeled {_num(r['modeled_noise'], '.2g')}, "
            f"unmodeled {_num(r['unmodeled_noise'], '.2g')}), rms {_num(r['rms'], '.2g')} {unit}{bias}"
        )
    delay = unmodeled.get("residual_delay_s")
    lines.append(f"  residual delay of the arm: {'n/a' if delay is None else f'{delay * 1000:.1f} ms'}")
    jitter = unmodeled.get("timestamp_jitter_s")
    if jitter is not None:
        lines.append(
            f"  timestamp jitter: std {jitter['std'] * 1000:.2f} ms, largest {jitter['max_abs'] * 1000:.2f} ms "
            f"(interval {jitter['median_interval'] * 1000:.1f} ms)"
        )
    return "\n".join(lines)


def format_planner_table(planner: Mapping[str, Any]) -> str:
    """The planner success table as text."""
    lines = [
        f"Scripted planner, {planner['episodes']} episodes (base seed {planner['base_seed']}), Wilson 95% intervals",
        f"  {'world':10s} {'success':>8s} {'95% CI':>14s}  failure causes",
    ]
    for name, row in planner["rows"].items():
        low, high = row["success_rate_ci95"]
        causes = ", ".join(f"{k} {v}" for k, v in row["failure_causes"].items() if v) or "none"
        lines.append(f"  {name:10s} {row['success_rate']:>8.0%} {f'{low:.0%}-{high:.0%}':>14s}  {causes}")
    gap = planner["gap"]
    closed = percent_text(gap["closed_percent"])
    lines.append(
        f"  gap to the lab: nominal {gap['nominal_points']:+.0f} points, grounded {gap['grounded_points']:+.0f} "
        f"points ({closed} of the nominal gap closed)"
    )
    return "\n".join(lines)


__all__ = [
    "GROUP_KEYS",
    "SIGNAL_GROUPS",
    "Validation",
    "format_nrmse_table",
    "format_planner_table",
    "format_unmodeled",
    "group_masks",
    "nrmse",
    "nrmse_rows",
    "percent_text",
    "planner_success",
    "reduction_percent",
    "residual_delay",
    "timestamp_jitter",
    "unmodeled_effects",
    "validate",
]
