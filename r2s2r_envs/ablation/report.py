"""The report in Markdown (:func:`to_markdown`, one function per section), the tables and effects as printed by
``r2s2r ablation`` (:func:`print_table`), and :func:`write_report`, which writes ``report.md``, ``report.json`` and
the plots."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from r2s2r_envs.ablation.arms_report import arms_markdown
from r2s2r_envs.ablation.interventions_report import interventions_markdown
from r2s2r_envs.ablation.plots import plot_all
from r2s2r_envs.ablation.specs import REAL_ONLY, Task
from r2s2r_envs.ablation.stats import (
    FINDINGS_ALPHA,
    HETEROGENEITY_ALPHA,
    METRIC_NAMES,
    METRICS,
    report_interval_method,
)
from r2s2r_envs.ablation.stats import format_percent as _pct
from r2s2r_envs.ablation.stats import format_points as _pts
from r2s2r_envs.ablation.store import Store, write_json_atomic
from r2s2r_envs.ablation.study import AblationDesign
from r2s2r_envs.ablation.tables import analyze
from r2s2r_envs.safe_json import plain_json


def write_report(design: AblationDesign, tasks: Sequence[Task], store: Store, out_dir: str | Path) -> Path:
    """Writes ``report.md``, ``report.json`` and the PNG plots to ``out_dir``; returns the Markdown's path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report = analyze(design, tasks, store)
    write_json_atomic(out / "report.json", plain_json(report), sort_keys=False)
    (out / "report.md").write_text(to_markdown(design, report))
    plot_all(design, report, out)
    return out / "report.md"


def print_table(report_json: str | Path, emit: Callable[[str], None] = print) -> None:
    """Prints the four-variant table and the effects of a written ``report.json``, and which interval method made
    them (reports made before method 2 are marked as such); then its interventions, if it has them."""
    report = json.loads(Path(report_json).read_text())
    emit(f"Intervals: {report_interval_method(report)}")
    emit(variant_markdown(report))
    if "detectable" in report:
        emit(detectable_markdown(report))
    emit(effects_markdown(report))
    if "interventions" in report:
        emit("\n" + "\n".join(interventions_markdown(report)))


def to_markdown(design: AblationDesign, report: Mapping[str, Any]) -> str:
    """The whole report as Markdown, section by section."""
    return "\n".join(
        [
            *_header_lines(design, report),
            *_variants_lines(report),
            *_data_cards_lines(report),
            *_effects_lines(report),
            *arms_markdown(report),
            *interventions_markdown(report),
            *_findings_lines(report),
            *_study_lines(report),
            *_versus_real_only_lines(report),
            *_failures_lines(report),
            *_sweep_lines(design, report),
            *_mixture_lines(design, report),
            *_chain_lines(report),
            *_tasks_lines(report),
        ]
    )


def _header_lines(design: AblationDesign, report: Mapping[str, Any]) -> list[str]:
    """The title, the lab, the data, the methods and training, and the interval method."""
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
    ]
    return out


def _variants_lines(report: Mapping[str, Any]) -> list[str]:
    return [
        "## Four-variant table",
        "",
        "Sim columns: each policy in its own simulated variant; real-only policies are evaluated in the lab only.",
        "",
        variant_markdown(report),
        "",
        detectable_markdown(report),
        "",
    ]


def _data_cards_lines(report: Mapping[str, Any]) -> list[str]:
    if not report.get("data_cards"):  # a report.json written before data cards
        return []
    return [
        "## Who made each cell's data (data cards)",
        "",
        "Per dataset, from its data card (docs/datasets.md#data-card): the demonstrator's successes per attempt; "
        "medians over the episodes of the time to sort, of each object's arrival-to-closure time (objects in the "
        "order the belt brings them), of the margin at the lift before the object would have left the reach, and of "
        "the mean squared jerk of the demonstrator's commanded TCP path.",
        "",
        data_cards_markdown(report["data_cards"]),
        "",
    ]


def data_cards_markdown(cards: Sequence[Mapping[str, Any]]) -> str:
    """The compact table of the data cards (``report["data_cards"]``)."""
    lines = [
        "| data | variant | demonstrator success | attempts | time to sort, s | arrival to closure, s | "
        "margin at lift, s | grasp types | squared jerk, m^2/s^6 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for entry in cards:
        card = entry.get("card")
        if not card:
            why = "not made yet" if not entry.get("done") else "none (`r2s2r datasets card FILE --store` adds it)"
            lines.append(f"| {entry['data']} | {entry['variant']} | {why} | | | | | | |")
            continue
        d, grasps = card.get("demonstrator") or {}, card.get("grasps") or {}
        rate = d.get("success_rate")
        success = "n/a" if rate is None else f"{100 * rate:.0f}% ({d.get('successes')}/{d.get('attempts')})"
        if grasps.get("available"):
            arrival = " / ".join(_median(o.get("arrival_to_closure_s")) for o in grasps.get("objects") or []) or "n/a"
            margin = _median(grasps.get("margin_s"))
            types = ", ".join(f"{k} {v}" for k, v in (grasps.get("types") or {}).items() if v) or "none"
        else:
            arrival = margin = types = "n/a"
        lines.append(
            f"| {entry['data']} | {entry['variant']} | {success} | {d.get('attempts')} | "
            f"{_median((card.get('time_to_sort') or {}).get('seconds'))} | {arrival} | {margin} | {types} | "
            f"{_median((card.get('smoothness') or {}).get('mean_squared_jerk'))} |"
        )
    return "\n".join(lines)


def _median(s: Mapping[str, Any] | None) -> str:
    return "n/a" if not s or s.get("median") is None else f"{s['median']:.3g}"


def _effects_lines(report: Mapping[str, Any]) -> list[str]:
    return [
        "## Effect of each grounding axis (co-trained policies, lab)",
        "",
        "world = ((W - U) + (F - B)) / 2, behavior = ((B - U) + (F - W)) / 2, interaction = (F - B) - (W - U).",
        effects_markdown(report),
        "",
    ]


def _findings_lines(report: Mapping[str, Any]) -> list[str]:
    return [
        "## Which axis matters (lab)",
        "",
        findings_markdown(report) or "No effect could be computed: cells are missing.",
        "",
    ]


def _study_lines(report: Mapping[str, Any]) -> list[str]:
    return [
        "## Side by side with the study (docs/concepts.md#findings)",
        "",
        "The study's figures are success on its real robot; here, in this run's lab (a simulated stand-in). "
        "Directions and sizes compare; the tasks and robots differ.",
        "",
        versus_study_markdown(report),
        "",
    ]


def _versus_real_only_lines(report: Mapping[str, Any]) -> list[str]:
    out = ["## Each variant against real-only (lab, points)", ""]
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
    return out


def _failures_lines(report: Mapping[str, Any]) -> list[str]:
    if not report.get("failures"):
        return []
    return ["", "## Where policies fail", "", failures_markdown(report), ""]


def _sweep_lines(design: AblationDesign, report: Mapping[str, Any]) -> list[str]:
    if not report["sweep"]:
        return []
    out = ["", f"## real_fraction sweep ({design.sweep_variant})", ""]
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
    out.append("real_fraction 1.0 is the real-only policy (evaluated in the lab only); 0.0 trains on sim data only.")
    out += ["", detectable_markdown(report, "sweep")]
    return out


def _mixture_lines(design: AblationDesign, report: Mapping[str, Any]) -> list[str]:
    if not report["mixture"]:
        return []
    out = ["", "## Mixture analysis (lab rollouts, nearest-neighbour attribution)", ""]
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
    return out


def _chain_lines(report: Mapping[str, Any]) -> list[str]:
    if report.get("chain") is None:
        return []
    return ["", "## The lab's chain", "", chain_markdown(report["chain"])]


def _tasks_lines(report: Mapping[str, Any]) -> list[str]:
    """Tasks finished, failed and skipped (with why), and the plots written beside the report."""
    missing = report["tasks"]["missing"]
    out = ["", "## Tasks", "", f"{report['tasks']['finished']} of {report['tasks']['total']} tasks finished."]
    if missing:
        out.append("Without results (failed or blocked): " + "; ".join(missing))
    for failed in report["tasks"].get("failed", []):
        out.append(f"- failed: {failed['label']}: {failed['error']}")
    for skipped in report["tasks"].get("skipped", []):
        out.append(f"- skipped: {skipped['label']}: {skipped['reason']}")
    out += ["", "Plots: variants.png, effects.png, sweep.png, mixture.png.", ""]
    return out


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
            gap = (entry.get("visual_gap") or {}).get("cameras")
            if gap:  # the image track's: cameras and look identified too
                result += "; visual gap, spec sheet -> identified: " + ", ".join(
                    f"{camera} {row['nominal']:.3g} -> {row['grounded']:.3g}" for camera, row in gap.items()
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


def _calibration(summary: Mapping[str, Any]) -> str:
    c = summary.get("calibration")
    if not c:
        return "n/a"
    return f"{100 * c['real_demos_real_like']:.0f} / {100 * c['sim_demos_real_like']:.0f}"


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
