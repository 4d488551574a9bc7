"""How alike two demonstration sets move: per-trait comparison and a classifier two-sample test.

Every demonstration is segmented into grasps (``behavior.segments``); each grasp gives motion traits, and each
episode the mean of its grasps' traits (docs/behavior.md#metrics):

| trait | meaning | unit |
|---|---|---|
| ``reach_duration`` | reach start (end of the hand's last pause) to closure onset | s |
| ``peak_time`` | time of the reach's speed peak, normalized by its duration | 1 |
| ``submovements`` | speed peaks of the reach (prominence >= 10% of the highest) | count |
| ``peak_speed`` | highest TCP speed of the reach | m/s |
| ``log_jerk`` | log dimensionless squared jerk of the reach, TCP path low-passed at 3 Hz (higher: rougher) | 1 |
| ``path_ratio`` | reach path length / straight-line distance, in the object's frame | 1 |
| ``approach_z``, ``approach_y`` | last 0.4 s of the approach in the object's frame (unit vector's z, y) | 1 |
| ``follow_speed`` | TCP velocity along the belt (-y) over the last 1 s before closing | m/s |
| ``arrival_to_grasp`` | object enters the workspace (y < 0.3 m) to closure onset | s |
| ``closure_spread`` | latest minus earliest digit closure onset | s |
| ``thumb_lead`` | mean finger onset minus thumb onset (order: > 0 thumb first) | s |
| ``closure_time`` | closure onset to lift start | s |
| ``release_height`` | TCP height when the fingers open over the bin | m |

The object's frame has its origin at the object's perceived centre and axes parallel to the world's (the belt
runs along -y). Paths are compared by dynamic time warping (``dtaidistance``): the distance between two sets is
the mean, over both directions, of each reach path's DTW distance to its nearest neighbour in the other set (0
for identical sets). The classifier two-sample test is the cross-validated ROC AUC of a logistic regression on the
per-episode traits (0.5: the sets cannot be told apart; 1: always).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy.signal import find_peaks

from r2s2r_envs.behavior.segments import DIGITS, DT, DemoSet, DemoTrace, Grasp, load_demos
from r2s2r_envs.extras import require
from r2s2r_envs.mappings import check_keys

#: Per-episode traits, in feature order (see the module docstring).
TRAITS: tuple[str, ...] = (
    "reach_duration",
    "peak_time",
    "submovements",
    "peak_speed",
    "log_jerk",
    "path_ratio",
    "approach_z",
    "approach_y",
    "follow_speed",
    "arrival_to_grasp",
    "closure_spread",
    "thumb_lead",
    "closure_time",
    "release_height",
)
TRAIT_UNITS: dict[str, str] = {
    "reach_duration": "s",
    "peak_time": "1",
    "submovements": "count",
    "peak_speed": "m/s",
    "log_jerk": "1",
    "path_ratio": "1",
    "approach_z": "1",
    "approach_y": "1",
    "follow_speed": "m/s",
    "arrival_to_grasp": "s",
    "closure_spread": "s",
    "thumb_lead": "s",
    "closure_time": "s",
    "release_height": "m",
}
#: Traits of the operator's strategy and timing: those a world's sensor noise and actuator response shape as much
#: as the demonstrator (``peak_speed``, ``log_jerk``, ``release_height``) left out (docs/behavior.md#metrics).
STRATEGY_TRAITS: tuple[str, ...] = tuple(t for t in TRAITS if t not in ("peak_speed", "log_jerk", "release_height"))
#: Length of the final approach whose direction is measured, steps (0.4 s).
_APPROACH_STEPS = 8
#: Length of the window before closing in which tracking along the belt is measured, steps (1 s).
_FOLLOW_STEPS = 20
#: Shortest reach that has a speed profile, steps.
_MIN_REACH = 4


def grasp_traits(trace: DemoTrace, g: Grasp) -> dict[str, float]:
    """The traits of one grasp (NaN where a trait is undefined, e.g. a release that never happened)."""
    out = dict.fromkeys(TRAITS, math.nan)
    s, e = g.reach_start, g.close
    rel = trace.eef_smooth - trace.objects[:, g.obj]
    if e - s >= _MIN_REACH:
        speed = trace.speed[s : e + 1]
        peak = float(speed.max())
        out["reach_duration"] = (e - s) * DT
        out["peak_time"] = float(np.argmax(speed)) / (e - s)
        peaks, _ = find_peaks(np.concatenate([[0.0], speed, [0.0]]), prominence=0.1 * max(peak, 1e-9))
        out["submovements"] = float(len(peaks))
        out["peak_speed"] = peak
        # On the 3 Hz low-passed path: differentiating three times amplifies the TCP sensor's noise. With the 7-step
        # Savitzky-Golay smoothing alone, 1 mm of white noise (the default lab's) raised a noise-free set's
        # log_jerk by 1.5 (the trait measured the sensor, not the hand); through the low-pass by 0.25.
        out["log_jerk"] = log_dimensionless_jerk(trace.eef_lowpass[s : e + 1])
        path = rel[s : e + 1]
        length = float(np.linalg.norm(np.diff(path, axis=0), axis=1).sum())
        out["path_ratio"] = length / max(float(np.linalg.norm(path[-1] - path[0])), 1e-3)
    a = max(e - _APPROACH_STEPS, 0)
    d = rel[e] - rel[a]
    norm = float(np.linalg.norm(d))
    if norm > 1e-3:
        out["approach_z"], out["approach_y"] = float(d[2] / norm), float(d[1] / norm)
    f = max(e - _FOLLOW_STEPS, 0)
    if e > f:
        out["follow_speed"] = float(-trace.eef_vel[f:e, 1].mean())
    if g.arrival <= e:
        out["arrival_to_grasp"] = (e - g.arrival) * DT
    onsets = g.digit_onsets
    if onsets:
        times = [onsets[d] for d in DIGITS if d in onsets]
        out["closure_spread"] = (max(times) - min(times)) * DT
        fingers = [onsets[d] for d in DIGITS[:3] if d in onsets]
        if "th" in onsets and fingers:
            out["thumb_lead"] = (float(np.mean(fingers)) - onsets["th"]) * DT
    out["closure_time"] = (g.lift - g.close) * DT
    if g.release is not None:
        out["release_height"] = float(trace.eef_smooth[g.release, 2])
    return out


def log_dimensionless_jerk(path: np.ndarray) -> float:
    """Log dimensionless squared jerk of a (T, 3) path sampled at ``DT`` (a minimum-jerk reach scores about 6)."""
    if len(path) < 5:
        return math.nan
    jerk = np.diff(path, n=3, axis=0) / DT**3
    duration = (len(path) - 1) * DT
    length = float(np.linalg.norm(np.diff(path, axis=0), axis=1).sum())
    if length < 1e-4:
        return math.nan
    cost = float((jerk**2).sum() * DT) * duration**5 / length**2
    return math.log(max(cost, 1e-12))


def episode_features(demos: DemoSet) -> np.ndarray:
    """(episodes, len(TRAITS)) mean traits over each episode's grasps (NaN for an episode without one)."""
    rows = []
    for trace in demos.traces:
        traits = [grasp_traits(trace, g) for g in trace.grasps]
        if traits:
            table = np.array([[t[k] for k in TRAITS] for t in traits], dtype=float)
            with np.errstate(all="ignore"):
                rows.append(_nanmean(table))
        else:
            rows.append(np.full(len(TRAITS), math.nan))
    return np.array(rows, dtype=float).reshape(-1, len(TRAITS))


def _nanmean(table: np.ndarray) -> np.ndarray:
    counts = np.sum(~np.isnan(table), axis=0)
    sums = np.nansum(table, axis=0)
    return np.where(counts > 0, sums / np.maximum(counts, 1), math.nan)


def reach_paths(demos: DemoSet) -> list[np.ndarray]:
    """Every grasp's reach path (reach start to closure onset) in the object's frame, (T, 3) float64, m."""
    paths = []
    for trace, g in demos.grasps:
        s, e = g.reach_start, g.close
        if e - s >= 2:
            paths.append(np.ascontiguousarray(trace.eef_smooth[s : e + 1] - trace.objects[s : e + 1, g.obj]))
    return paths


def dtw_set_distance(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> dict[str, float]:
    """DTW distance between two sets of (T, 3) paths, m.

    Returns:
        ``distance``: mean over both directions of each path's DTW distance to its nearest neighbour in the
        other set (0 for identical sets); ``within_a``, ``within_b``: the same within one set, each path's nearest
        other path (the scale of the set's own variability; NaN for fewer than two paths).
    """
    if not a or not b:
        return {"distance": math.nan, "within_a": math.nan, "within_b": math.nan}
    matrix = _dtw_matrix(list(a) + list(b))
    na = len(a)
    ab = matrix[:na, na:]
    distance = 0.5 * (float(ab.min(axis=1).mean()) + float(ab.min(axis=0).mean()))
    return {"distance": distance, "within_a": _within(matrix[:na, :na]), "within_b": _within(matrix[na:, na:])}


def _within(m: np.ndarray) -> float:
    if len(m) < 2:
        return math.nan
    m = m.copy()
    np.fill_diagonal(m, np.inf)
    return float(m.min(axis=1).mean())


def _dtw_matrix(paths: list[np.ndarray]) -> np.ndarray:
    from dtaidistance import dtw_ndim

    n = len(paths)
    condensed = dtw_ndim.distance_matrix_fast(paths, ndim=3, compact=True, parallel=True)
    full = np.zeros((n, n))
    iu = np.triu_indices(n, k=1)
    full[iu] = condensed
    return full + full.T


def classifier_auc(
    features_a: np.ndarray, features_b: np.ndarray, *, folds: int = 5, repeats: int = 5, seed: int = 0
) -> float:
    """Cross-validated ROC AUC of a logistic regression telling set A's episodes from set B's.

    Identical episodes in both sets always fall into the same fold. Missing traits are imputed with the training
    fold's median; traits missing everywhere are dropped. The AUC is pooled over the out-of-fold predictions and
    averaged over ``repeats`` shuffles. 0.5 means the sets cannot be told apart from these traits, 1.0 that they
    always can.

    Raises:
        ValueError: fewer than ``folds`` episodes in either set.
    """
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import StratifiedGroupKFold, cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    n_a, n_b = len(features_a), len(features_b)
    if min(n_a, n_b) < folds:
        raise ValueError(f"the classifier test needs at least {folds} episodes per set, got {n_a} and {n_b}")
    x = np.vstack([features_a, features_b])
    keep = ~np.all(np.isnan(x), axis=0)
    x = x[:, keep]
    y = np.r_[np.zeros(n_a), np.ones(n_b)]
    if x.shape[1] == 0:
        return 0.5
    # Identical episodes (the same demo in both sets) share a group, so they are never split between training and
    # test: a test episode whose twin was trained on with the other label would push the AUC below 0.5.
    _, groups = np.unique(np.nan_to_num(x.round(9), nan=1e300), axis=0, return_inverse=True)
    aucs = []
    for r in range(repeats):
        model = make_pipeline(SimpleImputer(strategy="median"), StandardScaler(), LogisticRegression(C=1.0))
        cv = StratifiedGroupKFold(n_splits=folds, shuffle=True, random_state=seed + r)
        p = cross_val_predict(model, x, y, cv=cv, groups=groups.ravel(), method="predict_proba")[:, 1]
        aucs.append(roc_auc_score(y, p))
    return float(np.mean(aucs))


@dataclasses.dataclass(frozen=True, kw_only=True)
class TraitComparison:
    """One trait in both sets: mean and standard deviation per set, standardized mean difference (Cohen's d),
    and the two-sample Kolmogorov-Smirnov statistic (0: same distribution, 1: disjoint)."""

    trait: str
    unit: str
    mean_a: float
    std_a: float
    mean_b: float
    std_b: float
    effect_size: float
    ks: float


@dataclasses.dataclass(frozen=True, kw_only=True)
class BehaviorComparison:
    """The comparison of two demonstration sets (``compare``)."""

    a: dict[str, Any]
    b: dict[str, Any]
    traits: list[TraitComparison]
    dtw: dict[str, float]
    auc: float
    classifier_traits: list[str]
    wall_time_s: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable form (NaN as null)."""
        return _clean(dataclasses.asdict(self))

    def table(self) -> str:
        """A plain-text table for the terminal."""
        lines = [
            f"A: {self.a['path']} ({self.a['episodes']} episodes, {self.a['grasps']} grasps, {self.a['domain']})",
            f"B: {self.b['path']} ({self.b['episodes']} episodes, {self.b['grasps']} grasps, {self.b['domain']})",
            f"{'trait':<18}{'unit':>6}{'A mean':>10}{'A std':>9}{'B mean':>10}{'B std':>9}{'d':>7}{'KS':>6}",
        ]
        for t in self.traits:
            lines.append(
                f"{t.trait:<18}{t.unit:>6}{t.mean_a:>10.3f}{t.std_a:>9.3f}{t.mean_b:>10.3f}{t.std_b:>9.3f}"
                f"{t.effect_size:>7.2f}{t.ks:>6.2f}"
            )
        d = self.dtw
        lines.append(
            f"DTW of reach paths in the object's frame: {d['distance']:.3f} m "
            f"(within A {d['within_a']:.3f}, within B {d['within_b']:.3f})"
        )
        which = "all traits" if len(self.classifier_traits) == len(TRAITS) else ", ".join(self.classifier_traits)
        lines.append(
            f"classifier two-sample AUC: {self.auc:.3f} (0.5 = indistinguishable, 1 = always told apart; {which})"
        )
        return "\n".join(lines)


def compare(
    a: str | Path | DemoSet,
    b: str | Path | DemoSet,
    *,
    seed: int = 0,
    classifier_traits: Sequence[str] | None = None,
) -> BehaviorComparison:
    """Compares the motion of two demonstration sets, per trait, by DTW of reach paths and by a classifier.

    Args:
        a, b: dataset files (``r2s2r generate`` output) or sets already loaded with ``segments.load_demos``.
        seed: seed of the classifier's cross-validation shuffles.
        classifier_traits: the traits the classifier sees (default: all of ``TRAITS``). ``STRATEGY_TRAITS`` leaves
            out those a world's sensing and actuators shape as much as the demonstrator does, for comparing
            demonstrations made in different worlds (docs/behavior.md#metrics).

    Raises:
        FileNotFoundError, r2s2r_envs.datasets.DatasetError, segments.BehaviorDataError: an unusable file.
        ValueError: a set with fewer than 5 episodes, or an unknown trait (the message lists them).
    """
    import time

    require("sklearn", "dtaidistance", what="comparing demonstrations (DTW and a classifier)")
    chosen = list(TRAITS if classifier_traits is None else classifier_traits)
    check_keys(chosen, TRAITS, what="classifier trait", error=ValueError)
    if not chosen:
        raise ValueError(f"no classifier trait given; valid (at least one): {list(TRAITS)}")
    columns = [TRAITS.index(t) for t in chosen]
    start = time.perf_counter()
    sets = [x if isinstance(x, DemoSet) else load_demos(x) for x in (a, b)]
    feats = [episode_features(s) for s in sets]
    traits = []
    for k, name in enumerate(TRAITS):
        va, vb = (f[:, k][~np.isnan(f[:, k])] for f in feats)
        traits.append(_trait(name, va, vb))
    dtw = dtw_set_distance(reach_paths(sets[0]), reach_paths(sets[1]))
    auc = classifier_auc(feats[0][:, columns], feats[1][:, columns], seed=seed)
    return BehaviorComparison(
        a=_describe(sets[0]),
        b=_describe(sets[1]),
        traits=traits,
        dtw=dtw,
        auc=auc,
        classifier_traits=chosen,
        wall_time_s=time.perf_counter() - start,
    )


def _trait(name: str, va: np.ndarray, vb: np.ndarray) -> TraitComparison:
    from scipy.stats import ks_2samp

    if len(va) == 0 or len(vb) == 0:
        nan = math.nan
        return TraitComparison(
            trait=name,
            unit=TRAIT_UNITS[name],
            mean_a=float(va.mean()) if len(va) else nan,
            std_a=float(va.std()) if len(va) else nan,
            mean_b=float(vb.mean()) if len(vb) else nan,
            std_b=float(vb.std()) if len(vb) else nan,
            effect_size=nan,
            ks=nan,
        )
    pooled = math.sqrt(0.5 * (va.var() + vb.var()))
    diff = float(vb.mean() - va.mean())
    effect = diff / pooled if pooled > 1e-12 else (0.0 if abs(diff) < 1e-12 else math.copysign(math.inf, diff))
    return TraitComparison(
        trait=name,
        unit=TRAIT_UNITS[name],
        mean_a=float(va.mean()),
        std_a=float(va.std()),
        mean_b=float(vb.mean()),
        std_b=float(vb.std()),
        effect_size=float(effect),
        ks=float(ks_2samp(va, vb).statistic),
    )


def _describe(s: DemoSet) -> dict[str, Any]:
    return {
        "path": str(s.path),
        "env_id": s.env_id,
        "domain": s.domain,
        "content_sha256": s.content_hash,
        "episodes": len(s.traces),
        "successes": sum(t.success for t in s.traces),
        "grasps": len(s.grasps),
    }


def _clean(value: Any) -> Any:
    if isinstance(value, float):
        return None if not math.isfinite(value) else value
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def plot(a: str | Path | DemoSet, b: str | Path | DemoSet, out_dir: str | Path) -> list[Path]:
    """Draws the two sets side by side: reach speed profiles (time-normalized) and reach paths in the object's
    frame (side view y-z and top view x-y). Writes ``speed_profiles.png`` and ``paths.png`` into ``out_dir``.

    Returns:
        The files written.
    """
    require("matplotlib", what="the behavior comparison's plots")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sets = [x if isinstance(x, DemoSet) else load_demos(x) for x in (a, b)]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    names = [f"A: {Path(s.path).name}" for s in sets[:1]] + [f"B: {Path(s.path).name}" for s in sets[1:]]

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, s, name in zip(axes, sets, names):
        for trace, g in s.grasps:
            if g.close - g.reach_start < _MIN_REACH:
                continue
            v = trace.speed[g.reach_start : g.close + 1]
            ax.plot(np.linspace(0.0, 1.0, len(v)), v, lw=0.6, alpha=0.5)
        ax.set_title(name)
        ax.set_xlabel("reach time (normalized)")
    axes[0].set_ylabel("TCP speed (m/s)")
    fig.tight_layout()
    speed_file = out / "speed_profiles.png"
    fig.savefig(speed_file, dpi=110)
    plt.close(fig)

    fig, axes = plt.subplots(2, 2, figsize=(11, 8), sharex="row", sharey="row")
    for col, (s, name) in enumerate(zip(sets, names)):
        for p in reach_paths(s):
            axes[0, col].plot(p[:, 1], p[:, 2], lw=0.6, alpha=0.5)
            axes[1, col].plot(p[:, 0], p[:, 1], lw=0.6, alpha=0.5)
        axes[0, col].set_title(f"{name}: side view")
        axes[0, col].set_xlabel("y rel. object (m)")
        axes[0, col].set_ylabel("z rel. object (m)")
        axes[1, col].set_title(f"{name}: top view")
        axes[1, col].set_xlabel("x rel. object (m)")
        axes[1, col].set_ylabel("y rel. object (m)")
    fig.tight_layout()
    path_file = out / "paths.png"
    fig.savefig(path_file, dpi=110)
    plt.close(fig)
    return [speed_file, path_file]
