"""The ablation's analysis: the four-variant table, the effect of each grounding axis with bootstrap intervals, the
interaction, the real_fraction sweep and the mixture curves; written as Markdown, JSON and PNG plots.

Statistics (docs/ablation.md, "Analysis"):

- A **cell** is a (method, variant) pair: its value is the mean over its training seeds of the mean over the
  protocol's episodes, for episode success (every object sorted) and for per-object sort accuracy.
- The 2 x 2 design gives, for a metric ``m`` with cells U, W, B, F (Ungrounded, WorldGrounded, BehaviorGrounded,
  FullyGrounded): the **world effect** ``((W - U) + (F - B)) / 2``, the **behavior effect** ``((B - U) + (F - W)) / 2``
  and the **interaction** ``(F - B) - (W - U)`` (= ``(F - W) - (B - U)``: how much more one axis adds when the other
  is grounded; negative when behavior grounding matters most with the nominal world). "All methods" averages each
  effect over the methods. The **findings** read those intervals as sentences: each axis helps, hurts or is
  unresolved, which adds more, and whether behavior grounding matters more on the nominal world than on the
  identified one (a negative interaction).
- **Where policies fail**: per object in the order the belt brings them, the share sorted (in the lab and in the
  policy's own variant), the share of second objects sorted after the first was, and the **transfer gap**, a
  policy's lab sort accuracy minus its sort accuracy in its own simulated variant on the same protocol episodes:
  near zero, the sim-to-lab difference is not what limits the policy, and no grounding of the sim can show much.
- **95% intervals** (since interval method 2, ``report["intervals"]``) are t-intervals of the paired, seed-level
  design (:mod:`r2s2r_envs.evaluation.intervals`): a contrast of cells is one ``(seeds, episodes)`` matrix (rows
  paired by training seed, columns the shared protocol episodes), its variance has a seed, an episode and a residual
  part, and the t quantile has Satterthwaite's degrees of freedom. An effect is pooled over methods only when a
  heterogeneity test does not reject (p >= 0.10); the findings' verdicts use Holm-adjusted p-values over every
  finding of the report; every table carries its minimum detectable difference (80% power, two-sided 5%).
  Reports without ``intervals`` used method 1, the crossed percentile bootstrap (:func:`bootstrap_contrast`), whose
  intervals were too wide for differences and too narrow for cell means at few seeds
  (experiments/interval-coverage/README.md).

Everything here reads finished task results from the store; nothing trains or evaluates.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from r2s2r_envs.ablation.design import (
    LAB_ENV_ID,
    REAL_ONLY,
    SINGLE_DOMAIN_METHOD,
    VARIANTS,
    AblationDesign,
    Task,
)
from r2s2r_envs.ablation.store import Store, write_json_atomic
from r2s2r_envs.evaluation import intervals
from r2s2r_envs.safe_json import plain_json

METRICS: tuple[str, ...] = ("success", "sort_accuracy")
#: Coverage bins with fewer visited states are left out of the mixture plot (the report's table lists them all).
MIN_BIN_STATES = 10
METRIC_NAMES = {"success": "episode success", "sort_accuracy": "sort accuracy"}
#: The published figures of the grounding study PickSort is modelled on (docs/concepts.md#findings): success on its
#: real robot, real-only and fully grounded co-training, the axes' effects in points averaged over configurations,
#: and whether behavior grounding mattered mainly where world grounding was imperfect.
STUDY: dict[str, Any] = {
    "real_only": 0.52,
    "fully_grounded": 0.86,
    "world": 0.18,
    "behavior": 0.10,
    "behavior_more_with_nominal_world": "yes",
}
#: Effects of the 2 x 2 design, as weights over the cells (U, W, B, F).
EFFECTS: dict[str, dict[str, float]] = {
    "world": {"Ungrounded": -0.5, "WorldGrounded": 0.5, "BehaviorGrounded": -0.5, "FullyGrounded": 0.5},
    "behavior": {"Ungrounded": -0.5, "WorldGrounded": -0.5, "BehaviorGrounded": 0.5, "FullyGrounded": 0.5},
    "interaction": {"Ungrounded": 1.0, "WorldGrounded": -1.0, "BehaviorGrounded": -1.0, "FullyGrounded": 1.0},
    "world, nominal behavior (W - U)": {"Ungrounded": -1.0, "WorldGrounded": 1.0},
    "world, grounded behavior (F - B)": {"BehaviorGrounded": -1.0, "FullyGrounded": 1.0},
    "behavior, nominal world (B - U)": {"Ungrounded": -1.0, "BehaviorGrounded": 1.0},
    "behavior, grounded world (F - W)": {"WorldGrounded": -1.0, "FullyGrounded": 1.0},
    # world effect minus behavior effect: U and F cancel, W - B remains.
    "world minus behavior": {"WorldGrounded": 1.0, "BehaviorGrounded": -1.0},
}
#: The effects the findings read (each a family member of the Holm correction).
FINDING_EFFECTS: tuple[str, ...] = ("world", "behavior", "interaction", "world minus behavior")
#: An effect is pooled over methods only when the heterogeneity test's p-value is at least this.
HETEROGENEITY_ALPHA = 0.10
#: A finding is a verdict (helps / hurts) when its Holm-adjusted p-value is below this.
FINDINGS_ALPHA = 0.05
#: What the report says of its intervals (``report["intervals"]``); reports without it used method 1.
INTERVALS: dict[str, Any] = {
    "version": intervals.METHOD_VERSION,
    "method": intervals.METHOD,
    "confidence": 0.95,
    "pooling": f"over methods only when the heterogeneity test gives p >= {HETEROGENEITY_ALPHA}",
    "multiplicity": f"Holm over every finding of the report, verdict at adjusted p < {FINDINGS_ALPHA}",
    "power": "minimum detectable differences at 80% power, two-sided 5%",
}
#: How reports written before interval method 2 are described.
OLD_INTERVALS = (
    "interval method 1: crossed percentile bootstrap (seeds resampled per cell, one shared episode resample); "
    "superseded, see experiments/interval-coverage/README.md"
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class EvalRun:
    """One policy's evaluation in one env (one training seed).

    Attributes:
        method: training method.
        variant: grounding variant of its sim data (``None``: real only).
        real_fraction: its real_fraction.
        seed: training seed.
        env: ``"lab"`` or ``"sim"`` (its own variant).
        success: ``(episodes,)`` 1 when every object was sorted at the end.
        sort_accuracy: ``(episodes,)`` share of objects sorted.
        failure_causes: episodes per first failure cause.
        object_sorted: ``(episodes, objects)`` 1 where the episode's i-th object (in the order the belt brings
            them) was sorted.
    """

    method: str
    variant: str | None
    real_fraction: float
    seed: int
    env: str
    success: np.ndarray
    sort_accuracy: np.ndarray
    failure_causes: Mapping[str, int]
    object_sorted: np.ndarray


# ---------------------------------------------------------------------- result files
def _results(results: Sequence[Any]) -> list[Any]:
    """EvaluationResults as given, result files (``str`` / ``os.PathLike``) read and checked."""
    from r2s2r_envs.evaluation import EvaluationResult

    return [r if isinstance(r, EvaluationResult) else EvaluationResult.from_json(Path(r).read_text()) for r in results]


def result_matrices(results: Sequence[Any]) -> dict[str, np.ndarray]:
    """``(results, episodes)`` matrices of episode ``success`` (1 when every object was sorted at the end) and
    ``sort_accuracy`` over the nominal episodes, one row per result in the order given: with one result per
    training seed, the cells that :func:`bootstrap_contrast` takes.

    Args:
        results: :class:`~r2s2r_envs.evaluation.EvaluationResult` objects, or paths of result files (read and
            checked with ``EvaluationResult.from_json``).

    Raises:
        ValueError: no results, or results of different numbers of episodes.
    """
    read = _results(results)
    if not read:
        raise ValueError("result_matrices needs at least one result")
    records = [nominal_records(r) for r in read]
    episodes = {len(r) for r in records}
    if len(episodes) > 1:
        raise ValueError(f"results of different numbers of episodes {sorted(episodes)} make no matrix")
    return {
        "success": np.array([[float(e.is_success) for e in r] for r in records]),
        "sort_accuracy": np.array([[float(e.sort_accuracy) for e in r] for r in records]),
    }


def nominal_records(result: Any) -> tuple[Any, ...]:
    """The episodes the tables read: a result's ``nominal`` condition (every episode of a nominal-only result)."""
    return tuple(result.condition_records().get("nominal", ()))


def failure_counts(results: Sequence[Any]) -> dict[str, int]:
    """Episodes per first failure cause over every episode of ``results`` (as :func:`result_matrices` takes them),
    most frequent first; ties in the order the causes first occur; causes that never occur left out."""
    counts: dict[str, int] = {}
    for result in _results(results):
        for e in nominal_records(result):
            if e.failure_cause:
                counts[e.failure_cause] = counts.get(e.failure_cause, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def load_runs(tasks: Sequence[Task], store: Store) -> list[EvalRun]:
    """Every finished evaluation of the design."""
    from r2s2r_envs.ablation.tasks import read_result

    runs = []
    for task in tasks:
        if task.kind != "eval" or not store.is_done("eval", task.key):
            continue
        result = read_result(store, task.key)
        values = result_matrices([result])
        p = task.config["policy"]
        runs.append(
            EvalRun(
                method=p["method"],
                variant=p["variant"],
                real_fraction=float(p["real_fraction"]),
                seed=int(p["seed"]),
                env="lab" if task.config["env_id"] == LAB_ENV_ID else "sim",
                success=values["success"][0],
                sort_accuracy=values["sort_accuracy"][0],
                failure_causes=dict(result.condition_summaries["nominal"]["failure_causes"]),
                object_sorted=np.array(
                    [[o == "sorted" for o in r.object_outcomes] for r in nominal_records(result)], float
                ),
            )
        )
    return runs


# ---------------------------------------------------------------------- statistics
def cell_matrix(runs: Sequence[EvalRun], metric: str) -> np.ndarray:
    """``(seeds, episodes)`` values of one cell's runs, ordered by seed."""
    runs = sorted(runs, key=lambda r: r.seed)
    return np.stack([getattr(r, metric) for r in runs])


def bootstrap_contrast(
    cells: Mapping[Any, np.ndarray],
    weights: Mapping[Any, float],
    *,
    replicates: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """A weighted sum of cell means with its 95% percentile bootstrap interval over seeds and episodes: interval
    method 1, which reports before method 2 used (kept to read and reproduce them; :func:`contrast` is the
    report's method now). It has no small-sample correction, and counts episode noise twice in a difference of
    cells (each cell's seed resample carries it again): experiments/interval-coverage/README.md.

    Args:
        cells: per cell, a ``(seeds, episodes)`` matrix. Cells with the same number of episodes share the
            episode resampling (paired: the same protocol episodes); seeds are resampled per cell.
        weights: the contrast, e.g. ``{"FullyGrounded": 1, "Ungrounded": -1}``; cells without weight are ignored.
        replicates: bootstrap replicates.
        seed: seed of the bootstrap's random generator.

    Returns:
        ``estimate`` (the contrast of the cell means), ``ci95`` ``[low, high]``, ``replicates``, and ``n_seeds``,
        ``n_episodes`` per cell; ``None`` values when a weighted cell is missing.
    """
    used = {k: w for k, w in weights.items() if w != 0}
    if any(k not in cells for k in used):
        return {
            "estimate": None,
            "ci95": None,
            "replicates": replicates,
            "missing": sorted(map(str, set(used) - set(cells))),
        }
    rng = np.random.default_rng(seed)
    estimate = float(sum(w * cells[k].mean() for k, w in used.items()))
    episode_draws: dict[int, np.ndarray] = {}
    total = np.zeros(replicates)
    for k, w in used.items():
        x = np.asarray(cells[k], dtype=np.float64)
        n_seeds, n_episodes = x.shape
        if n_episodes not in episode_draws:
            episode_draws[n_episodes] = rng.integers(0, n_episodes, size=(replicates, n_episodes))
        ep = episode_draws[n_episodes]
        seeds = rng.integers(0, n_seeds, size=(replicates, n_seeds))
        picked = x[seeds]  # (B, S, E)
        picked = np.take_along_axis(picked, np.broadcast_to(ep[:, None, :], picked.shape), axis=2)
        total += w * picked.mean(axis=(1, 2))
    low, high = np.percentile(total, [2.5, 97.5])
    return {
        "estimate": estimate,
        "ci95": [float(low), float(high)],
        "replicates": replicates,
        "n_seeds": {str(k): int(cells[k].shape[0]) for k in used},
        "n_episodes": {str(k): int(cells[k].shape[1]) for k in used},
    }


def contrast(cells: Mapping[Any, np.ndarray], weights: Mapping[Any, float]) -> dict[str, Any]:
    """A weighted sum of cell means with its 95% t-interval of the paired, seed-level design (interval method 2,
    :func:`r2s2r_envs.evaluation.intervals.contrast_interval`).

    Args:
        cells: per cell, a ``(seeds, episodes)`` matrix, rows in training-seed order; cells with the same number of
            seeds are paired by seed, cells with the same number of episodes share them.
        weights: the contrast, e.g. ``{"FullyGrounded": 1, "Ungrounded": -1}``; cells without weight are ignored.

    Returns:
        ``estimate``, ``ci95`` ``[low, high]``, ``se``, ``df``, ``p_value`` (of "the contrast is zero"), ``mdd``
        (the minimum detectable contrast, 80% power, two-sided 5%), ``n_seeds``, ``n_episodes``, ``paired_seeds``,
        ``seed_noise`` (False with one seed: episode noise only), ``method``; ``estimate`` and ``ci95`` ``None``
        with ``missing`` when a weighted cell is missing.
    """
    used = {k: w for k, w in weights.items() if w != 0}
    if any(k not in cells for k in used):
        return {"estimate": None, "ci95": None, "missing": sorted(map(str, set(used) - set(cells)))}
    return intervals.contrast_interval({k: cells[k] for k in used}, used).to_dict()


def effects(cells_by_method: Mapping[str, Mapping[str, np.ndarray]]) -> dict[str, dict[str, Any]]:
    """Every effect of :data:`EFFECTS` per method and, with several methods, pooled over them (``"all methods"``)
    when the heterogeneity test allows it (p >= :data:`HETEROGENEITY_ALPHA`); otherwise ``"all methods"`` has no
    estimate and says why (``withheld``). Every ``"all methods"`` entry carries its ``heterogeneity`` test.

    Args:
        cells_by_method: ``{method: {variant: (seeds, episodes) matrix}}`` for one metric.
    """
    out: dict[str, dict[str, Any]] = {}
    methods = list(cells_by_method)
    for name, weights in EFFECTS.items():
        out[name] = {}
        for method in methods:
            out[name][method] = contrast(cells_by_method[method], weights)
        if len(methods) < 2:
            continue
        if any(out[name][m]["estimate"] is None for m in methods):
            out[name]["all methods"] = {"estimate": None, "ci95": None, "missing": "a method's cells are missing"}
            continue
        test = intervals.heterogeneity(cells_by_method, {v: w for v, w in weights.items() if w != 0})
        if test["p_value"] < HETEROGENEITY_ALPHA:
            out[name]["all methods"] = {
                "estimate": None,
                "ci95": None,
                "withheld": f"the methods differ (heterogeneity p = {test['p_value']:.3g} < {HETEROGENEITY_ALPHA})",
                "heterogeneity": test,
            }
            continue
        pooled_cells = {(m, v): x for m in methods for v, x in cells_by_method[m].items()}
        pooled_weights = {(m, v): w / len(methods) for m in methods for v, w in weights.items()}
        out[name]["all methods"] = {**contrast(pooled_cells, pooled_weights), "heterogeneity": test}
    return out


def _sign(effect: Mapping[str, Any] | None) -> str | None:
    """``"positive"`` / ``"negative"`` when the Holm-adjusted p-value is below :data:`FINDINGS_ALPHA`,
    ``"unresolved"`` otherwise; ``None`` without an estimate."""
    if not effect or effect.get("estimate") is None:
        return None
    if effect["p_holm"] >= FINDINGS_ALPHA:
        return "unresolved"
    return "positive" if effect["estimate"] > 0 else "negative"


def finding_policies(per_policies: Mapping[str, Any]) -> list[str]:
    """Whose effect a finding reads: the pooled one (``"all methods"``) when it was pooled, else each method's."""
    pooled = per_policies.get("all methods")
    if pooled is not None and pooled.get("estimate") is not None:
        return ["all methods"]
    return [m for m in per_policies if m != "all methods"]


def findings(effects_by_metric: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Which grounding axis matters, read off the effects, per metric, with Holm's correction over all of them.

    For each effect of :data:`FINDING_EFFECTS` the findings read the pooled effect (``"all methods"``) when it was
    pooled, else each method's (:func:`finding_policies`). Every such statement over every metric is one member of
    the family whose p-values are Holm-adjusted (``p_holm``); a statement is ``"positive"`` or ``"negative"`` when
    its adjusted p-value is below :data:`FINDINGS_ALPHA`, else ``"unresolved"`` (``None``: cells missing).

    Returns:
        Per metric: ``statements`` ``{effect: {policies: effect dict with p_holm and sign}}``; ``signs``
        ``{effect: {policies: sign}}`` for world, behavior and the interaction; ``larger_axis`` ``{policies:
        "world" | "behavior" | "unresolved"}`` (the world minus behavior effect);
        ``behavior_more_with_nominal_world`` ``{policies: "yes" | "no" | "unresolved"}`` (the study's finding: a
        negative interaction, B - U above F - W); ``behavior_nominal_world`` and ``behavior_grounded_world``
        ``{policies: effect}``.
    """
    statements: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
    family: list[tuple[str, str, str]] = []
    for metric, by_effect in effects_by_metric.items():
        if not by_effect or not by_effect.get("world"):
            continue
        statements[metric] = {}
        for name in FINDING_EFFECTS:
            if name not in by_effect:
                continue
            statements[metric][name] = {}
            for who in finding_policies(by_effect[name]):
                effect = dict(by_effect[name][who])
                statements[metric][name][who] = effect
                if effect.get("estimate") is not None:
                    family.append((metric, name, who))
    adjusted = intervals.holm([statements[m][n][w]["p_value"] for m, n, w in family])
    for (metric, name, who), p in zip(family, adjusted):
        statements[metric][name][who]["p_holm"] = p
        statements[metric][name][who]["family_size"] = len(family)
    out: dict[str, dict[str, Any]] = {}
    for metric, by_name in statements.items():
        by_effect = effects_by_metric[metric]
        signs = {
            name: {who: _sign(e) for who, e in by_name[name].items()}
            for name in ("world", "behavior", "interaction")
            if name in by_name
        }
        larger = {who: _sign(e) for who, e in by_name.get("world minus behavior", {}).items()}
        interaction = signs.get("interaction", {})
        nominal = by_effect.get("behavior, nominal world (B - U)", {})
        grounded = by_effect.get("behavior, grounded world (F - W)", {})
        out[metric] = {
            "statements": by_name,
            "signs": signs,
            "larger_axis": {
                who: {"positive": "world", "negative": "behavior"}.get(x or "", x) for who, x in larger.items()
            },
            "behavior_more_with_nominal_world": {
                who: {"negative": "yes", "positive": "no"}.get(x or "", x) for who, x in interaction.items()
            },
            "behavior_nominal_world": {who: nominal.get(who) for who in interaction},
            "behavior_grounded_world": {who: grounded.get(who) for who in interaction},
        }
    return out


def findings_markdown(report: Mapping[str, Any]) -> str:
    """The findings as sentences, one paragraph per metric."""
    said = {
        "positive": "helps",
        "negative": "hurts",
        "unresolved": "not resolved",
        None: "cannot be computed (cells missing)",
    }
    larger_said = {
        "world": "world grounding adds more than behavior grounding",
        "behavior": "behavior grounding adds more than world grounding",
        "unresolved": "neither axis adds measurably more than the other",
    }
    more_said = {
        "yes": "yes, it adds more on the nominal world than on the identified one",
        "no": "no, it adds more on the identified world than on the nominal one",
        "unresolved": "not resolved",
    }

    def stated(effect: Mapping[str, Any] | None, sign: str | None) -> str:
        if not effect or effect.get("estimate") is None:
            return said[None]
        return f"{said[sign]}, {_pts(effect)} (Holm p {effect['p_holm']:.2g})"

    def pooling(report_effect: Mapping[str, Any]) -> str:
        test = (report_effect.get("all methods") or {}).get("heterogeneity")
        withheld = (report_effect.get("all methods") or {}).get("withheld")
        return f" (per method: heterogeneity p {test['p_value']:.2g})" if withheld and test else ""

    def shown(effect: Mapping[str, Any] | None) -> str:
        return "not pooled" if effect and effect.get("withheld") else _pts(effect or {})

    lines = []
    for metric, f in report.get("findings", {}).items():
        effects = report["effects"][metric]
        parts = []
        for name, label in (("world", "world grounding"), ("behavior", "behavior grounding")):
            per = f["statements"].get(name, {})
            text = "; ".join(f"{who}: {stated(e, f['signs'][name][who])}" for who, e in per.items())
            parts.append(f"{label}: {text}{pooling(effects[name])}")
        larger = "; ".join(
            f"{who}: {larger_said.get(x or '', 'which axis adds more cannot be computed')}"
            for who, x in f["larger_axis"].items()
        )
        more_parts = []
        for who, x in f["behavior_more_with_nominal_world"].items():
            nominal = shown(f["behavior_nominal_world"][who])
            grounded = shown(f["behavior_grounded_world"][who])
            inter = stated(f["statements"]["interaction"][who], f["signs"]["interaction"][who])
            more_parts.append(
                f"{who}: {more_said.get(x or '', 'cannot be computed')} "
                f"(B - U {nominal}, F - W {grounded}, interaction {inter})"
            )
        more = "; ".join(more_parts)
        lines.append(
            f"- **{METRIC_NAMES[metric]}**: {'; '.join(parts)}. Which adds more: {larger}. Does behavior grounding "
            f"matter more when world grounding is imperfect? {more}{pooling(effects['interaction'])}."
        )
    if lines:
        family = next(
            (
                e["family_size"]
                for f in report["findings"].values()
                for per in f["statements"].values()
                for e in per.values()
                if "family_size" in e
            ),
            0,
        )
        lines.append(
            f"\nVerdicts: Holm-adjusted p < {FINDINGS_ALPHA} over the {family} statements above; an effect is "
            f"pooled over methods only when the methods do not differ (heterogeneity p >= {HETEROGENEITY_ALPHA})."
        )
    return "\n".join(lines)


def versus_study(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The study's figures (``STUDY``) beside this run's on episode success in the lab, one row per figure.

    ``here`` is per method for the cells (real-only, fully grounded, their difference) and, for the effects, per
    the findings' policies (the pooled effect when it was pooled, else each method's); ``None`` where the cells are
    missing.
    """
    tables = report.get("tables", {})
    effects = report.get("effects", {}).get("success", {})
    finding = report.get("findings", {}).get("success")

    def cell(variant: str) -> dict[str, Any]:
        found = {
            m: next((r for r in method_rows if r["variant"] == variant), None) for m, method_rows in tables.items()
        }
        return {m: (r or {}).get("lab_success") for m, r in found.items()}

    def effect(name: str) -> dict[str, Any]:
        per = effects.get(name, {})
        return {who: per[who] for who in finding_policies(per)} if per else {}

    gain = report.get("versus_real_only", {}).get("success", {})
    return [
        {"figure": "real-only success, %", "study": STUDY["real_only"], "here": cell(REAL_ONLY)},
        {
            "figure": "fully grounded co-training success, %",
            "study": STUDY["fully_grounded"],
            "here": cell("FullyGrounded"),
        },
        {
            "figure": "fully grounded minus real-only, points",
            "study": STUDY["fully_grounded"] - STUDY["real_only"],
            "here": {m: v.get("FullyGrounded") for m, v in gain.items()},
        },
        {"figure": "world grounding effect, points", "study": STUDY["world"], "here": effect("world")},
        {"figure": "behavior grounding effect, points", "study": STUDY["behavior"], "here": effect("behavior")},
        {
            "figure": "behavior grounding matters more on the nominal world",
            "study": STUDY["behavior_more_with_nominal_world"],
            "here": dict(finding["behavior_more_with_nominal_world"]) if finding else {},
        },
    ]


def versus_study_markdown(report: Mapping[str, Any]) -> str:
    """The side-by-side with the study as a Markdown table (success in %, differences and effects in points)."""
    lines = ["| figure (lab episode success) | the study | here |", "|---|---|---|"]
    for row in report.get("versus_study", []):
        points = "points" in row["figure"]
        study = row["study"] if isinstance(row["study"], str) else f"{100 * row['study']:{'+' if points else ''}.0f}"
        here = []
        for who, x in row["here"].items():
            if isinstance(x, str) or x is None:
                shown = x or "n/a"
            else:
                shown = _pts(x) if points else _pct(x)
            here.append(f"{who}: {shown}")
        lines.append(f"| {row['figure']} | {study} | {'; '.join(here) or 'n/a'} |")
    return "\n".join(lines)


# ---------------------------------------------------------------------- tables
def _mean_ci(x: np.ndarray | None) -> dict[str, Any] | None:
    if x is None:
        return None
    b = intervals.mean_interval(x)
    return {
        "mean": b.estimate,
        "ci95": [b.low, b.high],
        "se": b.se,
        "df": b.df,
        "seeds": int(x.shape[0]),
        "episodes": int(x.shape[1]),
    }


def variant_table(runs: Sequence[EvalRun], design: AblationDesign, method: str) -> list[dict[str, Any]]:
    """The four-variant table of one method: real-only and each co-trained variant, in the lab and in sim."""
    rows = []
    for variant in [None, *design.variants]:
        if variant is None:
            match = [r for r in runs if r.variant is None and r.real_fraction == 1.0]
            rf = 1.0
        else:
            rf = design.rule_fraction(variant)
            match = [r for r in runs if r.method == method and r.variant == variant and r.real_fraction == rf]
        row: dict[str, Any] = {"variant": variant or REAL_ONLY, "real_fraction": rf}
        for env in ("lab", "sim"):
            cell = [r for r in match if r.env == env]
            for metric in METRICS:
                row[f"{env}_{metric}"] = _mean_ci(cell_matrix(cell, metric) if cell else None)
            causes: dict[str, int] = {}
            for r in cell:
                for k, v in r.failure_causes.items():
                    causes[k] = causes.get(k, 0) + int(v)
            row[f"{env}_failure_causes"] = {k: v for k, v in causes.items() if v}
        row["method"] = method if variant is not None else (match[0].method if match else None)
        rows.append(row)
    return rows


def design_cells(runs: Sequence[EvalRun], design: AblationDesign, metric: str, env: str = "lab") -> dict:
    """``{method: {variant: (seeds, episodes)}}`` of the co-trained policies at the rule's real_fraction."""
    out: dict[str, dict[str, np.ndarray]] = {}
    for method in design.methods:
        cells = {}
        for variant in design.variants:
            rf = design.rule_fraction(variant)
            match = [
                r
                for r in runs
                if r.method == method and r.variant == variant and r.real_fraction == rf and r.env == env
            ]
            if match:
                cells[variant] = cell_matrix(match, metric)
        real_only = [r for r in runs if r.variant is None and r.real_fraction == 1.0 and r.env == env]
        if real_only:
            cells[REAL_ONLY] = cell_matrix(real_only, metric)
        out[method] = cells
    return out


def versus_real_only(cells_by_method: Mapping[str, Mapping[str, np.ndarray]]) -> dict:
    """Each variant minus real-only, per method, with intervals."""
    return {
        method: {v: contrast(cells, {v: 1.0, REAL_ONLY: -1.0}) for v in VARIANTS if v in cells}
        for method, cells in cells_by_method.items()
    }


def sweep_table(runs: Sequence[EvalRun], design: AblationDesign) -> list[dict[str, Any]]:
    """The real_fraction sweep of ``sweep_variant``: lab (and sim) success and sort accuracy per method and rf."""
    rows = []
    for method in design.sweep_methods:
        for rf in design.sweep_values():
            spec = design.sweep_policy(method, rf, 0)
            if spec is None:
                continue
            match = [r for r in runs if r.method == spec.method and r.variant == spec.variant and r.real_fraction == rf]
            row: dict[str, Any] = {"method": method, "real_fraction": rf}
            for env in ("lab", "sim"):
                cell = [r for r in match if r.env == env]
                for metric in METRICS:
                    row[f"{env}_{metric}"] = _mean_ci(cell_matrix(cell, metric) if cell else None)
            rows.append(row)
    return rows


def sweep_cells(runs: Sequence[EvalRun], design: AblationDesign, metric: str = "success") -> dict[Any, np.ndarray]:
    """``{(method, real_fraction): (seeds, episodes)}`` of the sweep's lab cells, on the sweep's seeds only."""
    out: dict[Any, np.ndarray] = {}
    seeds = set(design.sweep_seeds if design.sweep_seeds is not None else design.seeds)
    for method in design.sweep_methods:
        for rf in design.sweep_values():
            spec = design.sweep_policy(method, rf, 0)
            if spec is None:
                continue
            match = [
                r
                for r in runs
                if r.method == spec.method
                and r.variant == spec.variant
                and r.real_fraction == rf
                and r.env == "lab"
                and r.seed in seeds
            ]
            if match:
                out[(method, rf)] = cell_matrix(match, metric)
    return out


def detectable(cells: Mapping[Any, np.ndarray]) -> dict[str, Any] | None:
    """What a table's cells can tell apart: the variance components of a paired difference between two of them
    (averaged over the pairs of one shape), its minimum detectable difference at the cells' seeds and episodes
    (80% power, two-sided 5%), and those at other seed counts. ``None`` with fewer than two comparable cells.

    :func:`seeds_to_detect` answers "how many seeds for d points" from the ``components`` kept here.
    """
    comps = intervals.difference_components(cells)
    if comps is None:
        return None
    shapes = [x.shape for x in cells.values()]
    seeds, episodes = max(set(shapes), key=shapes.count)
    if seeds < 2:  # one seed: the seed variance is unknown, so nothing can be said of other seed counts
        return {"components": None, "seeds": int(seeds), "episodes": int(episodes), "mdd": None, "mdd_by_seeds": {}}
    return {
        "components": comps.to_dict(),
        "seeds": int(seeds),
        "episodes": int(episodes),
        "mdd": intervals.design_mdd(comps, int(seeds), int(episodes)),
        "mdd_by_seeds": {str(n): intervals.design_mdd(comps, n, int(episodes)) for n in (3, 5, 10, 20)},
    }


def seeds_to_detect(
    report: Mapping[str, Any] | str | Path,
    difference: float,
    *,
    metric: str = "success",
    table: str | None = None,
    episodes: int | None = None,
    power: float = 0.8,
    alpha: float = 0.05,
) -> int | None:
    """How many training seeds per cell detect a true difference of ``difference`` (a fraction: 0.03 for 3
    points) between two cells of a report's table, at ``power`` and two-sided level ``alpha``, with the variance
    the report measured (its ``detectable`` components).

    Args:
        report: a ``report.json`` (its path, or the dict) written with interval method 2.
        difference: the difference to detect, > 0.
        metric: ``"success"`` or ``"sort_accuracy"`` (the co-trained cells of the four-variant table).
        table: ``None`` for the four-variant table, ``"sweep"`` for the real_fraction sweep's cells.
        episodes: episodes per policy (default: the report's).

    Returns:
        The number of seeds, or ``None`` when no number of seeds up to 1,000 suffices at these episodes (the
        episode noise alone is larger: more episodes are needed).

    Raises:
        ValueError: a report without the components (an older one: rebuild it with ``--report-only``), an unknown
            metric or table (naming the valid ones), or a bad difference.
    """
    data = json.loads(Path(report).read_text()) if isinstance(report, (str, Path)) else report
    if "detectable" not in data:
        raise ValueError(
            f"this report has no measured variance components ({report_interval_method(data)}); rebuild it with "
            "`r2s2r ablation --out DIR --report-only`"
        )
    key = metric if table is None else table
    valid = [k for k, v in data["detectable"].items() if v is not None]
    if table not in (None, "sweep") or metric not in METRICS:
        raise ValueError(
            f"unknown metric {metric!r} or table {table!r}; metrics: {list(METRICS)}, tables: None, 'sweep'"
        )
    if data["detectable"].get(key) is None:
        raise ValueError(f"the report has no comparable cells for {key!r}; it has them for {valid}")
    found = data["detectable"][key]
    if found["components"] is None:
        raise ValueError(f"the report's {key!r} cells have {found['seeds']} seed each: their seed variance is unknown")
    comps = intervals.Components(**found["components"])
    return intervals.seeds_needed(
        difference, comps, found["episodes"] if episodes is None else episodes, alpha=alpha, power=power
    )


def report_interval_method(report: Mapping[str, Any]) -> str:
    """What a report's intervals are: method 2 (:data:`INTERVALS`) or, for reports without the key, method 1."""
    found = report.get("intervals")
    if not found:
        return OLD_INTERVALS
    return f"interval method {found['version']}: {found['method']}"


def failure_table(runs: Sequence[EvalRun], design: AblationDesign) -> list[dict[str, Any]]:
    """Where the table's policies fail: per object in arrival order, the share sorted in the lab and in the policy's
    own variant, the second object after a sorted first one, and the transfer gap (lab minus sim sort accuracy)."""
    rows = []
    for method in design.methods:
        for variant in [None, *design.variants]:
            if variant is None:
                if method != design.methods[0]:
                    continue  # one real-only row: it is the same policy for every method
                match = [r for r in runs if r.variant is None and r.real_fraction == 1.0]
            else:
                rf = design.rule_fraction(variant)
                match = [r for r in runs if r.method == method and r.variant == variant and r.real_fraction == rf]
            row: dict[str, Any] = {
                "method": method if variant else SINGLE_DOMAIN_METHOD,
                "variant": variant or REAL_ONLY,
            }
            for env in ("lab", "sim"):
                cell = sorted((r for r in match if r.env == env), key=lambda r: r.seed)
                if not cell or len({r.object_sorted.shape for r in cell}) != 1:
                    row[f"{env}_sorted_by_order"] = None
                    row[f"{env}_second_after_first"] = None
                    continue
                sorted_ = np.concatenate([r.object_sorted for r in cell])  # (seeds * episodes, objects)
                row[f"{env}_sorted_by_order"] = [float(x) for x in sorted_.mean(axis=0)]
                first = sorted_[:, 0] > 0
                row[f"{env}_second_after_first"] = (
                    {"share": float(sorted_[first, 1].mean()), "of": int(first.sum())}
                    if sorted_.shape[1] > 1 and first.any()
                    else None
                )
            lab = [r for r in match if r.env == "lab"]
            sim = [r for r in match if r.env == "sim"]
            row["transfer_gap"] = (
                contrast(
                    {"lab": cell_matrix(lab, "sort_accuracy"), "sim": cell_matrix(sim, "sort_accuracy")},
                    {"lab": 1.0, "sim": -1.0},
                )
                if lab and sim
                else None
            )
            rows.append(row)
    return rows


def mixture_summaries(tasks: Sequence[Task], store: Store) -> list[dict[str, Any]]:
    """The summary of every finished mixture task."""
    out = []
    for task in tasks:
        if task.kind == "mixture" and store.is_done("mixture", task.key):
            s = store.done_record("mixture", task.key)["summary"]
            s = {**s, "sim_variant": task.config["sim_variant"], "key": task.key}
            out.append(s)
    return out


# ---------------------------------------------------------------------- report
def analyze(design: AblationDesign, tasks: Sequence[Task], store: Store) -> dict[str, Any]:
    """Every number of the report (JSON-able)."""
    runs = load_runs(tasks, store)
    report: dict[str, Any] = {
        "design": design.name,
        "intervals": INTERVALS,
        "tables": {},
        "effects": {},
        "versus_real_only": {},
        "detectable": {},
    }
    for method in design.methods:
        report["tables"][method] = variant_table(runs, design, method)
    for metric in METRICS:
        cells = design_cells(runs, design, metric)
        grounded = {m: {v: x for v, x in c.items() if v != REAL_ONLY} for m, c in cells.items()}
        report["effects"][metric] = effects(grounded)
        report["versus_real_only"][metric] = versus_real_only(cells)
        report["detectable"][metric] = detectable({(m, v): x for m, c in grounded.items() for v, x in c.items()})
    report["findings"] = findings(report["effects"])
    report["versus_study"] = versus_study(report)
    report["sweep"] = sweep_table(runs, design)
    report["detectable"]["sweep"] = detectable(sweep_cells(runs, design))
    report["failures"] = failure_table(runs, design)
    report["mixture"] = mixture_summaries(tasks, store)
    status = task_status(tasks, store)
    done = {t.key for t in tasks if status[t.key][0] == "done"}
    report["tasks"] = {
        "total": len(tasks),
        "finished": len(done),
        "missing": [t.label for t in tasks if t.key not in done],
        "failed": [{"label": t.label, "error": status[t.key][1]} for t in tasks if status[t.key][0] == "failed"],
        "skipped": [{"label": t.label, "reason": status[t.key][1]} for t in tasks if status[t.key][0] == "skipped"],
    }
    if design.lab is not None:
        report["lab"] = {"name": design.lab.name, "config_sha256": design.lab.config_sha256}
        report["chain"] = chain_summary(tasks, store, status)
    return report


def task_status(tasks: Sequence[Task], store: Store) -> dict[str, tuple[str, str | None]]:
    """``{key: (status, why)}`` of every task, from the store alone: ``done``; ``failed`` with its recorded error;
    ``skipped`` because a task it needs failed (why: that task and its error, or the root failure of a skipped one);
    ``not run`` (an interrupted run)."""
    labels = {t.key: t.label for t in tasks}
    out: dict[str, tuple[str, str | None]] = {}
    for task in tasks:  # dependencies come first
        if store.is_done(task.kind, task.key):
            out[task.key] = ("done", None)
            continue
        error = store.failure(task.key)
        if error is not None:
            out[task.key] = ("failed", error)
            continue
        failed = [d for d in task.deps if out.get(d, ("",))[0] == "failed"]
        skipped = [d for d in task.deps if out.get(d, ("",))[0] == "skipped"]
        if failed:
            out[task.key] = ("skipped", f"needs {labels[failed[0]]}, which failed: {out[failed[0]][1]}")
        elif skipped:
            out[task.key] = ("skipped", out[skipped[0]][1])
        else:
            out[task.key] = ("not run", None)
    return out


def chain_summary(
    tasks: Sequence[Task], store: Store, status: Mapping[str, tuple[str, str | None]]
) -> list[dict[str, Any]]:
    """One entry per stage of the lab's chain (sysid, the lab's demos, behavior fit, the variants' sim data): its
    status and what it produced (fields identified and not, held-out error reduction, tuned demonstrator; demos
    made; model sources)."""
    out = []
    for task in tasks:
        if task.kind not in ("sysid", "behavior", "data"):
            continue
        state, why = status[task.key]
        entry: dict[str, Any] = {"stage": task.kind, "label": task.label, "status": state, "why": why}
        if state == "done":
            record = store.done_record(task.kind, task.key)
            if task.kind == "sysid":
                entry.update(
                    identified=record["identified"],
                    not_identifiable=sorted(record["not_identifiable"]),
                    reduction_percent=record["reduction_percent"],
                    demonstrator=record["demonstrator"],
                    sha256=record["sha256"],
                )
            elif task.kind == "behavior":
                entry.update(sources=record["sources"], demos=record["demos"], sha256=record["sha256"])
            else:
                entry.update(num_demos=record["num_demos"], sha256=record["sha256"])
            entry["wall_time_s"] = record.get("wall_time_s")
        out.append(entry)
    return out


def _pct(x: dict[str, Any] | None) -> str:
    if not x or x.get("mean") is None:
        return "n/a"
    low, high = x["ci95"]
    return f"{100 * x['mean']:.1f} [{100 * low:.1f}, {100 * high:.1f}]"


def _calibration(summary: Mapping[str, Any]) -> str:
    c = summary.get("calibration")
    if not c:
        return "n/a"
    return f"{100 * c['real_demos_real_like']:.0f} / {100 * c['sim_demos_real_like']:.0f}"


def _pts(x: Mapping[str, Any]) -> str:
    if x.get("estimate") is None:
        return "n/a"
    low, high = x["ci95"]
    return f"{100 * x['estimate']:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]"


def variant_markdown(report: Mapping[str, Any]) -> str:
    """The four-variant table(s) as Markdown (also what ``r2s2r ablation`` prints)."""
    lines = [
        "| method | sim data | real_fraction | lab success, % | lab sort accuracy, % | sim success, % | "
        "sim sort accuracy, % | lab failures (first cause) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for method, rows in report["tables"].items():
        for row in rows:
            causes = ", ".join(f"{k} {v}" for k, v in sorted(row["lab_failure_causes"].items(), key=lambda kv: -kv[1]))
            shown = method if row["variant"] != REAL_ONLY else f"{row['method'] or 'flow'} (real only)"
            lines.append(
                f"| {shown} | {row['variant']} | {row['real_fraction']:g} | {_pct(row['lab_success'])} | "
                f"{_pct(row['lab_sort_accuracy'])} | {_pct(row['sim_success'])} | {_pct(row['sim_sort_accuracy'])} | "
                f"{causes or '-'} |"
            )
    return "\n".join(lines)


def effects_markdown(report: Mapping[str, Any]) -> str:
    """The effects table: points (percentage points) with 95% intervals, per metric and method; a pooled effect
    withheld because the methods differ reads "not pooled"; under each table, the minimum detectable effects."""
    lines = []
    new = "intervals" in report
    for metric, by_effect in report["effects"].items():
        methods = list(next(iter(by_effect.values())).keys()) if by_effect else []
        lines.append(f"\n**{METRIC_NAMES[metric]}** in the lab, points [95% {'interval' if new else 'bootstrap'}]\n")
        lines.append("| effect | " + " | ".join(methods) + " |")
        lines.append("|---|" + "---|" * len(methods))
        for name, per_method in by_effect.items():
            shown = [
                "not pooled: the methods differ" if per_method[m].get("withheld") else _pts(per_method[m])
                for m in methods
            ]
            lines.append(f"| {name} | " + " | ".join(shown) + " |")
        if new:
            lines.append("")
            for m in methods:
                lines.append("- " + _mdd_line(f"{m}, each effect", [per[m] for per in by_effect.values()]))
    return "\n".join(lines)


def _mdd_line(what: str, found: Sequence[Mapping[str, Any] | None]) -> str:
    """ "Minimum detectable difference ..." over the intervals ``found`` (their ``mdd``), as a range in points."""
    mdd = [x["mdd"] for x in found if x and x.get("mdd") is not None]
    if not mdd:
        return f"Minimum detectable difference ({what}): n/a."
    low, high = 100 * min(mdd), 100 * max(mdd)
    shown = f"{low:.1f}" if round(low, 1) == round(high, 1) else f"{low:.1f}-{high:.1f}"
    return f"Minimum detectable difference ({what}; 80% power, two-sided 5%): {shown} points."


def detectable_markdown(report: Mapping[str, Any], table: str | None = None) -> str:
    """The line under a table that says which differences its cells can tell apart, and at what seed counts."""
    lines = []
    keys = list(METRICS) if table is None else [table]
    for key in keys:
        found = (report.get("detectable") or {}).get(key)
        name = METRIC_NAMES.get(key, "lab success")
        if not found:
            lines.append(f"Minimum detectable difference between two cells ({name}): n/a (fewer than two cells).")
            continue
        if found["mdd"] is None:
            lines.append(f"Minimum detectable difference ({name}): unknown with {found['seeds']} seed per cell.")
            continue
        here = f"{100 * found['mdd']:.1f} points"
        others = ", ".join(f"{100 * v:.1f} at {n}" for n, v in found["mdd_by_seeds"].items())
        lines.append(
            f"Minimum detectable difference between two {'sweep points' if table else 'co-trained cells'} ({name}; "
            f"80% power, two-sided 5%): {here} at {found['seeds']} seeds x {found['episodes']} episodes ({others} "
            "seeds); `r2s2r ablation --out DIR --seeds-for POINTS` says how many seeds a difference needs."
        )
    return "\n".join(lines)


def _shares(x: Sequence[float] | None) -> str:
    return "n/a" if x is None else " / ".join(f"{100 * v:.0f}" for v in x)


def failures_markdown(report: Mapping[str, Any]) -> str:
    """The "where policies fail" table: per object in arrival order, and the transfer gap."""
    lines = [
        "Objects in the order the belt brings them: % of episodes in which the 1st / 2nd / 3rd ... object was "
        "sorted; the 2nd after a sorted 1st; the transfer gap is lab minus own-variant sim sort accuracy on the same "
        "protocol episodes (points, 95% interval): near zero, the sim-to-lab difference is not what limits the "
        "policy.",
        "",
        "| method | sim data | lab: sorted by order, % | lab: 2nd after a sorted 1st | sim: sorted by order, % | "
        "transfer gap, points |",
        "|---|---|---|---|---|---|",
    ]
    for row in report["failures"]:
        after = row["lab_second_after_first"]
        after_text = "n/a" if after is None else f"{100 * after['share']:.0f}% of {after['of']}"
        gap = "n/a (lab only)" if row["transfer_gap"] is None else _pts(row["transfer_gap"])
        lines.append(
            f"| {row['method']} | {row['variant']} | {_shares(row['lab_sorted_by_order'])} | {after_text} | "
            f"{_shares(row['sim_sorted_by_order'])} | {gap} |"
        )
    if "intervals" in report:
        lines += ["", _mdd_line("each transfer gap", [row["transfer_gap"] for row in report["failures"]])]
    return "\n".join(lines)


def to_markdown(design: AblationDesign, report: Mapping[str, Any]) -> str:
    """The whole report as Markdown."""
    from r2s2r_envs.datasets.mixture import suggest_real_fraction

    real = design.real
    first = design.variants[0]
    suggestion = suggest_real_fraction(real.episodes, design.sim_spec(first).episodes)
    rule = (
        f"{design.rule_fraction(first):g} (the mixing rule's {design.rule_end} end; {suggestion.note})"
        if suggestion.rule_applies
        else f"{design.rule_fraction(first):g} ({suggestion.note})"
    )
    sims = ", ".join(f"{v}: {s.label} ({s.episodes})" for v, s in design.sim)
    out = [f"# Grounding ablation ({design.name})", ""]
    if report.get("lab") is not None:
        lab = report["lab"]
        out += [
            f"Lab: **{lab['name']}**, config sha256 `{lab['config_sha256']}`. The whole chain ran on it: its world "
            "identified from its logs (sysid, the scripted demonstrator tuned there), its demos by its own "
            "teleoperator, the generator fitted to them, the four variants' data made with that grounding file and "
            "that model, every policy evaluated in this lab.",
            "",
        ]
    out += [
        f"Real data: {real.label} ({real.episodes} lab demos by the teleoperator). Sim data per variant: {sims}. "
        'Every policy trains on the successful demos only (`demos="success"`; every dataset here holds successful '
        "demos only), the same in every variant.",
        f"Methods: {', '.join(design.methods)}; seeds: {list(design.seeds)}"
        f"{'' if design.sweep_seeds is None else f' (sweep and mixture analysis: {list(design.sweep_seeds)})'}; "
        "training: "
        f"{dict(design.train) or 'defaults'}; co-training at real_fraction {rule}; lab episodes "
        f"{design.lab_episodes}, sim episodes {design.sim_episodes} (protocol seeds); evaluation env arguments: "
        f"{dict(design.eval_env_kwargs) or 'defaults'}.",
        f"Intervals: 95%, {report_interval_method(report)}; effects pooled over methods only where they do not "
        "differ; verdicts Holm-corrected (docs/ablation.md#analysis).",
        "",
        "## Four-variant table",
        "",
        "Sim columns: each policy in its own simulated variant; real-only policies are evaluated in the lab only.",
        "",
        variant_markdown(report),
        "",
        detectable_markdown(report),
        "",
        "## Effect of each grounding axis (co-trained policies, lab)",
        "",
        "world = ((W - U) + (F - B)) / 2, behavior = ((B - U) + (F - W)) / 2, interaction = (F - B) - (W - U).",
        effects_markdown(report),
        "",
        "## Which axis matters (lab)",
        "",
        findings_markdown(report) or "No effect could be computed: cells are missing.",
        "",
        "## Side by side with the study (docs/concepts.md#findings)",
        "",
        "The study's figures are success on its real robot; here, in this run's lab (a simulated stand-in). "
        "Directions and sizes compare; the tasks and robots differ.",
        "",
        versus_study_markdown(report),
        "",
        "## Each variant against real-only (lab, points)",
        "",
    ]
    for metric, per_method in report["versus_real_only"].items():
        for method, per_variant in per_method.items():
            cells = ", ".join(f"{v} {_pts(x)}" for v, x in per_variant.items())
            out.append(f"- {METRIC_NAMES[metric]}, {method}: {cells or 'n/a'}")
    out += [
        "",
        _mdd_line(
            "each difference",
            [x for pm in report["versus_real_only"].values() for pv in pm.values() for x in pv.values()],
        ),
    ]
    if report.get("failures"):
        out += ["", "## Where policies fail", "", failures_markdown(report), ""]
    if report["sweep"]:
        out += ["", f"## real_fraction sweep ({design.sweep_variant})", ""]
        out.append(
            "| method | real_fraction | lab success, % | lab sort accuracy, % | sim success, % | sim sort accuracy, % |"
        )
        out.append("|---|---|---|---|---|---|")
        for row in report["sweep"]:
            out.append(
                f"| {row['method']} | {row['real_fraction']:g} | {_pct(row['lab_success'])} | "
                f"{_pct(row['lab_sort_accuracy'])} | {_pct(row['sim_success'])} | {_pct(row['sim_sort_accuracy'])} |"
            )
        out.append("")
        out.append(
            "real_fraction 1.0 is the real-only policy (evaluated in the lab only); 0.0 trains on sim data only."
        )
        out += ["", detectable_markdown(report, "sweep")]
    if report["mixture"]:
        out += ["", "## Mixture analysis (lab rollouts, nearest-neighbour attribution)", ""]
        out.append(
            "Per visited lab state: real-like when the policy's action is nearer to the mean action of the "
            f"{design.mixture_neighbors} nearest real-demo states than to that of the nearest sim-demo states. "
            "Coverage d_real / (d_real + d_sim): 0 on real data, 1 where only sim data is near. Calibration: the "
            "last 20% of each domain's demos attributed the same way (a perfect measure: 100 / 0), and the policies "
            "at real_fraction 1 and 0."
        )
        out.append("")
        out.append(
            "| policy | sim data | states | real-like, % | held-out demos real-like, % (real / sim) | mean coverage "
            "| real-like by coverage bin |"
        )
        out.append("|---|---|---|---|---|---|---|")
        for s in report["mixture"]:
            p = s["policy"]
            curve = "; ".join(
                f"{c['coverage'][0]:.1f}-{c['coverage'][1]:.1f}: "
                + ("-" if c["real_like_share"] is None else f"{100 * c['real_like_share']:.0f}% (n={c['states']})")
                for c in s["curve"]
            )
            out.append(
                f"| {p['method']} @ {p['real_fraction']:g}, seed {p['training_seed']} | {s['sim_variant']} | "
                f"{s['states']} | {100 * s['real_like_share']:.1f} | {_calibration(s)} | {s['mean_coverage']:.2f} | "
                f"{curve} |"
            )
    if report.get("chain") is not None:
        out += ["", "## The lab's chain", "", chain_markdown(report["chain"])]
    missing = report["tasks"]["missing"]
    out += ["", "## Tasks", "", f"{report['tasks']['finished']} of {report['tasks']['total']} tasks finished."]
    if missing:
        out.append("Without results (failed or blocked): " + "; ".join(missing))
    for failed in report["tasks"].get("failed", []):
        out.append(f"- failed: {failed['label']}: {failed['error']}")
    for skipped in report["tasks"].get("skipped", []):
        out.append(f"- skipped: {skipped['label']}: {skipped['reason']}")
    out += ["", "Plots: variants.png, effects.png, sweep.png, mixture.png.", ""]
    return "\n".join(out)


def chain_markdown(chain: Sequence[Mapping[str, Any]]) -> str:
    """The chain's stages as a Markdown table."""
    lines = ["| stage | status | result |", "|---|---|---|"]
    for entry in chain:
        if entry["status"] != "done":
            result = entry["why"] or "-"
        elif entry["stage"] == "sysid":
            reductions = ", ".join(
                f"{g} {v:.0f}%" for g, v in entry["reduction_percent"].items() if isinstance(v, (int, float))
            )
            result = (
                f"{len(entry['identified'])} fields identified; kept at nominal: "
                f"{', '.join(entry['not_identifiable']) or 'none'}; held-out error reduction: {reductions or 'n/a'}; "
                f"demonstrator tuned there: {entry['demonstrator'] or 'defaults'}; grounding sha256 "
                f"{entry['sha256'][:12]}"
            )
        elif entry["stage"] == "behavior":
            demos = entry["demos"]
            result = (
                f"{entry['sources']} source grasps of {demos.get('grasps', '?')} in "
                f"{demos.get('episodes', '?')} demos; model sha256 {entry['sha256'][:12]}"
            )
        else:
            result = f"{entry['num_demos']} demos, content sha256 {entry['sha256'][:12]}"
        time_s = entry.get("wall_time_s")
        shown = f" ({time_s:.0f} s)" if isinstance(time_s, (int, float)) else ""
        lines.append(f"| {entry['label']} | {entry['status']}{shown} | {result} |")
    return "\n".join(lines)


def write_report(design: AblationDesign, tasks: Sequence[Task], store: Store, out_dir: str | Path) -> Path:
    """Writes ``report.md``, ``report.json`` and the PNG plots to ``out_dir``; returns the Markdown's path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report = analyze(design, tasks, store)
    write_json_atomic(out / "report.json", plain_json(report), sort_keys=False)
    (out / "report.md").write_text(to_markdown(design, report))
    plot_all(design, report, out)
    return out / "report.md"


# ---------------------------------------------------------------------- plots
def plot_all(design: AblationDesign, report: Mapping[str, Any], out: Path) -> None:
    """variants.png, effects.png, sweep.png (when swept) and mixture.png (when analysed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    _plot_variants(plt, report, out / "variants.png")
    _plot_effects(plt, report, out / "effects.png")
    if report["sweep"]:
        _plot_sweep(plt, design, report, out / "sweep.png")
    if report["mixture"]:
        _plot_mixture(plt, report, out / "mixture.png")


def _errorbar(x: Mapping[str, Any] | None) -> tuple[float, float, float]:
    if not x or x.get("mean") is None:
        return math.nan, 0.0, 0.0
    return 100 * x["mean"], 100 * (x["mean"] - x["ci95"][0]), 100 * (x["ci95"][1] - x["mean"])


def _plot_variants(plt: Any, report: Mapping[str, Any], path: Path) -> None:
    methods = list(report["tables"])
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), squeeze=False)
    for ax, metric in zip(axes[0], METRICS):
        width = 0.8 / max(1, len(methods))
        for i, method in enumerate(methods):
            rows = report["tables"][method]
            vals = [_errorbar(r[f"lab_{metric}"]) for r in rows]
            xs = np.arange(len(rows)) + i * width
            ax.bar(
                xs,
                [v[0] for v in vals],
                width,
                yerr=[[v[1] for v in vals], [v[2] for v in vals]],
                capsize=3,
                label=method,
            )
            ax.set_xticks(np.arange(len(rows)) + width * (len(methods) - 1) / 2)
            ax.set_xticklabels([r["variant"] for r in rows], rotation=20, fontsize=8)
        ax.set_ylabel(f"lab {METRIC_NAMES[metric]}, %")
        ax.set_ylim(0, 100)
        ax.legend(fontsize=8)
    fig.suptitle("Lab results per sim data variant (95% intervals)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _plot_effects(plt: Any, report: Mapping[str, Any], path: Path) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), squeeze=False)
    names = list(EFFECTS)
    for ax, metric in zip(axes[0], METRICS):
        by_effect = report["effects"][metric]
        methods = list(next(iter(by_effect.values())).keys())
        height = 0.8 / max(1, len(methods))
        for i, method in enumerate(methods):
            est, lo, hi = [], [], []
            for name in names:
                x = by_effect[name][method]
                if x["estimate"] is None:
                    est.append(math.nan)
                    lo.append(0)
                    hi.append(0)
                else:
                    est.append(100 * x["estimate"])
                    lo.append(100 * (x["estimate"] - x["ci95"][0]))
                    hi.append(100 * (x["ci95"][1] - x["estimate"]))
            ys = np.arange(len(names)) + i * height
            ax.errorbar(est, ys, xerr=[lo, hi], fmt="o", capsize=3, label=method)
        ax.axvline(0, color="grey", lw=0.8)
        ax.set_yticks(np.arange(len(names)) + height * (len(methods) - 1) / 2)
        ax.set_yticklabels(names, fontsize=8)
        ax.set_xlabel(f"{METRIC_NAMES[metric]} in the lab, points")
        ax.legend(fontsize=8)
    fig.suptitle("Effects of world and behavior grounding (95% intervals over seeds and episodes)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _plot_sweep(plt: Any, design: AblationDesign, report: Mapping[str, Any], path: Path) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), squeeze=False)
    for ax, metric in zip(axes[0], METRICS):
        for method in design.sweep_methods:
            rows = [r for r in report["sweep"] if r["method"] == method]
            vals = [_errorbar(r[f"lab_{metric}"]) for r in rows]
            ax.errorbar(
                [r["real_fraction"] for r in rows],
                [v[0] for v in vals],
                yerr=[[v[1] for v in vals], [v[2] for v in vals]],
                fmt="o-",
                capsize=3,
                label=method,
            )
        low, high, _ = design.rule_range(design.sweep_variant) if design.sweep_variant else (0, 0, False)
        ax.axvspan(low, high, color="grey", alpha=0.15, label="mixing rule range")
        ax.set_xlabel("real_fraction")
        ax.set_ylabel(f"lab {METRIC_NAMES[metric]}, %")
        ax.set_ylim(0, 100)
        ax.legend(fontsize=8)
    fig.suptitle(f"real_fraction sweep, {design.sweep_variant} sim data")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _plot_mixture(plt: Any, report: Mapping[str, Any], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for s in report["mixture"]:
        p = s["policy"]
        shown = [c for c in s["curve"] if c["states"] >= MIN_BIN_STATES]
        xs = [(c["coverage"][0] + c["coverage"][1]) / 2 for c in shown]
        ys = [100 * c["real_like_share"] for c in shown]
        style = "--" if p["real_fraction"] in (0.0, 1.0) else "-"
        ax.plot(xs, ys, style + "o", label=f"{p['method']} @ {p['real_fraction']:g}, seed {p['training_seed']}")
    ax.axhline(50, color="grey", lw=0.8)
    ax.set_xlabel("coverage d_real / (d_real + d_sim): 0 = on real data, 1 = only sim data near")
    ax.set_ylabel("states where the policy acts real-like, %")
    ax.set_ylim(0, 100)
    ax.legend(fontsize=7)
    ax.set_title(f"Mixture analysis: real-like actions vs coverage (bins of >= {MIN_BIN_STATES} lab states)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def print_table(report_json: str | Path, emit: Callable[[str], None] = print) -> None:
    """Prints the four-variant table and the effects of a written ``report.json``, and which interval method made
    them (reports made before method 2 are marked as such)."""
    report = json.loads(Path(report_json).read_text())
    emit(f"Intervals: {report_interval_method(report)}")
    emit(variant_markdown(report))
    if "detectable" in report:
        emit(detectable_markdown(report))
    emit(effects_markdown(report))
