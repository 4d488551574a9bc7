"""How fast PickSort runs: raw physics, env steps with state and with image observations, and env overhead.

Measures, in one run and on one model (``env.unwrapped.model``, the model the env steps):

* raw ``mj_step`` rate: the compiled model stepped by MuJoCo alone, from the env's reset state with the arm
  holding its home posture (a copy of the ``MjData``, so the env is untouched);
* env steps/s with ``obs_mode="state"`` and with ``obs_mode="rgb"`` (two 128x128 cameras per step);
* the overhead ratio (time of ``env.step``) / (time of the same physics done by ``mj_step`` alone).  Each
  control step is replayed on a twin ``MjData`` from the same state with the same actuator command and
  ``_n_substeps`` raw substeps, so both sides simulate exactly the same thing (checked: the twin ends in the
  same state), and the two are timed interleaved, so machine load hits both alike.

* the cost of a world change (``env.unwrapped.set_world`` then ``reset``), in place (parameters the compiled
  model holds) and by recompiling (another latency buffer or object size, not in the builder's cache), against
  the simulation time of one 500-step episode measured in the same run.

The overhead ratio is measured for each action regime given by ``--actions`` (default ``zeros,random``): zero
actions are the cheapest physics and hence the worst case for the ratio; random actions exercise the
controller and the outcome rules as a policy in training does.

Goals: physics >= 8,000 mj_step/s on a 2-core machine, overhead ratio <= 1.10 with random actions for state
observations, >= 100 frames/s for 128x128 images, a world change well under one episode's simulation time.

Example::

    MUJOCO_GL=egl python benchmarks/env_speed.py --steps 3000 --image-steps 600 --out runs/env_speed.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")  # before mujoco is imported: headless offscreen rendering

import gymnasium as gym  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402

import r2s2r_envs  # noqa: E402,F401  (registers the envs)
from r2s2r_envs.behavior import make_demonstrator  # noqa: E402


def action_stream(env: gym.Env, kind: str, seed: int):
    """A callable obs -> action: ``zeros`` (hold still), ``random`` (seeded uniform) or ``planner``."""
    if kind == "zeros":
        zero = np.zeros(env.action_space.shape, dtype=np.float32)
        return lambda obs, reset=False: zero
    if kind == "random":
        rng = np.random.default_rng(seed)
        return lambda obs, reset=False: rng.uniform(-1, 1, env.action_space.shape).astype(np.float32)
    planner = make_demonstrator(env)

    def act(obs, reset=False):
        if reset:
            planner.reset(seed)
        return planner.act(obs)

    return act


def raw_physics_rate(env: gym.Env, seed: int, substeps: int) -> float:
    """``mj_step`` calls per second on a copy of the reset state, arm holding still (its reset command)."""
    env.reset(seed=seed)
    model = env.unwrapped.model
    data = mujoco.MjData(model)
    mujoco.mj_copyData(data, model, env.unwrapped.data)
    start = time.perf_counter()
    mujoco.mj_step(model, data, nstep=substeps)
    return substeps / (time.perf_counter() - start)


def env_vs_physics(env: gym.Env, steps: int, actions: str, seed: int) -> dict:
    """Time ``env.step`` and the same physics replayed by ``mj_step`` alone, interleaved per control step."""
    base = env.unwrapped
    model, n_sub = base.model, base.n_substeps
    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    twin = mujoco.MjData(model)
    state = np.empty(mujoco.mj_stateSize(model, spec))
    act = action_stream(env, actions, seed)
    env_time = raw_time = 0.0
    done_steps, episodes, max_dev = 0, 0, 0.0
    while done_steps < steps:
        obs, _ = env.reset(seed=seed + episodes)
        action = act(obs, reset=True)
        episodes += 1
        done = False
        while not done and done_steps < steps:
            mujoco.mj_getState(model, base.data, state, spec)
            t0 = time.perf_counter()
            obs, _, terminated, truncated, info = env.step(action)
            t1 = time.perf_counter()
            done = terminated or truncated
            # Same start state, same command this step executed, same number of substeps.
            mujoco.mj_setState(model, twin, state, spec)
            twin.ctrl[:] = base.data.ctrl
            t2 = time.perf_counter()
            mujoco.mj_step(model, twin, nstep=n_sub)
            t3 = time.perf_counter()
            if not info.get("unstable", False):
                max_dev = max(max_dev, float(np.max(np.abs(twin.qpos - base.data.qpos))))
            env_time += t1 - t0
            raw_time += t3 - t2
            done_steps += 1
            if not done:
                action = act(obs)
    return {
        "steps": done_steps,
        "episodes": episodes,
        "env_steps_per_s": done_steps / env_time,
        "physics_substeps_per_s": done_steps * n_sub / raw_time,
        "overhead_ratio": env_time / raw_time,
        "twin_max_qpos_deviation": max_dev,
    }


def world_change_cost(env: gym.Env, repeats: int, seed: int) -> dict:
    """Seconds per ``set_world`` + ``reset``: in place, and by recompiling a model the builder has not cached."""
    from r2s2r_envs.world import WorldParams

    base = env.unwrapped
    rng = np.random.default_rng(seed)
    in_place, rebuilt = [], []
    for i in range(repeats):
        damping = tuple(float(v) for v in rng.uniform(0.5, 3.0, 7))
        world = WorldParams(arm_damping=damping, object_friction=float(rng.uniform(0.5, 1.0)))
        t0 = time.perf_counter()
        base.set_world(world)
        env.reset(seed=seed + i)
        in_place.append(time.perf_counter() - t0)
    for i in range(repeats):
        # A latency whose delay buffer has a length no earlier call used: a fresh compile every time.
        world = WorldParams(control_latency=0.004 * (i + 1) + 0.0001)
        t0 = time.perf_counter()
        base.set_world(world)
        env.reset(seed=seed + i)
        rebuilt.append(time.perf_counter() - t0)
    base.set_world(WorldParams())
    return {"repeats": repeats, "in_place_s": float(np.median(in_place)), "recompile_s": float(np.median(rebuilt))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="PickSort-Ungrounded-v0", help="env id (default PickSort-Ungrounded-v0)")
    parser.add_argument("--steps", type=int, default=3000, help="control steps with state observations")
    parser.add_argument("--image-steps", type=int, default=600, help="control steps with image observations")
    parser.add_argument("--image-size", type=int, default=128, help="image height = width, px")
    parser.add_argument("--raw-substeps", type=int, default=20000, help="mj_step calls for the raw rate")
    parser.add_argument(
        "--actions",
        default="zeros,random",
        help="comma-separated action regimes among zeros, random, planner (default zeros,random)",
    )
    parser.add_argument("--world-changes", type=int, default=10, help="set_world repetitions per kind")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="write config and results to this JSON file")
    args = parser.parse_args(argv)
    regimes = [r.strip() for r in args.actions.split(",") if r.strip()]
    unknown = [r for r in regimes if r not in ("zeros", "random", "planner")]
    if unknown or not regimes:
        parser.error(f"--actions: unknown regime(s) {unknown}; choose among zeros, random, planner")

    state_env = gym.make(args.env)
    base = state_env.unwrapped
    raw_rate = raw_physics_rate(state_env, args.seed, args.raw_substeps)
    state = {r: env_vs_physics(state_env, args.steps, r, args.seed) for r in regimes}
    world_change = world_change_cost(state_env, args.world_changes, args.seed)
    state_env.close()
    # One episode's simulation, at the rate of the first regime's env steps.
    episode_s = 500 / state[regimes[0]]["env_steps_per_s"]
    world_change["episode_simulation_s"] = episode_s

    # The planner reads object poses, which "rgb" leaves out; "state+rgb" adds them (a negligible cost).
    image_regime = regimes[-1]
    image_mode = "state+rgb" if image_regime == "planner" else "rgb"
    image_env = gym.make(args.env, obs_mode=image_mode, image_size=args.image_size)
    image = env_vs_physics(image_env, args.image_steps, image_regime, args.seed)
    image_env.close()
    image["obs_mode"] = image_mode
    image["actions"] = image_regime
    image["image_frames_per_s"] = 2 * image["env_steps_per_s"]  # scene + wrist camera per step

    results = {
        "config": {**vars(args), "out": None if args.out is None else str(args.out)},
        "machine": {
            "platform": platform.platform(),
            "python": sys.version.split()[0],
            "cpu_count": os.cpu_count(),
            "mujoco": mujoco.__version__,
            "mujoco_gl": os.environ.get("MUJOCO_GL"),
        },
        "model": {
            "timestep_s": float(base.model.opt.timestep),
            "substeps_per_control_step": base.n_substeps,
            "control_hz": 1.0 / base.dt,
            "nbody": base.model.nbody,
            "ngeom": base.model.ngeom,
            "nv": base.model.nv,
            "nu": base.model.nu,
        },
        "raw_mj_step_per_s": raw_rate,
        "state": state,
        "rgb": image,
        "world_change": world_change,
    }

    rows = [("raw mj_step/s (arm holding still)", f"{raw_rate:,.0f}", ">= 8,000")]
    for r in regimes:
        st = state[r]
        rows += [
            (f"mj_step/s replaying the state run ({r})", f"{st['physics_substeps_per_s']:,.0f}", ""),
            (
                f"env steps/s, state obs ({r})",
                f"{st['env_steps_per_s']:,.0f}",
                f"= {st['env_steps_per_s'] * base.n_substeps:,.0f} substeps/s",
            ),
            (
                f"env.step / raw physics, state obs ({r})",
                f"{st['overhead_ratio']:.3f}",
                "<= 1.10" if r == "random" else "",
            ),
        ]
    rows += [
        (
            f"env steps/s, {image_mode} obs {args.image_size}x{args.image_size} ({image_regime})",
            f"{image['env_steps_per_s']:,.0f}",
            "",
        ),
        ("image frames/s (2 cameras per step)", f"{image['image_frames_per_s']:,.0f}", ">= 100"),
        (f"env.step / raw physics, {image_mode} obs", f"{image['overhead_ratio']:.3f}", ""),
        (
            "set_world + reset, in place (ms)",
            f"{world_change['in_place_s'] * 1e3:.2f}",
            f"one episode's simulation: {episode_s * 1e3:,.0f} ms",
        ),
        ("set_world + reset, recompiled (ms)", f"{world_change['recompile_s'] * 1e3:.1f}", ""),
    ]
    print(
        f"{args.env}: {base.model.nv} dof, dt {base.model.opt.timestep * 1e3:.1f} ms, "
        f"{base.n_substeps} substeps per {base.dt * 1e3:.0f} ms control step, actions={args.actions}, "
        f"MUJOCO_GL={os.environ.get('MUJOCO_GL')}, {os.cpu_count()} CPUs"
    )
    width = max(len(r[0]) for r in rows)
    print(f"{'measure':<{width}}  {'value':>10}  goal")
    for name, value, goal in rows:
        print(f"{name:<{width}}  {value:>10}  {goal}")
    deviation = max(st["twin_max_qpos_deviation"] for st in state.values())
    print(f"(twin replay max |qpos| deviation: state {deviation:.1e}, rgb {image['twin_max_qpos_deviation']:.1e})")

    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
