"""How long world grounding takes: time per stage of ``r2s2r sysid --lab LAB``, and rollout throughput vs mj_step.

Measures, in one run:

* the stages of ``r2s2r sysid --lab LAB`` without the planner table: logging the lab (``excitation.log_lab``),
  fitting (``identify.identify`` on the fitting runs) and held-out validation (``validation.validate``), and
  their total, against the goal of 10 minutes on a 2-core machine;
* rollout throughput, in physics steps per second, of the two ways identification and validation simulate a
  logged run, against raw ``mj_step`` on the same compiled model measured in the same run:

  - ``simulate_run``: the env-based replay (any run; what validation uses), one world at a time;
  - ``JointRollout``: a batch of candidate worlds of one joint-mode run in one multi-threaded
    ``mujoco.rollout`` call (what the fit uses), with ``--workers`` threads.

Example::

    MUJOCO_GL=egl python benchmarks/sysid_speed.py --lab default --workers 2 --out runs/sysid_speed.json
    MUJOCO_GL=egl python benchmarks/sysid_speed.py --quick            # reduced logging and fitting budget
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import mujoco  # noqa: E402
import numpy as np  # noqa: E402

import r2s2r_envs  # noqa: E402
from r2s2r_envs.envs import PickSortEnv  # noqa: E402
from r2s2r_envs.grounding.excitation import log_lab  # noqa: E402
from r2s2r_envs.grounding.identify import identify  # noqa: E402
from r2s2r_envs.grounding.replay import JointRollout, make_sim_env, simulate_run  # noqa: E402
from r2s2r_envs.grounding.validation import validate  # noqa: E402
from r2s2r_envs.world import nominal  # noqa: E402
from r2s2r_envs.world.builder import build_model  # noqa: E402

GOAL_S = 600.0


def raw_mj_step_rate(num_objects: int, steps: int) -> float:
    """Physics steps/s of ``mj_step`` alone on the nominal model with ``num_objects`` slots, arm held at home."""
    env = PickSortEnv(num_objects=num_objects)
    env.reset(seed=0)
    m = build_model(nominal(), num_objects)
    d = mujoco.MjData(m)
    state = env.get_state()
    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    mujoco.mj_setState(m, d, state, spec)
    mujoco.mj_forward(m, d)
    start = time.perf_counter()
    mujoco.mj_step(m, d, nstep=steps)
    return steps / (time.perf_counter() - start)


def rollout_rates(log_set, workers: int, batch: int) -> dict[str, float]:  # noqa: ANN001 - a LogSet
    """Physics steps/s of simulate_run over the held-out runs and of a JointRollout batch."""
    runs = log_set.heldout
    env = make_sim_env(runs[0], nominal())
    sub = env.n_substeps
    start = time.perf_counter()
    steps = 0
    for run in runs:
        simulate_run(run, nominal())
        steps += run.steps * sub
    replay_rate = steps / (time.perf_counter() - start)
    joint = [r for r in log_set.fit if r.control_mode == "joint"]
    out = {"simulate_run_steps_per_s": replay_rate, "simulate_run_physics_steps": steps, "substeps": sub}
    if joint:
        run = max(joint, key=lambda r: r.steps)
        rng = np.random.default_rng(0)
        base = nominal()
        worlds = [
            dataclasses.replace(base, arm_damping=tuple(np.asarray(base.arm_damping) * rng.uniform(0.8, 1.2, 7)))
            for _ in range(batch)
        ]
        roll = JointRollout(run, nthread=workers)
        roll.predict(worlds[:1])  # warm up: model and env built once
        start = time.perf_counter()
        roll.predict(worlds)
        elapsed = time.perf_counter() - start
        out |= {
            "joint_rollout_run": run.name,
            "joint_rollout_batch": batch,
            "joint_rollout_steps_per_s": batch * run.steps * sub / elapsed,
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lab", default="default", help="lab to ground (shipped name or JSON file)")
    parser.add_argument("--quick", action="store_true", help="reduced logging and fitting budget")
    parser.add_argument("--workers", type=int, default=2, help="fit threads (default 2: the goal's 2 cores)")
    parser.add_argument("--batch", type=int, default=16, help="candidate worlds per JointRollout call")
    parser.add_argument("--raw-steps", type=int, default=20000, help="mj_step calls for the raw rate")
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON")
    args = parser.parse_args(argv)

    times: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        log_set = log_lab(args.lab, Path(tmp) / "logs", quick=args.quick)
        times["logging"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        ident = identify(log_set, quick=args.quick, workers=args.workers)
        times["fitting"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        validation = validate(log_set.heldout, ident.world)
        times["validation"] = time.perf_counter() - t0
        times["total"] = times["logging"] + times["fitting"] + times["validation"]
        rates = rollout_rates(log_set, args.workers, args.batch)
        num_objects = int(log_set.heldout[0].env_kwargs.get("num_objects", 3))
        raw = raw_mj_step_rate(num_objects, args.raw_steps)
        steps_logged = sum(r.steps for r in log_set.runs)

    print(f"lab {args.lab}{' (quick)' if args.quick else ''}: {len(log_set.runs)} runs, {steps_logged} control steps")
    print(f"{'stage':12s} {'seconds':>8s}")
    for k, v in times.items():
        print(f"{k:12s} {v:8.1f}")
    verdict = "within" if times["total"] <= GOAL_S else "OVER"
    print(f"goal: total <= {GOAL_S:.0f} s on 2 cores: {verdict} ({times['total'] / GOAL_S:.0%} of the goal)")
    print(f"raw mj_step:           {raw:10.0f} steps/s (1 thread)")
    print(
        f"simulate_run:          {rates['simulate_run_steps_per_s']:10.0f} physics steps/s "
        f"({rates['simulate_run_steps_per_s'] / raw:.2f} x raw)"
    )
    if "joint_rollout_steps_per_s" in rates:
        print(
            f"JointRollout x{args.batch}:      {rates['joint_rollout_steps_per_s']:10.0f} physics steps/s with "
            f"{args.workers} threads ({rates['joint_rollout_steps_per_s'] / raw:.2f} x raw single-thread)"
        )
    print(validation.format().split("\n\n")[0])
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        result = {
            "config": vars(args) | {"out": str(args.out)},
            "stages_s": times,
            "goal_s": GOAL_S,
            "raw_mj_step_per_s": raw,
            "rollout": rates,
            "nrmse": validation.nrmse,
            "identified": list(ident.identified),
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "mujoco": mujoco.__version__},
            "r2s2r_envs": r2s2r_envs.__version__,
        }
        args.out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
