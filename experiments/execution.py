"""How a trained policy's chunks are executed: receding horizon with 1, 2, 4 or 8 actions per chunk, and temporal
ensembling, on one checkpoint, in one env.

The settings are changed at load time (``load_policy(DIR, execute_steps=..., temporal_ensemble=...)``); the
weights are the same. Episodes use a base seed other than the protocol's (``--base-seed``, default 424242) so
that choosing an execution setting here never looks at the protocol's episodes; never run it in the lab (the lab
is the test set: it is refused).

Example::

    python experiments/execution.py runs/reference/train/sim-only-flow-s0 --env PickSort-Ungrounded-v0 \\
        --episodes 50 --out experiments/execution/sim-only-flow-s0.json
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from r2s2r_envs.evaluation import evaluate
from r2s2r_envs.evaluation.protocol import EVALUATION_BASE_SEED
from r2s2r_envs.policies import load_policy

#: Named execution settings: ``hN`` receding horizon with N actions per chunk, ``teK`` temporal ensembling.
SETTINGS = {
    **{f"h{n}": {"execute_steps": n, "temporal_ensemble": 0.0} for n in (1, 2, 4, 8)},
    **{f"te{k}": {"execute_steps": 1, "temporal_ensemble": k} for k in (0.1, 0.5)},
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", help="a checkpoint directory or zoo:NAME")
    parser.add_argument("--env", default="PickSort-Ungrounded-v0", help="a simulated PickSort id")
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--base-seed", type=int, default=424242)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--settings", default=",".join(SETTINGS), help=f"comma-separated, of {list(SETTINGS)}")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here (rows are merged)")
    args = parser.parse_args(argv)
    names = [n for n in args.settings.split(",") if n]
    unknown = [n for n in names if n not in SETTINGS]
    if unknown:
        parser.error(f"unknown setting(s) {unknown}; choose from {list(SETTINGS)}")
    if "Real" in args.env:
        parser.error("the lab is the test set: choose execution settings in a simulator")
    if args.base_seed == EVALUATION_BASE_SEED:
        parser.error("use a base seed other than the protocol's")
    rows = []
    if args.out is not None and args.out.is_file():  # earlier rows of the same checkpoint, env and seeds are kept
        earlier = json.loads(args.out.read_text())
        if (earlier["checkpoint"], earlier["env"], earlier["episodes"], earlier["base_seed"]) == (
            args.checkpoint,
            args.env,
            args.episodes,
            args.base_seed,
        ):
            rows = [r for r in earlier["rows"] if r["name"] not in names]
    print(f"{'setting':<40} {'success':>8} {'sort acc':>8} {'s':>6}  failures", flush=True)
    for name in names:
        setting = SETTINGS[name]
        t = time.perf_counter()
        policy = load_policy(args.checkpoint, **setting)
        result = evaluate(
            args.env, policy, episodes=args.episodes, base_seed=args.base_seed, workers=args.workers, progress=False
        )
        causes: dict[str, int] = {}
        for r in result.records:
            if r.failure_cause:
                causes[r.failure_cause] = causes.get(r.failure_cause, 0) + 1
        row = {
            "name": name,
            "setting": setting,
            "success_rate": result.summary["success_rate"],
            "success_rate_ci95": result.summary["success_rate_ci95"],
            "sort_accuracy": result.summary["sort_accuracy"],
            "failures": causes,
            "seconds": time.perf_counter() - t,
        }
        rows.append(row)
        label = ", ".join(f"{k}={v}" for k, v in setting.items())
        print(
            f"{label:<40} {100 * row['success_rate']:>7.1f}% {100 * row['sort_accuracy']:>7.1f}% "
            f"{row['seconds']:>6.0f}  {causes}",
            flush=True,
        )
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        record = {
            "checkpoint": args.checkpoint,
            "env": args.env,
            "episodes": args.episodes,
            "base_seed": args.base_seed,
            "load_average": os.getloadavg(),
            "rows": rows,
        }
        args.out.write_text(json.dumps(record, indent=2) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
