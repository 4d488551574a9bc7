"""The interventions in the report (docs/ablation.md#interventions): per cell of the table (each method's co-trained
variants, the real-only and sim-only policies), lab success under ``nominal`` and under each intervention, with the
change; and each grounding axis's lab effect (B - U, W - U, F - U, F - W, F - B) under ``nominal``, under each
intervention and their difference, with the report's intervals (:func:`.stats.effects`: per method, and pooled
where the heterogeneity test allows it).

Every number is a contrast of ``(seeds, episodes)`` cells keyed ``(condition, cell)``: cells of one shape are
paired by training seed and by episode, as the report's effects are (an intervention on the legacy seeds runs the
nominal evaluation's very episodes; on a split, its own, paired in their order).

:func:`interventions_analysis` adds ``report["interventions"]`` (only for a design with interventions: the reports of
designs without keep their form); :func:`interventions_markdown` writes its section.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from r2s2r_envs.ablation.runs import EvalRun, cell_matrix, load_runs
from r2s2r_envs.ablation.specs import REAL_ONLY, SINGLE_DOMAIN_METHOD, Task
from r2s2r_envs.ablation.stats import EFFECTS, contrast, effects, mean_ci
from r2s2r_envs.ablation.stats import format_percent as _pct
from r2s2r_envs.ablation.stats import format_points as _pts
from r2s2r_envs.ablation.store import Store
from r2s2r_envs.ablation.study import AblationDesign
from r2s2r_envs.envs.conditions import CONDITIONS

#: The row label of the sweep's policies trained on sim data only (real_fraction 0).
SIM_ONLY = "sim-only"
#: The metric the interventions read: episode success in the lab.
METRIC = "success"
#: The effects set beside each other under every condition: each axis's simple effects (:data:`.stats.EFFECTS`)
#: and both axes at once, F - U, in the order B - U, W - U, F - U, F - W, F - B.
INTERVENTION_EFFECTS: dict[str, dict[str, float]] = {
    "behavior, nominal world (B - U)": EFFECTS["behavior, nominal world (B - U)"],
    "world, nominal behavior (W - U)": EFFECTS["world, nominal behavior (W - U)"],
    "both axes (F - U)": {"Ungrounded": -1.0, "FullyGrounded": 1.0},
    "behavior, grounded world (F - W)": EFFECTS["behavior, grounded world (F - W)"],
    "world, grounded behavior (F - B)": EFFECTS["world, grounded behavior (F - B)"],
}


def change_name(condition: str) -> str:
    """The name of the difference between ``condition`` and ``nominal`` (a column of the effects)."""
    return f"{condition} - nominal"


def _cell_runs(runs: Sequence[EvalRun], design: AblationDesign) -> dict[tuple[str, str], list[EvalRun]]:
    """``{(method, cell): lab runs}`` of the cells the interventions read: real-only and sim-only (their method's,
    ``flow``), then each method's co-trained variants at the rule's real_fraction."""
    out: dict[tuple[str, str], list[EvalRun]] = {}
    lab = [r for r in runs if r.env == "lab"]
    out[(SINGLE_DOMAIN_METHOD, REAL_ONLY)] = [r for r in lab if r.variant is None and r.real_fraction == 1.0]
    if 0.0 in design.sweep_values():
        sim_only = [r for r in lab if r.real_fraction == 0.0 and r.variant == design.sweep_variant]
        out[(SINGLE_DOMAIN_METHOD, SIM_ONLY)] = [r for r in sim_only if r.method == SINGLE_DOMAIN_METHOD]
    for method in design.methods:
        for variant in design.variants:
            rf = design.rule_fraction(variant)
            out[(method, variant)] = [r for r in lab if (r.method, r.variant, r.real_fraction) == (method, variant, rf)]
    return {k: v for k, v in out.items() if v}


def interventions_analysis(
    design: AblationDesign, tasks: Sequence[Task], store: Store, runs: Sequence[EvalRun]
) -> dict[str, Any]:
    """``report["interventions"]`` from the design's finished evaluations (``runs``: the tables', under nominal).

    Returns:
        ``conditions`` (the interventions), ``paired_episodes`` (whether they ran the nominal evaluation's
        episodes: no ``eval_split``), ``cells`` (one row per cell: ``method``, ``cell``, lab success under
        ``nominal`` and each intervention with intervals, and per intervention its change from nominal) and
        ``effects`` (``{effect: {column: {method or "all methods": contrast}}}``, columns ``nominal``, each
        intervention and each intervention minus nominal).
    """
    conditions = ["nominal", *design.interventions]
    by_condition = {"nominal": _cell_runs(runs, design)}
    for condition in design.interventions:
        by_condition[condition] = _cell_runs(load_runs(tasks, store, intervention=condition), design)
    cells: dict[tuple[str, str], dict[str, np.ndarray]] = {}  # (method, cell) -> {condition: matrix}
    for condition, found in by_condition.items():
        for key, matched in found.items():
            cells.setdefault(key, {})[condition] = cell_matrix(matched, METRIC)
    rows = []
    for (method, cell), per_condition in sorted(cells.items(), key=lambda kv: _order(kv[0], design)):
        row: dict[str, Any] = {"method": method, "cell": cell}
        for condition in conditions:
            row[condition] = mean_ci(per_condition.get(condition))
        for condition in design.interventions:
            row[change_name(condition)] = contrast(per_condition, {condition: 1.0, "nominal": -1.0})
        rows.append(row)
    # The axes' effects: one set of cells per method, keyed (condition, variant), and every effect under each
    # condition and as each intervention's difference from nominal.
    by_method = {
        method: {(c, cell): x for (m, cell), per in cells.items() if m == method for c, x in per.items()}
        for method in design.methods
    }
    contrasts: dict[str, dict[Any, float]] = {}
    for name, weights in INTERVENTION_EFFECTS.items():
        for condition in conditions:
            contrasts[f"{name} | {condition}"] = {(condition, v): w for v, w in weights.items()}
        for condition in design.interventions:
            contrasts[f"{name} | {change_name(condition)}"] = {
                **{(condition, v): w for v, w in weights.items()},
                **{("nominal", v): -w for v, w in weights.items()},
            }
    table: dict[str, dict[str, Any]] = {}
    for label, per in effects(by_method, contrasts).items():
        name, column = label.split(" | ")
        table.setdefault(name, {})[column] = per
    return {
        "conditions": list(design.interventions),
        "paired_episodes": design.eval_split is None,
        "cells": rows,
        "effects": table,
    }


def _order(key: tuple[str, str], design: AblationDesign) -> tuple[int, int]:
    method, cell = key
    fixed = [REAL_ONLY, SIM_ONLY, *design.variants]
    first = -1 if cell in (REAL_ONLY, SIM_ONLY) else design.methods.index(method)
    return first, fixed.index(cell)


def _excludes_zero(x: Mapping[str, Any]) -> bool:
    ci = x.get("ci95")
    return ci is not None and (ci[0] > 0 or ci[1] < 0)


def _difference(x: Mapping[str, Any] | None) -> str:
    """A difference from nominal in points, marked where its interval excludes zero."""
    if not x or x.get("withheld"):
        return "not pooled: the methods differ" if x else "n/a"
    return _pts(x) + (" (excludes 0)" if _excludes_zero(x) else "")


def interventions_markdown(report: Mapping[str, Any]) -> list[str]:
    """The report's interventions section (none without ``report["interventions"]``)."""
    found = report.get("interventions")
    if not found:
        return []
    conditions = found["conditions"]
    out = ["## Interventions: the lab with part of its gap taken away", ""]
    out += [f"- `{c}`: {CONDITIONS[c].description}." for c in conditions]
    episodes = (
        "the nominal evaluation's lab episodes (paired by episode)"
        if found["paired_episodes"]
        else "the condition's own episodes of the split"
    )
    out += [
        "",
        f"The table's policies evaluated again in the lab under each diagnostic condition, on {episodes}. Reading: "
        "the timing explanation is supported where an axis's effect under `nominal-timing` differs from nominal "
        "(its `nominal-timing - nominal` row) with an interval excluding zero.",
        "",
        "**Lab success**, % [95% interval]; change from nominal, points",
        "",
        "| method | cell | nominal | " + " | ".join(f"{c} | change" for c in conditions) + " |",
        "|---|---|---|" + "---|---|" * len(conditions),
    ]
    for row in found["cells"]:
        shown = [f"{_pct(row[c])} | {_difference(row[change_name(c)])}" for c in conditions]
        out.append(f"| {row['method']} | {row['cell']} | {_pct(row['nominal'])} | " + " | ".join(shown) + " |")
    effects_table = found["effects"]
    if effects_table:
        first = next(iter(effects_table.values()))
        methods = list(next(iter(first.values())))
        out += ["", "**Axes' lab success effects** under each condition, points [95% interval]", ""]
        out += ["| effect | under | " + " | ".join(methods) + " |", "|---|---|" + "---|" * len(methods)]
        for name, columns in effects_table.items():
            for column, per in columns.items():
                show = _difference if column.endswith(" - nominal") else _plain
                out.append(f"| {name} | {column} | " + " | ".join(show(per.get(m)) for m in methods) + " |")
    return [*out, ""]


def _plain(x: Mapping[str, Any] | None) -> str:
    if not x:
        return "n/a"
    return "not pooled: the methods differ" if x.get("withheld") else _pts(x)


__all__ = ["INTERVENTION_EFFECTS", "SIM_ONLY", "change_name", "interventions_analysis", "interventions_markdown"]
