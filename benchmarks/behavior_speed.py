"""What behavior grounding costs: demonstrators per step beside env.step, fitting the generator, comparing sets.

Measures, in one run:

* per demonstrator, the time of ``act`` per control step as a share of the time of ``env.step`` on the env it
  comes with, timed interleaved in the same episodes (so machine load hits both alike): the scripted planner on
  ``PickSort-Ungrounded-v0``, the human-like generator on ``PickSort-BehaviorGrounded-v0`` and the lab's
  teleoperator on ``PickSort-Real-v0`` (each demonstrator on its own env, since that is where it runs);
* ``fit_behavior`` on a lab dataset (``--demos``), wall time;
* ``compare`` of two datasets (``--demos`` and ``--compare-with``), wall time.

Goals (docs/behavior.md#speed): a demonstrator costs at most 20% on top of an env step; fitting 50 demos takes
at most 5 minutes and comparing 50 with 50 demos at most 1 minute on 2 cores.

Example::

    r2s2r datasets make lab-50 --cache-dir runs
    r2s2r generate PickSort-BehaviorGrounded-v0 --episodes 50 --out runs/bg-50.hdf5 --workers 2
    MUJOCO_GL=egl python benchmarks/behavior_speed.py --demos runs/lab-50.hdf5 --compare-with runs/bg-50.hdf5 \\
        --episodes 5 --out runs/behavior_speed.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import gymnasium as gym  # noqa: E402
from demo_timing import measure  # noqa: E402  (benchmarks/demo_timing.py)

import r2s2r_envs  # noqa: E402,F401  (registers the envs and demonstrators)
from r2s2r_envs.behavior import demonstrator_names, make_demonstrator  # noqa: E402
from r2s2r_envs.behavior.fit import fit_behavior  # noqa: E402
from r2s2r_envs.behavior.metrics import compare  # noqa: E402

DEMONSTRATORS = {
    "scripted": "PickSort-Ungrounded-v0",
    "humanlike": "PickSort-BehaviorGrounded-v0",
    "teleoperator": "PickSort-Real-v0",
}


def demonstrator_cost(name: str, env_id: str, episodes: int, seed: int) -> dict[str, float]:
    """Mean ``act`` and ``env.step`` time per control step over ``episodes`` episodes, and their ratio."""
    env = gym.make(env_id)
    demo = make_demonstrator(env, name)
    timing = measure(env, demo, episodes, seed)
    env.close()
    return {
        "env": env_id,
        "steps": timing["steps"],
        "act_ms": 1e3 * timing["act_s"],
        "env_step_ms": 1e3 * timing["step_s"],
        "act_over_step": timing["act_s"] / timing["step_s"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=5, help="episodes per demonstrator (default 5)")
    parser.add_argument("--seed", type=int, default=0, help="base seed (default 0)")
    parser.add_argument("--demos", type=Path, default=None, help="lab dataset to fit (and compare)")
    parser.add_argument("--compare-with", type=Path, default=None, help="second dataset for the comparison")
    parser.add_argument("--out", type=Path, default=None, help="write the figures and settings as JSON")
    args = parser.parse_args()

    results: dict = {"settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}}
    results["machine"] = {"python": platform.python_version(), "cpus": os.cpu_count()}
    results["demonstrators"] = {}
    print(f"{'demonstrator':<14}{'env':<30}{'steps':>7}{'act ms':>9}{'step ms':>9}{'act/step':>10}")
    for name, env_id in DEMONSTRATORS.items():
        if name not in demonstrator_names():
            print(f"{name:<14}not registered in this installation: skipped")
            continue
        r = demonstrator_cost(name, env_id, args.episodes, args.seed)
        results["demonstrators"][name] = r
        print(
            f"{name:<14}{env_id:<30}{r['steps']:>7}{r['act_ms']:>9.3f}{r['env_step_ms']:>9.3f}"
            f"{100 * r['act_over_step']:>9.1f}%"
        )
    if args.demos is not None:
        t0 = time.perf_counter()
        model = fit_behavior(args.demos)
        fit_s = time.perf_counter() - t0
        demos = model["provenance"]["demos"]
        results["fit"] = {"demos": demos["episodes"], "grasps": demos["grasps"], "wall_s": fit_s}
        print(f"fit-behavior: {demos['episodes']} demos ({demos['grasps']} grasps) in {fit_s:.2f} s")
        other = args.compare_with or args.demos
        t0 = time.perf_counter()
        cmp = compare(args.demos, other)
        cmp_s = time.perf_counter() - t0
        results["compare"] = {"a": str(args.demos), "b": str(other), "auc": cmp.auc, "wall_s": cmp_s}
        print(
            f"compare-behavior: {cmp.a['episodes']} vs {cmp.b['episodes']} demos in {cmp_s:.2f} s (AUC {cmp.auc:.3f})"
        )
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
