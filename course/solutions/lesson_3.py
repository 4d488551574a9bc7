"""Exercise 3: the heavier category of course-heavy and its mass.

Lesson 3's weighing (lift minus lift_empty arm torques, matched by the simulator's difference, which is linear
in the mass) over every lift of the protocol, in course-heavy and, as a reference, in the default lab.  The
weighing's common bias (the lab's arm differs from the nominal one) is taken out with the default lab's figures
from `r2s2r sysid` (docs/grounding.md: 0.118 / 0.128 / 0.229 kg).  `r2s2r sysid --lab course-heavy --quick`
reads the masses directly, in a few minutes.
"""

import gymnasium as gym
import numpy as np
from _common import write_answer

import r2s2r_envs  # noqa: F401
from r2s2r_envs.grounding.excitation import env_kwargs_of, execute, plan_runs
from r2s2r_envs.world.builder import scene_layout
from r2s2r_envs.world.params import nominal

CATEGORIES = ("cube", "ball", "bar")
SYSID_DEFAULT = (0.118, 0.128, 0.229)  # kg, experiments/grounding-default/README.md
NOMINAL = nominal()
PLANS = {p.name: p for p in plan_runs() if p.protocol in ("lift", "lift_empty")}
LIFTS = [p for p in PLANS.values() if p.protocol == "lift"]
KWARGS = env_kwargs_of(LIFTS[0])
HELD_ABOVE = scene_layout().belt_top + 0.08


def weigh(lab: str) -> dict[str, float]:
    lab_env, sim = gym.make("PickSort-Real-v0", lab=lab, **KWARGS), gym.make("PickSort-Ungrounded-v0", **KWARGS)
    num = {c: 0.0 for c in CATEGORIES}
    den = {c: 0.0 for c in CATEGORIES}
    for i, plan in enumerate(LIFTS):
        c = CATEGORIES.index(plan.settings["category"])
        empty = PLANS[plan.settings["reference"]]
        lifted = execute(lab_env, plan, seed=i)
        commands = lifted["actions"]
        measured = lifted["obs"]["arm_torque"] - execute(lab_env, empty, seed=i, actions=commands)["obs"]["arm_torque"]
        held = lifted["obs"]["object_pos"][:, 2] > HELD_ABOVE
        simulated = []
        for scale in (1.0, 1.5):
            masses = list(NOMINAL.object_mass)
            masses[c] *= scale
            sim.reset(options={"world": {"object_mass": masses}})
            with_object = execute(sim, plan, seed=i, actions=commands)
            simulated.append(
                with_object["obs"]["arm_torque"] - execute(sim, empty, seed=i, actions=commands)["obs"]["arm_torque"]
            )
            held &= with_object["obs"]["object_pos"][:, 2] > HELD_ABOVE
        start, stop = plan.settings["mass_steps"]
        held[:start] = False
        held[stop:] = False
        slope = (simulated[1] - simulated[0])[held] / (0.5 * NOMINAL.object_mass[c])
        target = (measured - simulated[0])[held]
        num[CATEGORIES[c]] += float(np.sum(slope * target))
        den[CATEGORIES[c]] += float(np.sum(slope * slope))
    return {c: NOMINAL.object_mass[k] + num[c] / den[c] for k, c in enumerate(CATEGORIES)}


heavy, default = weigh("course-heavy"), weigh("default")
ratio = {c: heavy[c] / default[c] for c in CATEGORIES}
print("course-heavy (kg):", heavy, "\ndefault lab (kg):", default, "\nratio:", ratio)
category = max(ratio, key=ratio.get)
write_answer(
    3, {"heavier_category": category, "mass": round(ratio[category] * SYSID_DEFAULT[CATEGORIES.index(category)], 3)}
)
