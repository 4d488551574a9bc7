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
# # Lesson 6: real data and co-training
#
# **Goal.** Cover what no simulator expresses with a few real demonstrations: mix them with many simulated
# ones (`real_fraction`), choose the mix with the mixing rule, and know what a co-trained policy does where the
# real data is thin.
#
# Identification and randomization (lesson 5) leave a residual: effects with no parameter (a mis-tuned arm
# controller, parts that differ piece to piece). Real demonstrations show them as they are, but they are
# expensive: a person drives the robot for each. Simulated demonstrations are cheap and only as right as the
# simulator. *Co-training* trains one policy on both.
#
# **`real_fraction`** is the expected share of each training batch drawn from real data (docs/concepts.md).
# Papers disagree on what "alpha" means; this suite never says alpha. **The mixing rule** (a rule of thumb from a
# mechanistic study of co-training): with N real and M simulated demonstrations and M/N > 5, weight real data
# between N/(N+M) (the natural share, plain concatenation) and sqrt(N/M) (up-weighted). For 50 real and 1,000
# simulated demos: 0.048 to 0.22.

# %%
import json
import os

os.environ.setdefault("MUJOCO_GL", "egl")

import matplotlib.pyplot as plt
import numpy as np
from helpers import output_dir, r2s2r, show_exercise

import r2s2r_envs  # noqa: F401
from r2s2r_envs.datasets import CoTrainingMixture, TrajectoryDataset, open_dataset, suggest_real_fraction

QUICK = os.environ.get("R2S2R_COURSE_QUICK", "0") == "1"
OUT = output_dir("lesson_6")
N_REAL, N_SIM = (3, 16) if QUICK else (20, 200)  # M/N > 5: the mixing rule applies
STEPS = 50 if QUICK else 5000

# %% [markdown]
# ## The mixing rule

# %%
print(suggest_real_fraction(50, 1000))
sims = np.arange(10, 2001, 10)
ranges = [suggest_real_fraction(50, m) for m in sims]
fig, ax = plt.subplots(figsize=(5, 3))
ax.fill_between(sims, [r.low for r in ranges], [r.high for r in ranges], alpha=0.3, label="rule's range")
ax.plot(sims, [r.low for r in ranges], label="natural share N/(N+M)")
ax.axvline(5 * 50, color="grey", ls=":", label="M/N = 5")
ax.set_xlabel("simulated demos M (N = 50 real)")
ax.set_ylabel("real_fraction")
ax.legend(fontsize=8)
fig.savefig(OUT / "mixing_rule.png", dpi=80, bbox_inches="tight")
plt.show()

# %% [markdown]
# ## A few real and some simulated demonstrations
#
# Real demonstrations come from the lab's teleoperator (`r2s2r generate PickSort-Real-v0`), simulated ones
# from the scripted planner in the simulator. The lab here is `course-cotrain`, a cell whose unmodeled effects
# (its arm controller, piece-to-piece variation) are stronger than the default lab's: what real data has to
# cover. One object per episode keeps this notebook quick.

# %%
ONE = json.dumps({"num_objects": 1})
real_file, sim_file = OUT / "real.hdf5", OUT / "sim.hdf5"
r2s2r("generate", "PickSort-Real-v0", "--lab", "course-cotrain", "--env-kwargs", ONE, "--episodes", N_REAL,
      "--successes-only", "--out", real_file, "--no-progress", "--overwrite", tail=3)  # fmt: skip
r2s2r("generate", "PickSort-Ungrounded-v0", "--env-kwargs", ONE, "--episodes", N_SIM,
      "--successes-only", "--out", sim_file, "--no-progress", "--overwrite", tail=3)  # fmt: skip
for path in (real_file, sim_file):
    with open_dataset(path) as f:
        print(path.name, f.domain, f.num_demos, "demos", f.num_samples, "samples", f.content_hash[:12])

# %% [markdown]
# A `CoTrainingMixture` draws each batch entry from the real data with probability `real_fraction`; every
# batch carries a domain label (1 real, 0 sim) for methods that use it.

# %%
real = TrajectoryDataset(real_file, frame_stack=2, action_chunk=16)
sim = TrajectoryDataset(sim_file, frame_stack=2, action_chunk=16)
fractions = [0.0, 0.1, 0.25, 0.5, 0.9]
shares = []
for fraction in fractions:
    batch = CoTrainingMixture([real, sim], real_fraction=fraction, normalize="minmax", seed=0).sample(256)
    shares.append(float(np.mean(batch["domain"])))
print("real share of a 256-sample batch:", {f: round(s, 3) for f, s in zip(fractions, shares)})

# %% [markdown]
# ## Where the real data covers the task, and where it does not
#
# Compare where the hand went in the two sets (top view of the TCP). A co-trained policy acts like a mixture:
# it imitates the real demonstrations in states they cover and falls back on the simulated behaviour
# elsewhere (docs/concepts.md, "Findings"). With three or twenty real demos, most of the state space is
# covered by simulation only.

# %%
fig, ax = plt.subplots(figsize=(5, 3.5))
for path, colour, label in ((sim_file, "C0", "sim (planner)"), (real_file, "C1", "real (teleoperator)")):
    with open_dataset(path) as f:
        for k in range(f.num_demos):
            eef = f.demo(k, states=False).obs["eef_pos"]
            ax.plot(eef[:, 1], eef[:, 0], color=colour, lw=1, alpha=0.7, label=label if k == 0 else None)
ax.set_xlabel("y along the belt (m)")
ax.set_ylabel("x (m)")
ax.legend(fontsize=8)
fig.savefig(OUT / "coverage.png", dpi=80, bbox_inches="tight")
plt.show()

# %% [markdown]
# ## Training and evaluating a co-trained policy
#
# `r2s2r train` trains the suite's baselines (`bc`, `flow`, `flow-cfg`, `flow-adda`, `flow-cfg-adda`) on the mix.
# In quick mode this notebook trains a BC policy for a handful of steps to show the commands; it will not
# solve the task. In full mode (20 real + 200 simulated one-object demos, 5,000 steps at `real_fraction` 0.316)
# one run of this notebook sorted the object in 2 of 20 one-object episodes of `course-cotrain`. With three
# objects per episode, at the suite's full budget (5,000 steps, 50 real + 1,000 sim demos, `real_fraction`
# 0.22), the baselines train in 1.5-4.5 minutes on 2 cores and solve no lab episode out of 20
# (docs/baselines.md, "Measured"): PickSort is hard for a small policy, which is what makes it a benchmark.

# %%
suggestion = suggest_real_fraction(real.num_demos, sim.num_demos)
fraction = suggestion.high if suggestion.rule_applies else suggestion.low  # the rule's high end, else the natural share
print(suggestion.note)
policy_dir = OUT / "bc"
r2s2r("train", "--method", "bc", "--real", real_file, "--sim", sim_file, "--real-fraction", round(fraction, 3),
      "--steps", STEPS, "--batch-size", 64 if QUICK else 256, "--out", policy_dir, "--overwrite",
      "--no-progress", tail=5)  # fmt: skip
r2s2r("evaluate", "--policy", policy_dir, "--env", "PickSort-Real-v0", "--lab", "course-cotrain",
      "--num-objects", 1, "--episodes", 2 if QUICK else 20, "--no-progress", tail=8)  # fmt: skip

# %% [markdown]
# ## Exercise 6: the mixing rule for the co-training lab
#
# You have 40 real demonstrations from `course-cotrain` and 600 simulated ones. Which range of `real_fraction`
# does the mixing rule recommend?
#
# * Work it out by hand, then compare with `suggest_real_fraction`.
# * Answer: `{"real_fraction": [low, high]}` in `answer_6.json`; check with `r2s2r course check 6 answer_6.json`.
# * Going further (not checked): generate 40 real demos in `course-cotrain` and 600 simulated ones, train
#   `flow-cfg-adda` at the low end, the high end and 1.0 (real only), and evaluate each in the lab.

# %%
show_exercise(6)
