"""Lab v3's regime: how its own demonstrators fare, and what each structural gap costs them.

Runs the lab's teleoperator in the shipped ``v3`` lab and in ``v3`` with one group of gaps removed at a time
(perception delay, hand occlusion, the estimator's noise, the two cameras, contact, late commands and backlash),
in the ``default`` (v2) lab for reference, and the scripted planner in the nominal simulator, on fresh seeds no
earlier result used (base seed 20261207).  Writes ``record.json`` beside this script.

Example::

    MUJOCO_GL=egl python experiments/lab-v3/lab_v3.py --episodes 50 --workers 2
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import gymnasium as gym

import r2s2r_envs
from r2s2r_envs.behavior import make_demonstrator
from r2s2r_envs.envs.seeding import episode_seeds
from r2s2r_envs.evaluation.stats import wilson_interval
from r2s2r_envs.lab.config import load_lab

BASE_SEED = 20261207
HERE = Path(__file__).resolve().parent


def _without(group: str) -> dict[str, Any]:
    """The v3 lab with one group of its gaps removed (back to the v2 lab's value where it had one)."""
    lab = load_lab("v3").to_dict()
    lab = copy.deepcopy(lab)
    lab["name"] = f"v3-without-{group}"
    world = lab["world"]
    if group == "belt":
        world["belt_speed"] = load_lab("default").world.belt_speed
    elif group == "delay":
        world["perception_delay"] = 0.0
        lab["perception"]["delay_jitter"] = 0.0
    elif group == "occlusion":
        world["hand_occlusion_radius"] = 0.0
    elif group == "noise":
        for key in ("object_pos_noise_speed", "object_pos_noise_occlusion", "object_quat_noise"):
            world[key] = 0.0
        world["object_dropout"] = world["category_confusion"] = 0.0
        world["object_pos_noise"] = 0.003
    elif group == "cameras":
        del lab["perception"]["cameras"]
    elif group == "contact":
        del lab["contact"]
    elif group == "actuation":
        lab["effects"]["late_command_probability"] = 0.0
        lab["effects"]["finger_backlash"] = 0.0
    return lab


RUNS: dict[str, tuple[str, Any]] = {
    "teleoperator in v3": ("PickSort-Real-v0", "v3"),
    "teleoperator in default (v2)": ("PickSort-Real-v0", "default"),
    "teleoperator in v3 with the v2 belt (0.092 m/s)": ("PickSort-Real-v0", "belt"),
    **{
        f"teleoperator in v3 without {g}": ("PickSort-Real-v0", g)
        for g in ("delay", "occlusion", "noise", "cameras", "contact", "actuation")
    },
    "planner in the nominal simulator": ("PickSort-Ungrounded-v0", None),
}


def run(name: str, episodes: int) -> dict[str, Any]:
    env_id, lab = RUNS[name]
    kwargs: dict[str, Any] = {}
    if env_id == "PickSort-Real-v0":
        kwargs["lab"] = lab if lab in ("v3", "default") else _without(lab)
    env = gym.make(env_id, **kwargs)
    start = time.perf_counter()
    demonstrator = make_demonstrator(env)
    successes, outcomes = 0, {}
    for i in range(episodes):
        env_seed, policy_seed = episode_seeds(BASE_SEED, i)
        obs, info = env.reset(seed=int(env_seed))
        demonstrator.reset(seed=int(policy_seed))
        done = False
        while not done:
            obs, _, terminated, truncated, info = env.step(demonstrator.act(obs))
            done = terminated or truncated
        successes += bool(info["is_success"])
        for outcome in info["object_outcomes"]:
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
    env.close()
    low, high = wilson_interval(successes, episodes)
    return {
        "run": name,
        "episodes": episodes,
        "successes": successes,
        "success": successes / episodes,
        "wilson_95": [low, high],
        "object_outcomes": outcomes,
        "seconds": round(time.perf_counter() - start, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=HERE / "record.json")
    args = parser.parse_args()
    with ProcessPoolExecutor(args.workers) as pool:
        results = list(pool.map(run, RUNS, [args.episodes] * len(RUNS)))
    for r in results:
        print(
            f"{r['run']:45s} {100 * r['success']:5.1f}% [{100 * r['wilson_95'][0]:.1f}, "
            f"{100 * r['wilson_95'][1]:.1f}]  {r['object_outcomes']}"
        )
    record = {
        "script": "experiments/lab-v3/lab_v3.py",
        "config": {"episodes": args.episodes, "base_seed": BASE_SEED},
        "versions": {"r2s2r_envs": r2s2r_envs.__version__},
        "results": results,
    }
    args.out.write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
