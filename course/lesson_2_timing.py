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
# # Lesson 2: timing and control latency
#
# **Goal.** See how a delay between a command and its execution breaks a controller tuned without it, and
# measure that delay from logs.
#
# A real cell never executes a command the instant it is sent: the network, the driver, the servo loop each
# add a little. PickSort runs at 20 Hz (one command per 50 ms); a latency of 40 ms is almost a whole control
# step. The scripted planner was tuned in the nominal simulator, which has no latency, and it chases a moving
# object: it reacts to where the hand *was*, overshoots, corrects, and grasps late.

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

QUICK = os.environ.get("R2S2R_COURSE_QUICK", "0") == "1"
OUT = output_dir("lesson_2")
EPISODES = 3 if QUICK else 30

# %% [markdown]
# ## Latency breaks a sim-tuned controller
#
# Simulated worlds take any `WorldParams` field, so we can give the simulator a latency
# (`gym.make("PickSort-Ungrounded-v0", world={"control_latency": 0.08})`) and watch the planner degrade.

# %%
LATENCIES = [0.0, 0.04, 0.08, 0.12]
rates, accuracy = [], []
for latency in LATENCIES:
    res = evaluate(
        "PickSort-Ungrounded-v0",
        make_demonstrator,
        episodes=EPISODES,
        env_kwargs={"world": {"control_latency": latency}},
        progress=False,
    )
    rates.append(res.summary["success_rate"])
    accuracy.append(res.summary["sort_accuracy"])
    failures = {k: v for k, v in res.summary["failure_causes"].items() if v}
    print(f"latency {latency * 1000:4.0f} ms: success {rates[-1]:.0%}, sort accuracy {accuracy[-1]:.0%}, {failures}")

fig, ax = plt.subplots(figsize=(4.5, 3))
ax.plot(np.array(LATENCIES) * 1000, rates, "o-", label="success (all objects sorted)")
ax.plot(np.array(LATENCIES) * 1000, accuracy, "s--", label="sort accuracy")
ax.set_xlabel("control latency (ms)")
ax.set_ylim(0, 1.05)
ax.set_title(f"scripted planner in sim, {EPISODES} episodes each")
ax.legend(fontsize=8)
fig.savefig(OUT / "latency_sweep.png", dpi=80, bbox_inches="tight")
plt.show()

# %% [markdown]
# The same episode without latency (left) and with 120 ms (right): watch the hand hunt for the object.

# %%
SMALL = dict(render_mode="rgb_array", render_size=(128, 160), num_objects=1)
video, left, right = side_by_side(
    lambda: gym.make("PickSort-Ungrounded-v0", **SMALL),
    lambda: gym.make("PickSort-Ungrounded-v0", world={"control_latency": 0.12}, **SMALL),
    make_demonstrator,
    OUT / "latency_0_vs_120ms.mp4",
    seed=2,
    max_steps=120 if QUICK else 300,
)
print("no latency:", left["object_outcomes"], "| 120 ms:", right["object_outcomes"])
show_video(video)

# %% [markdown]
# ## Measuring latency from logs
#
# Latency shows in *when* a joint starts to move after a command. We need a joint whose command reaches its
# servo unaltered: the fingers (the lab's arm has a mis-tuned low-level controller, a lesson-3 effect that
# would blur the picture). The suite's excitation protocols include one made for this, `latency`: with the arm
# held still in joint mode (`control_mode="joint"`), the fingers step open and closed at several phases of the
# control clock. `r2s2r_envs.grounding.excitation` lists its runs (`plan_runs`) and `execute` runs one on any
# env, simulator or lab, with the same commands and operator set-up.
#
# The recipe, a tiny system identification by hand: run the protocol on the lab, then in the simulator for a
# grid of candidate latencies (and finger servo gains, which also shape the response), and keep the candidate
# whose finger angles match the lab's best.

# %%
from r2s2r_envs.grounding.excitation import env_kwargs_of, execute, plan_runs

PLANS = [p for p in plan_runs(quick=True) if p.protocol == "latency"][: 1 if QUICK else 2]
KWARGS = env_kwargs_of(PLANS[0])


def finger_logs(env: gym.Env, world: dict | None = None) -> list[np.ndarray]:
    """Finger angles (T + 1, 16) of every latency run, in the given (simulated) world."""
    logs = []
    for i, plan in enumerate(PLANS):
        if world is not None:
            env.reset(options={"world": world})  # a new world without rebuilding the env
        logs.append(execute(env, plan, seed=i)["obs"]["hand_qpos"])
    return logs


def fit_latency(lab: str | dict, grid_ms: np.ndarray, gains: list[float]) -> tuple[float, float, np.ndarray]:
    """Best (latency s, finger kp) on the grid, refined to 2.5 ms; and the cost over the coarse grid."""
    measured = finger_logs(gym.make("PickSort-Real-v0", lab=lab, **KWARGS))
    sim = gym.make("PickSort-Ungrounded-v0", **KWARGS)

    def cost(latency: float, kp: float) -> float:
        predicted = finger_logs(sim, {"control_latency": latency, "finger_kp": kp})
        return float(sum(np.sum((p - m) ** 2) for p, m in zip(predicted, measured)))

    table = np.array([[cost(ms / 1000, kp) for kp in gains] for ms in grid_ms])
    i, j = np.unravel_index(table.argmin(), table.shape)
    fine = np.arange(grid_ms[i] - 7.5, grid_ms[i] + 7.6, 2.5).clip(0)
    best = min(fine, key=lambda ms: cost(ms / 1000, gains[j]))
    return best / 1000, gains[j], table


GRID_MS = np.arange(0, 151, 10)
GAINS = [2.0, 3.0, 4.0, 6.0]
latency, kp, table = fit_latency("default", GRID_MS, GAINS)
print(f"default lab: control latency {latency * 1000:.1f} ms (finger kp {kp} N*m/rad)")

fig, ax = plt.subplots(figsize=(4.5, 3))
for j, g in enumerate(GAINS):
    ax.semilogy(GRID_MS, table[:, j], label=f"finger kp {g}")
ax.set_xlabel("candidate latency (ms)")
ax.set_ylabel("squared error, rad$^2$")
ax.legend(fontsize=8)
ax.set_title("sim vs lab finger angles")
fig.savefig(OUT / "latency_fit.png", dpi=80, bbox_inches="tight")
plt.show()

# %% [markdown]
# The cost has one clear minimum. The suite's full identification (`r2s2r sysid`, lesson 5) fits latency and
# finger gains together with `mujoco.sysid` and finds 41 ms (95% interval 39-43 ms) for the default lab
# (docs/measured.md); the grid above, with 2.5 ms steps, lands within a few milliseconds of that.
#
# Let us look at what it matched: the lab's fingers against the simulator with and without the fitted latency.

# %%
lab_q = finger_logs(gym.make("PickSort-Real-v0", **KWARGS))[0]
sim_env = gym.make("PickSort-Ungrounded-v0", **KWARGS)
no_latency = finger_logs(sim_env, {"control_latency": 0.0, "finger_kp": kp})[0]
fitted = finger_logs(sim_env, {"control_latency": latency, "finger_kp": kp})[0]
t = np.arange(len(lab_q)) * 0.05
fig, ax = plt.subplots(figsize=(6, 3))
ax.plot(t, lab_q[:, 1], "k.", ms=4, label="lab (measured)")
ax.plot(t, no_latency[:, 1], label="sim, no latency")
ax.plot(t, fitted[:, 1], label=f"sim, {latency * 1000:.0f} ms")
ax.set_xlim(0, 2.5)
ax.set_xlabel("time (s)")
ax.set_ylabel("finger joint angle (rad)")
ax.legend(fontsize=8)
fig.savefig(OUT / "latency_traces.png", dpi=80, bbox_inches="tight")
plt.show()

# %% [markdown]
# ## What to do about it
#
# Once measured, latency is a world parameter like any other: give it to the simulator
# (`world={"control_latency": ...}`, or a grounding file, lesson 5) so that policies are trained with it, and
# prefer policies that look at a short history of observations (frame stacks), which can compensate online.
#
# ## Exercise 2: the latency lab
#
# The lab `course-latency` has a longer control latency than the default lab. Measure it within 10 ms.
#
# * `fit_latency("course-latency", GRID_MS, GAINS)` is a good start; check the minimum is not at the edge of
#   the grid.
# * Answer: `{"control_latency": <s>}` in `answer_2.json`; check with `r2s2r course check 2 answer_2.json`.

# %%
show_exercise(2)
