"""Does a policy sort as well in the lab as in the simulator its data came from? The transfer gap by training budget.

The check behind benchmarks/results/transfer-gap-gpu/README.md: flow policies co-trained on ``lab-50`` and a
variant's canonical 1,000 demos (at the mixing rule's high end, 0.224, as in the ablation) or trained on the sim
demos alone (``--sim-only-seeds``), each evaluated with the protocol in the lab and in the variant it was trained
on. The **transfer gap** is lab minus sim sort accuracy (and episode success) on the same protocol episodes, with
the ablation's bootstrap over seeds and episodes. Near zero, the simulator predicts the lab for that policy; a
grounding of the world can only raise lab performance where a gap is left to close.

Example (the run in the docs, on a lent GPU machine with 16 cores; the canonical datasets are built if missing):
    python benchmarks/transfer_gap.py --variants Ungrounded --steps 30000 --seeds 0,1,2 --sim-only-seeds 0 \\
        --device cuda --parallel 4 --workers 4 --episodes 100 --out runs/transfer_gap
    python benchmarks/transfer_gap.py --variants Ungrounded --steps 20 --seeds 0 --episodes 2 --out runs/tg_smoke

Prints one line per evaluation and one summary per (variant, kind) group; writes ``results.jsonl`` (every episode's
object outcomes) in ``--out``.
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

import numpy as np

LAB = "PickSort-Real-v0"
REAL_DATA = "lab-50"
CO_TRAINED_FRACTION = 0.224

_TRAIN = """
import json, sys
from r2s2r_envs.policies.config import TrainConfig
from r2s2r_envs.policies.train import train
fields = json.loads(sys.argv[1])
fields["real"], fields["sim"] = tuple(fields["real"]), tuple(fields["sim"])
r = train(TrainConfig(recipe="v1", method="flow", verify="none", progress=False, overwrite=True, **fields))
print(json.dumps({"train_time_s": r.train_time_s, "samples_per_s": r.samples_per_s, "final_loss": r.final_loss}))
"""


def _ints(text: str) -> list[int]:
    return [int(s) for s in text.split(",") if s.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default="Ungrounded,WorldGrounded", help="comma-separated grounding variants")
    parser.add_argument("--steps", type=int, default=12000, help="training steps of every policy")
    parser.add_argument("--seeds", type=_ints, default=[0, 1, 2], help="seeds of the co-trained policies")
    parser.add_argument("--sim-only-seeds", type=_ints, default=[], help="seeds of sim-only policies (default none)")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda", "auto"), help="training device")
    parser.add_argument("--parallel", type=int, default=1, help="trainings at a time")
    parser.add_argument("--workers", type=int, default=2, help="dataset-building and evaluation worker processes")
    parser.add_argument("--episodes", type=int, default=100, help="protocol episodes per policy and env")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    from r2s2r_envs.ablation.analysis import bootstrap_contrast
    from r2s2r_envs.ablation.design import VARIANTS, canonical_sim_name, env_id_of
    from r2s2r_envs.datasets.canonical import make_datasets
    from r2s2r_envs.evaluation import evaluate
    from r2s2r_envs.policies import load_policy

    variants = [v for v in args.variants.split(",") if v]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant(s) {unknown}; choose from {list(VARIANTS)}")
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()

    names = [REAL_DATA, *(canonical_sim_name(v) for v in variants)]
    paths = {}
    for report in make_datasets(names=names, workers=args.workers, progress=False):
        # A hash mismatch (a build on another machine) is reported, not fatal: the file follows the same recipe.
        elapsed = time.perf_counter() - t0
        print(f"[{elapsed:6.0f} s] dataset {report.name}: {report.status} {report.message}", flush=True)
        if report.status in ("failed", "skipped"):
            sys.exit(f"dataset {report.name} could not be made: {report.message}")
        paths[report.name] = str(report.path)
    real = paths[REAL_DATA]

    jobs: list[tuple[str, str, int]] = [(v, "co-trained", s) for v in variants for s in args.seeds]
    jobs += [(v, "sim-only", s) for v in variants for s in args.sim_only_seeds]

    def run(job: tuple[str, str, int]) -> None:
        variant, kind, seed = job
        out = args.out / f"{variant}-{kind}-seed{seed}"
        sim = paths[canonical_sim_name(variant)]
        fields = {
            "real": [real] if kind == "co-trained" else [],
            "sim": [sim],
            "real_fraction": CO_TRAINED_FRACTION if kind == "co-trained" else 0.0,
            "seed": seed,
            "out": str(out),
            "steps": args.steps,
            "device": args.device,
        }
        p = subprocess.run([sys.executable, "-c", _TRAIN, json.dumps(fields)], capture_output=True, text=True)
        if p.returncode:
            print(f"{out.name}: training failed\n{p.stderr[-2000:]}", file=sys.stderr)
            return
        info = json.loads(p.stdout.strip().splitlines()[-1])
        for env_id in (LAB, env_id_of(variant)):
            result = evaluate(env_id, load_policy(out), episodes=args.episodes, workers=args.workers, progress=False)
            s = result.summary
            row: dict[str, Any] = {
                "variant": variant,
                "kind": kind,
                "seed": seed,
                "steps": args.steps,
                "device": args.device,
                **info,
                "env_id": env_id,
                "success_rate": s["success_rate"],
                "sort_accuracy": s["sort_accuracy"],
                "failure_causes": {k: v for k, v in s["failure_causes"].items() if v},
                "object_outcomes": [list(r.object_outcomes) for r in result.records],
            }
            print(
                f"[{time.perf_counter() - t0:6.0f} s] {out.name:32s} {env_id:28s} success {s['success_rate']:.2f}  "
                f"sort {s['sort_accuracy']:.3f}  {row['failure_causes']}",
                flush=True,
            )
            with open(args.out / "results.jsonl", "a") as f:
                f.write(json.dumps(row) + "\n")

    with ThreadPoolExecutor(max(1, args.parallel)) as pool:
        list(pool.map(run, jobs))
    summarize(args.out / "results.jsonl", bootstrap_contrast)


def summarize(path: Path, bootstrap_contrast: Any) -> None:
    """Per (variant, kind): lab and sim sort accuracy and success, objects sorted by arrival order, transfer gap."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    groups: dict[tuple[str, str], dict[str, dict[int, np.ndarray]]] = {}
    for r in rows:
        env = "lab" if r["env_id"] == LAB else "sim"
        sorted_ = np.array([[o == "sorted" for o in ep] for ep in r["object_outcomes"]], float)
        groups.setdefault((r["variant"], r["kind"]), {}).setdefault(env, {})[r["seed"]] = sorted_
    print("\nvariant, kind: lab | sim (sort accuracy %, success %, objects sorted by arrival order %); gap lab - sim")
    for (variant, kind), by_env in sorted(groups.items()):
        if set(by_env) != {"lab", "sim"}:
            continue
        seeds = sorted(set(by_env["lab"]) & set(by_env["sim"]))
        text = []
        cells: dict[str, dict[str, np.ndarray]] = {"sort": {}, "success": {}}
        for env in ("lab", "sim"):
            x = [by_env[env][s] for s in seeds]
            cells["sort"][env] = np.stack([e.mean(axis=1) for e in x])
            cells["success"][env] = np.stack([e.min(axis=1) for e in x])
            order = np.concatenate(x).mean(axis=0)
            text.append(
                f"{100 * cells['sort'][env].mean():.1f}, {100 * cells['success'][env].mean():.1f}, "
                f"{' / '.join(f'{100 * v:.0f}' for v in order)}"
            )
        gaps = []
        for metric in ("sort", "success"):
            b = bootstrap_contrast(cells[metric], {"lab": 1.0, "sim": -1.0})
            low, high = b["ci95"]
            gaps.append(f"{metric} {100 * b['estimate']:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]")
        print(f"{variant}, {kind} ({len(seeds)} seeds): {text[0]} | {text[1]}; gap {'; '.join(gaps)}")


if __name__ == "__main__":
    main()
