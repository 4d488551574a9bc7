"""Success of each env's demonstrator over many seeds, with a Wilson 95% interval and failure causes.

The issue's bar: the scripted planner sorts every object in at least 90% of 100 episodes on
``PickSort-Ungrounded-v0``.  Its success on ``PickSort-Real-v0`` (same planner, the lab's physics, latency and
sensor errors) is the first measurement of the world gap.  Episode i of an env uses seed ``seed + i``, as
``r2s2r demo`` does, so any episode can be re-run (and filmed) with
``r2s2r demo --env ID --episodes 1 --seed S --video ep.mp4``.

Example::

    python benchmarks/planner_success.py --seeds 100 --workers 2 --out runs/planner_success.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from multiprocessing import get_context
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")  # before mujoco is imported

import gymnasium as gym  # noqa: E402

import r2s2r_envs  # noqa: E402  (registers the envs and demonstrators)
from r2s2r_envs.behavior import make_demonstrator  # noqa: E402
from r2s2r_envs.cli import UnknownEnvError, check_env_id, run_demo  # noqa: E402
from r2s2r_envs.envs.pick_sort import FAILURE_CAUSES  # noqa: E402
from r2s2r_envs.evaluation.stats import summarize_episodes  # noqa: E402


def _chunk(job: tuple[str, int, int, int | None]) -> list[dict]:
    env_id, first_seed, count, num_objects = job
    return run_demo(env_id, count, first_seed, num_objects=num_objects, progress=False)["results"]


def evaluate(env_id: str, seeds: int, seed: int, workers: int, num_objects: int | None) -> dict:
    """Run the demonstrator of ``env_id`` on seeds ``seed .. seed + seeds - 1``; return the summary."""
    start = time.perf_counter()
    if workers <= 1:
        summary = run_demo(env_id, seeds, seed, num_objects=num_objects, progress=True)
        results, demonstrator = summary["results"], summary["demonstrator"]
    else:
        # Contiguous seed blocks, several per worker so a slow block does not leave a core idle.
        n_chunks = min(seeds, 4 * workers)
        bounds = [seed + (seeds * k) // n_chunks for k in range(n_chunks + 1)]
        jobs = [(env_id, lo, hi - lo, num_objects) for lo, hi in zip(bounds, bounds[1:]) if hi > lo]
        with get_context("spawn").Pool(workers) as pool:
            results = [r for chunk in pool.map(_chunk, jobs) for r in chunk]
        env = gym.make(env_id)
        demo = make_demonstrator(env)
        demonstrator = {"name": demo.name, "settings": demo.settings}
        env.close()
    results.sort(key=lambda r: r["seed"])
    return {
        "env_id": env_id,
        "episodes": seeds,
        "seeds": [r["seed"] for r in results],
        "demonstrator": demonstrator,
        **summarize_episodes(results, FAILURE_CAUSES),
        "wall_time_s": time.perf_counter() - start,
        "results": results,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", action="append", default=None, metavar="ID",
                        help=f"env id (repeatable; default: all of {list(r2s2r_envs.ENV_IDS)})")
    parser.add_argument("--seeds", type=int, default=100, help="episodes per env (default 100)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the first episode (default 0)")
    parser.add_argument("--num-objects", type=int, default=None, help="objects per episode (env default: 3)")
    parser.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--out", type=Path, default=None, help="write config and results to this JSON file")
    args = parser.parse_args(argv)
    env_ids = args.env or list(r2s2r_envs.ENV_IDS)
    for env_id in env_ids:
        try:
            check_env_id(env_id)
        except UnknownEnvError as e:
            parser.error(str(e))

    summaries = [evaluate(e, args.seeds, args.seed, args.workers, args.num_objects) for e in env_ids]

    print(f"{'env':<26} {'success':>8} {'95% CI (Wilson)':>16} {'sort acc':>9} {'t_sort':>7}  failure causes")
    for s in summaries:
        low, high = s["success_rate_ci95"]
        t = "n/a" if s["mean_time_to_sort"] is None else f"{s['mean_time_to_sort']:.1f} s"
        causes = ", ".join(f"{k} {v}" for k, v in s["failure_causes"].items() if v) or "none"
        print(f"{s['env_id']:<26} {s['success_rate']:>8.3f} {f'{low:.3f}-{high:.3f}':>16} "
              f"{s['sort_accuracy']:>9.3f} {t:>7}  {causes}")
    print(f"({args.seeds} episodes per env, seeds {args.seed}..{args.seed + args.seeds - 1}; "
          f"failure causes count episodes by their first failure)")

    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        config = {**vars(args), "env": env_ids, "out": str(args.out)}
        args.out.write_text(json.dumps({"config": config, "package_version": r2s2r_envs.__version__,
                                        "summaries": summaries}, indent=2))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
