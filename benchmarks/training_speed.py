"""Training speed of the baselines: samples/s per method and recipe, and the projected time of a full run.

Goals (docs/baselines.md, "Training speed"), for one policy on 50 real + 1,000 sim demos: the ``cpu`` recipe
within 45 minutes on the 2-core machine, the ``gpu`` recipe within 10 minutes on one GPU (measured where a GPU is
present; elsewhere its samples/s on the CPU are printed, marked as such); the ``v1`` recipe (the first policies)
had BC within 5 minutes and the flow methods within 15.

What it does, in one run:

* writes synthetic datasets with PickSort's observation and action shapes (``write_synthetic_dataset``) of
  canonical demo lengths (``--demo-steps``, default 343 real / 305 sim: the means of ``lab-50`` and
  ``ungrounded-1000``), fewer sim demos than the canonical 1,000 (``--sim-demos``);
* trains every method for ``--steps`` gradient steps with each ``--recipes`` recipe's network and batch size
  (``train()``, as ``r2s2r train`` does) at each ``--threads`` setting, and reports samples/s of the gradient
  steps (the validation-loss passes of a run are not in them: 10 passes over at most 4,096 samples);
* measures the data check and load time per demo (full content-hash verification) and projects the time of a
  run of the recipe on 50 + 1,000 demos: ``load time x 1050 / demos loaded + recipe steps x batch / samples/s``;
* with ``--canonical`` (the cached ``lab-50`` and ``ungrounded-1000``, ``r2s2r datasets make lab-50
  ungrounded-1000``), also trains each method for ``--steps`` on the real data and reports its measured load time
  and samples/s.

Assumptions of the projection (printed with it): samples/s does not depend on the number of demos (a batch is
gathered from memory in O(batch) time, which the ``--canonical`` run checks), load time grows linearly with the
demos, and the machine is as loaded as during the measurement (the load average is printed: on a shared machine
the figures move with it).

Example:
    python benchmarks/training_speed.py --steps 60 --threads 1,2 --out runs/training_speed.json
    python benchmarks/training_speed.py --recipes cpu,gpu --methods bc,flow,flow-cfg-adda --steps 200
    python benchmarks/training_speed.py --canonical --methods bc,flow-cfg-adda --steps 100
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
from pathlib import Path
from typing import Any

from r2s2r_envs.datasets.toy import write_synthetic_dataset
from r2s2r_envs.policies.config import METHODS, RECIPES, TrainConfig

# Goals: seconds for one run of the recipe on 50 real + 1,000 sim demos (v1: per method, on 2 cores).
_V1_GOAL_S = {"bc": 300.0, "flow": 900.0, "flow-cfg": 900.0, "flow-adda": 900.0, "flow-cfg-adda": 900.0}
GOAL_S = {"v1": _V1_GOAL_S, "cpu": dict.fromkeys(METHODS, 2700.0), "gpu": dict.fromkeys(METHODS, 600.0)}
CANONICAL_DEMOS = {"real": 50, "sim": 1000}


def _train(
    method: str, real: str, sim: str, out: Path, steps: int, threads: int, verify: str, recipe: str
) -> dict[str, Any]:
    from r2s2r_envs.policies.train import train

    config = TrainConfig(
        recipe=recipe,
        val_fraction=0.0,  # the measured steps only
        method=method,
        real=(real,),
        sim=(sim,),
        real_fraction=0.22,
        out=str(out),
        steps=steps,
        threads=threads,
        verify=verify,
        progress=False,
        overwrite=True,
    )
    r = train(config)
    return {
        "samples_per_s": r.samples_per_s,
        "step_ms": 1e3 * r.train_time_s / steps,
        "load_time_s": r.load_time_s,
        "train_time_s": r.train_time_s,
        "demos": r.metadata["n_real_demos"] + r.metadata["n_sim_demos"],
        "device": json.loads((out / "train_log.json").read_text())["device"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated methods")
    parser.add_argument("--steps", type=int, default=60, help="gradient steps measured per method")
    parser.add_argument("--recipes", default="cpu", help=f"comma-separated recipes {sorted(RECIPES)} (default cpu)")
    parser.add_argument("--threads", default="1", help="comma-separated torch thread counts, e.g. 1,2")
    parser.add_argument("--sim-demos", type=int, default=100, help="synthetic sim demos (real: 50)")
    parser.add_argument("--demo-steps", default="343,305", help="synthetic demo length, real,sim (steps)")
    parser.add_argument("--canonical", action="store_true", help="also train on the cached lab-50 + ungrounded-1000")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    args = parser.parse_args(argv)
    methods = [m for m in args.methods.split(",") if m]
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        parser.error(f"unknown method(s) {unknown}; choose from {list(METHODS)}")
    recipes = [r for r in args.recipes.split(",") if r]
    bad = [r for r in recipes if r not in RECIPES]
    if bad:
        parser.error(f"unknown recipe(s) {bad}; choose from {sorted(RECIPES)}")
    threads = [int(t) for t in args.threads.split(",")]
    real_len, sim_len = (int(x) for x in args.demo_steps.split(","))
    results: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": sys.version.split()[0]},
        "load_average_start": os.getloadavg(),
        "settings": {
            "steps_measured": args.steps,
            "recipes": {
                r: {k: RECIPES[r][k] for k in ("steps", "batch_size", "hidden_dim", "layers")} for r in recipes
            },
            "synthetic_demos": {"real": 50, "sim": args.sim_demos},
            "demo_steps": {"real": real_len, "sim": sim_len},
        },
        "synthetic": {},
        "canonical": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        real, sim = root / "real.hdf5", root / "sim.hdf5"
        write_synthetic_dataset(real, [real_len] * 50, domain="real", seed=1, valid_fraction=0.0)
        write_synthetic_dataset(sim, [sim_len] * args.sim_demos, domain="sim", seed=2, valid_fraction=0.0)
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
        header = (
            f"{'recipe':<6} {'method':<14} {'threads':>7} {'device':>6} {'samples/s':>10} {'ms/step':>8} "
            f"{'projected s':>12} {'goal s':>7}"
        )
        print("synthetic data (PickSort shapes):\n" + header, flush=True)
        canonical_demos = sum(CANONICAL_DEMOS.values())
        for recipe in recipes:
            steps, batch = RECIPES[recipe]["steps"], RECIPES[recipe]["batch_size"]
            for method in methods:
                for n in threads:
                    out = root / f"{recipe}-{method}-{n}"
                    m = _train(method, str(real), str(sim), out, args.steps, n, "full", recipe)
                    # The synthetic files mark every 4th demo failed; training reads the successful ones.
                    load_per_demo = m["load_time_s"] / m["demos"]
                    projected = load_per_demo * canonical_demos + steps * batch / m["samples_per_s"]
                    goal = GOAL_S[recipe][method]
                    m.update(projected_run_s=projected, goal_s=goal, load_s_per_demo=load_per_demo)
                    results["synthetic"][f"{recipe}/{method}/threads={n}"] = m
                    print(
                        f"{recipe:<6} {method:<14} {n:>7} {m['device']:>6} {m['samples_per_s']:>10.0f} "
                        f"{m['step_ms']:>8.1f} {projected:>12.0f} {goal:>7.0f}",
                        flush=True,
                    )
        if args.canonical:
            from r2s2r_envs.policies.data import resolve_path

            real_c, sim_c = str(resolve_path("lab-50")[1]), str(resolve_path("ungrounded-1000")[1])
            print("canonical lab-50 + ungrounded-1000:\n" + header.replace("projected s", "load s"), flush=True)
            for recipe in recipes:
                steps, batch = RECIPES[recipe]["steps"], RECIPES[recipe]["batch_size"]
                for method in methods:
                    n = threads[0]
                    out = root / f"canonical-{recipe}-{method}"
                    m = _train(method, real_c, sim_c, out, args.steps, n, "full", recipe)
                    projected = m["load_time_s"] + steps * batch / m["samples_per_s"]
                    goal = GOAL_S[recipe][method]
                    m.update(projected_run_s=projected, goal_s=goal)
                    results["canonical"][f"{recipe}/{method}/threads={n}"] = m
                    print(
                        f"{recipe:<6} {method:<14} {n:>7} {m['device']:>6} {m['samples_per_s']:>10.0f} "
                        f"{m['step_ms']:>8.1f} {m['load_time_s']:>12.1f} {goal:>7.0f}  (projected {projected:.0f} s)",
                        flush=True,
                    )
    results["load_average_end"] = os.getloadavg()
    print(
        f"projection: load time x {sum(CANONICAL_DEMOS.values())} demos / demos loaded + the recipe's steps x batch "
        "/ samples/s; assumes samples/s independent of the data size and a machine as loaded as now (load average "
        f"{results['load_average_end'][0]:.1f}); a gpu-recipe row measured on device cpu is not the GPU figure"
    )
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
