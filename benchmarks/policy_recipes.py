"""Which training recipe makes a policy solve PickSort in simulation: data (clean or noise-injected demos), method,
steps and batch size, each trained and evaluated with the protocol.

The sweep behind benchmarks/results/policies-v1/README.md (recipe v1; run there on a lent GPU machine with 16
cores: ``--device cuda --workers 16``). Sim only: the demos come from ``PickSort-Ungrounded-v0``'s scripted
planner, the policies are trained with ``real_fraction=0`` and evaluated in the same env on the published seeds.
Trainings run in parallel subprocesses (``--parallel``); each policy is evaluated as soon as it is trained.

Example:
    python benchmarks/policy_recipes.py --demos 1000 --action-noise 0,0.1 --recipes bc-12k-b1024,flow-12k-b1024 \\
        --device cuda --workers 16 --episodes 40 --out runs/policy_recipes
    python benchmarks/policy_recipes.py --demos 20 --recipes bc-tiny --episodes 2 --out runs/recipes_smoke

Prints one line per trained policy (samples/s, final loss, success with its Wilson interval, sort accuracy, failure
causes) and writes ``results.jsonl`` in ``--out``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ENV_ID = "PickSort-Ungrounded-v0"

#: name -> TrainConfig fields (method, steps, batch_size, lr, ...).
RECIPES: dict[str, dict[str, Any]] = {
    "bc-5k-b256": dict(method="bc", steps=5000, batch_size=256, lr=1e-3),
    "bc-5k-b1024": dict(method="bc", steps=5000, batch_size=1024, lr=2e-3),
    "bc-12k-b1024": dict(method="bc", steps=12000, batch_size=1024, lr=2e-3),
    "flow-12k-b1024": dict(method="flow", steps=12000, batch_size=1024, lr=2e-3),
    "bc-30k-b256": dict(method="bc", steps=30000, batch_size=256, lr=1e-3),
    "flow-30k-b256": dict(method="flow", steps=30000, batch_size=256, lr=1e-3),
    "bc-tiny": dict(method="bc", steps=20, batch_size=64, lr=1e-3),
}

_TRAIN = """
import json, sys
from r2s2r_envs.policies.config import TrainConfig
from r2s2r_envs.policies.train import train
fields = json.loads(sys.argv[1])
r = train(TrainConfig(recipe="v1", sim=(sys.argv[2],), real_fraction=0.0, seed=0, out=sys.argv[3], verify="none",
                      progress=False, overwrite=True, **fields))
print(json.dumps({"train_time_s": r.train_time_s, "samples_per_s": r.samples_per_s, "final_loss": r.final_loss}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demos", type=int, default=1000, help="planner demos per dataset (default 1000)")
    parser.add_argument("--action-noise", default="0,0.1", help="comma-separated noise levels, one dataset each")
    parser.add_argument("--recipes", default="bc-12k-b1024,flow-12k-b1024", help=f"comma-separated: {list(RECIPES)}")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda", "auto"), help="training device")
    parser.add_argument("--parallel", type=int, default=1, help="trainings at a time")
    parser.add_argument("--workers", type=int, default=2, help="generation and evaluation worker processes")
    parser.add_argument("--episodes", type=int, default=20, help="evaluation episodes per policy")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    recipes = args.recipes.split(",")
    unknown = [r for r in recipes if r not in RECIPES]
    if unknown:
        parser.error(f"unknown recipes {unknown}; known: {list(RECIPES)}")
    noises = [float(x) for x in args.action_noise.split(",")]
    args.out.mkdir(parents=True, exist_ok=True)

    from r2s2r_envs.datasets.generate import generate
    from r2s2r_envs.evaluation import evaluate
    from r2s2r_envs.policies import load_policy

    t0 = time.perf_counter()
    data = {}
    for noise in noises:
        path = args.out / f"demos_noise{noise}.hdf5"
        r = generate(ENV_ID, args.demos, path, workers=args.workers, successes_only=True, action_noise=noise)
        data[noise] = path
        print(f"[{time.perf_counter() - t0:6.0f} s] data noise {noise}: {r.num_demos} demos from {r.attempts} attempts")

    def run(job: tuple[float, str]) -> dict[str, Any] | None:
        noise, name = job
        out = args.out / f"{name}_noise{noise}"
        fields = {**RECIPES[name], "device": args.device}
        p = subprocess.run(
            [sys.executable, "-c", _TRAIN, json.dumps(fields), str(data[noise]), str(out)],
            capture_output=True,
            text=True,
        )
        if p.returncode:
            print(f"{name} noise {noise}: training failed\n{p.stderr[-2000:]}", file=sys.stderr)
            return None
        info = json.loads(p.stdout.strip().splitlines()[-1])
        result = evaluate(ENV_ID, load_policy(out), episodes=args.episodes, workers=args.workers, progress=False)
        s = result.summary
        row = {
            "recipe": name,
            **RECIPES[name],
            "action_noise": noise,
            "device": args.device,
            **info,
            "episodes": args.episodes,
            "success_rate": s["success_rate"],
            "success_rate_ci95": s["success_rate_ci95"],
            "sort_accuracy": s["sort_accuracy"],
            "failure_causes": {k: v for k, v in s["failure_causes"].items() if v},
        }
        low, high = s["success_rate_ci95"]
        print(
            f"[{time.perf_counter() - t0:6.0f} s] {name:16s} noise {noise:<4} {info['samples_per_s']:9.0f} samples/s  "
            f"loss {info['final_loss']:.4f}  success {s['success_rate']:.3f} ({low:.2f}-{high:.2f})  "
            f"sort {s['sort_accuracy']:.3f}  {row['failure_causes']}",
            flush=True,
        )
        with open(args.out / "results.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
        return row

    jobs = [(noise, name) for noise in noises for name in recipes]
    with ThreadPoolExecutor(max(1, args.parallel)) as pool:
        list(pool.map(run, jobs))


if __name__ == "__main__":
    main()
