"""The report's numbers (:func:`analyze`): the four-variant table, the data cards of the cells' data, the effects
and findings, the comparison with the study, the real_fraction sweep, where policies fail, the mixture summaries,
the chain's stages, the tasks' status, the control arms and the interventions, read from a design's finished tasks
in the store; the statistics themselves are in :mod:`.stats`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from r2s2r_envs.ablation.arms_report import arms_analysis
from r2s2r_envs.ablation.interventions_report import interventions_analysis
from r2s2r_envs.ablation.runs import EvalRun, cell_matrix, load_runs
from r2s2r_envs.ablation.specs import REAL_ONLY, SINGLE_DOMAIN_METHOD, VARIANTS, Task
from r2s2r_envs.ablation.stats import (
    INTERVALS,
    METRICS,
    contrast,
    detectable,
    effects,
    finding_policies,
    findings,
    mean_ci,
)
from r2s2r_envs.ablation.store import Store
from r2s2r_envs.ablation.study import AblationDesign
from r2s2r_envs.ablation.tasks import data_path
from r2s2r_envs.datasets import DatasetError, open_dataset
from r2s2r_envs.datasets.card import card_state

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
                row[f"{env}_{metric}"] = mean_ci(cell_matrix(cell, metric) if cell else None)
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
                    row[f"{env}_{metric}"] = mean_ci(cell_matrix(cell, metric) if cell else None)
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


def data_cards(design: AblationDesign, tasks: Sequence[Task], store: Store) -> list[dict[str, Any]]:
    """The data card of every data task (the real data, then each variant's sim data): the one its record holds,
    else the one stored current in its dataset file (a record made before data cards), else ``None``."""
    variant_of = {design.real.label: "real", **{spec.label: v for v, spec in design.sim}}
    out = []
    for task in tasks:
        if task.kind != "data":
            continue
        label = str(task.config.get("label"))
        card = None
        done = store.is_done("data", task.key)
        if done:
            card = store.done_record("data", task.key).get("card") or _stored_card(store, task.key)
        cell = (task.config.get("arm") or {}).get("cell")  # a control arm's data: its cell
        out.append({"data": label, "variant": cell or variant_of.get(label, label), "done": done, "card": card})
    return out


def _stored_card(store: Store, key: str) -> dict[str, Any] | None:
    """The current card stored in a finished data task's dataset file, if it has one."""
    try:
        with open_dataset(data_path(store, key), verify="quick") as f:
            state, card = card_state(f)
    except (DatasetError, OSError):
        return None
    return card if state == "current" else None


def mixture_summaries(tasks: Sequence[Task], store: Store) -> list[dict[str, Any]]:
    """The summary of every finished mixture task."""
    out = []
    for task in tasks:
        if task.kind == "mixture" and store.is_done("mixture", task.key):
            s = store.done_record("mixture", task.key)["summary"]
            s = {**s, "sim_variant": task.config["sim_variant"], "key": task.key}
            out.append(s)
    return out


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
    report["data_cards"] = data_cards(design, tasks, store)
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
    if design.arms:
        report["arms"] = arms_analysis(design, tasks, store, runs)
    if design.interventions:
        report["interventions"] = interventions_analysis(design, tasks, store, runs)
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
                    visual_gap=record.get("visual_gap"),
                )
            elif task.kind == "behavior":
                entry.update(sources=record["sources"], demos=record["demos"], sha256=record["sha256"])
            else:
                entry.update(num_demos=record["num_demos"], sha256=record["sha256"])
            entry["wall_time_s"] = record.get("wall_time_s")
        out.append(entry)
    return out
