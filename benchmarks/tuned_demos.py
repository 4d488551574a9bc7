"""Do demos from a planner tuned in the grounded world make co-trained policies sort more in the lab?

The training-data side of benchmarks/demonstrator_tuning.py. Three sim datasets of 1,000 demos, each made with the
canonical ``worldgrounded-1000`` recipe's seed, success filter and noise injection (docs/datasets.md):

* ``ungrounded``: the canonical ``ungrounded-1000`` (nominal world, planner with its default settings);
* ``worldgrounded``: the canonical ``worldgrounded-1000`` (grounded world, the planner as tuned there: the grounding
  file's ``demonstrator`` section, chosen in the grounded world only; the lab never enters the choice);
* ``worldgrounded-untuned``: the grounded world, the planner with its default settings (``--planner`` to give
  others), made here with the canonical recipe otherwise;
* ``behaviorgrounded``, ``fullygrounded``: the canonical ``behaviorgrounded-1000`` and ``fullygrounded-1000`` (the
  human-like generator fitted to the lab's demos, in the nominal and the grounded world), so that the four variants'
  data can be compared at a training budget of choice.

The records of 2026-11-30/12-01 (``benchmarks/results/tuned-demos*/``) were made before the tuned planner became
the grounded env's own demonstrator: there ``worldgrounded`` is the untuned arm and ``worldgrounded-tuned`` the tuned
one (made with ``--planner position_gain=0.3``).

For each, ``flow`` policies co-trained with ``lab-50`` at ``real_fraction`` 0.224 (the ablation's setting and
training defaults, ``--steps``) for ``--seeds``, evaluated in the lab on the protocol's episodes. Prints each
arm's lab sort accuracy and success and the contrasts between arms with the ablation's bootstrap (training seeds
and episodes, paired by episode); writes ``results.jsonl`` (every episode's object outcomes) in ``--out``.

Example (the run of benchmarks/results/tuned-demos/README.md, 2 cores)::

    python benchmarks/tuned_demos.py --out runs/tuned_demos
    python benchmarks/tuned_demos.py --arms worldgrounded-untuned --episodes-data 4 --steps 20 --seeds 0 \\
        --episodes 2 --out runs/tuned_smoke     # a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")  # before mujoco is imported

import numpy as np  # noqa: E402

# The same training call and co-training share as the transfer-gap benchmark (run from benchmarks/, as a script).
sys.path.insert(0, str(Path(__file__).resolve().parent))
from transfer_gap import _TRAIN, CO_TRAINED_FRACTION, LAB  # noqa: E402

ARMS = ("ungrounded", "worldgrounded", "worldgrounded-untuned", "behaviorgrounded", "fullygrounded")
DEFAULT_ARMS = ("ungrounded", "worldgrounded", "worldgrounded-untuned")
#: The four variants' canonical data, in the ablation's order (U, W, B, F).
VARIANT_ARMS = ("ungrounded", "worldgrounded", "behaviorgrounded", "fullygrounded")
#: The arm made here rather than taken from the canonical datasets.
MADE_HERE = "worldgrounded-untuned"


def _settings(text: str) -> dict[str, float]:
    """``"position_gain=0.3;lead_time=0.05"``: one value per ``PlannerConfig`` field (the tuning grid's syntax)."""
    from r2s2r_envs.grounding.tuning import TuningError, parse_grid

    try:
        grid = parse_grid(text)
    except TuningError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if several := [name for name, values in grid.items() if len(values) != 1]:
        raise argparse.ArgumentTypeError(f"give one value per setting, got several for {several}")
    return {name: values[0] for name, values in grid.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--planner", type=_settings, default={}, help=f"planner settings of {MADE_HERE} (default: its defaults)"
    )
    parser.add_argument(
        "--arms", default=",".join(DEFAULT_ARMS), help=f"comma-separated subset of {ARMS} (default: first 3)"
    )
    parser.add_argument("--episodes-data", type=int, default=1000, help=f"demos of {MADE_HERE} (default 1000)")
    parser.add_argument("--steps", type=int, default=5000, help="training steps of every policy (default 5000)")
    parser.add_argument("--seeds", default="0,1,2", help="training seeds")
    parser.add_argument("--parallel", type=int, default=2, help="trainings at a time")
    parser.add_argument("--workers", type=int, default=2, help="dataset-building worker processes")
    parser.add_argument("--episodes", type=int, default=100, help="protocol episodes per policy in the lab")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    arms = [a for a in args.arms.split(",") if a]
    if unknown := [a for a in arms if a not in ARMS]:
        parser.error(f"unknown arm(s) {unknown}; choose from {list(ARMS)}")
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]

    from r2s2r_envs.datasets.canonical import load_spec, make_datasets
    from r2s2r_envs.datasets.generate import generate
    from r2s2r_envs.evaluation import evaluate
    from r2s2r_envs.grounding.tuning import planner_factory
    from r2s2r_envs.policies import load_policy

    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()

    def log(text: str) -> None:
        print(f"[{time.perf_counter() - t0:6.0f} s] {text}", flush=True)

    names = ["lab-50", *(f"{a}-1000" for a in arms if a != MADE_HERE)]
    paths: dict[str, str] = {}
    for report in make_datasets(names=names, workers=args.workers, progress=False):
        log(f"dataset {report.name}: {report.status} {report.message}")
        if report.status in ("failed", "skipped"):
            sys.exit(f"dataset {report.name} could not be made: {report.message}")
        paths[report.name.removesuffix("-1000")] = str(report.path)
    if MADE_HERE in arms:
        recipe = {e.name: e for e in load_spec()}["worldgrounded-1000"]
        out = args.out / f"{MADE_HERE}.hdf5"
        result = generate(
            recipe.env_id,
            args.episodes_data,
            out,
            workers=args.workers,
            seed=recipe.seed,
            successes_only=recipe.successes_only,
            obs_mode=recipe.obs_mode,
            env_kwargs=recipe.env_kwargs,
            demonstrator=planner_factory(**args.planner),
            action_noise=recipe.action_noise,
            progress=False,
        )
        log(f"dataset {MADE_HERE} {args.planner}: {result.new_demos} new demos, {result.attempts} attempts")
        paths[MADE_HERE] = str(out)

    def run(job: tuple[str, int]) -> None:
        arm, seed = job
        out = args.out / f"{arm}-seed{seed}"
        fields = {
            "real": [paths["lab-50"]],
            "sim": [paths[arm]],
            "real_fraction": CO_TRAINED_FRACTION,
            "seed": seed,
            "out": str(out),
            "steps": args.steps,
        }
        p = subprocess.run([sys.executable, "-c", _TRAIN, json.dumps(fields)], capture_output=True, text=True)
        if p.returncode:
            log(f"{out.name}: training failed\n{p.stderr[-2000:]}")
            return
        info = json.loads(p.stdout.strip().splitlines()[-1])
        result = evaluate(LAB, load_policy(out), episodes=args.episodes, progress=False)
        s = result.summary
        row = {
            "arm": arm,
            "seed": seed,
            "steps": args.steps,
            "planner": args.planner if arm == MADE_HERE else None,
            **info,
            "env_id": LAB,
            "success_rate": s["success_rate"],
            "sort_accuracy": s["sort_accuracy"],
            "failure_causes": {k: v for k, v in s["failure_causes"].items() if v},
            "object_outcomes": [list(r.object_outcomes) for r in result.records],
        }
        causes = row["failure_causes"]
        log(f"{out.name:28s} lab success {s['success_rate']:.2f}  sort {s['sort_accuracy']:.3f}  {causes}")
        with open(args.out / "results.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")

    with ThreadPoolExecutor(max(1, args.parallel)) as pool:
        list(pool.map(run, [(a, s) for a in arms for s in seeds]))
    summarize(args.out / "results.jsonl")
    log("done")


def summarize(path: Path) -> None:
    """Per arm: lab sort accuracy and success; contrasts between arms (bootstrap over seeds and episodes)."""
    from r2s2r_envs.ablation.analysis import bootstrap_contrast

    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    sorted_: dict[str, dict[int, np.ndarray]] = {}
    for r in rows:
        sorted_.setdefault(r["arm"], {})[r["seed"]] = np.array(
            [[o == "sorted" for o in ep] for ep in r["object_outcomes"]], float
        )
    cells = {
        metric: {arm: np.stack([fn(x[s]) for s in sorted(x)]) for arm, x in sorted_.items()}
        for metric, fn in (("sort", lambda e: e.mean(axis=1)), ("success", lambda e: e.min(axis=1)))
    }
    print("\narm: lab sort accuracy %, success % [95% bootstrap over seeds and episodes]; objects sorted by arrival")
    for arm in sorted_:
        parts = []
        for metric in ("sort", "success"):
            b = bootstrap_contrast({arm: cells[metric][arm]}, {arm: 1.0})
            low, high = b["ci95"]
            parts.append(f"{100 * b['estimate']:.1f} [{100 * low:.1f}, {100 * high:.1f}]")
        order = np.concatenate([sorted_[arm][s] for s in sorted(sorted_[arm])]).mean(axis=0)
        order_text = " / ".join(f"{100 * v:.0f}" for v in order)
        print(f"{arm} ({len(sorted_[arm])} seeds): sort {parts[0]}, success {parts[1]}; {order_text}")
    arms = list(sorted_)

    def contrast(weights: dict[str, float]) -> str:
        parts = []
        for metric in ("sort", "success"):
            e = bootstrap_contrast(cells[metric], weights)
            low, high = e["ci95"]
            parts.append(f"{metric} {100 * e['estimate']:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]")
        return "; ".join(parts)

    if set(VARIANT_ARMS) <= set(arms):  # the four variants: the ablation's effects (docs/ablation.md#analysis)
        # The weights of r2s2r_envs.ablation.analysis.EFFECTS, over the arms; in this key order, in which the
        # bootstrap drew the intervals of the committed records (another order draws other replicates).
        u, w, b, f = VARIANT_ARMS
        effects = {
            "world (mean over behavior)": {w: 0.5, u: -0.5, f: 0.5, b: -0.5},
            "behavior (mean over world)": {b: 0.5, u: -0.5, f: 0.5, w: -0.5},
            "interaction (F - B) - (W - U)": {f: 1.0, b: -1.0, w: -1.0, u: 1.0},
        }
        for name, weights in effects.items():
            print(f"effect, {name}: {contrast(weights)}")
    for i, a in enumerate(arms):
        for b_arm in arms[i + 1 :]:
            print(f"{b_arm} - {a}: {contrast({b_arm: 1.0, a: -1.0})}")


if __name__ == "__main__":
    main()
