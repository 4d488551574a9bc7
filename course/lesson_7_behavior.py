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
# # Lesson 7: behavior: a teleoperator versus a planner
#
# **Goal.** See that simulated demonstrations differ from real ones not only in physics but in *how they move*,
# measure it, and fit a generator that moves like the real operator (*behavior grounding*).
#
# The lab's demonstrations come from its teleoperator, a model of a person: a reaction delay, bell-shaped
# reaches with corrective sub-movements, a habitual approach and grasp. The scripted planner moves like a
# controller: straight in, all fingers at once. A policy co-trained on both sees two behaviours for the same
# state. Behavior grounding fits a generator to the real demonstrations only and uses it in the simulator
# (`PickSort-BehaviorGrounded-v0`).

# %%
import json
import os

os.environ.setdefault("MUJOCO_GL", "egl")

import matplotlib.pyplot as plt
import numpy as np
from helpers import output_dir, r2s2r, show_exercise

import r2s2r_envs  # noqa: F401
from r2s2r_envs.behavior.metrics import compare

QUICK = os.environ.get("R2S2R_COURSE_QUICK", "0") == "1"
OUT = output_dir("lesson_7")
DEMOS = 5 if QUICK else 30  # the classifier's 5-fold cross-validation needs at least 5 episodes per set


def demos(env_id: str, out: str, *extra: object, env_kwargs: dict | None = None) -> str:
    """Generate DEMOS successful one-object demonstrations with the env's own demonstrator."""
    path = OUT / out
    kwargs = json.dumps({"num_objects": 1, **(env_kwargs or {})})  # one object: quick, and every style succeeds
    r2s2r("generate", env_id, "--env-kwargs", kwargs, "--episodes", DEMOS, "--successes-only", "--out", path,
          "--no-progress", "--overwrite", *extra, tail=1)  # fmt: skip
    return str(path)


lab = demos("PickSort-Real-v0", "lab.hdf5")  # the teleoperator in the default lab
planner = demos("PickSort-Ungrounded-v0", "planner.hdf5")  # the scripted planner in the simulator

# %% [markdown]
# ## How alike do they move?
#
# `r2s2r compare-behavior A B` splits every demonstration into grasps and compares traits of each reach (its
# duration, where its speed peaks, how many sub-movements, the approach direction, how the fingers close, how
# high the hand releases), the paths in the object's frame (DTW), and asks a classifier to tell the two sets
# apart (AUC 0.5: indistinguishable; 1: always told apart). `--plot` draws the speed profiles.

# %%
r2s2r("compare-behavior", lab, planner, "--plot", OUT / "plots", tail=25)

# %%
fig, axes = plt.subplots(1, 1, figsize=(8, 3))
axes.imshow(plt.imread(OUT / "plots" / "speed_profiles.png"))
axes.axis("off")
plt.show()

# %% [markdown]
# Read the table by its largest differences. The planner repeats itself (its reaches are nearly identical and
# flat-topped); the teleoperator's vary from reach to reach, peak lower and end with a
# corrective sub-movement. The planner grasps much sooner after an object arrives (`arrival_to_grasp`: it has no
# reaction time) and closes every finger at once (`closure_spread` 0); the operator's digits close in turn.
#
# ## Fitting a human-like generator
#
# `r2s2r fit-behavior` turns every successful grasp of the real demonstrations into a source segment; the
# generator replays them in the moving object's frame, retimed for the belt (docs/behavior.md, "Generator").

# %%
model = OUT / "model.json"
r2s2r("fit-behavior", "--demos", lab, "--out", model, "--min-grasps", 1, tail=3)
generated = demos("PickSort-BehaviorGrounded-v0", "generated.hdf5", env_kwargs={"behavior": str(model)})

# %%
against_planner, against_generator = compare(lab, planner), compare(lab, generated)
names = [t.trait for t in against_planner.traits]
fig, ax = plt.subplots(figsize=(7, 3))
x = np.arange(len(names))
for shift, comparison, label in ((-0.2, against_planner, "planner"), (0.2, against_generator, "generator")):
    d = [np.clip(np.nan_to_num(t.effect_size), -6, 6) for t in comparison.traits]
    ax.bar(x + shift, d, 0.4, label=f"{label} (AUC {comparison.auc:.2f})")
ax.set_xticks(x, names, rotation=60, ha="right", fontsize=7)
ax.set_ylabel("Cohen's d vs lab (clipped at 6)")
ax.axhline(0, color="k", lw=0.5)
ax.legend(fontsize=8)
fig.savefig(OUT / "trait_differences.png", dpi=80, bbox_inches="tight")
plt.show()

# %% [markdown]
# The generator's bars are shorter for the strategy traits (sub-movements, path shape, reaction, finger
# closure): it replays the operator's own segments. With a handful of demos per set every figure here is
# rough. With 50 demonstrations per set the suite measured Cohen's d of generator / planner for reach duration
# 0.17 / -3.06 and closure spread 0.47 / -34.9; the classifier still tells both apart (AUC 1.000) because peak
# speed, jerk and release height are shaped by the world's sensing and actuators as much as by the
# demonstrator (docs/behavior.md, "Measured"). Behavior grounding matters most when world grounding is
# imperfect (docs/concepts.md, "Findings").
#
# ## Exercise 7: the operator lab
#
# The lab `course-operator` has another teleoperator. Find its style: `approach` (`"above"`: reach above
# where the object will be, then descend; `"follow"`: come in along the belt behind it), `grasp` (`"wrap"`:
# the digits squeeze in turn; `"pinch"`: all together), `release` (`"drop"` from 0.22 m over the bin;
# `"place"`: lower it first); optionally its `reaction_time` (s).
#
# * Generate its demonstrations (`demos("PickSort-Real-v0", "other.hdf5", "--lab", "course-operator")`)
#   and compare them with the default lab's (`compare(lab, other).table()`): `follow_speed`, `approach_z`,
#   `closure_spread` and `release_height` are the traits to read (docs/behavior.md, "Metrics").
# * Answer: `{"approach": ..., "grasp": ..., "release": ...}` in `answer_7.json`; check with
#   `r2s2r course check 7 answer_7.json`.

# %%
show_exercise(7)
