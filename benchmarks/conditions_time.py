"""Does the protocol's standard mix take no longer than the 100 nominal episodes every evaluation ran before it?

Evaluates one policy (a model zoo checkpoint, torch on one thread per process) in one env twice each, in the order
legacy, mix, mix, legacy (so a drift of the machine's load cancels): the legacy run (100 nominal episodes at base
seed 271828) and the standard mix on the test split (nominal 50, fast-belt 25, novel-objects 25;
docs/protocol.md#conditions), with the same worker processes.  Records per run the wall time, the CPU time of the
process and its reaped workers (``resource.getrusage``: robust to other work sharing the cores, which wall time is
not) and the env steps; then the mix-over-legacy ratios of the sums.  Writes JSON with ``--out`` (never over an
existing file).

Example::

    MUJOCO_GL=egl python benchmarks/conditions_time.py --policy flow-cotrained-worldgrounded --env PickSort-Real-v0 \\
        --workers 2 --out benchmarks/results/conditions-time/flow-cotrained-worldgrounded.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")  # before mujoco is imported

import r2s2r_envs  # noqa: E402, F401  (registers the ids)
from r2s2r_envs.evaluation import evaluate  # noqa: E402
from r2s2r_envs.policies import load_policy  # noqa: E402

ORDER = ("legacy", "mix", "mix", "legacy")


class ZooPolicy:
    """``f(env) -> policy``: a zoo checkpoint, torch on one thread per process (no oversubscription)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, env: Any) -> Any:
        policy = load_policy(f"zoo:{self.name}")
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(1)
        return policy


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", required=True, help="a zoo entry, e.g. flow-cotrained-worldgrounded")
    parser.add_argument("--env", required=True, help="the env id it is evaluated in")
    parser.add_argument("--workers", type=int, default=2, help="worker processes of every evaluation")
    parser.add_argument("--out", type=Path, required=True, help="JSON record (must not exist yet)")
    args = parser.parse_args(argv)
    if args.out.exists():
        print(f"{args.out} exists: choose another --out (a record is never overwritten)", file=sys.stderr)
        return 2
    runs = []
    for kind in ORDER:
        load, wall, cpu = os.getloadavg(), time.perf_counter(), _cpu_seconds()
        if kind == "legacy":
            result = evaluate(args.env, ZooPolicy(args.policy), episodes=100, workers=args.workers, progress=False)
        else:
            result = evaluate(args.env, ZooPolicy(args.policy), workers=args.workers, progress=False)
        run = {
            "kind": kind,
            "split": result.split,
            "conditions": {c.condition: c.episodes for c in result.conditions},
            "success_rate": result.summary["success_rate"],
            "wall_s": time.perf_counter() - wall,
            "cpu_s": _cpu_seconds() - cpu,
            "env_steps": sum(r.steps for r in result.records),
            "load_average_before": load,
        }
        runs.append(run)
        print(json.dumps(run), flush=True)

    def ratio(key: str) -> float:
        return sum(r[key] for r in runs if r["kind"] == "mix") / sum(r[key] for r in runs if r["kind"] == "legacy")

    record = {
        "script": "benchmarks/conditions_time.py",
        "args": {"policy": args.policy, "env": args.env, "workers": args.workers},
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "runs": runs,
        "mix_over_legacy": {"wall": ratio("wall_s"), "cpu": ratio("cpu_s"), "env_steps": ratio("env_steps")},
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record["mix_over_legacy"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
