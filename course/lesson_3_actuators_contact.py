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
# # Lesson 3: actuators and contact
#
# **Goal.** See how finger strength, friction and object mass decide whether a grasp holds, what the failures
# look like, and what a cell's logs reveal about mass.
#
# A grasp is a balance: the fingers' servos squeeze (gain `finger_kp`, torque limit `finger_force_limit`),
# friction turns the squeeze into a grip (`object_friction`), and gravity and the carrying motion pull the
# object out (`object_mass`). A simulator with the spec-sheet values can be wrong on each, and the lab also has
# what no simulator parameter expresses: every real part differs a little from the next (per-object mass and
# friction variation) and its low-level arm controller is mis-tuned (it executes only part of each command).

# %%
import os

os.environ.setdefault("MUJOCO_GL", "egl")

import gymnasium as gym
import matplotlib.pyplot as plt
import numpy as np
from helpers import output_dir, show_exercise, show_video, side_by_side

import r2s2r_envs  # noqa: F401
from r2s2r_envs.behavior import make_demonstrator
from r2s2r_envs.evaluation import evaluate
from r2s2r_envs.world.params import nominal

QUICK = os.environ.get("R2S2R_COURSE_QUICK", "0") == "1"
OUT = output_dir("lesson_3")
EPISODES = 3 if QUICK else 30
NOMINAL = nominal()
print("nominal finger kp", NOMINAL.finger_kp, "| friction", NOMINAL.object_friction, "| masses", NOMINAL.object_mass)

# %% [markdown]
# ## Weak fingers, heavy objects: how the planner fails
#
# Four simulated worlds, the same planner and the same episodes. `failure_causes` counts episodes by their
# first failure: `dropped` (lost on the way), `missed`, `fell_off_belt` (knocked off), `wrong_bin`, `timeout`.
# (Object friction matters less here than you might expect: MuJoCo takes the larger friction coefficient of a
# contact pair, and the fingertips are grippier than any object, so an object's own friction decides mainly
# where it touches another object.)

# %%
WORLDS = {
    "nominal": {},
    "weak fingers": {"finger_kp": NOMINAL.finger_kp * 0.25},
    "heavy": {"object_mass": [m * 3 for m in NOMINAL.object_mass]},
    "weaker + heavier": {"finger_kp": NOMINAL.finger_kp * 0.5, "object_mass": [m * 2 for m in NOMINAL.object_mass]},
}
causes = {}
for name, world in WORLDS.items():
    res = evaluate(
        "PickSort-Ungrounded-v0", make_demonstrator, episodes=EPISODES, env_kwargs={"world": world}, progress=False
    )
    causes[name] = {"sorted": sum(r.is_success for r in res.records), **res.summary["failure_causes"]}
    print(f"{name:13s} success {res.summary['success_rate']:.0%}, sort accuracy {res.summary['sort_accuracy']:.0%}")

fig, ax = plt.subplots(figsize=(6, 3))
bottom = np.zeros(len(WORLDS))
for cause in ("sorted", "dropped", "missed", "fell_off_belt", "wrong_bin", "timeout"):
    counts = np.array([causes[w][cause] for w in WORLDS])
    ax.bar(list(WORLDS), counts, bottom=bottom, label=cause)
    bottom += counts
ax.set_ylabel("episodes")
ax.set_title(f"scripted planner, {EPISODES} episodes per world (first failure)")
ax.legend(fontsize=7, ncol=3)
fig.savefig(OUT / "failure_causes.png", dpi=80, bbox_inches="tight")
plt.show()

# %% [markdown]
# The same episode with nominal (left) and weak fingers (right):

# %%
SMALL = dict(render_mode="rgb_array", render_size=(128, 160), num_objects=1)
video, left, right = side_by_side(
    lambda: gym.make("PickSort-Ungrounded-v0", **SMALL),
    lambda: gym.make("PickSort-Ungrounded-v0", world=WORLDS["weak fingers"], **SMALL),
    make_demonstrator,
    OUT / "nominal_vs_weak_fingers.mp4",
    seed=6,  # an episode whose grasp fails with weak fingers
    max_steps=110 if QUICK else 300,
)
print("nominal:", left["object_outcomes"], "| weak fingers:", right["object_outcomes"])
show_video(video)

# %% [markdown]
# ## What the logs reveal: weighing objects with the arm
#
# A real arm like this one (a Panda) reports its joint torques; the lab offers them too
# (`sensors=("arm_torque",)`). Holding an object adds its weight to those torques. The suite's `lift` protocol
# (`r2s2r_envs.grounding.excitation`) places one object on the stopped belt, grasps it, lifts, holds and shakes
# it; `lift_empty` replays exactly the same commands with no object. The difference of the two runs' torques is
# the object's share alone: whatever the arm model gets wrong cancels.
#
# In the simulator the same difference is linear in the object's mass, so one more simulation with a heavier
# object gives the slope, and a least-squares fit gives the mass that explains the lab's difference.

# %%
from r2s2r_envs.grounding.excitation import env_kwargs_of, execute, plan_runs
from r2s2r_envs.world.builder import scene_layout

PLANS = {p.name: p for p in plan_runs(quick=True) if p.protocol in ("lift", "lift_empty")}
LIFTS = [p for name, p in PLANS.items() if p.protocol == "lift" and (name.endswith("_0") or not QUICK)]
KWARGS = env_kwargs_of(LIFTS[0])
HELD_ABOVE = scene_layout().belt_top + 0.08  # the object counts as held 8 cm above the belt, m
CATEGORIES = ("cube", "ball", "bar")


def weigh(lab: str | dict, lifts=LIFTS) -> dict[str, list[float]]:
    """Mass estimates (kg) per category from the lab's lift runs, one per run, and the torque traces of the
    first run (for the plot)."""
    lab_env = gym.make("PickSort-Real-v0", lab=lab, **KWARGS)
    sim = gym.make("PickSort-Ungrounded-v0", **KWARGS)
    estimates: dict[str, list[float]] = {c: [] for c in CATEGORIES}
    for i, plan in enumerate(lifts):
        c = CATEGORIES.index(plan.settings["category"])
        empty = PLANS[plan.settings["reference"]]
        lifted = execute(lab_env, plan, seed=i)  # closed loop: the lift's own controller
        commands = lifted["actions"]
        measured = lifted["obs"]["arm_torque"] - execute(lab_env, empty, seed=i, actions=commands)["obs"]["arm_torque"]
        held = lifted["obs"]["object_pos"][:, 2] > HELD_ABOVE
        simulated = []
        for scale in (1.0, 1.5):  # the simulator at the nominal mass and 1.5 times it
            masses = list(NOMINAL.object_mass)
            masses[c] *= scale
            sim.reset(options={"world": {"object_mass": masses}})
            with_object = execute(sim, plan, seed=i, actions=commands)
            without = execute(sim, empty, seed=i, actions=commands)
            simulated.append(with_object["obs"]["arm_torque"] - without["obs"]["arm_torque"])
            held &= with_object["obs"]["object_pos"][:, 2] > HELD_ABOVE
        start, stop = plan.settings["mass_steps"]  # lifting, holding and shaking: the arm moves
        window = np.zeros(len(held), dtype=bool)
        window[start:stop] = True
        held &= window
        m0 = NOMINAL.object_mass[c]
        slope = (simulated[1] - simulated[0])[held] / (0.5 * m0)  # N*m per kg
        target = (measured - simulated[0])[held]
        estimates[CATEGORIES[c]].append(m0 + float(np.sum(slope * target) / np.sum(slope * slope)))
        if i == 0:
            weigh.traces = (measured[:, 1], simulated[0][:, 1], held)
    return estimates


estimates = weigh("default")
for c in CATEGORIES:
    nominal_mass = NOMINAL.object_mass[CATEGORIES.index(c)]
    print(
        f"{c:5s} nominal {nominal_mass:.3f} kg, default lab {np.mean(estimates[c]):.3f} kg ({len(estimates[c])} lifts)"
    )

measured, simulated, held = weigh.traces
fig, ax = plt.subplots(figsize=(6, 3))
t = np.arange(len(measured)) * 0.05
ax.plot(t, measured, "k.", ms=3, label="lab: with minus without object")
ax.plot(t, simulated, label="sim, nominal mass")
ax.fill_between(t, measured.min(), measured.max(), where=held, alpha=0.15, label="steps used")
ax.set_xlabel("time (s)")
ax.set_ylabel("joint 2 torque difference (N*m)")
ax.legend(fontsize=7)
fig.savefig(OUT / "lift_torques.png", dpi=80, bbox_inches="tight")
plt.show()

# %% [markdown]
# This is a rough weighing: one lift per category in quick mode (four in full mode), each piece differs from
# the next, and it compares the lab with the *nominal* arm while the lab's arm differs (damping, friction, its
# mis-tuned controller). One full-mode run of this notebook gave 0.110 / 0.143 / 0.241 kg for cube / ball /
# bar. The suite's full identification (`r2s2r sysid`, lesson 5) first fits the arm from its own protocols and
# then weighs the objects in that fitted world: 0.118 / 0.128 / 0.229 kg, intervals about +-6%
# (experiments/grounding-default/README.md). Either way a category several times heavier than the
# others stands out at once.
#
# What the logs cannot show as one number: every real piece differs a little (the lab varies each object's
# mass and friction around its category's value). A simulator has one mass per category; the spread is left to
# domain randomization and real data (lessons 5 and 6).
#
# ## Exercise 3: the heavy lab
#
# In the lab `course-heavy` one object category is much heavier than in the default lab. Name it and give its
# mass within 25%.
#
# * `weigh("course-heavy")` names the category. For the mass, calibrate the weighing against a reference
#   (compare with `weigh("default")` and the figures above), or run the full identification on the lab:
#   `r2s2r sysid --lab course-heavy --quick --out heavy.json` (one to a few minutes) and read `object_mass` from the
#   grounding file's `world`.
# * Answer: `{"heavier_category": "cube" | "ball" | "bar", "mass": <kg>}` in `answer_3.json`; check with
#   `r2s2r course check 3 answer_3.json`.

# %%
show_exercise(3)
