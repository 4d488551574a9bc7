"""Training speed of the image recipes at 64 px against the state ``cpu`` recipe, measured in one run.

For every ``--recipes`` recipe and ``--methods`` method: gradient steps per second and samples per second of
``train()`` (as ``r2s2r train`` runs it, one torch thread, the validation passes off), the ratio of the image
recipe's steps/s to the state ``cpu`` recipe's for the same method in the same run, the network's parameter count
(the camera encoders' apart) and the projected time of a full run of the recipe on 50 real + 1,000 sim demos:
``load time x 1,050 / demos loaded + the recipe's steps x batch / samples/s``. It also reports the memory the
camera frames of such a run take, as the loaders hold them (uint8).

The data are synthetic files with PickSort's keys, demo lengths of the canonical sets (343 real, 305 sim steps) and
64 px cameras (``write_synthetic_dataset(image_size=64)``; random pixels: the speed of a step does not depend on
what the frames show). A ``gpu-image`` row measured on a machine without a GPU is the CPU's speed, marked by its
``device``; it is no estimate of the recipe on a GPU. On a shared machine the figures move with the load, which is
recorded (``load_average_start``/``_end``).

Example:
    python benchmarks/image_training_speed.py --out benchmarks/results/training-speed/image-speed.json
    python benchmarks/image_training_speed.py --recipes cpu,cpu-image --methods flow --steps cpu=40,cpu-image=20
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

from r2s2r_envs.datasets.toy import write_synthetic_dataset
from r2s2r_envs.policies.config import METHODS, RECIPES, TrainConfig, recipe_values

IMAGE_SIZE = 64
#: The demos a full run trains on (lab-50 + ungrounded-1000) and their mean lengths, steps.
FULL_DEMOS = {"real": 50, "sim": 1000}
DEMO_STEPS = {"real": 343, "sim": 305}
#: The state recipe every image recipe is compared with.
STATE_RECIPE = "cpu"


def measure(recipe: str, method: str, real: Path, sim: Path, out: Path, steps: int) -> dict[str, Any]:
    """One short training run: its speed, the network's size and the memory of its data."""
    import torch

    from r2s2r_envs.policies.train import train

    config = TrainConfig(
        recipe=recipe,
        method=method,
        real=(str(real),),
        sim=(str(sim),),
        real_fraction=0.22,
        out=str(out),
        steps=steps,
        val_fraction=0.0,  # the gradient steps only
        progress=False,
        overwrite=True,
    )
    result = train(config)
    weights = torch.load(out / "policy.pt", weights_only=True)
    cameras = sum(v.numel() for k, v in weights.items() if k.startswith("encoder.cameras."))
    log = json.loads((out / "train_log.json").read_text())
    demos = result.metadata["n_real_demos"] + result.metadata["n_sim_demos"]
    return {
        "steps_measured": steps,
        "steps_per_s": steps / result.train_time_s,
        "samples_per_s": result.samples_per_s,
        "step_ms": 1e3 * result.train_time_s / steps,
        "load_time_s": result.load_time_s,
        "demos_loaded": demos,
        "parameters": sum(v.numel() for v in weights.values()),
        "camera_encoder_parameters": cameras,
        "device": log["device"],
    }


def frame_bytes(recipe: str) -> int:
    """Bytes of the uint8 camera frames of a full run (every transition of 50 real + 1,000 sim demos)."""
    cameras = len(recipe_values(recipe)["image_keys"])
    transitions = sum(FULL_DEMOS[d] * (DEMO_STEPS[d] + 1) for d in FULL_DEMOS)
    return transitions * cameras * IMAGE_SIZE * IMAGE_SIZE * 3


def parse_steps(text: str) -> dict[str, int]:
    """``"cpu=40,cpu-image=20"`` to ``{"cpu": 40, "cpu-image": 20}``."""
    pairs = (item.split("=") for item in text.split(",") if item)
    return {name: int(value) for name, value in pairs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipes", default="cpu,cpu-image,gpu-image", help="comma-separated recipes")
    parser.add_argument("--methods", default="bc,flow,flow-cfg-adda", help="comma-separated methods")
    parser.add_argument(
        "--steps", default="cpu=40,cpu-image=20,gpu-image=2", help="gradient steps measured per recipe, RECIPE=N,..."
    )
    parser.add_argument("--demos", default="4,8", help="synthetic demos written, real,sim (default 4,8)")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    args = parser.parse_args(argv)
    recipes = [r for r in args.recipes.split(",") if r]
    methods = [m for m in args.methods.split(",") if m]
    steps = parse_steps(args.steps)
    bad = [r for r in recipes if r not in RECIPES] + [m for m in methods if m not in METHODS]
    if bad:
        parser.error(f"unknown recipe(s) or method(s) {bad}; recipes {sorted(RECIPES)}, methods {list(METHODS)}")
    missing = [r for r in recipes if r not in steps]
    if missing:
        parser.error(f"--steps gives no step count for {missing}")
    if STATE_RECIPE not in recipes:
        recipes.insert(0, STATE_RECIPE)
        steps.setdefault(STATE_RECIPE, 40)
    n_real, n_sim = (int(x) for x in args.demos.split(","))
    results: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": sys.version.split()[0]},
        "note": "shared machine: another training ran on both cores during the measurement (nice 5)",
        "load_average_start": os.getloadavg(),
        "settings": {
            "image_size": IMAGE_SIZE,
            "steps_measured": {r: steps[r] for r in recipes},
            "synthetic_demos": {"real": n_real, "sim": n_sim},
            "demo_steps": DEMO_STEPS,
            "recipes": {
                r: {
                    k: recipe_values(r)[k]
                    for k in ("steps", "batch_size", "features", "encoder", "image_encoder", "image_shift")
                }
                | {"image_keys": list(recipe_values(r)["image_keys"])}
                for r in recipes
            },
        },
        "runs": {},
    }
    header = (
        f"{'recipe':<10} {'method':<14} {'device':>6} {'steps/s':>8} {'ratio':>6} {'params':>11} {'projected h':>11}"
    )
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs\n{header}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        real, sim = root / "real.hdf5", root / "sim.hdf5"
        started = time.perf_counter()
        write_synthetic_dataset(real, [DEMO_STEPS["real"]] * n_real, domain="real", seed=1, image_size=IMAGE_SIZE)
        write_synthetic_dataset(sim, [DEMO_STEPS["sim"]] * n_sim, domain="sim", seed=2, image_size=IMAGE_SIZE)
        results["settings"]["write_time_s"] = time.perf_counter() - started
        for recipe in recipes:
            values = recipe_values(recipe)
            for method in methods:
                m = measure(recipe, method, real, sim, root / f"{recipe}-{method}", steps[recipe])
                state = results["runs"].get(f"{STATE_RECIPE}/{method}")
                m["steps_per_s_ratio_to_cpu"] = m["steps_per_s"] / state["steps_per_s"] if state else 1.0
                load = m["load_time_s"] / m["demos_loaded"] * sum(FULL_DEMOS.values())
                m["projected_run_s"] = load + values["steps"] * values["batch_size"] / m["samples_per_s"]
                if values["image_keys"]:
                    m["frame_bytes_full_run"] = frame_bytes(recipe)
                results["runs"][f"{recipe}/{method}"] = m
                hours = m["projected_run_s"] / 3600
                print(
                    f"{recipe:<10} {method:<14} {m['device']:>6} {m['steps_per_s']:>8.2f} "
                    f"{m['steps_per_s_ratio_to_cpu']:>6.3f} {m['parameters']:>11,} {hours:>11.2f}",
                    flush=True,
                )
    results["load_average_end"] = os.getloadavg()
    print(
        "ratio: steps/s over the state cpu recipe's for the same method; projected: a full run of the recipe on "
        f"50 real + 1,000 sim demos at the measured speed (load average {results['load_average_end'][0]:.1f})"
    )
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
