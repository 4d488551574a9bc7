"""How alike each demonstrator's motion is to the lab's demonstrations: the table of docs/behavior.md#measured.

For every row, generates 50 successful demonstrations (base seed 0; kept in ``--work`` and reused by a re-run)
and compares them with the lab's (``--lab-demos``, the canonical ``lab-50``) with ``behavior.metrics.compare``:
the classifier two-sample AUC on all traits and on the strategy traits, the DTW distance of reach paths, and the
traits that separate the sets most (Cohen's d). Rows:

* the human-like generator in nominal sim (``PickSort-BehaviorGrounded-v0``) and in the identified world
  (``PickSort-FullyGrounded-v0``), the goal's subject (AUC <= 0.65);
* the scripted planner in nominal sim (``PickSort-Ungrounded-v0``), the goal's contrast (AUC >= 0.9);
* both in the lab itself (``PickSort-Real-v0``);
* the lab's own teleoperator in nominal sim: the operator the generator is fitted to, moved to the other world.
  Its AUC against its own lab demonstrations is what any demonstrator in that world can be held to with these
  traits. (Running the lab's operator model in a simulated env is a measurement made here, never by grounding
  code.)

Example::

    r2s2r datasets make lab-50 --cache-dir runs
    MUJOCO_GL=egl python benchmarks/behavior_similarity.py --lab-demos runs/lab-50.hdf5 --work runs/similarity \\
        --workers 2 --out runs/behavior_similarity.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import r2s2r_envs  # noqa: E402,F401  (registers the envs and demonstrators)
from r2s2r_envs.behavior.metrics import STRATEGY_TRAITS, compare  # noqa: E402
from r2s2r_envs.datasets.generate import generate  # noqa: E402

#: (row label, env id, demonstrator name or None for the env's own).
ROWS: tuple[tuple[str, str, str | None], ...] = (
    ("generator, nominal sim", "PickSort-BehaviorGrounded-v0", None),
    ("generator, identified sim", "PickSort-FullyGrounded-v0", None),
    ("planner, nominal sim", "PickSort-Ungrounded-v0", None),
    ("generator, lab", "PickSort-Real-v0", "humanlike"),
    ("planner, lab", "PickSort-Real-v0", "scripted"),
    ("teleoperator, nominal sim", "PickSort-Ungrounded-v0", "teleoperator"),
)


def measure_row(label: str, env_id: str, demonstrator: str | None, args: argparse.Namespace) -> dict:
    name = f"{env_id.removeprefix('PickSort-').removesuffix('-v0')}-{demonstrator or 'own'}-{args.demos}.hdf5"
    path = args.work / name
    start = time.perf_counter()
    kwargs = {} if demonstrator is None else {"demonstrator": demonstrator}
    made = generate(env_id, args.demos, path, workers=args.workers, successes_only=True, progress=False, **kwargs)
    generation_s = time.perf_counter() - start
    full = compare(args.lab_demos, path)
    strategy = compare(args.lab_demos, path, classifier_traits=STRATEGY_TRAITS)
    worst = sorted(full.traits, key=lambda t: -abs(t.effect_size))[:4]
    return {
        "row": label,
        "env_id": env_id,
        "demonstrator": demonstrator or "own",
        "file": str(path),
        "demos": made.num_demos,
        "attempts": made.attempts,
        "generation_s": round(generation_s, 1),
        "auc_all": round(full.auc, 3),
        "auc_strategy": round(strategy.auc, 3),
        "dtw_m": round(full.dtw["distance"], 3),
        "dtw_within_lab_m": round(full.dtw["within_a"], 3),
        "largest_differences": {t.trait: round(t.effect_size, 2) for t in worst},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lab-demos", type=Path, required=True, help="the lab's demonstrations (lab-50.hdf5)")
    parser.add_argument("--work", type=Path, default=Path("runs/similarity"), help="where generated sets go")
    parser.add_argument("--demos", type=int, default=50, help="successful demos per generated set (default 50)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, help="also write the figures as JSON")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    rows = []
    print("| demonstrator, world | kept / attempts | AUC, all traits | AUC, strategy | DTW, m | largest |d| |")
    print("|---|---|---|---|---|---|")
    for label, env_id, demonstrator in ROWS:
        r = measure_row(label, env_id, demonstrator, args)
        rows.append(r)
        largest = ", ".join(f"{k} {v:+.2f}" for k, v in r["largest_differences"].items())
        print(
            f"| {label} | {r['demos']} / {r['attempts']} | {r['auc_all']:.3f} | {r['auc_strategy']:.3f} | "
            f"{r['dtw_m']:.3f} | {largest} |",
            flush=True,
        )
    print(f"DTW within the lab's own set: {rows[0]['dtw_within_lab_m']:.3f} m")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        meta = {"machine": platform.node(), "python": platform.python_version(), "lab_demos": str(args.lab_demos)}
        args.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
