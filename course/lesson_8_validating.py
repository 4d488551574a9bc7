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
# # Lesson 8: validating a simulator for evaluation
#
# **Goal.** Decide whether a simulator is good enough to *compare policies* in, by the one test that matters
# for that use: does it rank policies the way the real system does?
#
# A simulator used for evaluation need not reproduce absolute success rates (they almost never match); it must
# put the better policy first. SIMPLER (Li et al., 2024) measures this with two figures over a set of policies
# evaluated in both the simulator (success rates s) and the real system (r):
#
# * **Pearson correlation** of s and r (higher is better);
# * **mean maximum rank violation**, MMRV(s, r) = (1/N) sum_i max_j 1[(s_i > s_j) != (r_i > r_j)] |r_i - r_j|:
#   each policy is charged its worst mis-ordered pair, weighted by how far apart the pair really is
#   (lower is better; the magnitudes come from the real list, so always pass (sim, real) in that order).
#
# Both live in `r2s2r_envs.evaluation.ranking`, and `r2s2r leaderboard` reports them per simulated variant.

# %%
import os

os.environ.setdefault("MUJOCO_GL", "egl")

import matplotlib.pyplot as plt
from helpers import output_dir, show_exercise

import r2s2r_envs  # noqa: F401
from r2s2r_envs.behavior import make_demonstrator
from r2s2r_envs.evaluation import evaluate
from r2s2r_envs.evaluation.ranking import mmrv, pearson

QUICK = os.environ.get("R2S2R_COURSE_QUICK", "0") == "1"
OUT = output_dir("lesson_8")
EPISODES = 3 if QUICK else 30
OBJECTS = 2

# The worked example of docs/concepts.md: Pearson 0.839, MMRV 0.100 (0.067 with the arguments swapped).
s, r = [0.8, 0.5, 0.6], [0.9, 0.45, 0.3]
print(f"pearson {pearson(s, r):.3f}, mmrv(sim, real) {mmrv(s, r):.3f}, mmrv(real, sim) {mmrv(r, s):.3f}")

# %% [markdown]
# ## A family of policies
#
# Trained policies would be the natural candidates, but the suite's baselines do not solve the task yet
# (docs/baselines.md), and four zeros rank nothing. The scripted planner with different settings makes a
# family of policies of different quality and different sensitivity to the gap: how far ahead it predicts a
# moving object (`lead_time`, s) and how fast it corrects its position error (`position_gain`).

# %%
POLICIES = {
    "lead 0.0 s": {"lead_time": 0.0},
    "lead 0.12 s": {"lead_time": 0.12},
    "lead 0.3 s": {"lead_time": 0.3},
    "gain 0.25": {"position_gain": 0.25},
}
ENVS = {
    "nominal sim": ("PickSort-Ungrounded-v0", {}),
    "grounded sim": ("PickSort-WorldGrounded-v0", {}),
    "lab": ("PickSort-Real-v0", {}),
}
rates = {env: [] for env in ENVS}
for name, settings in POLICIES.items():
    for env, (env_id, kwargs) in ENVS.items():
        res = evaluate(
            env_id,
            lambda e, settings=settings: make_demonstrator(e, "scripted", **settings),
            episodes=EPISODES,
            env_kwargs={"num_objects": OBJECTS, **kwargs},
            progress=False,
        )
        rates[env].append(res.summary["success_rate"])
    print(f"{name:12s}", "  ".join(f"{env} {rates[env][-1]:.0%}" for env in ENVS))

# %%
fig, ax = plt.subplots(figsize=(4.5, 4))
for env, marker in (("nominal sim", "o"), ("grounded sim", "s")):
    p, m = pearson(rates[env], rates["lab"]), mmrv(rates[env], rates["lab"])
    label = f"{env}: Pearson {'n/a' if p is None else f'{p:.2f}'}, MMRV {m:.2f}"
    print(label)
    ax.scatter(rates[env], rates["lab"], marker=marker, label=label)
    for k, name in enumerate(POLICIES):
        ax.annotate(name, (rates[env][k], rates["lab"][k]), fontsize=6)
ax.plot([0, 1], [0, 1], "k:", lw=0.8)
ax.set_xlabel("success in sim")
ax.set_ylabel("success in the lab")
ax.set_title(f"{EPISODES} episodes per policy and env", fontsize=9)
ax.legend(fontsize=7, loc="upper left")
fig.savefig(OUT / "sim_vs_lab_ranking.png", dpi=80, bbox_inches="tight")
plt.show()

# %% [markdown]
# Read these figures with their noise in mind: with a few episodes per policy a success rate moves by tens of
# points (with 100 episodes the Wilson interval near 50% is still about +-10 points, docs/protocol.md), and a
# single swapped pair of close policies costs little MMRV but can move Pearson a lot. Validation needs enough
# episodes per policy, and policies that actually differ.
#
# A simulator can rank well without matching absolute numbers (all points below the diagonal, in order), and it
# can match an average while ranking badly: the two questions are different. World grounding (lesson 5) is meant
# to improve both; whether it does for a given set of policies is an empirical question this test answers.
#
# ## Exercise 8: the ranking lab
#
# `course-ranking` is a lab whose gap reorders policies. Evaluate the four planner settings above in the nominal
# simulator and in `course-ranking` exactly as the exercise states (the same seeds, episodes and objects as the
# checker: `evaluate(..., episodes=8, env_kwargs={"num_objects": 2, "lab": "course-ranking"})` in the lab), and
# report how well the simulator ranks them.
#
# * Answer: `{"pearson": r, "mmrv": m}` (`pearson` may be `null` when one list is constant) in `answer_8.json`;
#   check with `r2s2r course check 8 answer_8.json`.

# %%
show_exercise(8)
