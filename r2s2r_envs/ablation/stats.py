"""The ablation's statistics: contrasts of cells with their intervals, the effect of each grounding axis, the
interaction, the findings read off them, and the differences a design can detect.

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

Everything here works on ``(seeds, episodes)`` matrices and report dicts; nothing reads the store, trains or evaluates.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from r2s2r_envs.evaluation import intervals

METRICS: tuple[str, ...] = ("success", "sort_accuracy")
METRIC_NAMES = {"success": "episode success", "sort_accuracy": "sort accuracy"}
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


def effects(
    cells_by_method: Mapping[str, Mapping[Any, np.ndarray]],
    contrasts: Mapping[str, Mapping[str, float]] | None = None,
) -> dict[str, dict[str, Any]]:
    """Every effect of :data:`EFFECTS` (or of ``contrasts``) per method and, with several methods, pooled over them
    (``"all methods"``) when the heterogeneity test allows it (p >= :data:`HETEROGENEITY_ALPHA`); otherwise
    ``"all methods"`` has no estimate and says why (``withheld``). Every ``"all methods"`` entry carries its
    ``heterogeneity`` test.

    Args:
        cells_by_method: ``{method: {cell: (seeds, episodes) matrix}}`` for one metric (a cell: a variant, an arm's
            cell, or the interventions' ``(condition, variant)``).
        contrasts: ``{name: weights over cells}`` (default :data:`EFFECTS`; the control arms' rows,
            ``arms.ARM_EFFECTS``).
    """
    out: dict[str, dict[str, Any]] = {}
    methods = list(cells_by_method)
    for name, weights in (EFFECTS if contrasts is None else contrasts).items():
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


def mean_ci(x: np.ndarray | None) -> dict[str, Any] | None:
    """The mean of a cell's ``(seeds, episodes)`` values with its 95% interval (``None`` for no cell)."""
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


def format_percent(x: Mapping[str, Any] | None) -> str:
    """A mean with its 95% interval (``{"mean", "ci95"}``, shares) in percent, one decimal: ``"61.0 [52.1, 69.3]"``;
    ``"n/a"`` without a mean."""
    if not x or x.get("mean") is None:
        return "n/a"
    low, high = x["ci95"]
    return f"{100 * x['mean']:.1f} [{100 * low:.1f}, {100 * high:.1f}]"


def format_points(x: Mapping[str, Any]) -> str:
    """An effect with its 95% interval (``{"estimate", "ci95"}``, shares) in signed points: ``"+5.3 [-1.0, +11.6]"``;
    ``"n/a"`` without an estimate."""
    if x.get("estimate") is None:
        return "n/a"
    low, high = x["ci95"]
    return f"{100 * x['estimate']:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]"
