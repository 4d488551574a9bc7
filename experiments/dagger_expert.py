"""Can an expert label the states a policy visits? A take-over test of DAgger's labelling experts.

A trained policy drives each episode for a random number of steps, then an expert takes over and finishes it; the
expert has seen every observation of the episode (as a DAgger labeller does).  An expert whose decisions follow the
scene finishes what the policy started; one whose decisions follow its own earlier commands does not.  Experts:

- ``reactive``: the reactive planner (``scripted-reactive``), which decides from the current observation;
- ``planner``: the scripted planner shadowing the policy's observation stream (its phase machine fed states its
  own commands did not make): the naive DAgger labeller;
- ``planner-fresh``: a scripted planner started at the take-over (no history at all);
- ``policy``: no take-over (the policy alone), for reference.

Also the two planners' own success as demonstrators (no policy).  Every mode runs the same episodes (seeds from
``--base-seed``, not the protocol's), in a simulated variant; never the lab (refused).

Example::

    python experiments/dagger_expert.py --policy zoo:flow-sim-only --env PickSort-Ungrounded-v0 --episodes 40 \\
        --out experiments/dagger/expert-ungrounded.json
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

import r2s2r_envs  # noqa: F401  (registers the envs)
from r2s2r_envs.behavior import ReactivePlanner, ScriptedPlanner
from r2s2r_envs.envs.seeding import episode_seeds
from r2s2r_envs.evaluation.protocol import EVALUATION_BASE_SEED
from r2s2r_envs.evaluation.stats import wilson_interval
from r2s2r_envs.policies import load_policy

MODES = ("reactive", "planner", "planner-fresh", "policy", "reactive-alone", "planner-alone")


def _expert(env: gym.Env, kind: type) -> ScriptedPlanner:
    base = env.unwrapped
    settings = dict(base.demonstrator_settings or {}) if base.demonstrator == "scripted" else {}
    return kind(env, **settings)


def run_episode(env: gym.Env, policy, mode: str, env_seed: int, policy_seed: int, takeover: int) -> dict:
    obs, _ = env.reset(seed=env_seed)
    policy.reset(policy_seed)
    expert = _expert(env, ReactivePlanner if mode.startswith("reactive") else ScriptedPlanner)
    expert.reset(policy_seed)
    alone = mode.endswith("-alone")
    t, done = 0, False
    while not done:
        if alone:
            action = expert.act(obs)
        elif t < takeover or mode == "policy":
            action = policy.act(obs)
            if mode in ("reactive", "planner"):
                expert.act(obs)  # the labeller sees every observation
        else:
            if mode == "planner-fresh" and t == takeover:
                expert.reset(policy_seed)
            action = expert.act(obs)
        obs, _, terminated, truncated, info = env.step(action)
        done = terminated or truncated
        t += 1
    outcomes = [str(o) for o in info.get("object_outcomes", [])]
    return {"success": bool(info["is_success"]), "sorted": outcomes.count("sorted") / max(len(outcomes), 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policy", default="zoo:flow-sim-only", help="the driving policy (DIR or zoo:NAME)")
    parser.add_argument("--env", default="PickSort-Ungrounded-v0", help="a simulated PickSort id")
    parser.add_argument("--episodes", type=int, default=40)
    parser.add_argument("--takeover", default="20,200", help="take-over step drawn uniformly from MIN,MAX")
    parser.add_argument("--base-seed", type=int, default=515151)
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {list(MODES)}")
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    args = parser.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    if unknown := [m for m in modes if m not in MODES]:
        parser.error(f"unknown mode(s) {unknown}; choose from {list(MODES)}")
    if args.base_seed == EVALUATION_BASE_SEED:
        parser.error("use a base seed other than the protocol's")
    env = gym.make(args.env)
    if str(getattr(env.unwrapped, "domain", "sim")) == "real":
        parser.error("the lab is the test set (and cannot be taken over by a planner): choose a simulated variant")
    policy = load_policy(args.policy)
    policy.set_domain("sim")
    low, high = (int(x) for x in args.takeover.split(","))
    rng = np.random.default_rng(args.base_seed)
    takeovers = rng.integers(low, high + 1, size=args.episodes)
    rows: dict[str, dict] = {}
    for mode in modes:
        t0 = time.perf_counter()
        results = [
            run_episode(env, policy, mode, *episode_seeds(args.base_seed, i), int(takeovers[i]))
            for i in range(args.episodes)
        ]
        success = np.array([r["success"] for r in results], dtype=float)
        sort = np.array([r["sorted"] for r in results])
        rows[mode] = {
            "success_rate": float(success.mean()),
            "success_wilson95": [float(x) for x in wilson_interval(int(success.sum()), len(success))],
            "sort_accuracy": float(sort.mean()),
            "successes": [bool(s) for s in success],
            "seconds": round(time.perf_counter() - t0, 1),
        }
        lo, hi = rows[mode]["success_wilson95"]
        print(
            f"{mode:>14}: success {100 * success.mean():5.1f}% [{100 * lo:.1f}, {100 * hi:.1f}], "
            f"sort accuracy {100 * sort.mean():5.1f}%  ({rows[mode]['seconds']:.0f} s)",
            flush=True,
        )
    env.close()
    record = {
        "benchmark": "dagger_expert",
        "policy": args.policy,
        "env": args.env,
        "episodes": args.episodes,
        "takeover_range": [low, high],
        "base_seed": args.base_seed,
        "modes": rows,
        "machine": {"cpus": os.cpu_count()},
    }
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=1) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
