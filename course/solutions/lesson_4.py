"""Exercise 4: the camera offset of course-calibration: perceived minus placed positions (x, y), perceived minus
the simulator's perception of the same set-up (z), averaged over several set-ups and seeds."""

import gymnasium as gym
import numpy as np
from _common import write_answer

import r2s2r_envs  # noqa: F401

LAYOUTS = [
    [("cube", [0.52, 0.25]), ("ball", [0.58, -0.05]), ("bar", [0.55, -0.30])],
    [("ball", [0.56, 0.30]), ("bar", [0.50, 0.05]), ("cube", [0.57, -0.25])],
    [("bar", [0.55, 0.20]), ("cube", [0.53, -0.10]), ("ball", [0.52, 0.40])],
]


def perceived(env_id: str, layout, seed: int, **kwargs) -> np.ndarray:
    env = gym.make(env_id, num_objects=3, **kwargs)
    setup = {"belt": False, "objects": [{"category": c, "position": xy} for c, xy in layout]}
    obs, _ = env.reset(seed=seed, options={"setup": setup})
    readings = []
    for t in range(100):
        obs, *_ = env.step(np.zeros(env.action_space.shape, np.float32))
        if t >= 10:
            readings.append(obs["object_pos"].reshape(-1, 3))
    env.close()
    return np.mean(readings, axis=0)


offsets = []
for seed, layout in enumerate(LAYOUTS):
    lab = perceived("PickSort-Real-v0", layout, seed, lab="course-calibration")
    reference = perceived("PickSort-Ungrounded-v0", layout, seed)
    reference[:, :2] = [xy for _, xy in layout]
    offsets.append((lab - reference).mean(axis=0))
offset = np.mean(offsets, axis=0)
print("per set-up (mm):", (np.array(offsets) * 1000).round(1).tolist())
write_answer(4, {"object_pos_offset": [round(float(v), 4) for v in offset]})
