"""Exercise 4: the camera offset and the perception delay of course-calibration (lesson 4).

Offset: perceived minus placed positions (x, y), perceived minus the simulator's perception of the same set-up
(z), averaged over several set-ups and seeds, belt stopped.  Delay: cubes placed upstream on the running belt; a
line through each perceived track along y meets t = 0 ahead of the placed spot by the y offset plus the distance
the belt carries the object during the delay, so delay = (intercept - placed - offset) / speed (the line's own
slope), averaged over the objects.  ``R2S2R_COURSE_QUICK=1`` uses fewer and shorter runs.
"""

import os

import gymnasium as gym
import numpy as np
from _common import write_answer

import r2s2r_envs  # noqa: F401

QUICK = os.environ.get("R2S2R_COURSE_QUICK", "0") == "1"
LAB = "course-calibration"
LAYOUTS = [
    [("cube", [0.52, 0.25]), ("ball", [0.58, -0.05]), ("bar", [0.55, -0.30])],
    [("ball", [0.56, 0.30]), ("bar", [0.50, 0.05]), ("cube", [0.57, -0.25])],
    [("bar", [0.55, 0.20]), ("cube", [0.53, -0.10]), ("ball", [0.52, 0.40])],
]
REST_STEPS = 40 if QUICK else 100
RIDE_SPOTS = [[0.50, 0.75], [0.55, 0.95], [0.60, 1.15]]  # cubes (a ball rolls), upstream, m
RIDES, RIDE_STEPS = (6, 60) if QUICK else (12, 80)  # seeds; 3 s / 4 s at 20 Hz
FIT_FROM = 0.25  # s: the first frames are left out of the line


def perceived(env_id: str, layout, seed: int, **kwargs) -> np.ndarray:
    env = gym.make(env_id, num_objects=3, **kwargs)
    setup = {"belt": False, "objects": [{"category": c, "position": xy} for c, xy in layout]}
    obs, _ = env.reset(seed=seed, options={"setup": setup})
    readings = []
    for t in range(REST_STEPS):
        obs, *_ = env.step(np.zeros(env.action_space.shape, np.float32))
        if t >= 10:
            readings.append(obs["object_pos"].reshape(-1, 3))
    env.close()
    return np.mean(readings, axis=0)


def camera_offset(seed0: int = 0) -> np.ndarray:
    offsets = []
    for k, layout in enumerate(LAYOUTS):
        lab = perceived("PickSort-Real-v0", layout, seed0 + k, lab=LAB)
        reference = perceived("PickSort-Ungrounded-v0", layout, seed0 + k)
        reference[:, :2] = [xy for _, xy in layout]
        offsets.append((lab - reference).mean(axis=0))
    print("offset per set-up (mm):", (np.array(offsets, dtype=float) * 1000).round(1).tolist())
    return np.mean(offsets, axis=0)


def ride(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Time (T,), perceived y (T, 3) and visibility (T, 3) of three cubes riding the belt."""
    env = gym.make("PickSort-Real-v0", lab=LAB, num_objects=3, sensors=("object_visible",))
    setup = {"objects": [{"category": "cube", "position": xy} for xy in RIDE_SPOTS]}
    obs, _ = env.reset(seed=seed, options={"setup": setup})
    times, ys, seen = [0.0], [obs["object_pos"].reshape(-1, 3)[:, 1]], [obs["object_visible"]]
    for _ in range(RIDE_STEPS):
        obs, _, _, _, info = env.step(np.zeros(env.action_space.shape, np.float32))
        times.append(info["elapsed_time"])
        ys.append(obs["object_pos"].reshape(-1, 3)[:, 1])
        seen.append(obs["object_visible"])
    env.close()
    return np.array(times), np.array(ys), np.array(seen) > 0.5


def perception_delay(offset_y: float, seed0: int = 0) -> float:
    delays = []
    for seed in range(seed0, seed0 + RIDES):
        t, y, seen = ride(seed)
        for i, (_, y0) in enumerate(RIDE_SPOTS):
            rows = seen[:, i] & (t >= FIT_FROM)
            slope, intercept = np.polyfit(t[rows], y[rows, i], 1)
            delays.append((intercept - y0 - offset_y) / -slope)
    print("delay per object (ms):", (np.array(delays) * 1000).round(0).tolist())
    return float(np.mean(delays))


def solve(seed0: int = 0) -> tuple[np.ndarray, float]:
    offset = camera_offset(seed0)
    return offset, perception_delay(float(offset[1]), seed0)


if __name__ == "__main__":
    offset, delay = solve()
    write_answer(4, {"object_pos_offset": [round(float(v), 4) for v in offset], "perception_delay": round(delay, 4)})
