"""Exercise 2: the control latency of course-latency, fitted on the suite's `latency` protocol (lesson 2):
finger angles in the lab against the simulator over a grid of latencies and finger gains, then refined."""

import gymnasium as gym
import numpy as np
from _common import write_answer

import r2s2r_envs  # noqa: F401
from r2s2r_envs.grounding.excitation import env_kwargs_of, execute, plan_runs

PLANS = [p for p in plan_runs() if p.protocol == "latency"]
KWARGS = env_kwargs_of(PLANS[0])


def fingers(env, world=None):
    out = []
    for i, plan in enumerate(PLANS):
        if world is not None:
            env.reset(options={"world": world})
        out.append(execute(env, plan, seed=i)["obs"]["hand_qpos"])
    return out


measured = fingers(gym.make("PickSort-Real-v0", lab="course-latency", **KWARGS))
sim = gym.make("PickSort-Ungrounded-v0", **KWARGS)


def cost(latency, kp):
    return sum(
        np.sum((p - m) ** 2) for p, m in zip(fingers(sim, {"control_latency": latency, "finger_kp": kp}), measured)
    )


gains = [2.0, 3.0, 4.0, 5.0, 6.0]
grid = np.arange(0, 0.2001, 0.01)
table = np.array([[cost(latency, kp) for kp in gains] for latency in grid])
i, j = np.unravel_index(table.argmin(), table.shape)
fine = np.arange(max(grid[i] - 0.01, 0), grid[i] + 0.0101, 0.0025)
costs = [cost(latency, gains[j]) for latency in fine]
best = float(fine[int(np.argmin(costs))])
print(f"coarse minimum {grid[i]:.3f} s (finger kp {gains[j]}), refined {best:.4f} s")
write_answer(2, {"control_latency": round(best, 4)})
