"""What one excitation run is, and what the protocols' command generators share (``grounding.excitation``).

A protocol is a function ``(cmd, dt, quick) -> list[RunPlan]`` (``excitation_joint``, ``excitation_objects``,
``excitation_perception``): the runs it logs, each with its operator set-up at reset and its commands, open loop
(joint targets from :class:`JointCommands`) or closed loop (a scripted task-space policy such as
:func:`waypoint_policy`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from r2s2r_envs.envs.config import ControlConfig
from r2s2r_envs.envs.controller import finger_command
from r2s2r_envs.envs.scene import SceneView
from r2s2r_envs.world import constants as C
from r2s2r_envs.world.builder import build_model, scene_layout
from r2s2r_envs.world.params import nominal

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


# ---------------------------------------------------------------------------------------------- commands
class JointCommands:
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

    def plan(
        self,
        name: str,
        protocol: str,
        settings: dict[str, Any],
        arm_q: np.ndarray,
        hand_q: np.ndarray,
        *,
        objects: Sequence[dict[str, Any]] = (),
        belt: bool = False,
    ) -> RunPlan:
        """An open-loop joint-mode run from home: the operator places ``objects`` (and starts the belt when
        ``belt``) at reset, then the arm and fingers follow ``arm_q`` (T, 7) and ``hand_q`` (T, 16), one row a step."""
        return RunPlan(
            name=name,
            protocol=protocol,
            settings=settings,
            control_mode="joint",
            setup={"belt": belt, "objects": list(objects), "arm_qpos": list(HOME)},
            steps=len(arm_q),
            actions=self.joint_actions(arm_q, hand_q),
        )

    def still_plan(
        self,
        name: str,
        protocol: str,
        settings: dict[str, Any],
        steps: int,
        objects: Sequence[dict[str, Any]],
        *,
        belt: bool,
    ) -> RunPlan:
        """A joint-mode run of ``steps`` steps in which the robot holds home, open-handed, and only the placed
        ``objects`` (and the belt, when ``belt``) move: the sensing and perception runs."""
        return self.plan(name, protocol, settings, *self.hold(steps), objects=objects, belt=belt)


def waypoint_policy(path: np.ndarray, hand: np.ndarray) -> Callable[[gym.Env], Policy]:
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


def nominal_layout_height(category: str) -> float:
    """Centre height of an object of ``category`` resting on the belt with nominal sizes, m."""
    layout = scene_layout()
    size = layout.object_half_sizes[category]
    return layout.belt_top + float(size[0] if category == "ball" else size[2])
