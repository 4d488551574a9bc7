"""The control arms in the report (docs/ablation.md#control-arms): each arm cell's lab results, the decomposition of
the axes' effects with their intervals (``arms.ARM_EFFECTS``: world = physics + re-tune, behavior = pace + style,
...), per method and pooled where the methods do not differ, the paced arms' calibration and the matched scenes.

:func:`arms_analysis` adds ``report["arms"]`` (only for a design with arms: the reports of designs without keep their
form); :func:`arms_markdown` writes its section."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from r2s2r_envs.ablation.arm_data import PACE_FIGURES
from r2s2r_envs.ablation.arms import ARMS, arm_cells, effect_rows
from r2s2r_envs.ablation.runs import EvalRun, cell_matrix
from r2s2r_envs.ablation.specs import Task
from r2s2r_envs.ablation.stats import METRIC_NAMES, METRICS, effects, mean_ci
from r2s2r_envs.ablation.stats import format_percent as _pct
from r2s2r_envs.ablation.stats import format_points as _pts
from r2s2r_envs.ablation.store import Store
from r2s2r_envs.ablation.study import AblationDesign


def arms_cells(runs: Sequence[EvalRun], design: AblationDesign, metric: str) -> dict[str, dict[str, np.ndarray]]:
    """``{method: {cell: (seeds, episodes)}}`` in the lab: the table's variants at the rule's real_fraction and the
    arms' cells at their base variant's."""
    cells_of = {**{v: v for v in design.variants}, **arm_cells(design.arms)}
    out: dict[str, dict[str, np.ndarray]] = {}
    for method in design.methods:
        cells = {}
        for cell, base in cells_of.items():
            rf = design.rule_fraction(base)
            match = [r for r in runs if r.method == method and r.variant == cell and r.real_fraction == rf]
            match = [r for r in match if r.env == "lab"]
            if match:
                cells[cell] = cell_matrix(match, metric)
        out[method] = cells
    return out


def arms_analysis(
    design: AblationDesign, tasks: Sequence[Task], store: Store, runs: Sequence[EvalRun]
) -> dict[str, Any]:
    """``report["arms"]``: ``cells`` (per method, each arm cell's lab success and sort accuracy with intervals),
    ``effects`` (per metric, the decomposition rows per method and pooled), ``pace`` (per paced cell: target,
    achieved, settings and calibration rounds) and ``matched`` (per matched cell: attempts compared and kept)."""
    rows = effect_rows(design.arms)
    report: dict[str, Any] = {"arms": list(design.arms), "cells": {}, "effects": {}, "pace": [], "matched": []}
    for metric in METRICS:
        cells = arms_cells(runs, design, metric)
        report["effects"][metric] = effects(cells, rows)
        for method, per_cell in cells.items():
            table = report["cells"].setdefault(method, {})
            for cell in arm_cells(design.arms):
                table.setdefault(cell, {})[f"lab_{metric}"] = mean_ci(per_cell.get(cell))
    for task in tasks:
        arm = task.config.get("arm") if task.kind == "data" else None
        if not arm:
            continue
        record = store.done_record("data", task.key) if store.is_done("data", task.key) else {}
        if "pace" in arm:
            report["pace"].append(
                {"cell": arm["cell"], "data": task.config["label"], "done": bool(record), **record.get("pace", {})}
            )
        if "match" in arm:
            card = record.get("card") or {}
            report["matched"].append(
                {
                    "cell": arm["cell"],
                    "data": task.config["label"],
                    "done": bool(record),
                    **record.get("matched", {}),
                    "kept_seeds_sha256": (card.get("scenes") or {}).get("kept_seeds_sha256"),
                }
            )
    return report


def arms_markdown(report: Mapping[str, Any]) -> list[str]:
    """The report's control-arms section (none without ``report["arms"]``)."""
    arms = report.get("arms")
    if not arms:
        return []
    out = ["## Control arms: each axis split into its parts (lab)", ""]
    out += [f"- `{name}`: {ARMS[name].summary}." for name in arms["arms"]]
    out += [
        "",
        "Each arm cell is co-trained like the table's cells (same recipe, seeds and real_fraction as the variant whose "
        "data recipe it follows) and evaluated on the same lab episodes; rows of one split add up (world W - U = "
        "physics + re-tune; behavior B - U = pace + style, style being BehaviorGrounded minus the slowed planner).",
        "",
        "| method | cell | lab success, % | lab sort accuracy, % |",
        "|---|---|---|---|",
    ]
    for method, cells in arms["cells"].items():
        for cell, row in cells.items():
            out.append(f"| {method} | {cell} | {_pct(row['lab_success'])} | {_pct(row['lab_sort_accuracy'])} |")
    for metric, by_effect in arms["effects"].items():
        if not by_effect:
            continue
        methods = list(next(iter(by_effect.values())))
        out += ["", f"**{METRIC_NAMES[metric]}**, points [95% interval]", ""]
        out += ["| split | " + " | ".join(methods) + " |", "|---|" + "---|" * len(methods)]
        for name, per in by_effect.items():
            shown = ["not pooled: the methods differ" if per[m].get("withheld") else _pts(per[m]) for m in methods]
            out.append(f"| {name} | " + " | ".join(shown) + " |")
    if arms["pace"]:
        out += ["", "Paced arms (pace: medians over the grasps, s; docs/ablation.md#control-arms):", ""]
        out += [
            "| cell | target (from) | calibrated settings | calibration | pace of its data |",
            "|---|---|---|---|---|",
        ]
        for p in arms["pace"]:
            if not p["done"]:
                out.append(f"| {p['cell']} | not made yet | | | |")
                continue
            calibration = p["calibration"]
            settings = ", ".join(f"{k} {v:g}" for k, v in calibration["settings"].items())
            rounds = f"{len(calibration['rounds'])} rounds, {'within' if calibration['meets'] else 'outside'} tolerance"
            out.append(
                f"| {p['cell']} | {_pace(p['target'])} ({p['target']['data']}) | {settings} | {rounds} | "
                f"{_pace(p['achieved'])} |"
            )
    if arms["matched"]:
        out += ["", "Success-matched data (the scenes every variant's demonstrator solved):", ""]
        for m in arms["matched"]:
            if not m["done"]:
                out.append(f"- {m['cell']}: not made yet")
                continue
            solved = ", ".join(f"{v} {n}" for v, n in zip(m["variants"], m["solved"], strict=True))
            out.append(
                f"- {m['cell']}: {len(m['kept_attempts'])} scenes kept of {m['compared_attempts']} attempts every "
                f"variant made (solved: {solved}); env seeds hash {m['kept_seeds_sha256'] or 'n/a'}"
            )
        out.append("  The same hash in every row: the same scenes in every matched cell.")
    return [*out, ""]


def _pace(p: Mapping[str, Any] | None) -> str:
    if not p:
        return "n/a"
    shown = [f"{p.get(k):.2f}" if isinstance(p.get(k), (int, float)) else "n/a" for k in PACE_FIGURES]
    return f"arrival to closure {shown[0]}, transport {shown[1]} ({p.get('grasps')} grasps)"
