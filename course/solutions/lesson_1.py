"""Exercise 1: the swapped arm joints of course-interface.  The same task-space wiggle in the simulator and in
the lab; lab reading i follows simulated joint j where their increments correlate (lesson 1's probe)."""

import gymnasium as gym
import numpy as np
from _common import write_answer

import r2s2r_envs  # noqa: F401

STEPS = 80


def wiggle(t: int) -> np.ndarray:
    a = np.zeros(22, np.float32)
    a[:6] = 0.4 * np.sin(2 * np.pi * t / STEPS * np.array([1, 2, 1.5, 1, 2, 2.5]) + np.arange(6))
    return a


def joint_readings(env_id: str, **kwargs) -> np.ndarray:
    env = gym.make(env_id, num_objects=1, **kwargs)
    obs, _ = env.reset(seed=0)
    q = [obs["arm_qpos"]]
    for t in range(STEPS):
        obs, *_ = env.step(wiggle(t))
        q.append(obs["arm_qpos"])
    env.close()
    return np.asarray(q)


lab, sim = joint_readings("PickSort-Real-v0", lab="course-interface"), joint_readings("PickSort-Ungrounded-v0")
a, b = np.diff(lab, axis=0), np.diff(sim, axis=0)
a, b = (a - a.mean(0)) / a.std(0), (b - b.mean(0)) / b.std(0)
follows = (a.T @ b / len(a)).argmax(axis=1)
print("lab reading i follows simulated joint:", follows.tolist())
swapped = [i for i in range(7) if follows[i] != i]
assert len(swapped) == 2, swapped
write_answer(1, {"swapped_joints": swapped})
