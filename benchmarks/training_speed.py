"""Training speed of the baselines on CPU: samples/s per method and the projected time of a default run.

Goals (docs/baselines.md, "Training speed"): with the default configuration, BC on 50 real + 1,000 sim demos
trains within 5 minutes on 2 cores, flow and CFG-ADDA within 15.

What it does, in one run:

* writes synthetic datasets with PickSort's observation and action shapes (``write_synthetic_dataset``) of
  canonical demo lengths (``--demo-steps``, default 343 real / 305 sim: the means of ``lab-50`` and
  ``ungrounded-1000``), fewer sim demos than the canonical 1,000 (``--sim-demos``);
* trains every method for ``--steps`` gradient steps with the default network and batch size (``train()``, as
  ``r2s2r train`` does) at each ``--threads`` setting, and reports samples/s of the gradient steps;
* measures the data check and load time per demo (full content-hash verification) and projects the time of a
  default run on 50 + 1,000 demos: ``load time x 1050 / demos loaded + default steps x batch / samples/s``;
* with ``--canonical`` (the cached ``lab-50`` and ``ungrounded-1000``, ``r2s2r datasets make lab-50
  ungrounded-1000``), also trains each method for ``--steps`` on the real data and reports its measured load time
  and samples/s.

Assumptions of the projection (printed with it): samples/s does not depend on the number of demos (a batch is
gathered from memory in O(batch) time, which the ``--canonical`` run checks), load time grows linearly with the
demos, and the machine is as loaded as during the measurement (the load average is printed: on a shared machine
the figures move with it).

Example:
    python benchmarks/training_speed.py --steps 60 --threads 1,2 --out runs/training_speed.json
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
from r2s2r_envs.policies.config import METHODS, TrainConfig

# The goals: seconds for a default run on 50 real + 1,000 sim demos on 2 cores.
GOAL_S = {"bc": 300.0, "flow": 900.0, "flow-cfg": 900.0, "flow-adda": 900.0, "flow-cfg-adda": 900.0}
CANONICAL_DEMOS = {"real": 50, "sim": 1000}


def _train(method: str, real: str, sim: str, out: Path, steps: int, threads: int, verify: str) -> dict[str, Any]:
    from r2s2r_envs.policies.train import train

    config = TrainConfig(
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
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated methods")
    parser.add_argument("--steps", type=int, default=60, help="gradient steps measured per method")
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
    threads = [int(t) for t in args.threads.split(",")]
    real_len, sim_len = (int(x) for x in args.demo_steps.split(","))
    defaults = TrainConfig(method="bc", real_fraction=0.5, out="-")
    results: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": sys.version.split()[0]},
        "load_average_start": os.getloadavg(),
        "settings": {
            "steps_measured": args.steps,
            "default_steps": defaults.steps,
            "batch_size": defaults.batch_size,
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
        header = f"{'method':<14} {'threads':>7} {'samples/s':>10} {'ms/step':>8} {'projected s':>12} {'goal s':>7}"
        print("synthetic data (PickSort shapes):\n" + header, flush=True)
        for method in methods:
            for n in threads:
                m = _train(method, str(real), str(sim), root / f"{method}-{n}", args.steps, n, "full")
                # The synthetic files mark every 4th demo failed; training reads the successful ones.
                load_per_demo = m["load_time_s"] / m["demos"]
                canonical_demos = sum(CANONICAL_DEMOS.values())
                projected = load_per_demo * canonical_demos + defaults.steps * defaults.batch_size / m["samples_per_s"]
                m.update(projected_default_run_s=projected, goal_s=GOAL_S[method], load_s_per_demo=load_per_demo)
                results["synthetic"][f"{method}/threads={n}"] = m
                print(
                    f"{method:<14} {n:>7} {m['samples_per_s']:>10.0f} {m['step_ms']:>8.1f} {projected:>12.0f} "
                    f"{GOAL_S[method]:>7.0f}",
                    flush=True,
                )
        if args.canonical:
            from r2s2r_envs.policies.data import resolve_path

            real_c, sim_c = str(resolve_path("lab-50")[1]), str(resolve_path("ungrounded-1000")[1])
            print("canonical lab-50 + ungrounded-1000:\n" + header.replace("projected s", "load s"), flush=True)
            for method in methods:
                n = threads[0]
                m = _train(method, real_c, sim_c, root / f"canonical-{method}", args.steps, n, "full")
                projected = m["load_time_s"] + defaults.steps * defaults.batch_size / m["samples_per_s"]
                m.update(projected_default_run_s=projected, goal_s=GOAL_S[method])
                results["canonical"][f"{method}/threads={n}"] = m
                print(
                    f"{method:<14} {n:>7} {m['samples_per_s']:>10.0f} {m['step_ms']:>8.1f} {m['load_time_s']:>12.1f} "
                    f"{GOAL_S[method]:>7.0f}  (projected default run {projected:.0f} s)",
                    flush=True,
                )
    results["load_average_end"] = os.getloadavg()
    print(
        f"projection: load time x {sum(CANONICAL_DEMOS.values())} demos / demos loaded + {defaults.steps} steps x "
        f"{defaults.batch_size} / samples/s; assumes samples/s independent of the data size and a machine as loaded "
        f"as now (load average {results['load_average_end'][0]:.1f})"
    )
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
