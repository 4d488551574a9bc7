"""Does a demonstrator tuned in the grounded world transfer better to the lab? World grounding as better demos.

The sim datasets of every variant are made by a demonstrator whose settings were tuned in the nominal world (the
scripted planner: 97% in the nominal sim, 71% in the grounded sim, 60% in the lab, docs/grounding.md). A world
grounding changes the data only through the physics the demos meet and which attempts succeed; the demonstrator
does not adapt to the world. A team that trusts its grounded simulator would tune its demonstrator there. This
script measures what that buys, honestly for the lab boundary: the tuning sees only the tuning env (by default
``PickSort-WorldGrounded-v0``) on its own episodes (base seed ``--tune-seed``, disjoint from the protocol's); the lab
is used once, to evaluate the chosen settings against the default ones on the fixed protocol's episodes.

1. **Tune**: every combination of the grid (``--grid``, planner settings of ``PlannerConfig``) runs
   ``--tune-episodes`` episodes in the tuning env; the best by episode success is chosen (ties: sort accuracy,
   then the settings nearest the default, so that only a measured gain moves a setting).
2. **Evaluate**: the default and the chosen settings run the protocol's first ``--episodes`` episodes in each of
   ``--eval-envs`` (default: the nominal sim, the tuning env, the lab); paired differences (same episodes) with
   95% bootstrap intervals over episodes.

It prints both tables and writes them, with the configuration, to ``--out`` (JSON). Example::

    python experiments/demonstrator_tuning.py --tune-episodes 40 --episodes 100 --workers 2 --out runs/tuning.json
    python experiments/demonstrator_tuning.py --grid "lead_time=0.05,0.1;position_gain=0.6" --tune-episodes 4 \\
        --episodes 4 --eval-envs PickSort-WorldGrounded-v0    # a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")  # before mujoco is imported

import numpy as np  # noqa: E402

import r2s2r_envs  # noqa: E402, F401  (registers the envs)
from r2s2r_envs.ablation.analysis import bootstrap_contrast  # noqa: E402
from r2s2r_envs.evaluation.protocol import EVALUATION_BASE_SEED, evaluate  # noqa: E402
from r2s2r_envs.grounding.tuning import (  # noqa: E402
    DEFAULT_GRID,
    TUNING_BASE_SEED,
    TuningError,
    parse_grid,
    planner_factory,
    tune_planner,
)

DEFAULT_EVAL_ENVS = "PickSort-Ungrounded-v0,PickSort-WorldGrounded-v0,PickSort-Real-v0"


def _grid(text: str) -> dict[str, tuple[float, ...]]:
    try:
        return parse_grid(text)
    except TuningError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def summary(result: Any) -> dict[str, Any]:
    s = result.summary
    return {"success": s["success_rate"], "success_ci95": s["success_rate_ci95"], "sort": s["sort_accuracy"]}


def per_episode(result: Any) -> tuple[np.ndarray, np.ndarray]:
    """Success (0/1) and share of objects sorted, per episode."""
    records = result.to_dict()["records"]
    return (
        np.asarray([float(r["is_success"]) for r in records]),
        np.asarray([float(r["sort_accuracy"]) for r in records]),
    )


def paired_interval(a: np.ndarray, b: np.ndarray, seed: int = 0, replicates: int = 2000) -> list[float]:
    """95% percentile bootstrap over episodes of mean(b - a) (the same episodes in both): the package's
    :func:`~r2s2r_envs.ablation.analysis.bootstrap_contrast` on two one-seed cells."""
    c = bootstrap_contrast({"a": a[None], "b": b[None]}, {"b": 1.0, "a": -1.0}, replicates=replicates, seed=seed)
    return c["ci95"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tune-env", default="PickSort-WorldGrounded-v0", help="where the settings are tuned")
    parser.add_argument("--grid", type=_grid, default=DEFAULT_GRID, help=f"NAME=V1,V2;... (default {DEFAULT_GRID})")
    parser.add_argument("--tune-episodes", type=int, default=40, help="episodes per grid point (default 40)")
    parser.add_argument("--tune-seed", type=int, default=TUNING_BASE_SEED, help="tuning base seed (default 314159)")
    parser.add_argument("--episodes", type=int, default=100, help="protocol episodes per evaluation (default 100)")
    parser.add_argument("--eval-envs", default=DEFAULT_EVAL_ENVS, help=f"comma-separated (default {DEFAULT_EVAL_ENVS})")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--out", type=Path, default=Path("runs/demonstrator_tuning.json"), help="JSON output")
    args = parser.parse_args(argv)
    if min(args.tune_episodes, args.episodes, args.workers) < 1:
        parser.error("--tune-episodes, --episodes and --workers must be >= 1")
    eval_envs = [e.strip() for e in args.eval_envs.split(",") if e.strip()]

    def run(env_id: str, settings: dict[str, float], episodes: int, base_seed: int) -> Any:
        return evaluate(
            env_id,
            planner_factory(**settings),
            episodes=episodes,
            base_seed=base_seed,
            workers=args.workers,
            progress=False,
        )

    start = time.perf_counter()
    try:
        tuning = tune_planner(
            args.tune_env,
            grid=args.grid,
            episodes=args.tune_episodes,
            base_seed=args.tune_seed,
            workers=args.workers,
            log=lambda line: print(f"tune {line}", file=sys.stderr),
        )
    except TuningError as exc:
        parser.error(str(exc))
    chosen, default = tuning.chosen, tuning.default
    print(f"\nTuned in {args.tune_env} ({args.tune_episodes} episodes per point, base seed {args.tune_seed}):")
    print(tuning.table())

    evaluation = []
    print(f"\nProtocol episodes ({args.episodes}, base seed {EVALUATION_BASE_SEED}): default {default} vs {chosen}")
    print(f"{'env':<28} {'default: success / sort':>24} {'tuned: success / sort':>22}  tuned - default (95% CI)")
    for env_id in eval_envs:
        a = run(env_id, default, args.episodes, EVALUATION_BASE_SEED)
        b = run(env_id, chosen, args.episodes, EVALUATION_BASE_SEED)
        (sa, ra), (sb, rb) = per_episode(a), per_episode(b)
        row = {
            "env_id": env_id,
            "default": summary(a),
            "tuned": summary(b),
            "success_diff": float((sb - sa).mean()),
            "success_diff_ci95": paired_interval(sa, sb),
            "sort_diff": float((rb - ra).mean()),
            "sort_diff_ci95": paired_interval(ra, rb),
            "failure_causes": {"default": a.summary["failure_causes"], "tuned": b.summary["failure_causes"]},
        }
        evaluation.append(row)
        lo, hi = row["success_diff_ci95"]
        slo, shi = row["sort_diff_ci95"]
        print(
            f"{env_id:<28} {sa.mean():>14.2f} / {ra.mean():.3f} {sb.mean():>12.2f} / {rb.mean():.3f}  "
            f"success {row['success_diff']:+.2f} [{lo:+.2f}, {hi:+.2f}], sort {row['sort_diff']:+.3f} "
            f"[{slo:+.3f}, {shi:+.3f}]"
        )
    wall = time.perf_counter() - start
    print(f"({wall:.0f} s wall, {args.workers} workers)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    config = {**vars(args), "out": str(args.out), "eval_envs": eval_envs, "default": default}
    record = {"config": config, "tuning": tuning.to_dict(), "evaluation": evaluation, "wall_time_s": wall}
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
