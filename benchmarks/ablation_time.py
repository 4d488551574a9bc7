"""Time of the grounding ablation: does ``r2s2r ablation --quick`` finish within 15 minutes on 2 cores, and what
would the full table take?

Runs the quick design (``r2s2r_envs.ablation.quick_design``) on a local Ray with ``--workers`` CPUs into ``--out``
(or, with ``--measured DIR``, reads a finished run instead of running), then prints:

- the run's wall time and its task graph's time, and the CPU-seconds spent per kind of task (data, train, eval,
  mixture), from each task's own record;
- a projection of the full design (``full_design``: its seeds, 5,000 training steps, 100 episodes per env, 1,000 sim
  demos per variant) from the quick run's per-task costs, scaled by what each kind of task does more in the full
  design (training steps, episodes, demos), summed over the full design's tasks and divided by the cores. The
  projection assumes the quick run's per-step costs (the machine's load during it included) and perfect packing
  of tasks onto cores; it ignores that the longest single task bounds the wall time from below.

With ``--full-run DIR`` (a run of the full design, finished or not: ``r2s2r ablation --out DIR``, or a record of
one) it projects instead from the full design's own finished tasks: per kind, the mean CPU-seconds of its finished
tasks (trainings apart for real-only and co-trained policies, evaluations per episode) times the design's tasks of
that kind, for the whole design and for its four-variant table alone (the design without the sweep). This is the
projection to read for a recipe other than the quick design's (the ``cpu`` recipe's networks cost several times
more per training step than the quick design's ``v1``).

Writes the figures as JSON with ``--json``.

Example::

    nice -n 10 python benchmarks/ablation_time.py --out runs/ablation-quick --workers 2 --json runs/ablation_time.json
    python benchmarks/ablation_time.py --measured experiments/ablation-quick --cores 2,16,64
    python benchmarks/ablation_time.py --full-run runs/ablation-cpu --json runs/ablation_time_full.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")  # before mujoco is imported

from r2s2r_envs.ablation.design import AblationDesign, Task, full_design, quick_design  # noqa: E402
from r2s2r_envs.ablation.store import Store  # noqa: E402

GOAL_QUICK_S = 15 * 60
GOAL_FULL_S = 4 * 3600  # issue 21: the full design within 4 hours on the 2-core machine, table first


def task_costs(tasks: list[Task], store: Store, field: str = "cpu_time_s") -> dict[str, list[tuple[Task, float]]]:
    """Per kind, ``(task, seconds)`` of every finished task from its own record: its CPU time (``cpu_time_s``: what
    it costs on an idle core, whatever the machine's load was) or its wall time (``wall_time_s``)."""
    out: dict[str, list[tuple[Task, float]]] = defaultdict(list)
    for task in tasks:
        if store.is_done(task.kind, task.key):
            record = store.done_record(task.kind, task.key)
            out[task.kind].append((task, float(record.get(field, record["wall_time_s"]))))
    return out


def _episodes_of(task: Task, design: AblationDesign) -> int:
    return int(task.config["episodes"])


def project(
    quick: AblationDesign,
    full: AblationDesign,
    costs: dict[str, list[tuple[Task, float]]],
    train_records: dict[str, dict],
) -> dict:
    """CPU-seconds of the full design's tasks, from the quick run's per-unit costs.

    Units: data, per generated demo (canonical datasets that exist cost nothing; missing ones are generated); train,
    per training step plus, for loading, per demo trained on (each training's CPU time split in the proportion of
    its recorded load and step times); eval, per episode (lab and sim together; the episode lengths of the quick
    run's policies); mixture, per lab episode. Costs are CPU-seconds where the records have them.
    """
    per_unit: dict[str, float] = {}
    gen = [(t, s) for t, s in costs.get("data", []) if t.config["canonical"] is None]
    if gen:
        per_unit["data"] = sum(s for _, s in gen) / sum(t.config["episodes"] for t, _ in gen)
    train = costs.get("train", [])
    if train:
        # Split each training's CPU time into loading (grows with the demos) and steps, in the proportion of its own
        # recorded load and step times.
        load_s = step_s = demos = steps = 0.0
        for task, cpu_s in train:
            record = train_records[task.key]
            share = record["load_time_s"] / max(record["load_time_s"] + record["train_time_s"], 1e-9)
            load_s += share * cpu_s
            step_s += (1 - share) * cpu_s
            meta = record["metadata"]
            demos += meta["n_real_demos"] + meta["n_sim_demos"]
            steps += quick.train.get("steps", 5000)
        per_unit["train"] = step_s / steps
        per_unit["train_load_per_demo"] = load_s / demos
    for kind in ("eval", "mixture"):
        runs = costs.get(kind, [])
        if runs:
            per_unit[kind] = sum(s for _, s in runs) / sum(_episodes_of(t, quick) for t, _ in runs)
    full_tasks = full.tasks()
    totals: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for task in full_tasks:
        counts[task.kind] += 1
        if task.kind == "data":
            units = 0 if task.config["canonical"] is not None else task.config["episodes"]
        elif task.kind == "train":
            rf = task.config["real_fraction"]
            n_demos = (full.real.episodes if rf > 0 else 0) + (1000 if rf < 1 else 0)
            totals["train_load"] += n_demos * per_unit.get("train_load_per_demo", 0.0)
            units = full.train.get("steps", 5000)
        else:
            units = task.config["episodes"]
        totals[task.kind] += units * per_unit.get(task.kind, 0.0)
    # The full design reads the canonical sim datasets; building each (if missing) is 1,000 demos.
    missing_data_s = 4 * 1000 * per_unit.get("data", 0.0)
    return {
        "per_unit_s": per_unit,
        "tasks": dict(counts),
        "cpu_s": dict(totals),
        "cpu_s_total": sum(totals.values()),
        "cpu_s_building_the_four_canonical_sim_datasets": missing_data_s,
    }


def project_from_full(full: AblationDesign, run_dir: Path) -> dict:
    """CPU-seconds of the full design's tasks from its own finished tasks (see the module docstring)."""
    import dataclasses
    import statistics

    store = Store(run_dir)
    hashes = _planned_hashes(run_dir)
    tasks = full.tasks(canonical_hashes=hashes)
    table = {t.key for t in dataclasses.replace(full, sweep_variant=None).tasks(canonical_hashes=hashes)}

    def group(task: Task) -> str:
        if task.kind == "train":
            return "train real-only" if task.config["real_fraction"] == 1.0 else "train co-trained"
        return task.kind

    measured: dict[str, list[float]] = defaultdict(list)
    for kind, runs in task_costs(tasks, store).items():
        for task, cpu_s in runs:
            per = cpu_s / task.config["episodes"] if kind in ("eval", "mixture") else cpu_s
            measured[group(task)].append(per)
    mean = {g: statistics.fmean(v) for g, v in measured.items()}
    if "train real-only" not in mean and "train co-trained" in mean:
        mean["train real-only"] = mean["train co-trained"]  # fewer demos to load: an upper bound
    totals: dict[str, float] = defaultdict(float)
    table_totals: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    missing: set[str] = set()
    for task in tasks:
        g = group(task)
        counts[g] += 1
        if task.kind == "data":
            continue  # canonical datasets, built before the run
        if g not in mean:
            missing.add(g)
            continue
        cost = mean[g] * (task.config["episodes"] if task.kind in ("eval", "mixture") else 1)
        totals[g] += cost
        if task.key in table:
            table_totals[g] += cost
    done = sum(store.is_done(t.kind, t.key) for t in tasks)
    return {
        "finished_tasks": done,
        "tasks": dict(counts),
        "measured_tasks": {g: len(v) for g, v in measured.items()},
        "mean_cpu_s": mean,
        "cpu_s": dict(totals),
        "cpu_s_total": sum(totals.values()),
        "table_tasks": len(table),
        "cpu_s_table": sum(table_totals.values()),
        "not_measured": sorted(missing),
    }


def main_full(run_dir: Path, cores: list[int], json_out: Path | None) -> int:
    full = full_design()
    manifest = json.loads((run_dir / "ablation.json").read_text())
    if manifest.get("design", {}).get("train") != dict(full.train):
        print(f"{run_dir} was not made with the full design's training ({dict(full.train)})", file=sys.stderr)
        return 2
    projection = project_from_full(full, run_dir)
    total = sum(projection["tasks"].values())
    print(f"full design ({total} tasks; {projection['finished_tasks']} finished in {run_dir}):")
    print("  measured tasks: " + ", ".join(f"{g} {n}" for g, n in projection["measured_tasks"].items()))
    print("  mean CPU-seconds: " + ", ".join(f"{g} {v:.1f}" for g, v in projection["mean_cpu_s"].items())
          + " (eval and mixture per episode)")  # fmt: skip
    if projection["not_measured"]:
        print(f"  not measured yet, left out of the totals: {projection['not_measured']}")
    for n in cores:
        whole, table = projection["cpu_s_total"] / n / 3600, projection["cpu_s_table"] / n / 3600
        print(f"  projected on {n} cores: {whole:.1f} h, the four-variant table alone {table:.1f} h "
              f"(goal {GOAL_FULL_S / 3600:.0f} h on 2 cores)")  # fmt: skip
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        record = {
            "run_dir": str(run_dir),
            "projection": projection,
            "projected_hours": {n: projection["cpu_s_total"] / n / 3600 for n in cores},
            "projected_hours_table": {n: projection["cpu_s_table"] / n / 3600 for n in cores},
            "goal_hours_2_cores": GOAL_FULL_S / 3600,
            "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "load": os.getloadavg()},
        }
        json_out.write_text(json.dumps(record, indent=2) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("runs/ablation-quick"), help="run directory (resumed)")
    parser.add_argument("--measured", type=Path, default=None, help="read this finished run instead of running")
    parser.add_argument("--workers", type=int, default=2, help="CPUs of the local Ray (default 2)")
    parser.add_argument("--cores", default="2,16,64", help="core counts to project the full design for")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument("--full-run", type=Path, default=None, help="project from this run of the full design")
    args = parser.parse_args(argv)
    if args.full_run is not None:
        return main_full(args.full_run, [int(c) for c in args.cores.split(",")], args.json)

    quick = quick_design()
    if args.measured is None:
        from r2s2r_envs.ablation.runner import run_ablation

        start = time.perf_counter()
        summary = run_ablation(quick, args.out, workers=args.workers, log=lambda s: print(s, file=sys.stderr))
        wall = time.perf_counter() - start
        run_dir, run = args.out, summary.to_dict()
    else:
        run_dir = args.measured
        run = json.loads((run_dir / "run_summary.json").read_text())
        wall = run["wall_time_s"]
    store = Store(run_dir)
    tasks = quick.tasks(canonical_hashes=_planned_hashes(run_dir))
    costs = task_costs(tasks, store)
    cpu = {kind: sum(s for _, s in runs) for kind, runs in costs.items()}
    task_wall = {kind: sum(s for _, s in runs) for kind, runs in task_costs(tasks, store, "wall_time_s").items()}
    train_records = {t.key: store.done_record("train", t.key) for t, _ in costs.get("train", [])}
    projection = project(quick, full_design(), costs, train_records)
    cores = [int(c) for c in args.cores.split(",")]
    print(f"quick ablation ({run_dir}): {run['total']} tasks, {run['skipped']} already finished, {run['ran']} run")
    print(f"  wall time: {wall:.0f} s (task graph {run['task_time_s']:.0f} s); goal {GOAL_QUICK_S} s on 2 cores")
    print("  CPU-seconds per kind: " + ", ".join(f"{k} {v:.0f}" for k, v in sorted(cpu.items())))
    print("  task wall-seconds per kind: " + ", ".join(f"{k} {v:.0f}" for k, v in sorted(task_wall.items())))
    idle = sum(cpu.values()) / args.workers
    print(f"  on an idle machine with {args.workers} cores: about {idle:.0f} s of tasks (CPU-seconds / cores)")
    if run["skipped"]:
        print("  (a resumed run: its wall time does not include the tasks finished before)")
    print(f"full design ({sum(projection['tasks'].values())} tasks, canonical sim datasets built beforehand):")
    print("  per unit: " + ", ".join(f"{k} {v:.3f} s" for k, v in projection["per_unit_s"].items()))
    print("  CPU-seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in projection["cpu_s"].items()))
    for n in cores:
        hours = projection["cpu_s_total"] / n / 3600
        print(f"  projected on {n} cores: {hours:.1f} h (goal {GOAL_FULL_S / 3600:.0f} h)")
    build = projection["cpu_s_building_the_four_canonical_sim_datasets"]
    print(f"  plus building the four canonical sim datasets if missing: {build / 3600:.1f} CPU-hours")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {
                    "run": run,
                    "wall_time_s": wall,
                    "cpu_s_per_kind": cpu,
                    "task_wall_s_per_kind": task_wall,
                    "projection_full": projection,
                    "projected_hours": {n: projection["cpu_s_total"] / n / 3600 for n in cores},
                    "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "load": os.getloadavg()},
                },
                indent=2,
            )
            + "\n"
        )
    return 0


def _planned_hashes(run_dir: Path) -> dict[str, str]:
    """The canonical dataset hashes the run was planned with (from its data tasks' records)."""
    hashes = {}
    for record in (run_dir / "store" / "data").glob("*/task.json"):
        data = json.loads(record.read_text())
        name = data["config"].get("canonical")
        if name is not None and data["config"].get("expected_sha256"):
            hashes[name] = data["config"]["expected_sha256"]
    return hashes


if __name__ == "__main__":
    sys.exit(main())
