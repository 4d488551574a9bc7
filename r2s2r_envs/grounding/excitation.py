"""Excitation protocols: what a team runs on a real cell to identify its simulator, and ``log_lab`` to run them.

Every protocol uses only what a real cell offers (docs/lab_logs.md): the command interface (task space or joint
mode), the sensors (with the opt-in ``arm_torque`` and ``finger_current``) and what a person in the room can do
at reset (``reset(options={"setup": ...})``: place objects at measured spots, stop the belt, start the arm at a
posture).  Each protocol names the ``WorldParams`` fields it exposes:

* ``sensing_rest``: robot and objects at rest on a stopped belt, objects placed at measured spots.  Exposes
  every noise level, ``object_pos_offset`` and ``object_size_scale``.
* ``belt_ride``: objects ride the running belt far upstream of the robot.  Exposes ``belt_speed``,
  ``belt_speed_fluctuation`` and ``belt_fluctuation_time``.
* ``finger_steps``: finger open/close steps and ramps at several speeds and amplitudes, free.  Exposes
  ``finger_kp``, ``finger_kv``, ``finger_force_limit`` and ``control_latency``.
* ``latency``: small alternating steps of arm and fingers at once.  Exposes ``control_latency``.
* ``arm_steps`` / ``arm_chirp``: per arm joint, steps of several amplitudes with reversals / a chirp, in joint
  mode.  Expose ``arm_damping``, ``arm_armature`` and ``arm_frictionloss``.
* ``lift``: the scripted planner picks one placed object off the stopped belt (the fingers close around it),
  lifts it and carries it to its bin; ``lift_empty`` replays the same commands with no object.  Together they
  expose ``object_mass`` per category (measured joint torques with minus without the object).
* ``push``: the hand pushes a cube that rests on a bar along the bar; ``push_empty`` replays the same commands
  with the bar alone.  Together they expose ``object_friction`` (object against object is the only contact
  where the objects' own friction decides).
* ``perception_static``: objects placed at spots spread over the stopped belt, robot at home.  Exposes the
  camera's calibration (``object_pos_offset``, ``object_pos_rotation``), ``object_quat_noise``,
  ``object_dropout`` and ``category_confusion``.
* ``perception_moving``: objects placed at measured spots on the running belt as the log starts.  Exposes
  ``perception_delay`` (the perceived track trails the true one by the belt speed times the delay) and
  ``object_pos_noise_speed``.
* ``perception_occlusion``: the open hand sweeps across the scene camera's line of sight to a placed object at
  several distances and offsets.  Exposes ``hand_occlusion_radius`` and ``object_pos_noise_occlusion``.

``log_lab`` runs every protocol on ``gym.make("PickSort-Real-v0", lab=LAB, ...)`` and writes the logs
(``grounding.logs``); the split into fitting and held-out runs is fixed by ``split_of``.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import gymnasium as gym
import numpy as np

from r2s2r_envs.envs.config import ControlConfig
from r2s2r_envs.envs.controller import finger_command, finger_command_for_range
from r2s2r_envs.envs.hand import grasp_postures, hand_yaw
from r2s2r_envs.envs.scene import SceneView
from r2s2r_envs.grounding.logs import LogRun, LogSet, write_logs
from r2s2r_envs.world import constants as C
from r2s2r_envs.world.builder import build_model, scene_layout
from r2s2r_envs.world.params import nominal

if TYPE_CHECKING:
    from r2s2r_envs.envs.pick_sort import PickSortEnv

LAB_ID = "PickSort-Real-v0"
SENSORS = ("arm_torque", "finger_current", "object_visible")
NUM_OBJECTS = 3
HOME = tuple(ControlConfig().home_arm_qpos)

Policy = Callable[[dict[str, np.ndarray], int], np.ndarray]


@dataclasses.dataclass(frozen=True)
class RunPlan:
    """One run to execute: how to make and reset the env and what to command.

    Attributes:
        name: Run name (file stem).
        protocol: Protocol name.
        settings: The protocol's settings for this run (JSON-serializable).
        control_mode: ``"task"`` or ``"joint"``.
        setup: Operator set-up at reset.
        steps: Number of commands.
        actions: (steps, A) open-loop commands, or None when ``policy`` decides from the observations.
        policy: ``(obs, t) -> action`` for closed-loop runs (the scripted planner); None for open loop.
        replay_of: Name of the run whose logged commands this run replays open loop (``*_empty`` references).
    """

    name: str
    protocol: str
    settings: dict[str, Any]
    control_mode: str
    setup: dict[str, Any]
    steps: int
    actions: np.ndarray | None = None
    policy: Callable[[gym.Env], Policy] | None = None
    replay_of: str | None = None


def split_of(index: int, count: int, offset: int = 0) -> str:
    """The fixed split of run ``index`` among ``count`` runs of one protocol: every third run (counting from
    ``offset``; the second of two) is held out, a single run is for fitting."""
    if count == 1:
        return "fit"
    if count == 2:
        return "heldout" if index == 1 else "fit"
    return "heldout" if (index + offset) % 3 == 2 else "fit"


# Per protocol, where the held-out third starts: the chirps hold out other joints than the steps, so every
# arm joint keeps a fitting run.
_SPLIT_OFFSET = {"arm_chirp": 2}


# ---------------------------------------------------------------------------------------------- commands
class _Commands:
    """Joint-mode command helpers on the nominal scene (joint limits are drawings, not physics)."""

    def __init__(self) -> None:
        self.scene = SceneView(build_model(nominal(), NUM_OBJECTS), NUM_OBJECTS)
        self.arm_lo, self.arm_hi = self.scene.arm_range[:, 0], self.scene.arm_range[:, 1]
        self.hand_lo, self.hand_hi = self.scene.hand_range[:, 0], self.scene.hand_range[:, 1]
        self.hand_open = np.clip(np.zeros(len(C.HAND_JOINTS)), self.hand_lo, self.hand_hi)

    def joint_actions(self, arm_q: np.ndarray, hand_q: np.ndarray) -> np.ndarray:
        """(T, 23) joint-mode commands for arm (T, 7) and finger (T, 16) joint targets, rad."""
        arm = 2.0 * (np.asarray(arm_q) - self.arm_lo) / (self.arm_hi - self.arm_lo) - 1.0
        hand = finger_command(self.scene, np.asarray(hand_q))
        return np.clip(np.concatenate([arm, hand], axis=1), -1.0, 1.0).astype(np.float32)

    def hold(self, steps: int, arm_q: tuple[float, ...] = HOME) -> tuple[np.ndarray, np.ndarray]:
        return np.tile(np.asarray(arm_q), (steps, 1)), np.tile(self.hand_open, (steps, 1))


def _hold_pattern(levels: list[float], hold_steps: int) -> np.ndarray:
    return np.repeat(np.asarray(levels, dtype=float), hold_steps)


def _chirp(steps: int, dt: float, f0: float, f1: float, amplitude: float) -> np.ndarray:
    t = np.arange(steps) * dt
    duration = steps * dt
    phase = 2.0 * math.pi * (f0 * t + 0.5 * (f1 - f0) / duration * t * t)
    envelope = np.minimum(1.0, np.minimum(t, duration - t) / 0.5)  # 0.5 s fade in and out
    return amplitude * envelope * np.sin(phase)


# Per arm joint: step amplitudes (rad) and chirp amplitude (rad).  Shoulder and elbow move the most mass, so
# smaller amplitudes keep the hand well above the belt.
_ARM_STEP_AMPLITUDES = ((0.1, 0.3, 0.5), (0.05, 0.15, 0.25), (0.1, 0.3, 0.5), (0.05, 0.15, 0.25)) + (
    (0.15, 0.4, 0.7),
) * 3
_ARM_CHIRP_AMPLITUDE = (0.25, 0.12, 0.25, 0.12, 0.4, 0.4, 0.4)


def _plans_arm(cmd: _Commands, dt: float, quick: bool) -> list[RunPlan]:
    plans = []
    joints = range(7)
    hold = 10 if quick else 14
    for j in joints:
        amps = _ARM_STEP_AMPLITUDES[j]
        levels = [0.0]
        for a in amps:  # steps of several amplitudes, each with a reversal through zero
            levels += [a, -a, 0.0]
        pattern = _hold_pattern(levels, hold)
        arm, hand = cmd.hold(len(pattern))
        arm[:, j] += pattern
        plans.append(
            RunPlan(
                name=f"arm_steps_j{j + 1}",
                protocol="arm_steps",
                settings={"joint": j + 1, "amplitudes_rad": list(amps), "hold_s": hold * dt},
                control_mode="joint",
                setup={"belt": False, "objects": [], "arm_qpos": list(HOME)},
                steps=len(pattern),
                actions=cmd.joint_actions(arm, hand),
            )
        )
    chirp_steps = 80 if quick else 120
    for j in joints:
        wave = _chirp(chirp_steps, dt, 0.3, 2.5, _ARM_CHIRP_AMPLITUDE[j])
        arm, hand = cmd.hold(chirp_steps)
        arm[:, j] += wave
        plans.append(
            RunPlan(
                name=f"arm_chirp_j{j + 1}",
                protocol="arm_chirp",
                settings={"joint": j + 1, "f0_hz": 0.3, "f1_hz": 2.5, "amplitude_rad": _ARM_CHIRP_AMPLITUDE[j]},
                control_mode="joint",
                setup={"belt": False, "objects": [], "arm_qpos": list(HOME)},
                steps=chirp_steps,
                actions=cmd.joint_actions(arm, hand),
            )
        )
    return plans


def _finger_close(cmd: _Commands, fraction: float) -> np.ndarray:
    return cmd.hand_open + fraction * (cmd.hand_hi - cmd.hand_open)


def _plans_fingers(cmd: _Commands, dt: float, quick: bool) -> list[RunPlan]:
    plans = []
    # (name, closing fraction of the range, ramp durations in control steps: 1 = a step)
    variants = [("large", 0.7, (1, 5, 20)), ("small", 0.25, (1, 3, 10)), ("mixed", 0.5, (1, 8, 1))]
    if quick:
        variants = variants[:2]
    for k, (label, fraction, ramps) in enumerate(variants):
        target = _finger_close(cmd, fraction)
        rows = [np.tile(cmd.hand_open, (6, 1))]
        for ramp in ramps:
            for a, b in ((cmd.hand_open, target), (target, cmd.hand_open)):
                s = np.linspace(0.0, 1.0, ramp + 1)[1:, None]
                rows.append(a + s * (b - a))
                rows.append(np.tile(b, (12, 1)))
        hand = np.concatenate(rows)
        arm = np.tile(np.asarray(HOME), (len(hand), 1))
        plans.append(
            RunPlan(
                name=f"finger_steps_{k}_{label}",
                protocol="finger_steps",
                settings={"closing_fraction": fraction, "ramp_s": [r * dt for r in ramps]},
                control_mode="joint",
                setup={"belt": False, "objects": [], "arm_qpos": list(HOME)},
                steps=len(hand),
                actions=cmd.joint_actions(arm, hand),
            )
        )
    return plans


def _plans_latency(cmd: _Commands, dt: float, quick: bool) -> list[RunPlan]:
    plans = []
    count = 2 if quick else 3
    for k in range(count):
        hold = 8 + 2 * k  # different phases relative to the control clock
        levels = [0.0] + [(-1.0) ** i for i in range(8)]
        pattern = _hold_pattern(levels, hold)
        arm, hand = cmd.hold(len(pattern))
        arm[:, 0] += 0.08 * pattern
        arm[:, 6] += 0.2 * pattern
        hand = cmd.hand_open + np.outer((pattern + 1.0) * 0.5, 0.4 * (cmd.hand_hi - cmd.hand_open))
        hand[:hold] = cmd.hand_open
        plans.append(
            RunPlan(
                name=f"latency_{k}",
                protocol="latency",
                settings={"hold_s": hold * dt, "arm_step_rad": [0.08, 0.2], "finger_fraction": 0.4},
                control_mode="joint",
                setup={"belt": False, "objects": [], "arm_qpos": list(HOME)},
                steps=len(pattern),
                actions=cmd.joint_actions(arm, hand),
            )
        )
    return plans


# Spots (x, y on the belt, m) where the operator places cube, ball and bar for the sensing runs.
_REST_SPOTS = (
    ((0.51, 0.25), (0.59, -0.05), (0.55, -0.30)),
    ((0.58, 0.30), (0.50, 0.05), (0.56, -0.25)),
    ((0.55, 0.20), (0.55, -0.10), (0.52, 0.45)),
    ((0.60, 0.35), (0.53, 0.10), (0.57, -0.35)),
    ((0.50, 0.40), (0.57, 0.15), (0.54, -0.15)),
    ((0.56, 0.28), (0.52, -0.20), (0.58, 0.05)),
)


def _plans_rest(cmd: _Commands, dt: float, quick: bool) -> list[RunPlan]:
    count, steps = (4, 70) if quick else (6, 100)
    plans = []
    for k in range(count):
        objects = [{"category": c, "position": list(_REST_SPOTS[k][i]), "yaw": 0.0} for i, c in enumerate(C.CATEGORIES)]
        arm, hand = cmd.hold(steps)
        plans.append(
            RunPlan(
                name=f"sensing_rest_{k}",
                protocol="sensing_rest",
                settings={"spots_m": [list(s) for s in _REST_SPOTS[k]]},
                control_mode="joint",
                setup={"belt": False, "objects": objects, "arm_qpos": list(HOME)},
                steps=steps,
                actions=cmd.joint_actions(arm, hand),
            )
        )
    return plans


def _plans_belt(cmd: _Commands, dt: float, quick: bool) -> list[RunPlan]:
    count, steps = (3, 240) if quick else (6, 400)
    plans = []
    for k in range(count):
        # Cubes and a bar: a ball rolls, and its centre follows changes of the belt speed only partly.
        objects: list[dict[str, Any]] = [
            {"category": c, "position": [0.55, 2.4 + 0.35 * i + 0.05 * k], "yaw": 0.0}
            for i, c in enumerate(("cube", "bar", "cube"))
        ]
        arm, hand = cmd.hold(steps)
        plans.append(
            RunPlan(
                name=f"belt_ride_{k}",
                protocol="belt_ride",
                settings={"start_y_m": [o["position"][1] for o in objects]},
                control_mode="joint",
                setup={"belt": True, "objects": objects, "arm_qpos": list(HOME)},
                steps=steps,
                actions=cmd.joint_actions(arm, hand),
            )
        )
    return plans


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


def _plans_lift(cmd: _Commands, dt: float, quick: bool) -> list[RunPlan]:
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


def _waypoint_policy(path: np.ndarray, hand: np.ndarray) -> Callable[[gym.Env], Policy]:
    """A scripted task-space path: the TCP target moves from where the TCP is at reset along ``path`` (TCP
    positions, m, one per step).  The task-space command is a displacement of the controller's target, so the
    commands are the path's increments (feed-forward, no feedback that latency could make overshoot)."""
    step = ControlConfig().max_linear_step

    def make(env: gym.Env) -> Policy:
        route = path.copy()

        def act(obs: dict[str, np.ndarray], t: int) -> np.ndarray:
            if t == 0:  # start the first leg from the measured TCP
                lead = min(25, len(route) - 1)
                start = np.asarray(obs["eef_pos"], dtype=float)
                for k in range(lead + 1):
                    route[k] = start + k / lead * (path[lead] - start)
            a = np.zeros(6 + len(hand), dtype=np.float32)
            a[:3] = np.clip((route[min(t + 1, len(route) - 1)] - route[t]) / step, -1.0, 1.0)
            a[6:] = hand
            return a

        return act

    return make


def _plans_push(cmd: _Commands, dt: float, quick: bool) -> list[RunPlan]:
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
                policy=_waypoint_policy(_push_path(x_top, by), hand),
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


# ----------------------------------------------------------------------------------------------- perception
# Static spots: three lanes across the belt (x, m) and a spread along it (y, m); category and lane rotate
# independently over runs (multiples of three), so the calibration's tilt (z error against x) and the object size
# (z error against the object's height) separate.
_LANES = (0.48, 0.55, 0.62)
PERCEPTION_REST_START = 5  # control steps after reset before placed objects count as at rest (a 1 mm drop)
# Frames of a moving run whose perceived track is fitted as a line: from when the estimator's history holds only
# frames taken since reset (delays up to 0.2 s), while the belt's fluctuation, which starts at zero, is still small.
INTERCEPT_STEPS = (5, 45)
# Where the hand crosses the scene camera's line of sight to the object: distance along the line from the
# object (m) and offset across it (m), one per sweep: the fingertips stay well above the object.
_SWEEPS = ((0.17, 0.0), (0.23, 0.025), (0.29, -0.04))
_SWEEP_HALF = 0.12  # half length of a sweep, m
_SWEEP_STEPS = 40  # control steps per sweep (0.12 m/s: the image-time hand is then within a few mm of the logged one)
_SWEEP_GAP = 15  # control steps to move between sweeps


def _plans_perception_static(cmd: _Commands, dt: float, quick: bool) -> list[RunPlan]:
    count, steps = (9, 30) if quick else (12, 50)
    plans = []
    for k in range(count):
        objects = []
        for i in range(3):
            category = C.CATEGORIES[(i + k) % 3]
            x = _LANES[(i + 2 * k) % 3]
            y = -0.45 + 0.38 * i + 0.11 * (k % 3) + 0.02 * (k // 3)
            yaw = math.pi / 2 if category == "bar" else 0.0  # a bar lies along the belt: it fits every lane
            objects.append({"category": category, "position": [x, round(y, 3)], "yaw": yaw})
        arm, hand = cmd.hold(steps)
        plans.append(
            RunPlan(
                name=f"perception_static_{k}",
                protocol="perception_static",
                settings={
                    "spots_m": [o["position"] for o in objects],
                    "rest_steps": [PERCEPTION_REST_START, steps + 1],
                },
                control_mode="joint",
                setup={"belt": False, "objects": objects, "arm_qpos": list(HOME)},
                steps=steps,
                actions=cmd.joint_actions(arm, hand),
            )
        )
    return plans


def _plans_perception_moving(cmd: _Commands, dt: float, quick: bool) -> list[RunPlan]:
    count, steps = (12, 50) if quick else (18, 60)
    plans = []
    for k in range(count):
        # Cubes and a bar (a ball rolls), ahead of the robot so they pass under the hand at home unhidden.
        objects: list[dict[str, Any]] = [
            {"category": c, "position": [_LANES[(i + k) % 3], round(0.25 + 0.2 * i + 0.02 * k, 3)], "yaw": 0.0}
            for i, c in enumerate(("cube", "bar", "cube"))
        ]
        arm, hand = cmd.hold(steps)
        plans.append(
            RunPlan(
                name=f"perception_moving_{k}",
                protocol="perception_moving",
                settings={"spots_m": [o["position"] for o in objects], "intercept_steps": list(INTERCEPT_STEPS)},
                control_mode="joint",
                setup={"belt": True, "objects": objects, "arm_qpos": list(HOME)},
                steps=steps,
                actions=cmd.joint_actions(arm, hand),
            )
        )
    return plans


def sweep_path(obj: Sequence[float], camera: Sequence[float]) -> np.ndarray:
    """TCP positions (one per control step, m) of an occlusion run: sweeps across the line of sight from
    ``camera`` to an object centred at ``obj``, horizontally and perpendicular to it, at each of ``_SWEEPS``."""
    p, c = np.asarray(obj, dtype=float), np.asarray(camera, dtype=float)
    u = (c - p) / np.linalg.norm(c - p)
    across = np.cross(u, (0.0, 0.0, 1.0))
    across /= np.linalg.norm(across)
    normal = np.cross(across, u)  # perpendicular to the line of sight and to the sweep
    points: list[tuple[int, np.ndarray]] = []
    t = 25  # the first leg comes from wherever the TCP is (``_waypoint_policy``)
    for j, (along, offset) in enumerate(_SWEEPS):
        centre = p + along * u + offset * normal
        sign = 1.0 if j % 2 == 0 else -1.0
        points.append((t, centre - sign * _SWEEP_HALF * across))
        t += _SWEEP_STEPS
        points.append((t, centre + sign * _SWEEP_HALF * across))
        t += _SWEEP_GAP
    path = np.empty((t + 1, 3))
    path[: points[0][0] + 1] = points[0][1]
    for (t0, p0), (t1, p1) in zip(points[:-1], points[1:]):
        for step in range(t0, t1 + 1):
            path[step] = p0 + (step - t0) / (t1 - t0) * (p1 - p0)
    path[points[-1][0] :] = points[-1][1]
    return path


def _plans_perception_occlusion(cmd: _Commands, dt: float, quick: bool) -> list[RunPlan]:
    from r2s2r_envs.grounding.perception_fit import scene_camera_position

    count = 3
    hand = finger_command(cmd.scene, cmd.hand_open[None])[0]
    camera = scene_camera_position()
    plans = []
    for k in range(count):
        spot = (_LANES[k % 3], round(-0.1 + 0.15 * k, 3))
        centre = (*spot, nominal_layout_height("cube"))
        path = sweep_path(centre, camera)
        plans.append(
            RunPlan(
                name=f"perception_occlusion_{k}",
                protocol="perception_occlusion",
                settings={
                    "spot_m": list(spot),
                    "camera_m": [float(v) for v in camera],
                    "sweeps_m": [list(s) for s in _SWEEPS],
                },
                control_mode="task",
                setup={
                    "belt": False,
                    "objects": [{"category": "cube", "position": list(spot)}],
                    "arm_qpos": list(HOME),
                },
                steps=len(path) - 1,
                policy=_waypoint_policy(path, hand),
            )
        )
    return plans


PROTOCOLS: dict[str, tuple[str, ...]] = {
    "sensing_rest": (
        "joint_pos_noise",
        "joint_vel_noise",
        "eef_pos_noise",
        "object_pos_noise",
        "object_vel_noise",
        "arm_torque_noise",
        "finger_current_noise",
        "object_pos_offset",
        "object_size_scale",
    ),
    "belt_ride": ("belt_speed", "belt_speed_fluctuation", "belt_fluctuation_time"),
    "finger_steps": ("finger_kp", "finger_kv", "finger_force_limit", "control_latency"),
    "latency": ("control_latency",),
    "arm_steps": ("arm_damping", "arm_armature", "arm_frictionloss"),
    "arm_chirp": ("arm_damping", "arm_armature", "arm_frictionloss"),
    "lift": ("object_mass",),
    "lift_empty": ("object_mass",),
    "push": ("object_friction",),
    "push_empty": ("object_friction",),
    "perception_static": (
        "object_pos_offset",
        "object_pos_rotation",
        "object_size_scale",
        "object_quat_noise",
        "object_dropout",
        "category_confusion",
    ),
    "perception_moving": ("perception_delay", "object_pos_noise_speed"),
    "perception_occlusion": ("hand_occlusion_radius", "object_pos_noise_occlusion"),
}

# Perception runs come last: the runs before keep their index, so their reset seeds (``run_seed``) are unchanged.
_PLANNERS = (
    _plans_rest,
    _plans_belt,
    _plans_fingers,
    _plans_latency,
    _plans_arm,
    _plans_lift,
    _plans_push,
    _plans_perception_static,
    _plans_perception_moving,
    _plans_perception_occlusion,
)


def plan_runs(*, quick: bool = False, dt: float = 0.05) -> list[RunPlan]:
    """Every run of every protocol, in logging order (references after the runs they replay)."""
    cmd = _Commands()
    return [plan for make in _PLANNERS for plan in make(cmd, dt, quick)]


#: Names of short runs in ``plan_runs(quick=True)``, one of each protocol but the finger steps and the arm chirp
#: (about 3 s to log in the nominal simulator): the small log set that the log checks' tests and
#: ``benchmarks/hardening_probes.py`` write and corrupt.
SMOKE_RUNS: tuple[str, ...] = (
    "sensing_rest_0",
    "sensing_rest_2",
    "belt_ride_0",
    "latency_0",
    "arm_steps_j1",
    "lift_cube_0",
    "lift_cube_0_empty",
    "push_0",
    "push_0_empty",
    "perception_static_0",
    "perception_moving_0",
    "perception_occlusion_0",
)


def _splits(plans: list[RunPlan]) -> dict[str, str]:
    """Fixed split per run name; a reference run shares the split of the run it replays."""
    by_protocol: dict[str, list[RunPlan]] = {}
    for p in plans:
        if p.replay_of is None:
            group = p.protocol if p.protocol != "lift" else f"lift_{p.settings['category']}"
            by_protocol.setdefault(group, []).append(p)
    split = {}
    for members in by_protocol.values():
        for i, p in enumerate(members):
            split[p.name] = split_of(i, len(members), _SPLIT_OFFSET.get(p.protocol, 0))
    for p in plans:
        if p.replay_of is not None:
            split[p.name] = split[p.replay_of]
    return split


def execute(env: gym.Env, plan: RunPlan, seed: int, actions: np.ndarray | None = None) -> dict[str, Any]:
    """Run one plan on ``env``; returns the logged arrays (actions, timestamps, obs)."""
    obs, _ = env.reset(seed=seed, options={"setup": plan.setup})
    policy = plan.policy(env) if plan.policy is not None else None
    commands = actions if actions is not None else plan.actions
    observations = {k: [v] for k, v in obs.items()}
    sent, stamps = [], [0.0]
    for t in range(plan.steps):
        a = commands[t] if policy is None else np.asarray(policy(obs, t), dtype=np.float32)
        obs, _, _, truncated, info = env.step(a)
        sent.append(np.asarray(a, dtype=np.float32))
        stamps.append(float(info["elapsed_time"]))
        for k, v in obs.items():
            observations[k].append(v)
        if info["unstable"]:
            raise RuntimeError(f"run {plan.name}: the simulation became unstable at step {t}")
    return {
        "actions": np.asarray(sent, dtype=np.float32),
        "timestamps": np.asarray(stamps, dtype=np.float64),
        "obs": {k: np.asarray(v) for k, v in observations.items()},
    }


def env_kwargs_of(plan: RunPlan) -> dict[str, Any]:
    """The env arguments (besides the lab) a plan runs with; replay uses the same."""
    return {
        "control_mode": plan.control_mode,
        "num_objects": NUM_OBJECTS,
        "sensors": list(SENSORS),
        "episode_steps": plan.steps + 1,
        "obs_mode": "state",
    }


def run_seed(seed: int, index: int) -> int:
    """Reset seed of run ``index`` of a session with base seed ``seed``."""
    return int(np.random.SeedSequence(seed, spawn_key=(index,)).generate_state(1, np.uint32)[0])


def check_protocols(protocols: Sequence[str]) -> list[str]:
    """``protocols`` as a list of names of :data:`PROTOCOLS` (one name alone is taken as a list of one).

    Raises:
        ValueError: an unknown protocol name, or none given (naming the protocols).
    """
    names = [protocols] if isinstance(protocols, str) else list(protocols)
    unknown = sorted(set(names) - set(PROTOCOLS))
    if unknown or not names:
        raise ValueError(f"unknown protocol(s) {unknown or names}; protocols (at least one): {list(PROTOCOLS)}")
    return names


def select_protocols(plans: list[RunPlan], protocols: Sequence[str] | None) -> list[RunPlan]:
    """The runs of ``plans`` whose protocol is in ``protocols`` (``None``: all), in logging order.

    Raises:
        ValueError: as :func:`check_protocols`.
    """
    if protocols is None:
        return plans
    names = check_protocols(protocols)
    return [p for p in plans if p.protocol in names]


def log_lab(
    lab: str | Path,
    out: str | Path,
    *,
    seed: int = 0,
    quick: bool = False,
    protocols: Sequence[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> LogSet:
    """Run every protocol (or those of ``protocols``) on the lab and write the logs.

    Args:
        lab: A shipped lab name or a lab JSON file (what ``PickSort-Real-v0`` takes as ``lab=``).
        out: Output directory (``manifest.json`` plus one HDF5 file per run).
        seed: Base seed of the session (run ``i`` resets with ``run_seed(seed, i)``).
        quick: Fewer and shorter runs (a reduced budget for tests and quick looks).
        protocols: Names of :data:`PROTOCOLS` to run (``None``: all); identification leaves the fields only the
            others expose at nominal, flagged.
        progress: Called with one line per run (e.g. ``print``).

    Returns:
        The written logs, as read back.

    Raises:
        ValueError: an unknown protocol name.
    """
    lab_arg = lab if isinstance(lab, str) else str(lab)
    plans = select_protocols(plan_runs(quick=quick), protocols)
    return log_env(
        lambda kwargs: gym.make(LAB_ID, lab=lab_arg, **kwargs),
        out,
        seed=seed,
        quick=quick,
        progress=progress,
        plans=plans,
    )


def log_env(
    make_env: Callable[[dict[str, Any]], gym.Env],
    out: str | Path,
    *,
    seed: int = 0,
    quick: bool = False,
    progress: Callable[[str], None] | None = None,
    plans: list[RunPlan] | None = None,
) -> LogSet:
    """Run the protocols on envs made by ``make_env(env_kwargs)`` and write the logs (``log_lab`` on the lab;
    tests log a simulated env with a known world the same way).  The lab identity comes from the env's
    ``provenance()["lab"]``; a simulated env is named ``sim:<world sha256>``."""
    plans = plan_runs(quick=quick) if plans is None else plans
    splits = _splits(plans)
    runs: list[LogRun] = []
    logged: dict[str, np.ndarray] = {}
    identity: dict[str, str] | None = None
    for i, plan in enumerate(plans):
        start = time.perf_counter()
        kwargs = env_kwargs_of(plan)
        env = make_env(kwargs)
        try:
            if identity is None:
                prov = cast("PickSortEnv", env.unwrapped).provenance()  # the lab's or a simulated PickSort env
                identity = prov.get("lab") or {"name": f"sim:{prov['world_sha256'][:12]}", "config_sha256": ""}
            s = run_seed(seed, i)
            replay = logged[plan.replay_of] if plan.replay_of else None
            record = execute(env, plan, s, replay)
        finally:
            env.close()
        logged[plan.name] = record["actions"]
        runs.append(
            LogRun(
                name=plan.name,
                protocol=plan.protocol,
                settings=plan.settings,
                split=splits[plan.name],
                seed=s,
                control_mode=plan.control_mode,
                setup=plan.setup,
                env_kwargs=kwargs,
                actions=record["actions"],
                timestamps=record["timestamps"],
                obs=record["obs"],
            )
        )
        if progress is not None:
            progress(f"{plan.name:28s} {plan.protocol:14s} {splits[plan.name]:8s} {time.perf_counter() - start:5.2f} s")
    assert identity is not None
    return write_logs(out, runs, lab_name=identity["name"], lab_config_sha256=identity["config_sha256"], seed=seed)


def nominal_layout_height(category: str) -> float:
    """Centre height of an object of ``category`` resting on the belt with nominal sizes, m."""
    layout = scene_layout()
    size = layout.object_half_sizes[category]
    return layout.belt_top + float(size[0] if category == "ball" else size[2])
