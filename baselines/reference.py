"""The co-training reference: the baselines trained at a named recipe and evaluated with the protocol.

Rows (``--rows``, default all), each trained with every seed of ``--seeds`` and evaluated on the protocol's
published seeds (``--episodes`` each, 100 by default):

* ``sim-only/<method>``: the method on ``ungrounded-1000`` (real_fraction 0), evaluated in ``PickSort-Ungrounded-v0``;
* ``real-only/<method>``: on ``lab-50`` (real_fraction 1), evaluated in the lab (``PickSort-Real-v0``);
* ``co-trained/<method>/<variant>``: ``lab-50`` plus the variant's 1,000 canonical demos at the mixing rule's high
  end (real_fraction ``sqrt(50 / 1000) = 0.224``, docs/concepts.md), evaluated in the lab.

Methods: ``flow`` and ``bc`` for the sim-only and real-only rows, ``flow``, ``flow-cfg`` and ``flow-cfg-adda``
co-trained, with the grounded variants WorldGrounded, BehaviorGrounded and FullyGrounded and, as the reference
without grounding, Ungrounded. Nothing is chosen on lab episodes: the recipe, the
checkpoint (validation loss on held-out *demos*) and real_fraction (the mixing rule) are fixed before any lab
episode runs.

Every training and every evaluation is a file under ``--out`` (``train/<row>-s<seed>/``,
``results/<row>-s<seed>.json``): a second run skips what exists, so the script resumes after an interruption and
a row can be added later. At the end it writes the leaderboard of ``results/`` (``leaderboard/``) and
``summary.json`` / ``summary.md``: per row, the mean over seeds and episodes of episode success and sort
accuracy with 95% bootstrap intervals (seeds and episodes resampled), each co-trained row against real-only and
each grounded co-trained row against the Ungrounded one of its method (paired over the protocol's episodes).

Example::

    r2s2r datasets make lab-50 ungrounded-1000 worldgrounded-1000
    python baselines/reference.py --rows sim-only/flow,real-only/flow,co-trained/flow/WorldGrounded --seeds 0 \\
        --out runs/reference
    python baselines/reference.py --out runs/reference --recipe gpu --device cuda   # the GPU recipe
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from r2s2r_envs.ablation.analysis import bootstrap_contrast, failure_counts, result_matrices
from r2s2r_envs.evaluation import evaluate
from r2s2r_envs.evaluation.leaderboard import build_leaderboard
from r2s2r_envs.policies.config import RECIPES, ConfigError, TrainConfig, check_config

LAB_ID = "PickSort-Real-v0"
SIM_ID = "PickSort-Ungrounded-v0"
REAL_DATA = "lab-50"
SIM_DATA = {
    "Ungrounded": "ungrounded-1000",
    "WorldGrounded": "worldgrounded-1000",
    "BehaviorGrounded": "behaviorgrounded-1000",
    "FullyGrounded": "fullygrounded-1000",
}
#: real_fraction of the co-trained rows: the mixing rule's high end for 50 real and 1,000 sim demos.
CO_TRAINING_FRACTION = round(math.sqrt(50 / 1000), 3)


@dataclasses.dataclass(frozen=True)
class Row:
    """One row of the reference: what is trained on what, and where it is evaluated."""

    name: str
    method: str
    real: tuple[str, ...]
    sim: tuple[str, ...]
    real_fraction: float
    env_id: str

    def config(self, *, seed: int, out: Path, recipe: str, overrides: dict[str, Any]) -> TrainConfig:
        return TrainConfig(
            method=self.method,
            real=self.real,
            sim=self.sim,
            real_fraction=self.real_fraction,
            seed=seed,
            out=str(out),
            recipe=recipe,
            progress=False,
            **overrides,
        )


def all_rows() -> dict[str, Row]:
    rows = [
        *(Row(f"sim-only/{m}", m, (), (SIM_DATA["Ungrounded"],), 0.0, SIM_ID) for m in ("flow", "bc")),
        *(Row(f"real-only/{m}", m, (REAL_DATA,), (), 1.0, LAB_ID) for m in ("flow", "bc")),
        *(
            Row(f"co-trained/{m}/{v}", m, (REAL_DATA,), (SIM_DATA[v],), CO_TRAINING_FRACTION, LAB_ID)
            for m in ("flow", "flow-cfg", "flow-cfg-adda")
            for v in ("Ungrounded", "WorldGrounded", "BehaviorGrounded", "FullyGrounded")
        ),
    ]
    return {r.name: r for r in rows}


def _stem(name: str) -> str:
    return name.replace("/", "-")


def _slug(name: str, seed: int) -> str:
    return f"{_stem(name)}-s{seed}"


def run_row(row: Row, seed: int, args: argparse.Namespace, overrides: dict[str, Any], log: Any) -> Path:
    """Trains (unless done) and evaluates (unless done) one row's seed; returns its result file."""
    from r2s2r_envs.policies import load_policy
    from r2s2r_envs.policies.train import train

    out = Path(args.out)
    ckpt = out / "train" / _slug(row.name, seed)
    result_path = out / "results" / f"{_slug(row.name, seed)}.json"
    if not (ckpt / "config.json").is_file():
        t = time.perf_counter()
        config = row.config(seed=seed, out=ckpt, recipe=args.recipe, overrides={**overrides, "overwrite": True})
        done = train(config)
        log(f"  trained {row.name} seed {seed}: {time.perf_counter() - t:.0f} s, final loss {done.final_loss:.4f}")
    if not result_path.is_file():
        t = time.perf_counter()
        policy = load_policy(ckpt)
        result = evaluate(row.env_id, policy, episodes=args.episodes, workers=args.workers, progress=False)
        result_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = result_path.with_suffix(".tmp")
        tmp.write_text(result.to_json(indent=1) + "\n")
        tmp.replace(result_path)
        s = result.summary
        log(
            f"  evaluated {row.name} seed {seed} in {row.env_id}: success {100 * s['success_rate']:.1f}%, sort "
            f"accuracy {100 * s['sort_accuracy']:.1f}% ({time.perf_counter() - t:.0f} s)"
        )
    return result_path


def _paired(cells: dict[str, dict[str, np.ndarray]], row: str, base: str, replicates: int) -> dict[str, Any]:
    """``row`` minus ``base`` for each metric, paired over the protocol's episodes."""
    return {
        metric: bootstrap_contrast(
            {row: cells[row][metric], base: cells[base][metric]}, {row: 1.0, base: -1.0}, replicates=replicates
        )
        for metric in ("success", "sort_accuracy")
    }


def summarize(rows: list[Row], done: dict[str, list[Path]], replicates: int = 2000) -> dict[str, Any]:
    """Per row: success and sort accuracy with 95% bootstrap intervals; co-trained rows against real-only, against
    the Ungrounded sim data (the world axis) and, for the other co-training methods, against `flow` on the same data."""
    cells = {name: result_matrices(paths) for name, paths in done.items() if paths}
    summary: dict[str, Any] = {"rows": {}, "versus_real_only": {}, "versus_ungrounded": {}, "versus_flow": {}}
    for row in rows:
        if row.name not in cells:
            continue
        entry = {"env_id": row.env_id, "seeds": len(done[row.name]), "failures": failure_counts(done[row.name])}
        for metric, x in cells[row.name].items():
            entry[metric] = bootstrap_contrast({row.name: x}, {row.name: 1.0}, replicates=replicates)
        summary["rows"][row.name] = entry
        if row.name.startswith("co-trained/"):
            base = f"real-only/{'flow' if row.method.startswith('flow') else row.method}"
            if base in cells:
                summary["versus_real_only"][row.name] = _paired(cells, row.name, base, replicates)
            ungrounded = f"co-trained/{row.method}/Ungrounded"
            if row.name != ungrounded and ungrounded in cells:
                summary["versus_ungrounded"][row.name] = _paired(cells, row.name, ungrounded, replicates)
            # Another co-training method on the same data against plain flow.
            flow = f"co-trained/flow/{row.name.rsplit('/', 1)[1]}"
            if row.method != "flow" and flow in cells:
                summary["versus_flow"][row.name] = _paired(cells, row.name, flow, replicates)
    return summary


def _pct(c: dict[str, Any]) -> str:
    low, high = c["ci95"]
    return f"{100 * c['estimate']:.1f} [{100 * low:.1f}, {100 * high:.1f}]"


def _pts(c: dict[str, Any]) -> str:
    low, high = c["ci95"]
    return f"{100 * c['estimate']:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]"


def to_markdown(summary: dict[str, Any], recipe: str, episodes: int) -> str:
    lines = [
        f"Recipe `{recipe}`, {episodes} protocol episodes per policy; % [95% bootstrap over seeds and episodes].",
        "",
        "| row | evaluated in | seeds | success, % | sort accuracy, % | failures (first cause) |",
        "|---|---|---|---|---|---|",
    ]
    for name, e in summary["rows"].items():
        failures = ", ".join(f"{k} {v}" for k, v in e["failures"].items()) or "none"
        lines.append(
            f"| {name} | {e['env_id']} | {e['seeds']} | {_pct(e['success'])} | {_pct(e['sort_accuracy'])} | "
            f"{failures} |"
        )
    if summary["versus_real_only"]:
        lines += ["", "| co-trained minus real-only (lab) | success, points | sort accuracy, points |", "|---|---|---|"]
        for name, c in summary["versus_real_only"].items():
            lines.append(f"| {name} | {_pts(c['success'])} | {_pts(c['sort_accuracy'])} |")
    if summary["versus_ungrounded"]:
        lines += [
            "",
            "| grounded minus Ungrounded sim data (lab) | success, points | sort accuracy, points |",
            "|---|---|---|",
        ]
        for name, c in summary["versus_ungrounded"].items():
            lines.append(f"| {name} | {_pts(c['success'])} | {_pts(c['sort_accuracy'])} |")
    if summary.get("versus_flow"):
        lines += [
            "",
            "| method minus `flow`, same data (lab) | success, points | sort accuracy, points |",
            "|---|---|---|",
        ]
        for name, c in summary["versus_flow"].items():
            lines.append(f"| {name} | {_pts(c['success'])} | {_pts(c['sort_accuracy'])} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    rows = all_rows()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="output directory (resumed if it exists)")
    parser.add_argument("--rows", default=",".join(rows), help=f"comma-separated rows (default all: {list(rows)})")
    parser.add_argument("--seeds", default="0,1,2", help="training seeds (default 0,1,2)")
    parser.add_argument("--recipe", default="cpu", choices=sorted(RECIPES), help="training recipe (default cpu)")
    parser.add_argument("--steps", type=int, default=None, help="training steps instead of the recipe's")
    parser.add_argument("--device", default=None, choices=("cpu", "cuda", "auto"), help="training device")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads per training (default 1)")
    parser.add_argument("--episodes", type=int, default=100, help="protocol episodes per policy (default 100)")
    parser.add_argument("--workers", type=int, default=2, help="evaluation worker processes (default 2)")
    parser.add_argument(
        "--summary-only",
        action="store_true",
        help="train and evaluate nothing: summarize the results under --out of the chosen rows, whatever seeds exist",
    )
    args = parser.parse_args(argv)

    chosen = [r.strip() for r in args.rows.split(",") if r.strip()]
    unknown = [r for r in chosen if r not in rows]
    if unknown:
        parser.error(f"unknown row(s) {unknown}; choose from {list(rows)}")
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--seeds must be comma-separated integers, got {args.seeds!r}")
    if not seeds or any(s < 0 for s in seeds):
        parser.error(f"--seeds must be integers >= 0, got {args.seeds!r}")
    overrides: dict[str, Any] = {"threads": args.threads}
    if args.steps is not None:
        overrides["steps"] = args.steps
    if args.device is not None:
        overrides["device"] = args.device
    out = Path(args.out)
    for name in chosen:  # every setting checked before any work
        try:
            check_config(rows[name].config(seed=seeds[0], out=out / "check", recipe=args.recipe, overrides=overrides))
        except ConfigError as exc:
            parser.error(f"row {name}: {exc}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "command.txt").write_text(" ".join(["python", "baselines/reference.py", *(argv or sys.argv[1:])]) + "\n")

    def log(text: str) -> None:
        print(text, flush=True)
        with open(out / "run_log.txt", "a") as f:
            f.write(text + "\n")

    done: dict[str, list[Path]] = {}
    if args.summary_only:
        for name in chosen:
            done[name] = sorted((out / "results").glob(f"{_stem(name)}-s*.json"))
        seeds = sorted({int(p.stem.rpartition("-s")[2]) for paths in done.values() for p in paths})
    else:
        log(f"reference: rows {chosen}, seeds {seeds}, recipe {args.recipe}, {args.episodes} episodes")
        for name in chosen:
            done[name] = [run_row(rows[name], seed, args, overrides, log) for seed in seeds]
    summary = summarize([rows[n] for n in chosen], done)
    summary.update(recipe=args.recipe, seeds=seeds, episodes=args.episodes, overrides=overrides)
    for name, paths in done.items():
        if name in summary["rows"]:
            summary["rows"][name]["results"] = [p.name for p in paths]
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    markdown = to_markdown(summary, args.recipe, args.episodes)
    (out / "summary.md").write_text(markdown)
    build_leaderboard(out / "results", out / "leaderboard", title="Co-training reference")
    print(markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
