"""Reactive planner: the scripted planner with its memory replaced by what the current observation shows.

The scripted planner (:mod:`r2s2r_envs.behavior.scripted`) keeps a phase machine: which object it is after, whether
it is approaching, descending, closing, carrying or releasing, how long it has been closing.  That memory follows
its own commands, so the planner cannot label the states another controller visits: fed a policy's observation
stream, it answers from a phase the scene is not in (DAgger with it made policies worse every round).

This planner re-derives the phase and target from each observation alone, then issues the scripted planner's
command for that phase, with the same settings:

- an object counts as *held* when it is within ``lost_distance`` of the hand, the four digits are flexed at
  least ``held_closure`` of the way from the open to the touching posture of its category;
- a held object still at the grasp height is squeezed until the digits have reached the touching posture or
  stopped moving (``settle_speed``), as the scripted planner squeezes before it lifts; then it is lifted while the
  hand is over the belt and low, carried to its bin otherwise, and released within ``arrive_tolerance`` of the
  release point;
- with open fingers near an object falling off the belt above a bin, the hand waits (the release);
- otherwise the target is the most downstream attemptable object on the belt (as the scripted planner chooses);
  the hand approaches it, descends when aligned, and closes when at the grasp height, the closing progress read
  from how far the fingers are flexed.

Its actions are a function of the observations seen (its only memory is the phase it read one step earlier, for
hysteresis against sensor noise), so it labels any visited state, which is what
:func:`r2s2r_envs.policies.dagger.dagger` needs.  Its grasp lifts once the digits are on the object, a little
before the scripted planner's timed squeeze ends (no timer can be read from the scene).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from r2s2r_envs.behavior.scripted import ScriptedPlanner
from r2s2r_envs.envs import hand
from r2s2r_envs.envs.demonstrators import register_demonstrator
from r2s2r_envs.world import constants as C

#: The joints whose flexion closes a digit onto the object (the planner's grasp moves these).
_FLEX = np.array([hand.JOINT_INDEX[j] for j in ("if_mcp", "mf_mcp", "rf_mcp", "th_mcp")])


class ReactivePlanner(ScriptedPlanner):
    """Observation-driven scripted planner (see the module docstring); settings as :class:`PlannerConfig`.

    Args:
        env: the env whose controller it commands.
        held_closure: share of the way from the open to the touching finger posture above which an object near
            the hand counts as grasped.
        settle_speed: finger flexion speed (rad/s, the fastest of the four flexing joints) below which grasping
            digits count as settled on the object: a grasp at the grasp height is lifted once the digits are settled
            or at the touching posture.
        close_lead: how far (in closing progress, 0 open, 0.5 touching, 1 squeezing) the finger command leads
            the measured fingers while closing.
        **settings: :class:`~r2s2r_envs.behavior.scripted.PlannerConfig` fields.
    """

    name = "scripted-reactive"

    def __init__(
        self,
        env: gym.Env,
        *,
        held_closure: float = 0.6,
        close_lead: float = 0.25,
        settle_speed: float = 0.5,
        **settings: Any,
    ) -> None:
        super().__init__(env, **settings)
        self.held_closure = float(held_closure)
        self.close_lead = float(close_lead)
        self.settle_speed = float(settle_speed)

    @property
    def settings(self) -> dict[str, Any]:
        extra = {"held_closure": self.held_closure, "close_lead": self.close_lead, "settle_speed": self.settle_speed}
        return {**super().settings, **extra}

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self._last: tuple[int | None, str] = (None, "approach")

    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        self._infer(obs)
        action = super().act(obs)
        self._last = (self._target, self._phase)  # after the planner's own transition of this step
        return action

    # ------------------------------------------------------------------ inference
    def _closure(self, hand_q: np.ndarray, cat: str | None) -> float:
        """How far the digits are flexed, 0 at the open posture of ``cat``, 1 at the touching one."""
        open_f, touch_f, _ = self._posture_table[cat]
        span = touch_f[_FLEX] - open_f[_FLEX]
        return float(np.mean((hand_q[_FLEX] - open_f[_FLEX]) / span))

    def _over_belt(self, tcp: np.ndarray) -> bool:
        lay = self.layout
        return abs(tcp[0] - lay.belt_center_x) < lay.belt_half_width + 0.02

    def _infer(self, obs: dict[str, np.ndarray]) -> None:
        cfg, lay = self.config, self.layout
        tcp = obs["eef_pos"].astype(float)
        pos = obs["object_pos"].reshape(-1, 3).astype(float)
        vel = obs["object_vel"].reshape(-1, 6)[:, :3].astype(float)
        cats = obs["object_category"].reshape(-1, len(C.CATEGORIES)).argmax(axis=1)
        hand_q = obs["hand_qpos"].astype(float)
        self._done = set()
        near = [i for i in range(len(pos)) if np.linalg.norm(pos[i] - tcp) < cfg.lost_distance]

        # Holding something: squeeze, lift, carry or release it.
        flex_speed = float(np.abs(obs["hand_qvel"][_FLEX]).max())
        for i in sorted(near, key=lambda i: np.linalg.norm(pos[i] - tcp)):
            cat = C.CATEGORIES[cats[i]]
            closure = self._closure(hand_q, cat)
            if closure >= self.held_closure:
                grasp_z = max(pos[i, 2] + cfg.grasp_offset, lay.belt_top + cfg.min_grasp_height)
                at_grasp = tcp[2] < grasp_z + cfg.descend_tolerance and self._on_belt(pos[i])
                if at_grasp and closure < 1.0 and flex_speed >= self.settle_speed:  # the digits still closing
                    self._target, self._yaw = i, self._grasp_yaw(obs, i, cat)
                    self._start_closing(tcp, grasp_z, vel[i], closure)
                    return
                release = np.array([*lay.bin_centers[cat][:2], cfg.release_height])
                self._target, self._yaw = i, hand.hand_yaw(obs["eef_quat"], numpy_math=True)  # carry it as it is held
                if np.linalg.norm(release - tcp) < cfg.arrive_tolerance:
                    self._phase, self._timer = "release", 0
                elif self._over_belt(tcp) and tcp[2] < cfg.lift_height - 0.04:
                    self._phase = "lift"
                else:
                    self._phase = "transport"
                return
        # Just let go above a bin: wait while the object falls.
        for i in near:
            in_bin_area = np.all(np.abs(tcp[:2] - lay.bin_centers[C.CATEGORIES[cats[i]]][:2]) < lay.bin_half_size)
            if in_bin_area and not self._on_belt(pos[i]) and pos[i, 2] < tcp[2]:
                self._target, self._phase, self._timer, self._yaw = i, "release", 0, None
                return

        # Going for the next object on the belt.
        target = self._choose_target(pos)
        self._target, self._phase, self._timer = target, "approach", 0
        if target is None:
            self._yaw = None
            return
        cat = C.CATEGORIES[cats[target]]
        p, v = pos[target], vel[target]
        self._yaw = self._grasp_yaw(obs, target, cat)
        predicted = p + v * cfg.lead_time
        error = float(np.linalg.norm(predicted[:2] - tcp[:2]))
        grasp_z = max(p[2] + cfg.grasp_offset, lay.belt_top + cfg.min_grasp_height)
        hover_z = p[2] + cfg.hover_height
        closure = self._closure(hand_q, cat)
        at_grasp = tcp[2] < grasp_z + cfg.descend_tolerance
        was = self._last[1] if self._last[0] == target else "approach"
        closing = was == "close" or closure > 0.1
        if at_grasp and (error < cfg.align_tolerance or error < cfg.abort_tolerance and closing):
            self._start_closing(tcp, grasp_z, v, closure)
        elif error < 2.0 * cfg.align_tolerance and abs(hover_z - tcp[2]) < cfg.hover_tolerance:
            self._phase = "descend"
        elif error < cfg.abort_tolerance and (was in ("descend", "close") or tcp[2] < hover_z - cfg.hover_tolerance):
            self._phase = "descend"  # on the way down already

    def _start_closing(self, tcp: np.ndarray, grasp_z: float, v: np.ndarray, closure: float) -> None:
        """The planner's closing phase at the progress the fingers show: the command leads their measured progress
        by ``close_lead`` (the servos lag it), so they close at about the planner's pace; the hand dead-reckons with
        the belt from where it is, at the object's velocity when the closing began (the fingers push it once they
        touch)."""
        cfg = self.config
        progress = min(0.5 * max(closure, 0.0) + self.close_lead, 1.0)
        self._phase, self._timer = "close", int(round(progress * cfg.close_time * self.control.control_hz)) - 1
        if self._last != (self._target, "close"):
            self._belt_vel = v.copy()
        here = np.array([tcp[0], tcp[1], grasp_z])
        self._anchor = here - self._belt_vel * self._timer * self.dt


register_demonstrator(ReactivePlanner.name, ReactivePlanner)
