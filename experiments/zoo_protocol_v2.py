"""The model zoo's reference policies under protocol v2, and the time of its standard mix.

For every entry of ``r2s2r_envs/policies/zoo/index.json``, in the env it is evaluated in, two evaluations with the
same workers, one after the other: the legacy run (100 nominal episodes at base seed 271828, what the zoo's figure
was measured on) and the protocol's default evaluation (the standard mix on the fresh ``test`` split: nominal 50,
fast-belt 25, novel-objects 25; docs/protocol.md#conditions).  Writes both result files per entry under
``OUT/results/`` and ``OUT/summary.json``: the zoo's recorded figure, the legacy re-run, each condition's and the
"all shifted" success rate with Wilson 95% intervals, and both wall times with their ratio (the issue's goal: the
mix takes no longer than 100 nominal episodes).  Refuses to overwrite an existing record.

Example::

    MUJOCO_GL=egl python experiments/zoo_protocol_v2.py --workers 2 --out experiments/zoo-protocol-v2
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import r2s2r_envs  # noqa: F401  (registers the ids)
from r2s2r_envs.evaluation import evaluate
from r2s2r_envs.policies import load_policy
from r2s2r_envs.policies.zoo import zoo_index

LEGACY_EPISODES = 100


class ZooPolicy:
    """``f(env) -> policy``: a zoo checkpoint, torch on one thread per process (no oversubscription)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, env: Any) -> Any:
        policy = load_policy(f"zoo:{self.name}")
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(1)
        return policy


def _figure(summary: dict[str, Any]) -> dict[str, Any]:
    n = summary["episodes"]
    return {
        "success_rate": summary["success_rate"],
        "ci95": summary["success_rate_ci95"],
        "successes": round(summary["success_rate"] * n),
        "episodes": n,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="record folder (must not exist yet)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes of every evaluation")
    parser.add_argument("--only", action="append", default=[], help="zoo entries to run (default: all)")
    args = parser.parse_args(argv)
    if args.out.exists():
        print(f"{args.out} exists: choose another --out (a record is never overwritten)", file=sys.stderr)
        return 2
    entries = [e for name, e in zoo_index().items() if not args.only or name in args.only]
    (args.out / "results").mkdir(parents=True)
    rows = []
    for entry in entries:
        name, env_id = entry["name"], entry["evaluated_in"]
        print(f"{name} in {env_id}", flush=True)
        load = os.getloadavg()
        legacy = evaluate(env_id, ZooPolicy(name), episodes=LEGACY_EPISODES, workers=args.workers, progress=False)
        mix = evaluate(env_id, ZooPolicy(name), workers=args.workers, progress=False)
        for tag, result in (("legacy", legacy), ("test", mix)):
            (args.out / "results" / f"{name}_{tag}.json").write_text(result.to_json(indent=2) + "\n")
        conditions = {c: _figure(s) for c, s in mix.condition_summaries.items()}
        assert mix.shifted_summary is not None  # the standard mix has shifted conditions
        conditions["all shifted"] = _figure(mix.shifted_summary)
        row = {
            "name": name,
            "env_id": env_id,
            "zoo_index": {"success_rate": entry["success_rate"], "ci95": entry["success_rate_ci95"]},
            "legacy_rerun": _figure(legacy.summary),
            "test": conditions,
            "test_all": _figure(mix.summary),
            "nominal_moved_points": round(100 * (conditions["nominal"]["success_rate"] - entry["success_rate"]), 1),
            "wall_time_s": {"legacy_100_nominal": legacy.wall_time_s, "standard_mix": mix.wall_time_s},
            "time_ratio_mix_over_legacy": (mix.wall_time_s or 0.0) / (legacy.wall_time_s or 1.0),
            "load_average_before": load,
            "load_average_after": os.getloadavg(),
        }
        rows.append(row)
        print(json.dumps(row, indent=1), flush=True)
    summary = {
        "script": "experiments/zoo_protocol_v2.py",
        "args": {"workers": args.workers, "only": args.only},
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "note": "the machine's 2 cores were shared with other work while this ran (load averages per row)",
        "rows": rows,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
