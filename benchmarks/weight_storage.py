"""What storing a policy's weights smaller changes: bytes, weights, actions and closed-loop outcomes.

For each checkpoint (default: every zoo entry), against its weights as stored:

* the bytes of ``policy.pt`` in each storage of :data:`r2s2r_envs.policies.weights.STORAGES`;
* the largest and the relative RMS change of the weights (:func:`~r2s2r_envs.policies.weights.storage_error`);
* open loop: the policy fed the observations of a dataset's demos (default: the first 10 demos of the canonical
  ``lab-50`` file in the dataset cache), the same policy seed both ways; the actions' largest and mean absolute
  difference (in action units; for scale, the RMS over dimensions of the demos' action standard deviation);
* closed loop (``--episodes N``): N nominal episodes in a simulator (default ``PickSort-Ungrounded-v0``) at the
  development seeds ``--base-seed`` (never the lab, never the test split), both ways, episode by episode.

Example::

    python benchmarks/weight_storage.py --episodes 20 --out benchmarks/results/house/weight-storage.json
"""

from __future__ import annotations

import argparse
import io
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from r2s2r_envs.datasets.canonical import default_cache_dir
from r2s2r_envs.datasets.reader import open_dataset
from r2s2r_envs.evaluation.runner import evaluate
from r2s2r_envs.policies.runtime import TrainedPolicy, load_policy
from r2s2r_envs.policies.weights import (
    STORAGES,
    pack_state_dict,
    storage_error,
    unpack_state_dict,
)
from r2s2r_envs.policies.zoo import resolve_checkpoint, zoo_index

#: Development seeds in simulation (never the protocol's test split).
DEV_BASE_SEED = 424242


def _bytes(state: dict[str, torch.Tensor]) -> int:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return len(buffer.getvalue())


def _with_weights(spec: str, state: dict[str, torch.Tensor]) -> TrainedPolicy:
    policy = load_policy(spec)
    policy.model.load_state_dict(state)
    return policy


def _open_loop(a: TrainedPolicy, b: TrainedPolicy, demos: list[dict[str, np.ndarray]], scale: float) -> dict:
    worst, total, count = 0.0, 0.0, 0
    for i, obs in enumerate(demos):
        a.reset(seed=i)
        b.reset(seed=i)
        steps = len(next(iter(obs.values())))
        for t in range(steps):
            o = {k: v[t] for k, v in obs.items()}
            diff = np.abs(a.act(o) - b.act(o))
            worst = max(worst, float(diff.max()))
            total += float(diff.sum())
            count += diff.size
    return {
        "demos": len(demos),
        "steps": count // max(a.pipeline.action_dim, 1),
        "max_abs_action_change": worst,
        "mean_abs_action_change": total / count,
        "demo_action_rms_std": scale,
        "mean_change_over_rms_std": total / count / scale,
    }


def _demos(path: Path, keys: list[str], limit: int) -> tuple[list[dict[str, np.ndarray]], float]:
    """The observations of the first ``limit`` demos, and the RMS over action dimensions of their std (a scale)."""
    with open_dataset(path, verify="quick") as f:
        read = [f.demo(i, obs_keys=keys, next_obs=False, states=False) for i in f.demo_ids[:limit]]
    actions = np.concatenate([d.actions for d in read])
    return [d.obs for d in read], float(np.sqrt(np.mean(actions.std(axis=0) ** 2)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policy", action="append", help="a checkpoint or zoo:NAME (repeatable; default: the zoo)")
    parser.add_argument("--storage", default="int8", choices=STORAGES, help="the storage compared (default int8)")
    parser.add_argument("--dataset", default="lab-50", help="canonical dataset whose demos feed the open loop")
    parser.add_argument("--demos", type=int, default=10, help="demos of the open-loop check")
    parser.add_argument("--episodes", type=int, default=0, help="closed-loop episodes per policy and storage")
    parser.add_argument("--env", default="PickSort-Ungrounded-v0", help="simulator of the closed loop")
    parser.add_argument("--base-seed", type=int, default=DEV_BASE_SEED, help="closed-loop seeds (development)")
    parser.add_argument("--out", type=Path, help="write the JSON record here")
    args = parser.parse_args(argv)
    specs = args.policy or [f"zoo:{name}" for name in sorted(zoo_index())]
    record: dict[str, Any] = {
        "command": " ".join(["python", "benchmarks/weight_storage.py", *(argv or sys.argv[1:])]),
        "machine": {"processor": platform.processor() or platform.machine(), "python": platform.python_version()},
        "storage": args.storage,
        "dataset": args.dataset,
        "env": args.env,
        "base_seed": args.base_seed,
        "policies": {},
    }
    for spec in specs:
        start = time.perf_counter()
        stored = torch.load(resolve_checkpoint(spec) / "policy.pt", map_location="cpu", weights_only=True)
        reference = unpack_state_dict(stored)  # float32, as load_policy reads it
        packed = unpack_state_dict(pack_state_dict(reference, args.storage))
        entry: dict[str, Any] = {
            "stored_dtypes": sorted({str(v.dtype) for v in stored.values()}),
            "bytes": {s: _bytes(pack_state_dict(reference, s)) for s in STORAGES},
            "stored_bytes": _bytes(stored),
            "weights": storage_error(reference, args.storage),
        }
        a, b = _with_weights(spec, reference), _with_weights(spec, packed)
        keys = sorted(a.pipeline.obs_keys)
        demos, scale = _demos(default_cache_dir() / f"{args.dataset}.hdf5", keys, args.demos)
        entry["open_loop"] = _open_loop(a, b, demos, scale)
        if args.episodes:
            runs = {}
            for name, policy in (("stored", a), (args.storage, b)):
                result = evaluate(args.env, policy, episodes=args.episodes, base_seed=args.base_seed, progress=False)
                runs[name] = [bool(r.is_success) for r in result.records]
            entry["closed_loop"] = {
                "episodes": args.episodes,
                "successes": {k: int(sum(v)) for k, v in runs.items()},
                "episodes_with_other_outcome": int(sum(x != y for x, y in zip(*runs.values()))),
            }
        entry["seconds"] = round(time.perf_counter() - start, 1)
        record["policies"][spec] = entry
        print(json.dumps({spec: entry}, indent=2), flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
