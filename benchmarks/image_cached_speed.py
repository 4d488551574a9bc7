"""Training speed of the ``cpu-image-cached`` recipe against ``cpu`` (state) and ``cpu-image``, measured in one run.

The three recipes train the same method (``--method``, default ``flow``) on the same small data, the first
``--demos`` demos of the canonical Ungrounded image set (``ungrounded-v1-1000-rgb64``, 64 px renders with the
object state, so the state recipe reads the same demos), copied into a temporary file with the suite's writer. Each
run is ``train()`` as ``r2s2r train`` runs it (one torch thread, the validation passes off) for ``--steps`` gradient
steps. Per recipe: steps/s and samples/s of the gradient steps, the ratio of its steps/s (and samples/s) to the state
recipe's measured in this run, and the load time; for ``cpu-image-cached`` also the one-off feature extraction (the
frozen ``sim-pose`` encoder on every frame of both cameras), per 1,000 frames.

Projections for the canonical 1,000-demo set (its transitions read from the file's header): the memory of the
cached float32 features against that of the uint8 frames ``cpu-image`` holds, and the minutes of a full
``cpu-image-cached`` training: the load time without extraction scaled by demos, the extraction scaled by frames, and
the recipe's steps at the measured steps/s (the validation passes, about 2% of the steps' time, left out).

On a shared machine the figures move with the load, which is recorded (``load_average_start``/``_end``); run it
under ``nice`` beside other work.

Example:
    nice -n 15 python benchmarks/image_cached_speed.py \\
        --out benchmarks/results/training-speed/image-cached-speed.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from r2s2r_envs.datasets.reader import open_dataset
from r2s2r_envs.datasets.writer import DatasetWriter, Episode
from r2s2r_envs.policies.config import FROZEN_ENCODERS, METHODS, RECIPES, TrainConfig, recipe_values
from r2s2r_envs.policies.data import resolve_path

#: The state recipe every image recipe is compared with, and the recipes measured.
STATE_RECIPE = "cpu"
RECIPES_MEASURED = ("cpu", "cpu-image", "cpu-image-cached")
CACHED_RECIPE = "cpu-image-cached"


def copy_demos(source: Path, out: Path, demos: int) -> dict[str, Any]:
    """Writes the first ``demos`` demos of ``source`` to a new dataset file ``out`` (observations, actions, labels,
    rewards and states as recorded); returns what was copied."""
    with open_dataset(source, verify="none") as f:
        ids = f.demo_ids[:demos]
        with DatasetWriter.create(
            out, provenance=f.provenance, env_args=f.env_args, episodes_requested=len(ids), overwrite=True
        ) as writer:
            for demo_id in ids:
                d = f.demo(demo_id)
                writer.append(
                    Episode(
                        observations={k: np.concatenate([d.obs[k], d.next_obs[k][-1:]]) for k in d.obs},
                        actions=d.actions,
                        action_labels=d.action_labels,
                        rewards=d.rewards,
                        states=d.states,
                        terminated=bool(d.dones[-1]),
                        success=True,  # the canonical set holds successful demos only
                        success_any_step=True,
                    )
                )
        return {"source": str(source), "source_sha256": f.content_hash, "demo_ids": [int(i) for i in ids]}


def measure(recipe: str, method: str, data: Path, out: Path, steps: int) -> dict[str, Any]:
    """One short training run of ``recipe``: its speed and load time (and the cached recipe's extraction)."""
    from r2s2r_envs.policies.train import train

    config = TrainConfig(
        recipe=recipe,
        method=method,
        sim=(str(data),),
        real_fraction=0.0,
        out=str(out),
        steps=steps,
        val_fraction=0.0,  # the gradient steps only
        progress=False,
        overwrite=True,
    )
    result = train(config)
    log = json.loads((out / "train_log.json").read_text())
    row: dict[str, Any] = {
        "steps_measured": steps,
        "batch_size": config.batch_size,
        "steps_per_s": steps / result.train_time_s,
        "samples_per_s": result.samples_per_s,
        "step_ms": 1e3 * result.train_time_s / steps,
        "load_time_s": result.load_time_s,
        "demos_loaded": result.metadata["n_sim_demos"],
        "transitions_loaded": sum(int(v) for v in log["num_samples"].values()),
    }
    if "frozen_encoder" in log:
        cache = log["frozen_encoder"]
        row["frozen_encoder"] = cache
        row["extract_s_per_1000_frames"] = 1e3 * cache["extract_time_s"] / cache["frames_encoded"]
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="ungrounded-v1-1000-rgb64", help="canonical image set (name or file)")
    parser.add_argument("--demos", type=int, default=20, help="its first N demos are trained on")
    parser.add_argument("--method", default="flow", choices=[m for m in METHODS if "cfg" not in m and "adda" not in m])
    parser.add_argument(
        "--steps", default="cpu=200,cpu-image=100,cpu-image-cached=200", help="gradient steps per recipe, RECIPE=N,..."
    )
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    args = parser.parse_args(argv)
    steps = {name: int(value) for name, value in (item.split("=") for item in args.steps.split(",") if item)}
    missing = [r for r in RECIPES_MEASURED if r not in steps]
    if missing:
        parser.error(f"--steps gives no step count for {missing}")
    name, source = resolve_path(args.data)
    with open_dataset(source, verify="none") as f:
        full_demos, full_transitions = f.num_demos, f.num_samples
    load_start = os.getloadavg()
    results: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": sys.version.split()[0]},
        "command": "python benchmarks/image_cached_speed.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "load_average_start": load_start,
        "settings": {
            "method": args.method,
            "steps_measured": steps,
            "recipes": {r: {k: recipe_values(r)[k] for k in ("steps", "batch_size", "image_encoder")} for r in steps},
            "threads": 1,
        },
        "runs": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "subset.hdf5"
        t0 = time.perf_counter()
        results["data"] = {"name": name, **copy_demos(source, data, args.demos)}
        results["data"]["copy_time_s"] = time.perf_counter() - t0
        for recipe in RECIPES_MEASURED:
            print(f"{recipe}: {steps[recipe]} steps of {args.method} ...", flush=True)
            results["runs"][recipe] = measure(recipe, args.method, data, Path(tmp) / recipe, steps[recipe])
    runs = results["runs"]
    state = runs[STATE_RECIPE]
    for row in runs.values():
        row["steps_per_s_ratio_to_cpu"] = row["steps_per_s"] / state["steps_per_s"]
        row["samples_per_s_ratio_to_cpu"] = row["samples_per_s"] / state["samples_per_s"]
    cached = runs[CACHED_RECIPE]
    frozen = FROZEN_ENCODERS[RECIPES[CACHED_RECIPE]["image_encoder"]]
    cameras = len(RECIPES[CACHED_RECIPE]["image_keys"])
    extract_s = cached["frozen_encoder"]["extract_time_s"]
    recipe_steps = recipe_values(CACHED_RECIPE)["steps"]
    projected = {
        "demos": full_demos,
        "transitions": full_transitions,
        "feature_bytes": full_transitions * cameras * frozen.out_dim * 4,
        "frame_bytes_uint8": full_transitions * cameras * frozen.image_size**2 * 3,
        "load_s": (cached["load_time_s"] - extract_s) * full_demos / cached["demos_loaded"],
        "extract_s": cached["extract_s_per_1000_frames"] * full_transitions / 1e3,
        "train_s": recipe_steps / cached["steps_per_s"],
    }
    projected["total_minutes"] = (projected["load_s"] + projected["extract_s"] + projected["train_s"]) / 60
    results["projected_full_cpu_image_cached"] = projected
    results["load_average_end"] = os.getloadavg()
    text = json.dumps(results, indent=2) + "\n"
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    print(f"{'recipe':<18}{'batch':>6}{'steps/s':>9}{'x cpu':>7}{'samples/s':>11}{'x cpu':>7}{'load s':>8}")
    for recipe, row in runs.items():
        print(
            f"{recipe:<18}{row['batch_size']:>6}{row['steps_per_s']:>9.2f}{row['steps_per_s_ratio_to_cpu']:>7.2f}"
            f"{row['samples_per_s']:>11.0f}{row['samples_per_s_ratio_to_cpu']:>7.2f}{row['load_time_s']:>8.1f}"
        )
    print(
        f"feature extraction: {cached['extract_s_per_1000_frames']:.2f} s per 1,000 frames (both cameras); "
        f"{full_demos:,}-demo set: {projected['feature_bytes'] / 2**20:.0f} MiB of float32 features "
        f"(uint8 frames: {projected['frame_bytes_uint8'] / 2**30:.1f} GiB); a full {CACHED_RECIPE} run: "
        f"{projected['total_minutes']:.0f} min (load {projected['load_s'] / 60:.1f}, extraction "
        f"{projected['extract_s'] / 60:.1f}, {recipe_steps:,} steps {projected['train_s'] / 60:.1f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
