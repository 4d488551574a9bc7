"""The protocols that handle objects (``grounding.excitation``): ``lift`` and ``push``, scripted task-space
runs, each with its ``*_empty`` reference that replays the same commands without the object."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from r2s2r_envs.envs.config import ControlConfig
from r2s2r_envs.envs.controller import finger_command, finger_command_for_range
from r2s2r_envs.envs.hand import grasp_postures, hand_yaw
from r2s2r_envs.grounding.excitation_plan import HOME, JointCommands, Policy, RunPlan, waypoint_policy
from r2s2r_envs.world import constants as C
from r2s2r_envs.world.builder import scene_layout

# Where the operator puts the object for a lift (on the stopped belt, under the robot's reach), m.
LIFT_SPOT = (0.55, 0.05)


# Lift test timing (control steps): reach and turn the hand, descend, close, lift, hold, shake, put back, open.
_LIFT_PHASES = {
    "hover": 30,
    "descend": 50,
    "close": 54,
    "closed": 74,
    "lift": 80,
    "hold": 110,
    "shake": 130,
    "put_back": 210,
    "open": 240,
    "end": 260,
}
LIFT_HEIGHT = 0.28  # TCP height while holding, m
SHAKE_AMPLITUDE = 0.03  # vertical shake while holding, m (0.5 Hz: gentle enough for the grip)


def _lift_policy(category: str, spot: tuple[float, float]) -> Callable[[gym.Env], Policy]:
    """A scripted pick of a resting object, feed-forward in task space (no feedback latency could upset).

    The finger postures are the scripted planner's for the category (``envs.hand.grasp_postures`` with its default
    settings: from the hand geometry and the object's nominal size); the hand turns so its pinch axis runs along
    the belt, as the planner's does."""
    layout = scene_layout()
    size = layout.object_half_sizes[category]
    centre = layout.belt_top + float(size[0] if category == "ball" else size[2])
    grasp_z = max(centre + 0.02, layout.belt_top + 0.037)
    ph = _LIFT_PHASES
    step = ControlConfig().max_linear_step
    turn_step = ControlConfig().max_angular_step

    def make(env: gym.Env) -> Policy:
        open_f, touch_f, closed_f = grasp_postures(layout, category)
        to_cmd = lambda q: finger_command_for_range(layout.hand_joint_range, q)  # noqa: E731
        state: dict[str, Any] = {}

        def tcp_target(t: int) -> np.ndarray:
            start, hover = state["start"], np.array([spot[0], spot[1], centre + 0.07])
            grasp, up = np.array([spot[0], spot[1], grasp_z]), np.array([spot[0], spot[1], LIFT_HEIGHT])
            lerp = lambda a, b, t0, t1: a + (b - a) * min(max((t - t0) / (t1 - t0), 0.0), 1.0)  # noqa: E731
            if t <= ph["hover"]:
                return lerp(start, hover, 0, ph["hover"])
            if t <= ph["descend"]:
                return lerp(hover, grasp, ph["hover"], ph["descend"])
            if t <= ph["lift"]:
                return grasp
            if t <= ph["hold"]:
                return lerp(grasp, up, ph["lift"], ph["hold"])
            if t <= ph["put_back"] - 40:
                if t <= ph["shake"]:
                    return up
                phase = 2.0 * math.pi * 0.5 * (t - ph["shake"]) * 0.05
                return up + np.array([0.0, 0.0, SHAKE_AMPLITUDE * math.sin(phase)])
            if t <= ph["put_back"]:
                return lerp(up, grasp + np.array([0.0, 0.0, 0.003]), ph["put_back"] - 40, ph["put_back"])
            if t <= ph["open"]:
                return grasp + np.array([0.0, 0.0, 0.003])
            return lerp(grasp, hover, ph["open"], ph["end"])

        def fingers(t: int) -> np.ndarray:
            if t < ph["close"]:
                return open_f
            if t < ph["closed"]:
                k = (t - ph["close"]) / (ph["closed"] - ph["close"])
                return open_f + (touch_f - open_f) * min(2 * k, 1.0) + (closed_f - touch_f) * max(2 * k - 1, 0.0)
            if t < ph["open"] - 20:
                return closed_f
            return open_f

        def act(obs: dict[str, np.ndarray], t: int) -> np.ndarray:
            if t == 0:
                state["start"] = np.asarray(obs["eef_pos"], dtype=float)
                yaw = hand_yaw(obs["eef_quat"], numpy_math=True)  # as the planner reads it
                target = math.pi / 2 + math.pi * round((yaw - math.pi / 2) / math.pi)  # along the belt, nearest
                state["turn"] = (target - yaw) / ph["hover"]
            a = np.zeros(6 + len(open_f), dtype=np.float32)
            a[:3] = np.clip((tcp_target(t + 1) - tcp_target(t)) / step, -1.0, 1.0)
            if t < ph["hover"]:
                a[5] = state["turn"] / turn_step  # about the world's vertical
            a[6:] = to_cmd(fingers(t))
            return a

        return act

    return make


def plans_lift(cmd: JointCommands, dt: float, quick: bool) -> list[RunPlan]:
    per_category = 4 if quick else 5  # pieces differ: the category's mean needs several
    steps = _LIFT_PHASES["end"]
    plans = []
    for c in C.CATEGORIES:
        for k in range(per_category):
            x, y = LIFT_SPOT
            spot = (x + 0.01 * (k - 1), y + 0.04 * (k - 1))
            name = f"lift_{c}_{k}"
            plans.append(
                RunPlan(
                    name=name,
                    protocol="lift",
                    settings={
                        "category": c,
                        "spot_m": list(spot),
                        "reference": f"{name}_empty",
                        "index": k,
                        "mass_steps": [_LIFT_PHASES["lift"], _LIFT_PHASES["put_back"] - 40],
                    },
                    control_mode="task",
                    setup={"belt": False, "objects": [{"category": c, "position": list(spot)}], "arm_qpos": list(HOME)},
                    steps=steps,
                    policy=_lift_policy(c, spot),
                )
            )
            plans.append(
                RunPlan(
                    name=f"{name}_empty",
                    protocol="lift_empty",
                    settings={"category": c, "replays": name, "index": k},
                    control_mode="task",
                    setup={"belt": False, "objects": [], "arm_qpos": list(HOME)},
                    steps=steps,
                    replay_of=name,
                )
            )
    return plans


# Push test: a bar lies on the stopped belt along x, a second bar rests on it; the open hand pushes the top bar
# along the bottom one.  Bar on bar is a contact where the objects' own friction decides (against the belt and
# the hand, MuJoCo's contact takes the larger coefficient: theirs), and a bar pushed low along its length slides
# without tipping.
PUSH_SPOT = (0.56, 0.05)  # bottom bar centre (x, y), m
PUSH_HEIGHT = 0.18  # TCP height while pushing, m: the fingertips clear the bottom bar and meet the top one
PUSH_STEPS = 130


def _push_path(x_top: float, y: float) -> np.ndarray:
    """(PUSH_STEPS + 1, 3) TCP targets, m: above and behind the top bar, down, a slow 8 cm push, up."""
    x0 = x_top - 0.125
    points = [
        (0, (x0, y, 0.26)),
        (25, (x0, y, PUSH_HEIGHT)),
        (35, (x0, y, PUSH_HEIGHT)),
        (95, (x0 + 0.08, y, PUSH_HEIGHT)),
        (100, (x0 + 0.08, y, PUSH_HEIGHT)),
        (120, (x0 + 0.06, y, 0.26)),
    ]
    path = np.tile(np.asarray(points[-1][1], dtype=float), (PUSH_STEPS + 1, 1))
    for (t0, p0), (t1, p1) in zip(points[:-1], points[1:]):
        for t in range(t0, t1 + 1):
            path[t] = np.asarray(p0) + (t - t0) / (t1 - t0) * (np.asarray(p1) - np.asarray(p0))
    return path


def plans_push(cmd: JointCommands, dt: float, quick: bool) -> list[RunPlan]:
    count = 4 if quick else 5
    top = scene_layout().belt_top
    bar_height = 2.0 * float(scene_layout().object_half_sizes["bar"][2])  # nominal, as the operator measures
    hand = finger_command(cmd.scene, cmd.hand_open[None])[0]
    plans = []
    for k in range(count):
        bx, by = PUSH_SPOT[0], PUSH_SPOT[1] + 0.04 * (k - 1)
        x_top = bx - 0.02
        bottom = {"category": "bar", "position": [bx, by]}
        upper = {"category": "bar", "position": [x_top, by, top + bar_height + bar_height / 2 + 0.003]}
        name = f"push_{k}"
        settings = {
            "bottom_m": bottom["position"],
            "top_m": upper["position"],
            "push_steps": [40, 95],
            "rest_steps": [5, 30],  # the bars rest untouched while the hand comes
        }
        plans.append(
            RunPlan(
                name=name,
                protocol="push",
                settings={**settings, "reference": f"{name}_empty"},
                control_mode="task",
                setup={"belt": False, "objects": [bottom, upper], "arm_qpos": list(HOME)},
                steps=PUSH_STEPS,
                policy=waypoint_policy(_push_path(x_top, by), hand),
            )
        )
        plans.append(
            RunPlan(
                name=f"{name}_empty",
                protocol="push_empty",
                settings={**settings, "replays": name},
                control_mode="task",
                setup={"belt": False, "objects": [bottom], "arm_qpos": list(HOME)},
                steps=PUSH_STEPS,
                replay_of=name,
            )
        )
    return plans
