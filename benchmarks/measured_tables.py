"""Render docs/measured.md's tables and the README's headline from the committed JSON records, so that they cannot
drift.

Every figure in a generated table is read from a JSON record committed in the repository (under
``benchmarks/results/`` for speed, ``experiments/`` for studies, or a shipped file such as the default grounding); a
row whose figure has no committed record says so and links to the README that holds the figure, and states no number.
The tables sit between ``<!-- BEGIN generated: NAME -->`` and ``<!-- END generated: NAME -->`` markers; the text
around them is the page's own.

    python benchmarks/measured_tables.py            # rewrite the generated blocks of both pages
    python benchmarks/measured_tables.py --check    # exit 1, printing the difference, when a page is stale

``tests/test_measured_tables.py`` runs ``--check``. The script reads JSON only (standard library, no package import),
so it runs in a second. To add a row, add a ``Row`` to ``TABLES`` whose ``render`` reads the record; a goal met or not
is decided here from the record's value, never written by hand.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "measured.md"
README = ROOT / "README.md"
RESULTS = "benchmarks/results"
#: Scientific records (studies), apart from the speed records above.
EXPERIMENTS = "experiments"

SPEED = f"{RESULTS}/speed/env_speed.json"
PLANNER = f"{RESULTS}/speed/planner_success.json"
GROUNDING = "r2s2r_envs/grounding/groundings/default.json"
TUNING = f"{EXPERIMENTS}/demonstrator-tuning/grounded.json"
AXIS_V2 = f"{EXPERIMENTS}/behavior-axis-v2/behavior_axis_seed8000.json"
SIMILARITY_V2 = f"{EXPERIMENTS}/behavior-similarity-v2/behavior_similarity.json"
TRAINING = f"{RESULTS}/training-speed/training_speed.json"
VECTOR_SPEED = f"{RESULTS}/vector-speed/run6_free_cores.json"  # make_vec on free cores
VECTOR_EVALUATE = f"{RESULTS}/vector-speed/run7_evaluate_ppo.json"  # evaluate, its floor, PPO
TEST_SUITE = f"{RESULTS}/test-suite/test_suite_time.json"
DATASET_SPEED = f"{RESULTS}/dataset-speed/dataset_speed.json"
BEHAVIOR_SPEED = f"{RESULTS}/behavior-speed/behavior_speed.json"
ABLATION = f"{EXPERIMENTS}/ablation-cpu/report/report.json"
TELEOPERATOR = f"{EXPERIMENTS}/teleoperator/teleoperator.json"
RECOVERY = f"{EXPERIMENTS}/identification-recovery/identification_recovery.json"
RL_DR = f"{EXPERIMENTS}/rl-dr/results/rl_dr_lab.json"

#: READMEs holding figures that have no committed JSON record.
UNRECORDED = f"{RESULTS}/speed-unrecorded/README.md"


@cache
def record(path: str) -> Any:
    """A committed JSON record, by its path from the repository root."""
    return json.loads((ROOT / path).read_text(encoding="utf-8"))


def pct(x: float, digits: int = 0) -> str:
    return f"{100 * x:.{digits}f}%"


def ci(pair: list[float], digits: int = 1) -> str:
    return f"{100 * pair[0]:.{digits}f}-{100 * pair[1]:.{digits}f}%"


def points(x: float) -> str:
    return f"{100 * x:+.0f}"


def met(ok: bool) -> str:
    return "met" if ok else "**not met**"


def causes(counts: dict[str, int]) -> str:
    """Failure causes with a count, largest first: ``missed 23, dropped 11``."""
    items = sorted(((n, k) for k, n in counts.items() if n), key=lambda t: (-t[0], t[1]))
    return ", ".join(f"{k.replace('_', ' ')} {n}" for n, k in items) or "none"


def success(summary: dict[str, Any], key: str = "success_rate") -> str:
    return f"{pct(summary[key])} ({ci(summary[key + '_ci95'])})"


@dataclass(frozen=True)
class Row:
    """One table row: what is measured, its goal, and how the record gives the figure."""

    measure: str
    goal: str = ""
    source: str | None = None  # the record's path; None: no committed record
    render: Callable[[], str] | None = None
    readme: str | None = None  # where a figure without a record is written
    see: str | None = None  # the page whose own generated table or record holds the figures

    def cells(self) -> tuple[str, str, str, str]:
        if self.see is not None:
            assert self.readme, self.measure
            name = self.readme.split("/")[-2]
            return self.measure, self.goal, f"see {self.see}", f"[{name}](../{self.readme})"
        if self.source is None:
            assert self.readme, self.measure
            name = self.readme.split("/")[-2]
            return self.measure, self.goal, "no committed record", f"[{name}](../{self.readme})"
        assert self.render is not None
        return self.measure, self.goal, self.render(), f"[{Path(self.source).name}](../{self.source})"


# --- speed and scale -------------------------------------------------------------------------------------------


def dataset_generation() -> str:
    g = record(DATASET_SPEED)["generation"]
    per = g["per_workers"]
    speedup = g["speedup_2_vs_1"]
    return (
        f"{per['2']['demos_per_minute']:.0f} / {per['1']['demos_per_minute']:.0f} demos/min = {speedup:.2f}x"
        f"{'' if g['identical_content'] else ', files differ'}: {met(speedup >= 1.8)}"
    )


def loader_speed() -> str:
    loader = record(DATASET_SPEED)["loader"]
    value = loader["numpy_samples_per_second"]
    return f"{value:,.0f} (torch DataLoader {loader['torch_samples_per_second']:,.0f}): {met(value >= 50000)}"


def loader_memory() -> str:
    loader = record(DATASET_SPEED)["loader"]
    ratio = loader["peak_over_arrays"]
    peak, arrays = loader["peak_traced_mb"], loader["arrays_mb"]
    return f"{peak:.1f} MB / {arrays:.1f} MB = {ratio:.2f}x: {met(ratio <= 2.0)}"


def behavior_costs() -> str:
    b = record(BEHAVIOR_SPEED)
    shares = {name: d["act_over_step"] for name, d in b["demonstrators"].items()}
    fit, compare = b["fit"]["wall_s"], b["compare"]["wall_s"]
    ok = max(shares.values()) <= 0.20 and fit <= 300 and compare <= 60
    listed = " / ".join(f"{name} {pct(share, 1)}" for name, share in shares.items())
    return f"{listed}; {fit:.1f} s / {compare:.1f} s: {met(ok)}"


def env_speed_raw() -> str:
    value = record(SPEED)["raw_mj_step_per_s"]
    return f"{value:,.0f}: {met(value >= 8000)}"


def env_speed_steps() -> str:
    state = record(SPEED)["state"]
    return f"{state['zeros']['env_steps_per_s']:,.0f} / {state['random']['env_steps_per_s']:,.0f}"


def env_speed_ratio() -> str:
    state = record(SPEED)["state"]
    random_ratio = state["random"]["overhead_ratio"]
    return f"{random_ratio:.3f} (zero actions {state['zeros']['overhead_ratio']:.3f}): {met(random_ratio <= 1.10)}"


def env_speed_images() -> str:
    rgb = record(SPEED)["rgb"]
    frames = rgb["image_frames_per_s"]
    return f"{frames:,.0f} ({rgb['env_steps_per_s']:,.0f} env steps/s): {met(frames >= 100)}"


def env_speed_world() -> str:
    w = record(SPEED)["world_change"]
    return (
        f"{1000 * w['in_place_s']:.1f} ms / {1000 * w['recompile_s']:.1f} ms "
        f"(one episode's simulation: {1000 * w['episode_simulation_s']:.0f} ms)"
    )


def planner(world: str, goal: float | None = None) -> Callable[[], str]:
    def render() -> str:
        summary = record(PLANNER)["results"][world]["summary"]
        text = f"{success(summary)}; failures: {causes(summary['failure_causes'])}"
        if goal is not None:
            text += f": {met(summary['success_rate'] >= goal)}"
        return text

    return render


def planner_episodes() -> int:
    return int(record(PLANNER)["config"]["episodes"])


# --- grounding, demonstrators and baselines --------------------------------------------------------------------


def sysid_time() -> str:
    t = record(GROUNDING)["provenance"]["wall_time_s"]
    ident = t["logging"] + t["fitting"] + t["validation"]
    return (
        f"{ident:.0f} s (logging {t['logging']:.0f}, fitting {t['fitting']:.0f}, held-out validation "
        f"{t['validation']:.0f}), then {t['planner']:.0f} s of planner episodes; {t['total']:.0f} s in all: "
        f"{met(t['total'] <= 600)}"
    )


NRMSE_GROUPS = ("arm joints", "fingers", "objects on the belt", "held objects")


def nrmse_cut() -> str:
    nrmse = record(GROUNDING)["validation"]["nrmse"]
    cuts = [nrmse[g]["reduction_percent"] for g in NRMSE_GROUPS]
    held_beyond = nrmse["held objects"]["beyond_noise"]["reduction_percent"]
    short = [g for g, c in zip(NRMSE_GROUPS, cuts, strict=True) if c < 70]
    verdict = "met" if not short else "**not met** for " + ", ".join(short)
    return " / ".join(f"{c:.1f}%" for c in cuts) + f" ({held_beyond:.1f}% beyond sensor noise): {verdict}"


def identified() -> str:
    g = record(GROUNDING)
    world, lo_hi = g["world"], g["intervals"]
    lat, lat_ci = world["control_latency"], lo_hi["control_latency"]
    belt, belt_ci = world["belt_speed"], lo_hi["belt_speed"]
    offset = ", ".join(f"{1000 * v:.1f}" for v in world["object_pos_offset"])
    return (
        f"{1000 * lat:.0f} ms ({1000 * lat_ci[0]:.0f}-{1000 * lat_ci[1]:.0f}); ({offset}) mm; "
        f"{belt:.4f} m/s ({belt_ci[0]:.4f}-{belt_ci[1]:.4f})"
    )


def grounded_planner() -> str:
    p = record(GROUNDING)["validation"]["planner"]
    rows = p["rows"]
    cells = [pct(rows["nominal"]["success_rate"])] + [success(rows[k]) for k in ("grounded", "lab")]
    return " / ".join(cells) + f": grounding closes {p['gap']['closed_percent']:.0f}% of the gap"


def tuned_planner() -> str:
    by_env = {e["env_id"]: e for e in record(TUNING)["evaluation"]}
    envs = ("PickSort-WorldGrounded-v0", "PickSort-Real-v0")
    tuned = " / ".join(pct(by_env[e]["tuned"]["success"]) for e in envs)
    default = " / ".join(pct(by_env[e]["default"]["success"]) for e in envs)
    diffs = " / ".join(
        f"{points(by_env[e]['success_diff'])} [{points(by_env[e]['success_diff_ci95'][0])}, "
        f"{points(by_env[e]['success_diff_ci95'][1])}]"
        for e in envs
    )
    nominal = by_env["PickSort-Ungrounded-v0"]
    return (
        f"{tuned} against {default} with the default settings ({diffs} points, paired); nominal sim "
        f"{points(nominal['success_diff'])} [{points(nominal['success_diff_ci95'][0])}, "
        f"{points(nominal['success_diff_ci95'][1])}]"
    )


def recovery() -> str:
    labs = record(RECOVERY)["labs"]
    within = [lab["seed"] for lab in labs if not lab["outside_tolerance"]]
    misses = "; ".join(
        f"lab {lab['seed']}: " + ", ".join(lab["outside_tolerance"]) for lab in labs if lab["outside_tolerance"]
    )
    return f"{len(within)} of {len(labs)} labs ({misses or 'none outside'}) {met(len(within) == len(labs))}"


def teleoperator() -> str:
    row = next(r for r in record(TELEOPERATOR)["rows"] if r["label"] == "default")
    return f"{success(row)} {met(0.80 <= row['success_rate'] <= 0.95)}"


def rl_dr() -> str:
    lab = record(RL_DR)
    steps = lab["method"].get("env_steps")
    return f"{success(lab['summary'])} in the lab after {steps:,} randomized env steps"


def generator_success() -> str:
    axis = record(AXIS_V2)
    worlds = ("PickSort-FullyGrounded-v0", "PickSort-Real-v0", "PickSort-BehaviorGrounded-v0")
    rows = [axis[f"generator in {w}"] for w in worlds]
    cells = " / ".join(f"{pct(r['success'])} ({ci(r['success_ci95'], 0)})" for r in rows)
    ok = rows[0]["success"] >= 0.75 and rows[1]["success"] >= 0.60
    return f"{cells}: {met(ok)}"


def generator_similarity() -> str:
    rows = {r["row"]: r for r in record(SIMILARITY_V2)["rows"]}
    gen, ref = rows["generator, nominal sim"], rows["teleoperator, nominal sim"]
    ok = all(g["met"] for g in record(SIMILARITY_V2)["goals"].values())
    return (
        f"{gen['auc_all']:.3f} / {ref['auc_all']:.3f} (strategy traits: {gen['auc_strategy']:.3f} / "
        f"{ref['auc_strategy']:.3f}); identified sim and lab rows in the record: {met(ok)}"
    )


def training_cpu() -> str:
    synthetic = record(TRAINING)["synthetic"]
    methods = ("bc", "flow", "flow-cfg-adda")
    runs = [synthetic[f"cpu/{m}/threads=1"] for m in methods]
    ok = all(r["projected_run_s"] <= r["goal_s"] for r in runs)
    return " / ".join(f"{r['projected_run_s'] / 60:.0f}" for r in runs) + f" min, projected: {met(ok)}"


def evaluate_speed() -> str:
    e = record(VECTOR_EVALUATE)["evaluate"]
    workers, batch = e["workers_s"][0], e["batch_s"][0]
    return f"{workers:.0f} s / {batch:.0f} s: {met(min(workers, batch) <= 300)}"


def batch_speedup() -> str:
    e = record(VECTOR_EVALUATE)["evaluate"]
    ratio = e["median_ratio"]
    return (
        f"{ratio:.2f}x (the physics alone, no policy: at most {e['ratio_workers_over_floor']:.1f}x): "
        f"{met(ratio >= 3.0)}"
    )


def ppo_speedup() -> str:
    p = record(VECTOR_EVALUATE)["ppo"]
    return f"{p['median_ratio']:.2f}x"


def make_vec_speed() -> str:
    v = record(VECTOR_SPEED)["vector"]
    ratio = v["median_ratio"]
    return f"{ratio:.2f}x (two processes: {v['median_ratio_two_processes']:.2f}x): {met(ratio >= 1.7)}"


def test_suite_time() -> str:
    r = record(TEST_SUITE)
    return f"{r['wall_s'] / 60:.1f} min for {r['tests']['passed']:,} tests: {met(r['goal_met'])}"


TABLES: dict[str, list[Row]] = {
    "speed": [
        Row(
            "raw `mj_step`/s, arm holding still (`benchmarks/env_speed.py`)",
            ">= 8,000",
            SPEED,
            env_speed_raw,
        ),
        Row("env steps/s, state obs, zero / random actions", "", SPEED, env_speed_steps),
        Row("`env.step` time / raw physics time, random actions", "<= 1.10", SPEED, env_speed_ratio),
        Row(
            "128x128 image frames/s (2 cameras per step)",
            ">= 100",
            SPEED,
            env_speed_images,
        ),
        Row(
            "world change, `set_world` + `reset`: in place / recompiling",
            "well under one episode",
            SPEED,
            env_speed_world,
        ),
        Row(
            "`make_vec(num_envs=8)` / one env, steps/s",
            ">= 1.7x",
            VECTOR_SPEED,
            make_vec_speed,
        ),
        Row(
            "`make test`",
            "<= 6.5 min",
            TEST_SUITE,
            test_suite_time,
        ),
        Row(
            "scripted planner, 100 protocol episodes, nominal sim (`benchmarks/planner_success.py`)",
            ">= 90%",
            PLANNER,
            planner("sim", 0.90),
        ),
        Row(
            "same, sim with the lab's world parameters (an oracle)",
            "",
            PLANNER,
            planner("lab-world"),
        ),
        Row("same, in the lab", "", PLANNER, planner("lab")),
        Row(
            "dataset generation, 2 workers / 1 (`benchmarks/dataset_speed.py`)",
            ">= 1.8x",
            DATASET_SPEED,
            dataset_generation,
        ),
        Row(
            "low-dim loader, numpy batches of 256",
            ">= 50,000 samples/s",
            DATASET_SPEED,
            loader_speed,
        ),
        Row("peak memory loading a dataset", "<= ~2x the arrays", DATASET_SPEED, loader_memory),
        Row("canonical datasets: size and build time", "", readme=UNRECORDED),
    ],
    "grounding": [
        Row(
            "`r2s2r sysid --lab default`, the shipped grounding file's run",
            "<= 10 min",
            GROUNDING,
            sysid_time,
        ),
        Row(
            "held-out NRMSE cut: arm / fingers / objects on the belt / held objects",
            ">= 70%",
            GROUNDING,
            nrmse_cut,
        ),
        Row(
            "identified: latency, perception offset, belt speed",
            "",
            GROUNDING,
            identified,
        ),
        Row(
            "scripted planner, 100 episodes: nominal / grounded sim / lab (the file's validation)",
            "grounded much closer to the lab",
            GROUNDING,
            grounded_planner,
        ),
        Row(
            "planner tuned in the grounded world (`r2s2r tune-planner`), 100 episodes: grounded sim / lab",
            "",
            TUNING,
            tuned_planner,
        ),
        Row(
            "identification of random labs within tolerance (quick budget)",
            "every parameter",
            RECOVERY,
            recovery,
        ),
        Row(
            "teleoperator in the default lab, 100 episodes",
            "80-95%",
            TELEOPERATOR,
            teleoperator,
        ),
        Row(
            "human-like generator, 50 episodes: identified sim / lab / nominal sim",
            ">= 75% / >= 60% / none",
            AXIS_V2,
            generator_success,
        ),
        Row(
            "AUC against the lab's demos, nominal sim: generator / teleoperator",
            "generator <= teleoperator + 0.05",
            SIMILARITY_V2,
            generator_similarity,
        ),
        Row(
            "demonstrators' cost per env step; `fit-behavior`, `compare-behavior` time",
            "<= 20%; <= 5 min / <= 1 min",
            BEHAVIOR_SPEED,
            behavior_costs,
        ),
        Row(
            "`r2s2r train`, `cpu` recipe, 50 real + 1,000 sim demos: bc / flow / flow-cfg-adda",
            "<= 45 min on 2 cores",
            TRAINING,
            training_cpu,
        ),
        Row(
            "baselines at the `cpu` recipe (`baselines/reference.py`, retired)",
            "",
            readme=f"{EXPERIMENTS}/reference-cpu/README.md",
            see="[baselines.md](baselines.md#measured)",
        ),
        Row(
            "`evaluate`, 100 lab episodes: `workers=2` / `batch=16`",
            "<= 5 min",
            VECTOR_EVALUATE,
            evaluate_speed,
        ),
        Row(
            "`evaluate`, 100 lab episodes of a flow policy: `--workers 2` / `--batch 16`",
            ">= 3x",
            VECTOR_EVALUATE,
            batch_speedup,
        ),
        Row("PPO training env steps/s (`baselines/rl_dr.py`), `--num-envs 8` / 1", "", VECTOR_EVALUATE, ppo_speedup),
        Row(
            "PPO with domain randomization, zero-shot (`baselines/rl_dr.py`)",
            "honest report",
            RL_DR,
            rl_dr,
        ),
    ],
}

# --- the README's headline --------------------------------------------------------------------------------------


def estimate(cell: dict[str, Any] | None) -> str:
    """A mean or effect with its interval, in points: ``92.0 [87.0, 96.0]``."""
    if cell is None:
        return "not yet"
    value = cell["mean"] if "mean" in cell else cell["estimate"]
    low, high = cell["ci95"]
    sign = "+" if "estimate" in cell else ""
    return f"{100 * value:{sign}.1f} [{100 * low:{sign}.1f}, {100 * high:{sign}.1f}]"


def headline() -> str:
    """The ablation's four-variant table at the `cpu` recipe, lab success per method, and the axes' effects."""
    report = record(ABLATION)
    methods = list(report["tables"])
    tasks = report["tasks"]
    seeds = sorted({r["lab_success"]["seeds"] for m in methods for r in report["tables"][m] if r["lab_success"]})
    data = {
        "real-only": "50 lab demos (real-only)",
        "Ungrounded": "50 lab + 1,000 Ungrounded demos",
        "WorldGrounded": "50 lab + 1,000 WorldGrounded demos",
        "BehaviorGrounded": "50 lab + 1,000 BehaviorGrounded demos",
        "FullyGrounded": "50 lab + 1,000 FullyGrounded demos",
    }
    lines = [
        "| policy trained on | " + " | ".join(f"`{m}`" for m in methods) + " |",
        "|---|" + "---|" * len(methods),
    ]
    for variant, label in data.items():
        cells = []
        for m in methods:
            row = next((r for r in report["tables"][m] if r["variant"] == variant), None)
            if row is None:
                cells.append("n/a")
            elif row.get("method", m) != m:  # real-only has no sim data to treat: one method's policies serve all
                cells.append(f"the `{row['method']}` policies")
            else:
                cells.append(estimate(row["lab_success"]))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    effects = report["effects"]["success"]
    seed_text = "-".join(str(n) for n in sorted({seeds[0], seeds[-1]}))

    def effect(name: str) -> str:
        pooled = effects[name].get("all methods")
        if pooled is not None and pooled.get("estimate") is not None:
            return f"{estimate(pooled)} (both methods)"
        # Not pooled: the methods' effects differ (the report's heterogeneity test), so each is given.
        return ", ".join(f"`{m}` {estimate(effects[name][m])}" for m in methods)

    if "intervals" in report:
        method = "t-interval over training seeds and the 100 shared lab episodes per policy"
        mdd = report["detectable"]["success"]["mdd"]
        detect = f"; two co-trained cells differ detectably from {100 * mdd:.1f} points (80% power)"
    else:
        method, detect = "bootstrap over training seeds and 100 lab episodes per policy", ""
    lines += [
        "",
        f"Lab success, % [95% {method}, {seed_text} seeds{detect}]. Effects in the lab, points: world grounding "
        f"{effect('world')}; behavior grounding {effect('behavior')}; interaction {effect('interaction')} "
        f"({tasks['finished']} of {tasks['total']} tasks of the design finished; "
        "[intervals](docs/ablation.md#analysis)).",
    ]
    return "\n".join(lines)


#: Generated blocks of each page: block name -> what renders it.
PAGES: dict[Path, dict[str, Callable[[], str]]] = {
    DOC: {name: (lambda rows=rows: table(rows)) for name, rows in TABLES.items()},
    README: {"headline": headline},
}


def table(rows: list[Row]) -> str:
    lines = ["| measure | goal | measured | record |", "|---|---|---|---|"]
    lines += ["| " + " | ".join(row.cells()) + " |" for row in rows]
    return "\n".join(lines)


def render(text: str, blocks: dict[str, Callable[[], str]]) -> str:
    """``text`` with every generated block replaced by what its records give."""
    for name, make in blocks.items():
        begin, end = f"<!-- BEGIN generated: {name} -->", f"<!-- END generated: {name} -->"
        pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
        if not pattern.search(text):
            raise SystemExit(f"no block {begin} ... {end} in the page")
        block = f"{begin}\n{make()}\n{end}"
        text = pattern.sub(lambda _m, block=block: block, text)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a page differs from its records")
    parser.add_argument("--doc", type=Path, default=DOC, help="docs/measured.md's path (default: the repository's)")
    parser.add_argument("--readme", type=Path, default=README, help="README.md's path (default: the repository's)")
    args = parser.parse_args(argv)
    stale = 0
    for doc, blocks in ((args.doc, PAGES[DOC]), (args.readme, PAGES[README])):
        current = doc.read_text(encoding="utf-8")
        wanted = render(current, blocks)
        if current == wanted:
            continue
        if args.check:
            diff = difflib.unified_diff(
                current.splitlines(), wanted.splitlines(), str(doc), "from the records", lineterm=""
            )
            print("\n".join(diff))
            print(f"{doc} differs from its records: run python benchmarks/measured_tables.py", file=sys.stderr)
            stale = 1
            continue
        doc.write_text(wanted, encoding="utf-8")
        print(f"wrote {doc}")
    return stale


if __name__ == "__main__":
    sys.exit(main())
