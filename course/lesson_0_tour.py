# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Lesson 0: a tour of PickSort, the simulator and the lab
#
# **Goal.** Know the task, the environment ids, and what "the lab" is; run the same demonstrator in the
# simulator and in the lab and see the sim-to-real gap for the first time; measure one property of the lab
# (the belt speed) from what its sensors report.
#
# **The task.** Objects of three categories (red cube, green ball, blue bar) ride a conveyor belt through the
# workspace of a 7-DoF arm with a 4-finger, 16-joint hand. The robot picks each object while it moves and drops
# it into the bin of its category. It is *dynamic* (a late reach misses) and *dexterous* (a weak grasp drops the
# object). The full spec is the env's docstring: `help(r2s2r_envs.envs.PickSortEnv)`.
#
# **The lab.** There is no real robot in this course. `PickSort-Real-v0`, *the lab*, stands in for the real
# cell: a MuJoCo world whose physics differ from the simulator's nominal model the way a real cell's do, plus
# effects no simulator parameter can express. You may step it, log it and read its data, exactly as you would a
# real robot; you may **not** read its parameters (the lab refuses: `env.unwrapped.world_params` raises
# `LabBoundaryError`). Every exercise in this course is a lab you have not seen, with a twist to diagnose.
#
# Run this notebook top to bottom. `R2S2R_COURSE_QUICK=1` runs it with small budgets (what CI does); without
# it the budgets are the ones quoted in the text.

# %%
import os

os.environ.setdefault("MUJOCO_GL", "egl")  # offscreen rendering, before MuJoCo is imported

import gymnasium as gym
import matplotlib.pyplot as plt
import numpy as np
from helpers import output_dir, r2s2r, show_exercise, show_video, side_by_side, wilson_bars

import r2s2r_envs
from r2s2r_envs.behavior import make_demonstrator
from r2s2r_envs.evaluation import evaluate

QUICK = os.environ.get("R2S2R_COURSE_QUICK", "0") == "1"
OUT = output_dir("lesson_0")
EPISODES = 4 if QUICK else 50
print("r2s2r_envs", r2s2r_envs.__version__, "| quick mode" if QUICK else "| full mode")

# %% [markdown]
# ## The environment ids
#
# | id | physics | demonstrator |
# |---|---|---|
# | `PickSort-Ungrounded-v0` | the nominal model (the spec sheet) | scripted planner |
# | `PickSort-WorldGrounded-v0` | identified from lab logs (lesson 5) | scripted planner, tuned in that world |
# | `PickSort-BehaviorGrounded-v0` | nominal | human-like generator fitted to lab demos (lesson 7) |
# | `PickSort-FullyGrounded-v0` | identified | human-like generator |
# | `PickSort-Real-v0` | the lab | the lab's teleoperator (a model of a human operator) |

# %%
r2s2r("envs")

env = gym.make("PickSort-Ungrounded-v0")
print("action space:", env.action_space)
print("observation keys:", {k: v.shape for k, v in env.observation_space.spaces.items()})
env.close()

# %% [markdown]
# The action (22 numbers in [-1, 1] at 20 Hz) moves the hand's tool centre point (TCP) by up to 2 cm and turns
# it by up to 0.15 rad per step, and sets the 16 finger targets. Observations are what the robot's sensors
# report: joint angles, the TCP pose, perceived object positions. In the nominal simulator they are exact; in
# the lab they are noisy, biased and late, like a real cell's.
#
# ## The same episode in the simulator and in the lab
#
# The scripted planner was written and tuned in the nominal simulator. Below, it runs the same episode (same
# seed: same objects, same spacing) in the simulator (left) and in the lab (right). Watch the timing of the
# grasps.

# %%
SMALL = dict(render_mode="rgb_array", render_size=(128, 160), num_objects=2)
video, info_sim, info_lab = side_by_side(
    lambda: gym.make("PickSort-Ungrounded-v0", **SMALL),
    lambda: gym.make("PickSort-Real-v0", **SMALL),
    lambda env: make_demonstrator(env, "scripted"),
    OUT / "planner_sim_vs_lab.mp4",
    seed=3,
    max_steps=160 if QUICK else 400,
)
print("sim:", info_sim["object_outcomes"], "| lab:", info_lab["object_outcomes"])
show_video(video)

# %% [markdown]
# One episode says little. The evaluation protocol runs a fixed list of published seeds and reports the
# success rate with a Wilson 95% interval. From a terminal this is `r2s2r demo --env ID --episodes N`; from
# Python, `r2s2r_envs.evaluation.evaluate`.

# %%
r2s2r("demo", "--env", "PickSort-Real-v0", "--episodes", 2, "--no-progress", tail=12)

# %%
planner = lambda env: make_demonstrator(env, "scripted")  # noqa: E731  (the planner everywhere, also in the lab)
results = {
    "sim (nominal)": evaluate("PickSort-Ungrounded-v0", planner, episodes=EPISODES, progress=False),
    "lab": evaluate("PickSort-Real-v0", planner, episodes=EPISODES, progress=False),
}
for name, res in results.items():
    s = res.summary
    low, high = s["success_rate_ci95"]
    failures = {k: v for k, v in s["failure_causes"].items() if v}
    print(f"{name:14s} success {s['success_rate']:.0%} (95% CI {low:.0%}-{high:.0%}), first failures {failures}")

fig, ax = plt.subplots(figsize=(4, 3))
wilson_bars(ax, list(results), list(results.values()), f"scripted planner, {EPISODES} episodes")
fig.savefig(OUT / "planner_success.png", dpi=80, bbox_inches="tight")
plt.show()

# %% [markdown]
# Over the protocol's first 100 episodes the planner sorts everything in **97%** of episodes in the simulator
# and in **60%** in the lab (docs/measured.md). That drop is the *sim-to-real gap*. The rest of the course
# takes it apart layer by layer (interface, timing, actuators and contact, sensing), then treats it with the
# remedies (system identification, domain randomization, real data, behavior grounding) and finally asks how to
# tell whether a simulator is good enough to evaluate policies in.
#
# ## A first measurement: the belt speed
#
# A real cell tells you nothing about itself; you measure it. Let the arm hold still (an all-zero action:
# no TCP motion, fingers half open) and watch the objects ride past. The slope of the perceived position
# along the belt (y) over time is the belt speed.


# %%
def belt_track(env_id: str, seed: int, steps: int = 200, **kwargs) -> tuple[np.ndarray, np.ndarray]:
    """Perceived object positions (steps + 1, N, 3) and their times (s) while the arm holds still."""
    env = gym.make(env_id, **kwargs)
    obs, info = env.reset(seed=seed)
    times, positions = [0.0], [obs["object_pos"].reshape(-1, 3)]
    for _ in range(steps):
        obs, _, terminated, truncated, info = env.step(np.zeros(env.action_space.shape, np.float32))
        times.append(info["elapsed_time"])
        positions.append(obs["object_pos"].reshape(-1, 3))
        if terminated or truncated:
            break
    env.close()
    return np.array(times), np.array(positions)


def belt_speed(times: np.ndarray, positions: np.ndarray) -> float:
    """Mean speed along -y of every object over the whole track (least-squares slope), m/s."""
    return float(np.mean([-np.polyfit(times, positions[:, j, 1], 1)[0] for j in range(positions.shape[1])]))


fig, ax = plt.subplots(figsize=(6, 3))
for env_id, colour in (("PickSort-Ungrounded-v0", "C0"), ("PickSort-Real-v0", "C1")):
    t, p = belt_track(env_id, seed=0)
    ax.plot(t, p[:, :, 1], color=colour, lw=1)
    ax.plot([], [], color=colour, label=f"{env_id}: {belt_speed(t, p):.4f} m/s")
ax.set_xlabel("time (s)")
ax.set_ylabel("perceived object y (m)")
ax.legend(fontsize=8)
fig.savefig(OUT / "belt_tracks.png", dpi=80, bbox_inches="tight")
plt.show()

# %% [markdown]
# The simulator's belt runs at its nominal 0.08 m/s; the lab's belt is faster, and its tracks are noisy (sensor
# noise) and not quite straight (the lab's belt speed fluctuates). Averaging over several objects and episodes
# tames both. (The suite's own identification, `r2s2r sysid`, measures the default lab's belt at 0.0888 m/s,
# 95% interval 0.0872-0.0903: docs/measured.md.)
#
# ## Exercise 0: the tour lab
#
# The exercise lab `course-tour` is a cell whose belt runs at another speed. Measure it, within 10%.
#
# * Make it with `gym.make("PickSort-Real-v0", lab="course-tour")`; every command that takes `--lab` takes
#   `--lab course-tour` too.
# * Write your answer as JSON, `{"belt_speed": <m/s>}`, to a file, e.g. `answer_0.json`.
# * Check it: `r2s2r course check 0 answer_0.json` says right or wrong (without giving the answer away).
#
# `r2s2r course labs` lists every exercise with its task and answer format:

# %%
r2s2r("course", "labs", tail=60)
show_exercise(0)
