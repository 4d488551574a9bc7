"""What the lab's teleoperator costs per control step, beside the scripted planner and the env step alone.

Runs the same episodes (base seed S, episode i: ``episode_seeds(S, i)``) in ``PickSort-Real-v0`` once with the
teleoperator and once with the scripted planner, timing every ``act`` and every ``env.step`` separately
(interleaved, so machine load hits both alike).  Prints, per demonstrator, the mean time of an env step, of an
``act`` call, and the ratio (env.step + act) / env.step; and the one-off cost of the teleoperator's practice
episodes (made once per lab, operator style and episode settings, then cached), against one episode's time.

Goal (docs/lab.md#operator): the teleoperator adds at most 20% to an env step.

Example::

    MUJOCO_GL=egl python benchmarks/teleop_speed.py --episodes 6 --out runs/teleop_speed.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")  # before mujoco is imported

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
from demo_timing import measure  # noqa: E402  (benchmarks/demo_timing.py)

import r2s2r_envs  # noqa: E402,F401  (registers the envs and demonstrators)
from r2s2r_envs.behavior import make_demonstrator  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=6, help="episodes per demonstrator (default 6)")
    parser.add_argument("--seed", type=int, default=31337, help="base seed (default 31337)")
    parser.add_argument("--lab", default="default", help="shipped lab name or lab JSON file (default 'default')")
    parser.add_argument("--out", type=Path, default=None, help="write the resolved config and results as JSON")
    args = parser.parse_args(argv)

    env = gym.make("PickSort-Real-v0", lab=args.lab)
    t0 = time.perf_counter()
    teleoperator = make_demonstrator(env, "teleoperator")  # practises here (once per process and lab)
    practice_s = time.perf_counter() - t0
    planner = make_demonstrator(env, "scripted")
    # Warm-up episode each, then the measured ones.
    measure(env, teleoperator, 1, args.seed + 1)
    measure(env, planner, 1, args.seed + 1)
    results = {
        "teleoperator": measure(env, teleoperator, args.episodes, args.seed),
        "scripted": measure(env, planner, args.episodes, args.seed),
    }
    print(f"PickSort-Real-v0, lab {args.lab!r}, {args.episodes} episodes per demonstrator (base seed {args.seed})")
    print(f"{'demonstrator':14s} {'steps':>6s} {'env.step':>10s} {'act':>10s} {'(step+act)/step':>16s}")
    for name, r in results.items():
        r["ratio"] = (r["step_s"] + r["act_s"]) / r["step_s"]
        print(f"{name:14s} {r['steps']:6d} {r['step_s'] * 1e3:8.3f}ms {r['act_s'] * 1e3:8.3f}ms {r['ratio']:16.3f}")
    episode_s = results["teleoperator"]["episode_s"]
    print(
        f"teleoperator practice (one-off, {teleoperator.calibration.practice_episodes} episodes + reference): "
        f"{practice_s:.2f} s = {practice_s / episode_s:.1f} x one episode's env time ({episode_s:.2f} s)"
    )
    goal = results["teleoperator"]["ratio"] <= 1.2
    print(f"goal (teleoperator adds <= 20% to an env step): {'met' if goal else 'NOT met'}")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        record = {
            "config": vars(args) | {"out": str(args.out)},
            "results": results,
            "practice_s": practice_s,
            "machine": {"platform": platform.platform(), "python": sys.version.split()[0], "cpus": os.cpu_count()},
            "numpy": np.__version__,
        }
        args.out.write_text(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
