"""The real-only regime in simulation: what a policy trained on 50 human-like demos needs, chosen without the lab.

The real-only baseline trains on the lab's 50 teleoperated demos and is tested in the lab, which is the test set:
no setting of its may be chosen on lab episodes. This study builds the same regime in the simulator the team
trusts most, ``PickSort-FullyGrounded-v0`` (the identified world, demonstrated by the human-like generator fitted
to the lab's demos): 50 successful generator demos (base seed 2,000,000: not ``lab-50``'s scenes, not the
protocol's), the real-only recipe trained on them (``real_fraction`` 0: the data are simulated, the domain label
plays no part in ``flow`` and ``bc``), and each policy evaluated in that world on held-out episodes (base seed
400,000, never the protocol's published seeds). What wins here is what the real-only row may use.

Each configuration is a set of :class:`~r2s2r_envs.policies.config.TrainConfig` values over the ``cpu`` recipe
(``CONFIGS``). Every dataset, training and evaluation is a file under ``--out``: a second run skips what exists.
The summary (``summary.json``, ``summary.md``, printed) gives per configuration the success and sort accuracy
with 95% bootstrap intervals over episodes (over seeds and episodes where there are several seeds), the first
failure causes, the validation loss curve's best step, and each configuration minus ``base`` paired over the
same episodes.

Example::

    MUJOCO_GL=egl python experiments/small_data.py --out runs/small-data
    MUJOCO_GL=egl python experiments/small_data.py --out runs/small-data --configs base,steps-4k --seeds 0,1
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from r2s2r_envs.ablation.analysis import bootstrap_contrast, failure_counts, result_matrices
from r2s2r_envs.evaluation.protocol import EvaluationResult

ENV_ID = "PickSort-FullyGrounded-v0"
DEMOS = 50
DATA_SEED = 2_000_000
EVAL_SEED = 400_000
DATA_FILE = "fg-50.hdf5"
#: TrainConfig values over the ``cpu`` recipe; ``base`` is the real-only row as the reference ran it.
CONFIGS: dict[str, dict[str, Any]] = {
    "base": {"method": "flow"},
    "obs-noise-0.1": {"method": "flow", "obs_noise": 0.1},
    "steps-4k": {"method": "flow", "steps": 4000},
    "steps-4k-stack-1": {"method": "flow", "steps": 4000, "frame_stack": 1},
    "steps-4k-stack-4": {"method": "flow", "steps": 4000, "frame_stack": 4},
    "last-weights": {"method": "flow", "val_fraction": 0.0},
    "stack-4": {"method": "flow", "frame_stack": 4},
    "steps-4k-stack-8": {"method": "flow", "steps": 4000, "frame_stack": 8},
}


def _machine() -> str:
    try:
        names = [ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")]
    except OSError:
        names = []
    return f"{names[0] if names else platform.machine()}, {len(names) or '?'} cores, Python {platform.python_version()}"


def _log(out: Path, text: str) -> None:
    print(text, flush=True)
    with open(out / "run_log.txt", "a") as f:
        f.write(text + "\n")


def make_data(out: Path, workers: int) -> Path:
    from r2s2r_envs.datasets.generate import generate

    path = out / DATA_FILE  # generate resumes an existing file: a complete one is only checked
    generate(ENV_ID, DEMOS, path, seed=DATA_SEED, successes_only=True, workers=workers, progress=False)
    return path


def run_config(name: str, seed: int, data: Path, out: Path, episodes: int, batch: int) -> Path:
    """Trains (unless done) and evaluates (unless done) one configuration's seed; returns its result file."""
    from r2s2r_envs.evaluation import evaluate
    from r2s2r_envs.policies import load_policy
    from r2s2r_envs.policies.config import TrainConfig
    from r2s2r_envs.policies.train import train

    ckpt = out / "train" / f"{name}-s{seed}"
    result_path = out / "results" / f"{name}-s{seed}.json"
    if not (ckpt / "config.json").is_file():
        t = time.perf_counter()
        values = dict(CONFIGS[name])
        config = TrainConfig(
            method=values.pop("method"),
            sim=(str(data),),
            real_fraction=0.0,
            seed=seed,
            out=str(ckpt),
            progress=False,
            overwrite=True,
            **values,
        )
        done = train(config)
        _log(out, f"  trained {name} seed {seed}: {time.perf_counter() - t:.0f} s, final loss {done.final_loss:.4f}")
    if not result_path.is_file():
        t = time.perf_counter()
        result = evaluate(
            ENV_ID, load_policy(ckpt), episodes=episodes, base_seed=EVAL_SEED, batch=batch, progress=False
        )
        result_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = result_path.with_suffix(".tmp")
        tmp.write_text(result.to_json(indent=1) + "\n")
        tmp.replace(result_path)
        s = result.summary
        _log(
            out,
            f"  evaluated {name} seed {seed}: success {100 * s['success_rate']:.1f}%, sort accuracy "
            f"{100 * s['sort_accuracy']:.1f}% ({time.perf_counter() - t:.0f} s)",
        )
    return result_path


def summarize(out: Path, names: list[str], replicates: int = 2000) -> dict[str, Any]:
    """Per configuration: success and sort accuracy with bootstrap intervals, failures, validation; minus base."""
    cells: dict[str, dict[str, np.ndarray]] = {}
    rows: dict[str, Any] = {}
    for name in names:
        paths = sorted(p for p in (out / "results").glob(f"{name}-s*.json") if p.stem[len(name) + 2 :].isdigit())
        if not paths:
            continue
        results = [EvaluationResult.from_json(p.read_text()) for p in paths]
        cells[name] = result_matrices(results)
        validation = []
        for p in paths:
            log = json.loads((out / "train" / p.stem / "train_log.json").read_text())
            validation.append({"checkpoint_step": log["checkpoint_step"], "losses": log["validation"]})
        rows[name] = {
            "config": CONFIGS[name],
            "seeds": [int(p.stem.rpartition("-s")[2]) for p in paths],
            "failures": failure_counts(results),
            "validation": validation,
            **{
                metric: bootstrap_contrast({name: x}, {name: 1.0}, replicates=replicates)
                for metric, x in cells[name].items()
            },
        }
    versus_base = {
        name: {
            metric: bootstrap_contrast(
                {name: cells[name][metric], "base": cells["base"][metric]},
                {name: 1.0, "base": -1.0},
                replicates=replicates,
            )
            for metric in ("success", "sort_accuracy")
        }
        for name in cells
        if name != "base" and "base" in cells
    }
    return {"rows": rows, "versus_base": versus_base}


def _pct(c: dict[str, Any], sign: str = "") -> str:
    low, high = c["ci95"]
    return f"{100 * c['estimate']:{sign}.1f} [{100 * low:{sign}.1f}, {100 * high:{sign}.1f}]"


def to_markdown(summary: dict[str, Any], episodes: int) -> str:
    lines = [
        f"50 human-like demos in {ENV_ID}, `cpu` recipe plus each configuration's values; {episodes} held-out "
        f"episodes (base seed {EVAL_SEED}) per policy; % [95% bootstrap].",
        "",
        "| configuration | values | seeds | success, % | sort accuracy, % | minus base, success points | "
        "best validation step | first failures |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, e in summary["rows"].items():
        values = ", ".join(f"{k} {v}" for k, v in e["config"].items())
        versus = summary["versus_base"].get(name)
        delta = _pct(versus["success"], "+") if versus else "-"
        steps = "/".join(str(v["checkpoint_step"]) for v in e["validation"])
        failures = ", ".join(f"{k} {v}" for k, v in e["failures"].items()) or "none"
        lines.append(
            f"| {name} | {values} | {len(e['seeds'])} | {_pct(e['success'])} | {_pct(e['sort_accuracy'])} | "
            f"{delta} | {steps} | {failures} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="output directory (resumed if it exists)")
    parser.add_argument("--configs", default=",".join(CONFIGS), help=f"comma-separated, default all: {list(CONFIGS)}")
    parser.add_argument("--seeds", default="0", help="training seeds (default 0)")
    parser.add_argument("--episodes", type=int, default=100, help="held-out episodes per policy (default 100)")
    parser.add_argument("--batch", type=int, default=10, help="envs per evaluation batch (default 10)")
    parser.add_argument("--workers", type=int, default=1, help="dataset generation workers (default 1)")
    parser.add_argument("--summary-only", action="store_true", help="summarize what exists under --out")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.configs.split(",") if n.strip()]
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        parser.error(f"unknown configuration(s) {unknown}; choose from {list(CONFIGS)}")
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--seeds must be comma-separated integers, got {args.seeds!r}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not args.summary_only:
        _log(out, f"small_data: configs {names}, seeds {seeds}, {args.episodes} episodes, {_machine()}")
        data = make_data(out, args.workers)
        for name in names:
            for seed in seeds:
                run_config(name, seed, data, out, args.episodes, args.batch)
    summary = summarize(out, names if "base" in names else ["base", *names])
    summary.update(env_id=ENV_ID, demos=DEMOS, data_seed=DATA_SEED, eval_seed=EVAL_SEED, episodes=args.episodes)
    arguments = argv if argv is not None else sys.argv[1:]
    summary["command"] = " ".join(["python", "experiments/small_data.py", *arguments])
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    markdown = to_markdown(summary, args.episodes)
    (out / "summary.md").write_text(markdown)
    print(markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
