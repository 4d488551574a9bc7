"""Which way a CFG policy is guided: one co-trained checkpoint run in a simulator with its flow guided toward the
real label, the sim label, or unguided, at several guidance scales.

A CFG policy (``flow-cfg``, ``flow-cfg-adda``) learns one flow per domain label and an unlabelled one; at inference
``v = v_none + w * (v_toward - v_none)``. In the lab it is guided toward "real", whose flow was learned from the
lab's few demos only. Run in a simulator, this script shows what each branch does on its own, on the same episodes:
guided toward "real" the policy acts as its real-label flow would, toward "sim" as its sim-label flow, and at scale 0
it is the unlabelled (pooled) flow. Episodes use a base seed other than the protocol's; the lab is refused (it is
the test set: no setting is chosen there).

Example::

    python experiments/cfg_guidance.py runs/cfg/co-trained-flow-cfg-adda-WorldGrounded-s0 \\
        --env PickSort-WorldGrounded-v0 --episodes 50 --out experiments/cfg-guidance/cfg-adda-world-s0.json
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from r2s2r_envs.evaluation import evaluate
from r2s2r_envs.evaluation.protocol import EVALUATION_BASE_SEED
from r2s2r_envs.policies import load_policy

#: Named guidance settings: the label the flow is guided toward and the scale ``w`` (0: the unlabelled flow).
SETTINGS: dict[str, dict[str, Any]] = {
    "none": {"toward": "sim", "cfg_scale": 0.0},
    "sim-1.0": {"toward": "sim", "cfg_scale": 1.0},
    "sim-1.5": {"toward": "sim", "cfg_scale": 1.5},
    "real-1.0": {"toward": "real", "cfg_scale": 1.0},
    "real-1.5": {"toward": "real", "cfg_scale": 1.5},
}


class PinnedGuidance:
    """A trained CFG policy whose guidance label and scale are fixed, whatever domain the evaluation says."""

    def __init__(self, policy: Any, toward: str, cfg_scale: float) -> None:
        policy.set_domain(toward)
        policy.cfg_scale = float(cfg_scale)
        self.policy = policy
        self.name = f"{policy.name}[{toward}@{cfg_scale:g}]"
        self.metadata = policy.metadata

    @property
    def settings(self) -> dict[str, Any]:
        return self.policy.settings

    def set_domain(self, domain: str) -> None:
        """Ignored: the label is pinned."""

    def reset(self, seed: int | None = None) -> None:
        self.policy.reset(seed)

    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        return self.policy.act(obs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", help="a CFG checkpoint directory or zoo:NAME")
    parser.add_argument("--env", default="PickSort-WorldGrounded-v0", help="a simulated PickSort id")
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--base-seed", type=int, default=424242)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--settings", default=",".join(SETTINGS), help=f"comma-separated, of {list(SETTINGS)}")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here (rows are merged)")
    args = parser.parse_args(argv)
    names = [n for n in args.settings.split(",") if n]
    unknown = [n for n in names if n not in SETTINGS]
    if unknown:
        parser.error(f"unknown setting(s) {unknown}; choose from {list(SETTINGS)}")
    if "Real" in args.env:
        parser.error("the lab is the test set: compare guidance settings in a simulator")
    if args.base_seed == EVALUATION_BASE_SEED:
        parser.error("use a base seed other than the protocol's")
    if not load_policy(args.checkpoint).model.cfg:
        parser.error(f"{args.checkpoint} is not a CFG policy (methods flow-cfg, flow-cfg-adda)")
    rows: list[dict[str, Any]] = []
    key = (args.checkpoint, args.env, args.episodes, args.base_seed)
    if args.out is not None and args.out.is_file():  # earlier rows of the same checkpoint, env and seeds are kept
        earlier = json.loads(args.out.read_text())
        if (earlier["checkpoint"], earlier["env"], earlier["episodes"], earlier["base_seed"]) == key:
            rows = [r for r in earlier["rows"] if r["name"] not in names]
    print(f"{'setting':<10} {'success':>8} {'sort acc':>8} {'s':>6}  failures", flush=True)
    for name in names:
        setting = SETTINGS[name]
        t = time.perf_counter()
        policy = PinnedGuidance(load_policy(args.checkpoint), **setting)
        result = evaluate(
            args.env, policy, episodes=args.episodes, base_seed=args.base_seed, workers=args.workers, progress=False
        )
        causes: dict[str, int] = {}
        for r in result.records:
            if r.failure_cause:
                causes[r.failure_cause] = causes.get(r.failure_cause, 0) + 1
        rows.append(
            {
                "name": name,
                "setting": setting,
                "success_rate": result.summary["success_rate"],
                "success_rate_ci95": result.summary["success_rate_ci95"],
                "sort_accuracy": result.summary["sort_accuracy"],
                "successes": [bool(r.is_success) for r in result.records],
                "failures": causes,
                "seconds": time.perf_counter() - t,
            }
        )
        row = rows[-1]
        print(
            f"{name:<10} {100 * row['success_rate']:>7.1f}% {100 * row['sort_accuracy']:>7.1f}% "
            f"{row['seconds']:>6.0f}  {causes}",
            flush=True,
        )
        if args.out is not None:  # written after every setting: a stopped run keeps what it measured
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
