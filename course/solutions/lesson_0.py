"""Exercise 0: the belt speed of course-tour, from perceived object positions while the arm holds still."""

import gymnasium as gym
import numpy as np
from _common import write_answer

import r2s2r_envs  # noqa: F401

speeds = []
for seed in range(4):
    env = gym.make("PickSort-Real-v0", lab="course-tour", num_objects=3)
    obs, info = env.reset(seed=seed)
    times, ys = [0.0], [obs["object_pos"].reshape(-1, 3)[:, 1]]
    for _ in range(200):
        obs, _, terminated, truncated, info = env.step(np.zeros(env.action_space.shape, np.float32))
        times.append(info["elapsed_time"])
        ys.append(obs["object_pos"].reshape(-1, 3)[:, 1])
        if terminated or truncated:
            break
    ys = np.array(ys)
    speeds += [-np.polyfit(times, ys[:, j], 1)[0] for j in range(ys.shape[1])]
    env.close()
print("per object (m/s):", np.round(speeds, 4))
write_answer(0, {"belt_speed": round(float(np.mean(speeds)), 4)})
