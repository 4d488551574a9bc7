"""Where along the belt objects are taken: in each training set, and by the policies trained on them in the lab.

The ablation (experiments/ablation-cpu/) found that behavior grounding lowers lab success when the world is not
grounded, and that the policies trained on BehaviorGrounded data miss more objects in the lab. This study measures
the trait that explains a miss: how far along the belt (world y, objects ride toward -y and are lost past the
arm's reach at y = -0.36 m) an object is when the hand reaches it and when the fingers close on it.

Per object of every episode, from what a real cell records (``behavior.segments``: commands and sensor readings):

* ``approach_y``: the object's perceived y when the TCP first comes within 6 cm of it (NaN if it never does),
* ``close_y``: its y at the closure onset of its first grasp (NaN if it was never lifted),
* ``arrival_to_close``: seconds from its arrival in the workspace (y < 0.3 m) to that closure onset,
* ``close_to_release``: seconds from that closure onset to the fingers opening again (the transport),
* ``order``: its rank among the episode's objects by arrival (0: first),
* its outcome (``sorted``, ``missed``, ...).

Rows: the first ``--demos`` demonstrations of each table dataset (the lab's and the four variants'), and the lab
episodes of each table policy of the ablation run ``--run`` (method ``--methods``, seeds ``--seeds``), or with
``--where own-variant`` its episodes in its own simulated variant (the same policy, the nominal or identified world).
A policy's episodes are the evaluation protocol's first ``--episodes`` (``evaluate``'s seeds, the ablation's
evaluation): the script checks that their outcomes are those of the run's own evaluation record. Running the
policies in the lab is an evaluation (the lab is the test set): nothing here is chosen on it.

Example::

    python experiments/grasp_timing.py --run runs/ablation-cpu --out runs/grasp_timing.json
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import r2s2r_envs  # noqa: F401  (registers the envs)
from r2s2r_envs.behavior.segments import ARRIVAL_Y, DT, OBS_KEYS, DemoTrace, trace_from_arrays
from r2s2r_envs.datasets import open_dataset
from r2s2r_envs.datasets.canonical import default_cache_dir
from r2s2r_envs.evaluation.protocol import evaluate
from r2s2r_envs.provenance import versions

#: The ablation table's datasets (canonical names) and the variant each one grounds.
TABLE_DATASETS: dict[str, str] = {
    "lab-50": "lab",
    "ungrounded-1000": "Ungrounded",
    "worldgrounded-1000": "WorldGrounded",
    "behaviorgrounded-1000": "BehaviorGrounded",
    "fullygrounded-1000": "FullyGrounded",
}
#: TCP distance to an object's perceived centre that counts as the hand having reached it, m.
APPROACH_RADIUS = 0.06
LAB_ID = "PickSort-Real-v0"


def object_events(trace: DemoTrace, outcomes: Sequence[str]) -> list[dict[str, Any]]:
    """One row per object of a demonstration (see the module docstring)."""
    first_grasp: dict[int, Any] = {}
    for g in trace.grasps:
        first_grasp.setdefault(g.obj, g)
    n_obj = trace.objects.shape[1]
    arrived = [np.flatnonzero(trace.objects[:, i, 1] < ARRIVAL_Y) for i in range(n_obj)]
    arrival = [int(a[0]) if len(a) else len(trace.fingers) for a in arrived]
    order = np.argsort(np.argsort(arrival, kind="stable"), kind="stable")
    rows = []
    for i in range(n_obj):
        pos = trace.objects[:, i]
        distance = np.linalg.norm(trace.eef_smooth - pos, axis=1)
        near = np.flatnonzero(distance < APPROACH_RADIUS)
        g = first_grasp.get(i)
        late = g is None or arrival[i] > g.close
        rows.append(
            {
                "outcome": str(outcomes[i]) if i < len(outcomes) else None,
                "order": int(order[i]),
                "approach_y": float(pos[near[0], 1]) if len(near) else math.nan,
                "close_y": float(pos[g.close, 1]) if g is not None else math.nan,
                "arrival_to_close": math.nan if late else (g.close - arrival[i]) * DT,
                "close_to_release": (g.release - g.close) * DT if g is not None and g.release is not None else math.nan,
            }
        )
    return rows


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Medians and quartiles of each trait, the outcome counts, and the traits of the missed objects."""

    def quantiles(values: Iterable[float]) -> dict[str, float | int]:
        v = np.asarray([x for x in values if not math.isnan(x)], dtype=float)
        if not len(v):
            return {"n": 0}
        q1, med, q3 = np.percentile(v, [25, 50, 75])
        return {"n": int(len(v)), "q1": round(float(q1), 4), "median": round(float(med), 4), "q3": round(float(q3), 4)}

    outcomes: dict[str, int] = {}
    for r in rows:
        outcomes[str(r["outcome"])] = outcomes.get(str(r["outcome"]), 0) + 1
    missed = [r for r in rows if r["outcome"] == "missed"]
    return {
        "objects": len(rows),
        "outcomes": dict(sorted(outcomes.items())),
        "missed_share": round(len(missed) / max(len(rows), 1), 4),
        "approach_y": quantiles(r["approach_y"] for r in rows),
        "close_y": quantiles(r["close_y"] for r in rows),
        "arrival_to_close": quantiles(r["arrival_to_close"] for r in rows),
        "close_to_release": quantiles(r["close_to_release"] for r in rows),
        "missed_never_approached": sum(math.isnan(r["approach_y"]) for r in missed),
        "missed_approach_y": quantiles(r["approach_y"] for r in missed),
        # By arrival order (0: the first object to arrive): a demonstrator that falls behind misses the last ones.
        "by_order": {
            str(k): {
                "objects": len(of),
                "missed": sum(r["outcome"] == "missed" for r in of),
                "arrival_to_close": quantiles(r["arrival_to_close"] for r in of),
            }
            for k in sorted({r["order"] for r in rows})
            for of in [[r for r in rows if r["order"] == k]]
        },
    }


def dataset_rows(path: Path, demos: int) -> list[dict[str, Any]]:
    """Object rows of the first ``demos`` demonstrations of a dataset."""
    rows: list[dict[str, Any]] = []
    with open_dataset(path, verify="quick") as f:
        for demo_id in f.demo_ids[:demos]:
            obs = {k: f.read(demo_id, f"obs/{k}") for k in OBS_KEYS}
            attrs = f.demo_attrs(demo_id)
            trace = trace_from_arrays(demo_id, obs, f.read(demo_id, "actions"), attrs)
            rows += object_events(trace, list(attrs.get("object_outcomes") or []))
    return rows


class Recorder:
    """A policy that records the observations it is given and the actions it returns, per episode."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy
        self.episodes: list[tuple[dict[str, list[np.ndarray]], list[np.ndarray]]] = []

    def __getattr__(self, name: str) -> Any:  # metadata, name, settings, set_domain
        return getattr(self.__dict__["policy"], name)

    def reset(self, seed: int | None) -> None:
        self.policy.reset(seed)
        self.episodes.append(({k: [] for k in OBS_KEYS}, []))

    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        action = self.policy.act(obs)
        observations, actions = self.episodes[-1]
        for k in OBS_KEYS:
            observations[k].append(np.array(obs[k], copy=True))
        actions.append(np.array(action, dtype=np.float32, copy=True))
        return action


def env_of(variant: str | None, where: str) -> str | None:
    """The env a policy of ``variant`` is run in: the lab, or its own variant (``where="own-variant"``; ``None`` for a
    real-only policy, which has no variant)."""
    if where == "lab":
        return LAB_ID
    return None if variant is None else f"PickSort-{variant}-v0"


def table_policies(
    run: Path, methods: Sequence[str], seeds: Sequence[int], table_fraction: float, where: str = "lab"
) -> list[dict[str, Any]]:
    """The run's finished table trainings of ``methods`` x ``seeds`` (real-only and the four variants), with the
    run's evaluation record in the env ``where`` says (real-only policies have none in a variant)."""
    evals = {}
    for task in sorted((run / "store" / "eval").glob("*/task.json")):
        record = json.loads(task.read_text())
        config = record["config"]
        p = config["policy"]
        if config["env_id"] == env_of(p["variant"], where) and not config["env_kwargs"]:
            evals[(p["method"], p["variant"], round(p["real_fraction"], 6), p["seed"])] = record
    found = []
    for task in sorted((run / "store" / "train").glob("*/task.json")):
        record = json.loads(task.read_text())
        meta = record["metadata"]
        method, variant, seed = meta["method"], meta.get("variant"), meta["training_seed"]
        fraction = round(float(meta["real_fraction"]), 6)
        if method not in methods or seed not in seeds:
            continue
        evaluation = evals.get((method, variant, fraction, seed))
        if evaluation is None:
            continue
        # The table's cells: real-only (all real data) and each variant at the table's fraction (not the sweep's).
        if (variant is None) != (fraction == 1.0) or (variant is not None and fraction != round(table_fraction, 6)):
            continue
        found.append(
            {
                "method": method,
                "variant": variant or "real-only",
                "real_fraction": fraction,
                "seed": seed,
                "policy": record["policy"],
                "evaluation": evaluation,
            }
        )
    return found


def policy_rows(entry: dict[str, Any], episodes: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Object rows of a policy's first ``episodes`` evaluation episodes in the env of its evaluation record, and
    whether their outcomes are the record's."""
    from r2s2r_envs.policies.runtime import load_policy

    recorder = Recorder(load_policy(entry["policy"]))
    env_id = entry["evaluation"]["config"]["env_id"]
    result = evaluate(env_id, recorder, episodes=episodes, progress=False)
    rows: list[dict[str, Any]] = []
    for record, (observations, actions) in zip(result.records, recorder.episodes, strict=True):
        obs = {k: np.stack(v) for k, v in observations.items()}
        attrs = {"object_outcomes": record.object_outcomes, "success": record.is_success}
        trace = trace_from_arrays(record.index, obs, np.stack(actions), attrs)
        rows += object_events(trace, record.object_outcomes)
    stored = json.loads(Path(entry["evaluation"]["result"]).read_text())["records"][:episodes]
    same = [list(r.object_outcomes) for r in result.records] == [list(r["object_outcomes"]) for r in stored]
    summary = {"env_id": env_id, "episodes": episodes, "success_rate": result.summary["success_rate"]}
    return rows, {**summary, "outcomes_match_run": same}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True, help="an ablation run directory (its store is read)")
    parser.add_argument("--data-dir", type=Path, default=None, help="canonical dataset cache (default: the usual)")
    parser.add_argument("--demos", type=int, default=300, help="demonstrations read per dataset (default 300)")
    parser.add_argument("--episodes", type=int, default=100, help="lab episodes per policy (default 100)")
    parser.add_argument("--methods", default="flow", help="methods, comma-separated (default flow)")
    parser.add_argument("--seeds", default="0", help="training seeds, comma-separated (default 0)")
    parser.add_argument("--real-fraction", type=float, default=0.224, help="the table's fraction (default 0.224)")
    parser.add_argument(
        "--where",
        choices=("lab", "own-variant"),
        default="lab",
        help="run the policies in the lab (default) or "
        "each in its own simulated variant (real-only policies are left out)",
    )
    parser.add_argument("--variants", default=None, help="only these policies' variants, comma-separated")
    parser.add_argument("--skip-policies", action="store_true", help="only the datasets")
    parser.add_argument("--skip-datasets", action="store_true", help="only the policies")
    parser.add_argument("--out", type=Path, required=True, help="the JSON record")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    start = time.time()
    cache = args.data_dir or default_cache_dir()
    record: dict[str, Any] = {
        "study": "grasp-timing",
        "run": str(args.run),
        "where": args.where,
        "approach_radius_m": APPROACH_RADIUS,
        "arrival_y_m": ARRIVAL_Y,
        "datasets": {},
        "policies": [],
    }
    for name, variant in ({} if args.skip_datasets else TABLE_DATASETS).items():
        path = cache / f"{name}.hdf5"
        with open_dataset(path, verify="quick") as f:
            digest = f.content_hash
        row = {"variant": variant, "sha256": digest, "demos": args.demos, **summarize(dataset_rows(path, args.demos))}
        record["datasets"][name] = row
        print(f"{name:24s} close_y {row['close_y']} approach_y {row['approach_y']['median']}", flush=True)
    if not args.skip_policies:
        methods = args.methods.split(",")
        seeds = [int(s) for s in args.seeds.split(",")]
        for entry in table_policies(args.run, methods, seeds, args.real_fraction, args.where):
            if args.variants is not None and entry["variant"] not in args.variants.split(","):
                continue
            rows, check = policy_rows(entry, args.episodes)
            row = {k: entry[k] for k in ("method", "variant", "real_fraction", "seed")}
            row["evaluation_key"] = entry["evaluation"]["key"]
            row.update(check)
            row.update(summarize(rows))
            record["policies"].append(row)
            print(
                f"{row['method']:14s} {row['variant']:16s} seed {row['seed']} success {row['success_rate']:.2f} "
                f"missed {row['outcomes'].get('missed', 0):3d} close_y {row['close_y'].get('median')} "
                f"approach_y {row['approach_y'].get('median')} match {row['outcomes_match_run']}",
                flush=True,
            )
    record["machine"] = {"platform": platform.platform(), "python": platform.python_version()}
    record["versions"] = {**versions(), "torch": torch.__version__}
    record["wall_time_s"] = round(time.time() - start, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
