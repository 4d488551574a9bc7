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
# # Lesson 1: interface mismatches
#
# **Goal.** Find the cheapest and most embarrassing layer of the sim-to-real gap: the *interface* between your
# code and the robot. Joint order, units, action scaling and camera channel order are not physics; they are
# conventions, and when the real cell's driver follows another one than your simulator, everything downstream
# fails in confusing ways. Interface mismatches are bugs, fixed by **checking**, never by learning.
#
# A lab config may carry interface faults (the `"interface"` section of a lab config, docs/lab.md):
#
# | key | fault |
# |---|---|
# | `arm_joint_order` | reading `i` and joint-mode command `i` are arm joint `arm_joint_order[i]` |
# | `arm_joint_units` | `"deg"`: joint readings in degrees instead of radians |
# | `task_action_scale` | a +1 TCP command moves that many times 2 cm |
# | `camera_channels` | `"bgr"`: images with blue and red swapped |
#
# Below we build labs with known faults (a teacher's demonstration; a student never sees the config of an
# exercise lab) and learn, for each, a check that finds it from what the robot reports. The recipe is always
# the same: **do the same thing in the simulator and in the lab, and compare what comes back.**

# %%
import os

os.environ.setdefault("MUJOCO_GL", "egl")

import gymnasium as gym
import matplotlib.pyplot as plt
import numpy as np
from helpers import output_dir, show_exercise

import r2s2r_envs  # noqa: F401

QUICK = os.environ.get("R2S2R_COURSE_QUICK", "0") == "1"
OUT = output_dir("lesson_1")

# Demonstration labs: the default lab plus one interface fault each.
FAULTS = {
    "joint order": {"arm_joint_order": [0, 1, 2, 3, 4, 6, 5]},
    "degrees": {"arm_joint_units": "deg"},
    "action scale": {"task_action_scale": 0.5},
    "BGR camera": {"camera_channels": "bgr"},
}


def lab(fault: str) -> dict:
    """The default lab with one interface fault (a dict over the default lab; see docs/lab.md)."""
    return {"name": f"lesson1-{fault.replace(' ', '-')}", "interface": FAULTS[fault]}


# %% [markdown]
# ## A probe: the same task-space wiggle everywhere
#
# The task-space controller runs inside the cell, on the true joints, so the same TCP commands move the real
# arm the same way whatever its driver reports. We send a slow wiggle of the TCP (a little of every
# translation and rotation, so every joint moves) and record what comes back.

# %%
STEPS = 40 if QUICK else 80


def wiggle(t: int) -> np.ndarray:
    """Task-space command at step t: slow sines on the 6 TCP axes (different frequencies), fingers half open."""
    a = np.zeros(22, np.float32)
    a[:6] = 0.4 * np.sin(2 * np.pi * t / STEPS * np.array([1, 2, 1.5, 1, 2, 2.5]) + np.arange(6))
    return a


def probe(env_id: str = "PickSort-Ungrounded-v0", seed: int = 0, **kwargs) -> dict[str, np.ndarray]:
    """Run the wiggle; return every observation key stacked over time."""
    env = gym.make(env_id, num_objects=1, **kwargs)
    obs, _ = env.reset(seed=seed)
    log = {k: [v] for k, v in obs.items()}
    for t in range(STEPS):
        obs, *_ = env.step(wiggle(t))
        for k, v in obs.items():
            log[k].append(v)
    env.close()
    return {k: np.asarray(v) for k, v in log.items()}


sim = probe()
labs = {fault: probe("PickSort-Real-v0", lab=lab(fault)) for fault in ("joint order", "degrees", "action scale")}

# %% [markdown]
# ## Joint order
#
# If reading `i` is in fact joint `j`, reading `i`'s motion in the lab matches joint `j`'s motion in the
# simulator. Correlate the joint *increments* (steps' differences remove the posture) of every lab reading with
# every simulated joint: the matrix is the identity for a correct interface, a permutation otherwise.


# %%
def increment_correlation(lab_q: np.ndarray, sim_q: np.ndarray) -> np.ndarray:
    """(7, 7) correlation of lab reading i's increments with simulated joint j's increments."""
    a, b = np.diff(lab_q, axis=0), np.diff(sim_q, axis=0)
    a = (a - a.mean(0)) / (a.std(0) + 1e-12)
    b = (b - b.mean(0)) / (b.std(0) + 1e-12)
    return a.T @ b / len(a)


fig, axes = plt.subplots(1, 2, figsize=(8, 3.4))
for ax, (title, q) in zip(
    axes,
    (("default lab", probe("PickSort-Real-v0")["arm_qpos"]), ("joint-order fault", labs["joint order"]["arm_qpos"])),
):
    m = increment_correlation(q, sim["arm_qpos"])
    ax.imshow(m, vmin=-1, vmax=1, cmap="RdBu_r")
    ax.set_title(title)
    ax.set_xlabel("simulated joint j")
    ax.set_ylabel("lab reading i")
    print(title, "-> reading i looks like joint", m.argmax(axis=1).tolist())
fig.savefig(OUT / "joint_order.png", dpi=80, bbox_inches="tight")
plt.show()

# %% [markdown]
# The default lab's matrix is (nearly) the identity: its physics differ from the simulator's, but each reading
# still follows its own joint. With the fault, readings 5 and 6 follow joints 6 and 5.
#
# ## Units
#
# A joint angle of 115 "rad" is not an angle. Compare the *range* of the readings: the ratio of their
# spreads, lab over sim, is 1 for the same units and 57.3 (180/pi) for degrees.

# %%
ratio = np.std(labs["degrees"]["arm_qpos"], axis=0) / np.std(sim["arm_qpos"], axis=0)
print("spread ratio per joint, lab / sim:", ratio.round(1))
print("home posture as read in the lab:", labs["degrees"]["arm_qpos"][0].round(1))

# %% [markdown]
# ## Action scaling
#
# The same command should move the TCP by the same distance. Compare the TCP path length per step, lab over
# sim (the TCP pose is measured, not commanded).


# %%
def path_length(eef: np.ndarray) -> float:
    return float(np.linalg.norm(np.diff(eef, axis=0), axis=1).sum())


for name, log in (("default lab", probe("PickSort-Real-v0")), ("action-scale fault", labs["action scale"])):
    print(f"{name:20s} TCP path, lab / sim: {path_length(log['eef_pos']) / path_length(sim['eef_pos']):.2f}")

# %% [markdown]
# The default lab's arm travels a little less than the simulator's (its low-level controller is mis-tuned, a
# physics effect of lesson 3), the faulty one about half.
#
# ## Camera channel order
#
# Render the scene camera of the same episode in both (`obs_mode="rgb"`) and look at the red cube: with BGR
# images it is blue. The channel means tell it without looking.


# %%
def first_image(env_id: str, **kwargs) -> np.ndarray:
    env = gym.make(env_id, obs_mode="rgb", image_size=96, num_objects=3, **kwargs)
    obs, _ = env.reset(seed=1)
    env.close()
    return obs["scene_image"]


images = {
    "sim": first_image("PickSort-Ungrounded-v0"),
    "BGR lab": first_image("PickSort-Real-v0", lab=lab("BGR camera")),
}
fig, axes = plt.subplots(1, 2, figsize=(6, 3))
for ax, (name, img) in zip(axes, images.items()):
    ax.imshow(img)
    ax.set_title(f"{name}: mean RGB {img.reshape(-1, 3).mean(0).round(0).tolist()}", fontsize=8)
    ax.axis("off")
fig.savefig(OUT / "camera_channels.png", dpi=80, bbox_inches="tight")
plt.show()

# %% [markdown]
# Checks like these belong in a cell's commissioning script and in every policy's start-up: a unit test of the
# interface, run against the real robot before any learning. In a notebook they take seconds; a policy trained
# through a swapped joint or a BGR camera can take days to debug.
#
# ## Exercise 1: the interface lab
#
# The lab `course-interface` has two arm joints swapped in its interface (commands and readings). Name them.
#
# * `gym.make("PickSort-Real-v0", lab="course-interface")`; reuse the probe above.
# * Answer: `{"swapped_joints": [i, j]}`, 0-based arm joint indices, in any order, in `answer_1.json`.
# * Check: `r2s2r course check 1 answer_1.json`.

# %%
show_exercise(1)
