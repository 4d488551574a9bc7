"""Scripted planner: the demonstrator that comes with the simulated PickSort variants.

It works from the state observation (so it meets the lab's latency and sensor errors like any policy), except in
a simulated world that models camera-based perception, where it acts on the objects' true state as the env's
simulator gives it (``behavior.simulator_view``: a planner that waits for a delayed estimate of an object its own
hand hides cannot grasp it).  It predicts where the next object will be from its position and velocity, moves the
open hand above the intercept point, descends while matching the belt's motion, pinches, lifts, carries the object
to the bin of its category and releases it.  Motions are straight lines in task space, executed through the env's
task-space controller with a proportional law plus belt-velocity feed-forward.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, cast

import gymnasium as gym
import mujoco
import numpy as np

from r2s2r_envs.behavior.simulator_view import demonstrator_view
from r2s2r_envs.envs import hand
from r2s2r_envs.envs.controller import finger_command_for_range
from r2s2r_envs.envs.demonstrators import register_demonstrator
from r2s2r_envs.world import constants as C
from r2s2r_envs.world.builder import SceneLayout, scene_layout
from r2s2r_envs.world.params import Bound, check_number

if TYPE_CHECKING:
    from r2s2r_envs.envs.pick_sort import PickSortEnv


@dataclasses.dataclass(frozen=True, kw_only=True)
class PlannerConfig:
    """Settings of the scripted planner (distances in m, times in s, angles in rad).

    Attributes:
        hover_height: TCP height above the object's centre while approaching.
        grasp_offset: TCP height above the object's centre when the fingers close.
        min_grasp_height: Lowest TCP height above the belt while grasping (keeps the fingertips off the belt).
        lift_height: TCP height (world z) for carrying.
        release_height: TCP height (world z) above the bin when releasing.
        align_tolerance: Horizontal TCP error below which the hand descends onto the object.
        abort_tolerance: Horizontal TCP error above which a descent is abandoned (back to approach).
        hover_tolerance: Height error within which the hover point counts as reached.
        arrive_tolerance: Distance to the release point at which the hand opens.
        lost_distance: Object-to-TCP distance while carrying beyond which the object counts as lost.
        descend_tolerance: TCP height error below which the fingers close.
        close_time: Time the fingers take to close before lifting: the first half brings every digit to
            the object at once (so none shoves it before the others arrive), the second half squeezes.
        release_time: Time the hand stays open above the bin.
        lead_time: How far ahead the object's position is predicted when tracking it.
        position_gain: Fraction of the TCP position error corrected per control step.
        carry_speed: Speed limit while holding an object, as a fraction of the controller's maximum
            (jerky carrying shakes objects out of a pinch).
        rotation_gain: Fraction of the TCP orientation error corrected per control step.
        reach_limit_y: Objects further downstream than this are not attempted.
        reach_upstream_y: Objects further upstream than this are not targeted yet (out of comfortable reach).
        preshape_margin: Flexion short of contact while approaching (the hand opens just enough).
        squeeze: Thumb flexion commanded beyond the angle at which it touches the object, so the servo
            squeezes; the three opposing fingers get the share that balances the thumb's force.
        adduction: Index/ring abduction towards the middle finger for small objects.
        bar_spread: Index/ring abduction away from the middle finger for bars (a wider support along the
            bar resists it pivoting out of the pinch).
    """

    hover_height: float = 0.07
    grasp_offset: float = 0.02
    min_grasp_height: float = 0.037
    lift_height: float = 0.28
    release_height: float = 0.22
    align_tolerance: float = 0.008
    abort_tolerance: float = 0.02
    hover_tolerance: float = 0.03
    arrive_tolerance: float = 0.02
    lost_distance: float = 0.07
    descend_tolerance: float = 0.008
    close_time: float = 0.4
    release_time: float = 0.3
    lead_time: float = 0.05
    position_gain: float = 0.6
    carry_speed: float = 0.55
    rotation_gain: float = 0.5
    reach_limit_y: float = C.REACH_LIMIT_Y
    reach_upstream_y: float = C.REACH_UPSTREAM_Y
    preshape_margin: float = hand.PRESHAPE_MARGIN
    squeeze: float = hand.SQUEEZE
    adduction: float = hand.ADDUCTION
    bar_spread: float = hand.BAR_SPREAD


_GAIN = Bound(strict=True, maximum=1.0)  # fraction per control step
_TOLERANCE = Bound(strict=True, maximum=0.3)  # m
_ANGLE = Bound(minimum=-1.6, maximum=1.6)  # rad: at most a right angle of flexion or spread
#: What each scripted planner setting accepts, in its unit (``PlannerConfig``: m, s, rad, fractions): the ranges
#: in which the planner still runs its phases in the PickSort cell (docs/grounding.md#tuning-the-demonstrator).
PLANNER_BOUNDS: dict[str, Bound] = {
    "hover_height": Bound(maximum=0.5),  # m above the object
    "grasp_offset": Bound(minimum=-0.1, maximum=0.2),  # m above the object's centre
    "min_grasp_height": Bound(maximum=0.3),  # m above the belt
    "lift_height": Bound(maximum=1.0),  # m, world z
    "release_height": Bound(maximum=1.0),  # m, world z
    "align_tolerance": _TOLERANCE,
    "abort_tolerance": _TOLERANCE,
    "hover_tolerance": _TOLERANCE,
    "arrive_tolerance": _TOLERANCE,
    "lost_distance": Bound(strict=True, maximum=0.5),  # m
    "descend_tolerance": _TOLERANCE,
    "close_time": Bound(maximum=5.0),  # s
    "release_time": Bound(maximum=5.0),  # s
    "lead_time": Bound(maximum=2.0),  # s ahead (an object crosses the reach in ~10 s)
    "position_gain": _GAIN,
    "carry_speed": _GAIN,  # fraction of the controller's maximum speed
    "rotation_gain": _GAIN,
    "reach_limit_y": Bound(minimum=-2.0, maximum=2.0),  # m, world y
    "reach_upstream_y": Bound(minimum=-2.0, maximum=2.0),  # m, world y
    "preshape_margin": _ANGLE,
    "squeeze": _ANGLE,
    "adduction": _ANGLE,
    "bar_spread": _ANGLE,
}


def check_planner_setting(owner: str, name: str, value: Any) -> float:
    """One scripted planner setting checked against ``PLANNER_BOUNDS`` (a finite number when it has no bound).

    Raises:
        TypeError / ValueError: not a number or out of range; the message names ``owner.name`` and the range.
    """
    # Every bound here is a scalar one (no length): check_number returns a float.
    return float(cast(float, check_number(owner, name, value, PLANNER_BOUNDS.get(name, Bound(minimum=None)))))


class ScriptedPlanner:
    """Planner-style demonstrator (see the module docstring).  Deterministic: ``reset(seed)`` has no effect
    on its behaviour but is part of the interface."""

    name = "scripted"

    def __init__(self, env: gym.Env, **settings: Any) -> None:
        base = cast("PickSortEnv", env.unwrapped)  # a PickSort env (gym.Env declares no control)
        self._env = base
        self.config = PlannerConfig(**settings)
        self.control = base.control
        self.dt = 1.0 / self.control.control_hz
        self.layout: SceneLayout = scene_layout()
        # Postures depend only on the category and the fixed layout: computed once, not every control step.
        self._posture_table = {c: self._postures(c) for c in (*C.CATEGORIES, None)}
        self.reset()

    @property
    def settings(self) -> dict[str, Any]:
        return dataclasses.asdict(self.config)

    def reset(self, seed: int | None = None) -> None:
        self._phase = "approach"
        self._target: int | None = None
        self._timer = 0
        self._done: set[int] = set()
        self._yaw: float | None = None
        self._anchor = np.zeros(3)
        self._belt_vel = np.zeros(3)

    # ------------------------------------------------------------------ policy
    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        obs, _ = demonstrator_view(self._env, obs)
        cfg = self.config
        tcp = obs["eef_pos"].astype(float)
        pos = obs["object_pos"].reshape(-1, 3).astype(float)
        vel = obs["object_vel"].reshape(-1, 6)[:, :3].astype(float)
        cats = obs["object_category"].reshape(-1, len(C.CATEGORIES)).argmax(axis=1)

        if self._target is None or self._phase == "approach" and not self._attemptable(self._target, pos):
            self._target = self._choose_target(pos)
            self._phase = "approach"
            self._yaw = None
        if self._target is None:
            return self._command(tcp, self._idle_point(), obs, fingers=self._posture_table[None][0], yaw=None)

        i = self._target
        cat = C.CATEGORIES[cats[i]]
        p, v = pos[i], vel[i]
        if self._yaw is None:
            self._yaw = self._grasp_yaw(obs, i, cat)
        grasp_z = max(p[2] + cfg.grasp_offset, self.layout.belt_top + cfg.min_grasp_height)
        predicted = p + v * cfg.lead_time
        open_f, touch_f, closed_f = self._posture_table[cat]

        if self._phase == "approach":
            goal = np.array([predicted[0], predicted[1], p[2] + cfg.hover_height])
            if (
                np.linalg.norm(goal[:2] - tcp[:2]) < 2.0 * cfg.align_tolerance
                and abs(goal[2] - tcp[2]) < cfg.hover_tolerance
            ):
                self._phase = "descend"
            return self._command(tcp, goal, obs, open_f, self._yaw, v)
        if self._phase == "descend":
            goal = np.array([predicted[0], predicted[1], grasp_z])
            if np.linalg.norm(goal[:2] - tcp[:2]) > cfg.abort_tolerance:
                self._phase = "approach"
            elif (
                abs(tcp[2] - grasp_z) < cfg.descend_tolerance
                and np.linalg.norm(goal[:2] - tcp[:2]) < cfg.align_tolerance
            ):
                self._phase, self._timer = "close", 0
                self._anchor, self._belt_vel = goal.copy(), v.copy()
            return self._command(tcp, goal, obs, open_f, self._yaw, v)
        if self._phase == "close":
            # Dead-reckon along the belt instead of chasing the measured object: the closing fingers push it,
            # and following that push would walk the hand (and the object) across the belt.
            self._timer += 1
            goal = self._anchor + self._belt_vel * self._timer * self.dt
            progress = self._timer * self.dt / cfg.close_time
            if progress >= 1.0:
                self._phase = "lift"
            if progress < 0.5:
                fingers = open_f + (touch_f - open_f) * (2.0 * progress)
            else:
                fingers = touch_f + (closed_f - touch_f) * min(2.0 * progress - 1.0, 1.0)
            return self._command(tcp, goal, obs, fingers, self._yaw, self._belt_vel)
        if self._phase in ("lift", "transport"):
            if np.linalg.norm(p - tcp) > cfg.lost_distance:  # lost it: open, back off, retry whatever is reachable
                self._phase, self._target = "approach", None
                return self._command(tcp, tcp + np.array([0.0, 0.0, 0.02]), obs, open_f, None)
            bin_c = self.layout.bin_centers[cat]
            if self._phase == "lift":
                goal = np.array([tcp[0], tcp[1], cfg.lift_height])
                if tcp[2] > cfg.lift_height - 0.04:
                    self._phase = "transport"
            else:
                goal = np.array([bin_c[0], bin_c[1], cfg.release_height])
                if np.linalg.norm(goal - tcp) < cfg.arrive_tolerance:
                    self._phase, self._timer = "release", 0
            return self._command(tcp, goal, obs, closed_f, self._yaw, speed=cfg.carry_speed)
        # release
        self._timer += 1
        if self._timer * self.dt >= cfg.release_time:
            self._done.add(i)
            self._target, self._phase = None, "approach"
        return self._command(tcp, tcp, obs, open_f, None)

    # ------------------------------------------------------------------ targets
    def _on_belt(self, p: np.ndarray) -> bool:
        lay = self.layout
        return abs(p[0] - lay.belt_center_x) < lay.belt_half_width and lay.belt_top < p[2] < lay.belt_top + 0.08

    def _attemptable(self, i: int, pos: np.ndarray) -> bool:
        return i not in self._done and self._on_belt(pos[i]) and pos[i, 1] > self.config.reach_limit_y

    def _choose_target(self, pos: np.ndarray) -> int | None:
        candidates = [
            i for i in range(len(pos)) if self._attemptable(i, pos) and pos[i, 1] < self.config.reach_upstream_y
        ]
        if not candidates:
            return None
        return min(candidates, key=lambda i: pos[i, 1])

    def _idle_point(self) -> np.ndarray:
        return np.array([self.layout.belt_center_x - 0.05, 0.15, self.layout.belt_top + 0.2])

    # ------------------------------------------------------------------ hand
    def _grasp_yaw(self, obs: dict[str, np.ndarray], i: int, cat: str) -> float:
        """Yaw of the hand's pinch axis (hand x) for object i (``envs.hand.grasp_yaw``, numpy's math)."""
        return hand.object_grasp_yaw(obs, i, cat, numpy_math=True)

    def _postures(self, cat: str | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Finger postures for an object category: (open, touching, squeezing) (``envs.hand.grasp_postures``
        with this planner's settings); the flat open hand for no category."""
        cfg = self.config
        if cat is None:
            flat = hand.open_posture(cfg.preshape_margin)
            return flat, flat, flat
        return hand.grasp_postures(
            self.layout,
            cat,
            margin=cfg.preshape_margin,
            squeeze=cfg.squeeze,
            adduction=cfg.adduction,
            bar_spread=cfg.bar_spread,
        )

    # ------------------------------------------------------------------ action
    def _command(
        self,
        tcp: np.ndarray,
        goal: np.ndarray,
        obs: dict[str, np.ndarray],
        fingers: np.ndarray,
        yaw: float | None,
        feedforward: np.ndarray | None = None,
        speed: float = 1.0,
    ) -> np.ndarray:
        cfg, ctl = self.config, self.control
        action = np.zeros(6 + hand.N_FINGER)
        step = cfg.position_gain * (goal - tcp)
        limit = speed * ctl.max_linear_step
        norm = np.linalg.norm(step)
        if norm > limit:
            step = step * (limit / norm)  # keep the direction: a straight line, not a per-axis clip
        if feedforward is not None:
            step = step + feedforward * self.dt
        action[:3] = np.clip(step / ctl.max_linear_step, -1.0, 1.0)

        cur = obs["eef_quat"].astype(float)
        cur_yaw = hand.hand_yaw(cur, numpy_math=True)
        desired = hand.down_quat(cur_yaw if yaw is None else yaw, numpy_math=True)
        local = np.empty(3)
        mujoco.mju_subQuat(local, desired, cur)
        rot_mat = np.empty(9)
        mujoco.mju_quat2Mat(rot_mat, cur)
        world = rot_mat.reshape(3, 3) @ local
        action[3:6] = np.clip(cfg.rotation_gain * world / ctl.max_angular_step, -1.0, 1.0)

        action[6:] = finger_command_for_range(self.layout.hand_joint_range, fingers)
        return action.astype(np.float32)


register_demonstrator(ScriptedPlanner.name, ScriptedPlanner)
