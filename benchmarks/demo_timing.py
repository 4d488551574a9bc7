"""The timing loop the demonstrator benchmarks share (teleop_speed.py, behavior_speed.py): run a demonstrator in an
env on the protocol's seeding and time its ``act`` calls and the env's ``step`` calls separately."""

from __future__ import annotations

import time

import gymnasium as gym

from r2s2r_envs.envs.seeding import episode_seeds


def measure(env: gym.Env, demonstrator, episodes: int, seed: int) -> dict[str, float]:
    """Mean seconds per env step and per ``act`` call over ``episodes`` episodes (episode i: ``episode_seeds(seed,
    i)``), and mean simulated seconds of ``env.step`` per episode."""
    step_time = act_time = 0.0
    steps = 0
    for i in range(episodes):
        env_seed, policy_seed = episode_seeds(seed, i)
        obs, _ = env.reset(seed=int(env_seed))
        demonstrator.reset(seed=int(policy_seed))
        done = False
        while not done:
            t0 = time.perf_counter()
            action = demonstrator.act(obs)
            t1 = time.perf_counter()
            obs, _, terminated, truncated, _ = env.step(action)
            t2 = time.perf_counter()
            act_time += t1 - t0
            step_time += t2 - t1
            steps += 1
            done = terminated or truncated
    return {"steps": steps, "step_s": step_time / steps, "act_s": act_time / steps, "episode_s": step_time / episodes}
