"""The lab's teleoperator: a model of the person who makes ``PickSort-Real-v0``'s demonstrations.

It drives the robot through the same action interface a policy uses (20 Hz task-space displacements and finger
targets, as a teleoperation rig would send them) and sees only what the lab shows: the observation, with its noisy
and biased object positions.  It never reads the simulator: what it knows of the cell is what a person in the
room knows (the nominal layout of belt and bins, the hand's geometry, the rig's step sizes), as the scripted planner
does.  Its style comes from the lab config's ``"operator"`` section (``config.OperatorStyle``, docs/lab.md#operator).

Human motion traits, each visible in the data:

* **Reaction delay** before each reach: the hand stays put for a time drawn around ``reaction_time`` once an object
  becomes the next target.
* **Minimum-jerk reaches**: every movement follows a quintic (minimum-jerk) path re-planned each step towards a
  goal that moves with the object (Hoff and Arbib's model of interception), so speed profiles are bell-shaped.
  Durations follow Fitts' law, scaled by ``speed``.  The primary reach aims with an endpoint error (undershoot
  and scatter growing with distance and ``variability``); seeing the hand miss its aim, the operator makes a
  short **corrective sub-movement** (a second speed peak).
* **Interception with a learned lead**: object velocities are estimated by watching positions (an alpha-beta
  filter on the perceived positions, not the velocity sensor), and the hand aims where the object will be when
  the hand arrives, plus the lead the operator has learned the cell's lag needs.
* **Human grasp**: the digits reach the object together (one arriving alone would shove it away); then
  ``"wrap"`` squeezes them one after the other (index, middle, thumb, ring, about 50 ms apart) and curls the
  fingers' distal joints around the object, while ``"pinch"`` squeezes all digits at once with straight fingers.
* **Hesitations and re-grasps**: now and then the operator pauses above the object before committing, or opens
  and re-closes the hand to adjust the grip; a grasp that fails to lift the object is retried while the object is
  still within reach.
* **Variability between episodes**: a per-episode tempo and reaction scale, plus per-movement noise, all from the
  demonstrator's own random generator (``reset(seed)``); ``variability=0`` removes every random element.

**Practice** (the adaptation a person gets after a few minutes in a new cell): before its first recorded episode
the operator runs ``practice_episodes`` warm-up episodes in its own copy of the lab (fixed practice seeds, so every
worker learns the same) and learns two things from what it sees there, each against the same practice in the
nominal simulator it trained on: the cell's extra lag (how many more control steps the measured hand trails the
intended motion; half of it becomes lead and feedback delay) and the camera's offset (where a held object is
perceived relative to the hand that holds it, along the pinch axis where the closing digits centre it).
Calibrations are cached per lab, style and episode settings.  See ``practise``.

The demonstrator is registered as ``"teleoperator"`` (``r2s2r_envs.behavior.make_demonstrator``) and is the
lab's own demonstrator.  In the lab its style comes from the lab config only; in a simulated env it runs with the
default operator style (or ``OperatorStyle`` settings given to ``make_demonstrator``) and practises in a copy of
that simulator.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import gymnasium as gym
import mujoco
import numpy as np

from r2s2r_envs.envs import hand
from r2s2r_envs.envs.config import ControlConfig, replace_checked
from r2s2r_envs.envs.controller import finger_command_for_range
from r2s2r_envs.envs.demonstrators import register_demonstrator
from r2s2r_envs.envs.pick_sort import PickSortEnv
from r2s2r_envs.lab.config import OperatorStyle
from r2s2r_envs.lab.lab_env import LabEnv
from r2s2r_envs.world import constants as C
from r2s2r_envs.world.builder import SceneLayout, scene_layout

_DIGITS = ("if", "mf", "rf", "th")
# The practice episodes' seeds: fixed, so the calibration is the same in every process.
_PRACTICE_SEED = 8_675_309
_HORIZONTAL = np.array([1.0, 1.0, 0.0])


@dataclasses.dataclass(frozen=True, kw_only=True)
class Habits:
    """What any operator does, whatever the style (distances in m, times in s).  Not part of the lab config: these
    are the person's motor habits, the same in every cell; ``OperatorStyle`` holds what differs between people.

    Attributes:
        fitts_a: Fitts' law intercept of a reach's duration, s.
        fitts_b: Fitts' law slope, s per bit (index of difficulty log2(2 D / W), W = ``target_width``).
        target_width: Width of the aim zone in Fitts' law, m.
        peak_speed: Highest hand speed at ``speed`` 1, m/s (within the rig's 0.4 m/s per-axis step limit).
        carry_peak_speed: Highest hand speed while holding an object, m/s (gentler, so the grip holds).
        hover_height: TCP height above the object's centre at the end of an ``"above"`` reach.
        follow_behind: Distance upstream of the object where a ``"follow"`` reach ends (at ``hover_height``).
        follow_height: TCP height above the grasp height where a ``"follow"`` approach along the belt ends.
        grasp_offset: TCP height above the object's centre when the fingers close.
        min_grasp_height: Lowest TCP height above the belt while grasping.
        lift_height: TCP height (world z) for carrying.
        drop_height: TCP height (world z) above the bin for a ``"drop"`` release.
        place_height: TCP height above the bin's centre site (rim at 1 cm above it) for a ``"place"`` release: the
            held object's bottom stays just clear of the rim.
        descend_time: Duration of the final descent onto the object at ``speed`` 1.
        follow_time: Duration of closing in on the object along the belt at ``speed`` 1.
        close_time: Time a digit takes to close (half to reach the object, half to squeeze).
        stagger: Delay between successive digits of a wrap grasp.
        release_time: Time the hand stays open above the bin.
        correction_tolerance: Horizontal aim error that triggers a corrective sub-movement.
        descend_tolerance: Hand-to-grasp-point error (horizontal, and in height) within which the fingers close.
        feedback_gain: Fraction of the (lag-compensated) hand error corrected per step.
        rotation_gain: Fraction of the hand's yaw error corrected per step.
        filter_alpha: Position gain of the alpha-beta filter that tracks each object.
        filter_beta: Velocity gain of that filter.
        reach_limit_y: Objects further downstream than this are not attempted.
        reach_upstream_y: Objects further upstream than this are not targeted yet.
        lost_distance: Object-to-hand distance beyond which a lifted object counts as lost.
        hesitation_probability: Chance of a pause before the final approach, at ``variability`` 1.
        regrasp_probability: Chance of re-closing the hand to adjust the grip, at ``variability`` 1.
        max_regrasps: Attempts after a failed lift, per object.
        max_corrections: Corrective sub-movements per reach before the operator commits anyway.
        squeeze: Thumb flexion commanded beyond touching the object, rad (the grip force).
        clear_height: Lift above the grasp height after which the carry starts (the movements blend).
        glimpses: Last sightings of an object (control steps) from which the operator judges where it rides on
            once the hand hides it.
    """

    fitts_a: float = 0.2
    fitts_b: float = 0.12
    target_width: float = 0.02
    peak_speed: float = 0.5
    carry_peak_speed: float = 0.45
    hover_height: float = 0.07
    follow_behind: float = 0.05
    follow_height: float = 0.015
    grasp_offset: float = 0.02
    min_grasp_height: float = 0.037
    lift_height: float = 0.28
    drop_height: float = 0.22
    place_height: float = 0.08
    descend_time: float = 0.35
    follow_time: float = 0.4
    close_time: float = 0.35
    stagger: float = 0.05
    release_time: float = 0.3
    correction_tolerance: float = 0.015
    descend_tolerance: float = 0.008
    feedback_gain: float = 0.25
    rotation_gain: float = 0.5
    filter_alpha: float = 0.5
    filter_beta: float = 0.1
    reach_limit_y: float = -0.36
    reach_upstream_y: float = 0.55
    lost_distance: float = 0.07
    hesitation_probability: float = 0.4
    regrasp_probability: float = 0.2
    max_corrections: int = 2
    squeeze: float = 0.2
    clear_height: float = 0.05
    max_regrasps: int = 2
    glimpses: int = 10


@dataclasses.dataclass(frozen=True)
class Calibration:
    """What practice taught the operator about this cell.

    Attributes:
        lag_steps: Control steps by which the operator expects the measured hand to trail the intended motion:
            the feedback compares the hand with where it was meant to be that long ago, and the hand aims that far
            ahead of a moving object (the lead).
        perception_offset: Where a held object is perceived relative to the hand holding it, x and y, m (the
            camera's offset, which the operator subtracts from what it sees).
        practice_episodes: Warm-up episodes this was learned from (0: the habits of the simulator).
    """

    lag_steps: int = 2
    perception_offset: tuple[float, float] = (0.0, 0.0)
    practice_episodes: int = 0


_CALIBRATIONS: dict[tuple, Calibration] = {}


class Teleoperator:
    """The lab's operator (see the module docstring).

    Args:
        env: The env to demonstrate in (``control_mode="task"``, state observations).
        calibration: Skip practice and use this calibration (tests, or an operator who has practised already).
        **settings: ``OperatorStyle`` fields overriding the default operator in a simulator.  In the lab the
            operator comes from the lab config only (its config hash covers it; docs/lab.md#operator).

    Raises:
        ValueError: the env is in joint control mode, a setting is out of range, or settings were given in
            the lab.
        KeyError: an unknown setting; the message lists the valid ones.
    """

    name = "teleoperator"

    def __init__(self, env: gym.Env, *, calibration: Calibration | None = None, **settings: Any) -> None:
        base: Any = env.unwrapped  # a PickSort env (gym.Env declares none of the attributes read here)
        if getattr(base, "control_mode", "task") != "task":
            raise ValueError(
                f"the teleoperator drives the task-space rig: make the env with control_mode='task', "
                f"got {base.control_mode!r}"
            )
        if settings and isinstance(base, LabEnv):
            raise ValueError(
                f"the lab's operator is part of the lab config (so its config hash covers it): write the settings "
                f"{sorted(settings)} under the lab's 'operator', e.g. gym.make('PickSort-Real-v0', "
                f"lab={{'operator': {{...}}}}), instead of passing them to the teleoperator"
            )
        self.style: OperatorStyle = replace_checked(_operator_of(base), settings, "teleoperator setting")
        self.habits = Habits()
        self.control: ControlConfig = base.control
        self.dt = 1.0 / self.control.control_hz
        self.layout: SceneLayout = scene_layout()
        # The planner's postures (hand.grasp_postures' defaults) with this operator's grip force.
        self._postures = {c: hand.grasp_postures(self.layout, c, squeeze=self.habits.squeeze) for c in C.CATEGORIES}
        self._preshape = {c: self._finger_command(q[0]) for c, q in self._postures.items()}
        self._open = self._finger_command(hand.open_posture())
        if calibration is None:
            calibration = self._practise(base)
        self.calibration = calibration
        self.reset()

    @property
    def settings(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self.style), "calibration": dataclasses.asdict(self.calibration)}

    # ------------------------------------------------------------------ episode
    def reset(self, seed: int | None = None) -> None:
        v = self.style.variability
        self._rng = np.random.default_rng(seed)
        # The day's tempo and alertness: one draw per episode.
        self._tempo = float(np.exp(0.12 * v * self._rng.standard_normal()))
        self._alertness = float(np.exp(0.2 * v * self._rng.standard_normal()))
        self._t = 0
        self._phase = "idle"
        self._timer = 0.0
        self._target: int | None = None
        self._done: set[int] = set()
        self._attempts: dict[int, int] = {}
        self._x: np.ndarray | None = None  # intended TCP path: position, velocity, acceleration
        self._anchor, self._anchor_v = np.zeros(3), np.zeros(3)  # where the hand closes, and the belt's motion
        self._regrasp_pending = False
        self._v = np.zeros(3)
        self._a = np.zeros(3)
        self._history: list[np.ndarray] = []  # intended positions of the last steps (for the lag compensation)
        self._est: np.ndarray | None = None  # object position and velocity estimates
        self._last_meas: np.ndarray | None = None  # the last perceived positions (to tell a held estimate)
        self._category_votes: np.ndarray | None = None  # per object, how often each category was seen
        self._belt_pace: float | None = None  # the belt's velocity along y as seen on the objects, m/s
        self._carried_unseen = False  # whether the hand hid the object it carries when the carry began
        self._glimpses: dict[int, list[tuple[int, np.ndarray]]] = {}  # per object, its last seen (step, position)
        self._seen = np.ones(0, dtype=bool)  # which objects the estimator sees this step
        self._vel: np.ndarray | None = None
        self._yaw: float | None = None
        self._fingers = self._open.copy()
        # What practice learns from: (grasp number, category, hand, perceived object, yaw) while carrying.
        self._log: list[tuple[int, int, np.ndarray, np.ndarray, float]] = []
        self._grasps = 0

    # ------------------------------------------------------------------ policy
    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        h, cal = self.habits, self.calibration
        tcp = obs["eef_pos"].astype(float)
        meas = obs["object_pos"].reshape(-1, 3).astype(float)
        self._seen = self._visibility(obs, meas)
        self._watch(meas, tcp)
        if self._x is None:
            self._x = tcp.copy()
            self._tcp_prev = tcp
        cats = self._categories(obs)
        lead = cal.lag_steps * self.dt
        self._timer += self.dt
        self._t += 1

        if self._target is None or self._phase in ("idle", "react") and not self._attemptable(self._target):
            self._select()
        i = self._target
        goal, goal_v, tau = self._x, np.zeros(3), 0.0
        phase = self._phase
        if i is None:
            goal, tau = self._ready_point(), 1.0
        else:
            cat = C.CATEGORIES[cats[i]]
            est, vel = self._tracks
            p, v = est[i], vel[i] * _HORIZONTAL  # the belt carries objects horizontally
            grasp_dz = max(h.grasp_offset, self.layout.belt_top + h.min_grasp_height - p[2])
            if self._yaw is None:
                self._yaw = self._grasp_yaw(obs, i, cat)
            if phase in ("reach", "correct", "approach", "descend", "hesitate"):
                self._fingers = self._preshape[cat]
            if phase == "react":  # the hand holds still until the operator reacts
                if self._timer >= self._delay:
                    self._start_reach(tcp, p, v, grasp_dz)
            elif phase in ("reach", "correct", "approach", "descend", "hesitate"):
                goal, goal_v, tau = self._intercept(tcp, p, v, lead, grasp_dz)
            elif phase == "close":
                goal = self._anchor + self._anchor_v * self._timer
                goal_v, tau = self._anchor_v, self.dt
                self._fingers = self._closing(cat, self._timer)
                if self._timer >= self._close_end:
                    if self._regrasp_pending:
                        self._regrasp_pending = False
                        self._begin("adjust")
                    else:
                        self._grasp_z = float(tcp[2])
                        self._begin("lift", self.habits.lift_height - tcp[2])
            elif phase == "adjust":  # open a little and close again: adjusting the grip
                goal = self._anchor + self._anchor_v * (self._timer + self._close_end)
                goal_v, tau = self._anchor_v, self.dt
                self._fingers = self._finger_command(self._postures[cat][1])
                if self._timer >= 0.2:
                    self._anchor = goal.copy()
                    self._begin("close")
                    self._schedule_closing(0.0)
            elif phase == "lift":
                goal = np.array([self._x[0], self._x[1], h.lift_height])
                tau = max(self._duration - self._timer, 0.0)
                if self._timer > 0.3 and not self._holding(tcp, meas, i):
                    self._fail_grasp(i)
                elif tau <= 0.0 or self._timer > 0.3 and tcp[2] > self._grasp_z + h.clear_height:
                    self._begin_carry(cat)  # clear of the belt: blend into the carry
            elif phase == "carry":
                goal = self._release_point(cat)
                tau = max(self._duration - self._timer, 0.0)
                if not self._holding(tcp, meas, i):
                    if self._carried_unseen and self._attemptable(i):
                        # The hand hid the object as it lifted; now it is seen back on the belt: it never came up.
                        self._fail_grasp(i)
                    else:
                        self._done.add(i)
                        self._target = None
                        self._begin("idle")
                else:
                    if self._seen[i]:  # a hand that hides what it holds teaches nothing about the camera
                        self._log.append((self._grasps, int(cats[i]), tcp.copy(), meas[i].copy(), self._yaw))
                    # "place" brings the object down into the bin and opens once the hand is there and slow.
                    near = 0.03 if self.style.release == "drop" else 0.015
                    arrived = tau <= 0.0 and np.linalg.norm(goal - tcp) < near or self._timer > self._duration + 1.0
                    if arrived:
                        self._begin("release")
            elif phase == "release":
                goal = self._x
                self._fingers = self._open
                if self._timer >= h.release_time:
                    self._done.add(i)
                    self._target = None
                    opened = self._timer
                    self._begin("idle")
                    self._select()
                    if self._phase == "react":  # already looking for the next object while the hand opened
                        self._timer = opened
        if self._phase in ("idle", "react") and self._target is None:
            self._fingers = self._open
        self._advance(goal, goal_v, tau)
        self._tcp_prev = tcp
        return self._command(tcp, obs)

    @property
    def _path(self) -> np.ndarray:
        """The intended TCP position (from the first ``act`` on)."""
        if self._x is None:
            raise RuntimeError("the teleoperator has not acted yet: its intended path starts at the first act()")
        return self._x

    @property
    def _tracks(self) -> tuple[np.ndarray, np.ndarray]:
        """The filtered positions and velocities of the objects (from the first ``act`` on)."""
        if self._est is None or self._vel is None:
            raise RuntimeError("the teleoperator has not watched the objects yet: it starts at the first act()")
        return self._est, self._vel

    # ------------------------------------------------------------------ watching the objects
    def _visibility(self, obs: dict[str, np.ndarray], meas: np.ndarray) -> np.ndarray:
        """Which objects the cell's estimator sees this step: its ``object_visible`` key where the env reports it;
        else an estimate that repeats the last one exactly is one the estimator holds (a seen object's noisy
        estimate never repeats)."""
        if "object_visible" in obs:
            seen = np.asarray(obs["object_visible"]) > 0.5
        elif self._last_meas is None:
            seen = np.ones(len(meas), dtype=bool)
        else:
            seen = np.any(meas != self._last_meas, axis=1)
        self._last_meas = meas.copy()
        return seen

    def _categories(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """Each object's category: the colour most often seen on it so far this episode (an estimator that
        confuses a colour now and then does not fool a person watching the object)."""
        seen = obs["object_category"].reshape(-1, len(C.CATEGORIES)) * self._seen[:, None]
        self._category_votes = seen if self._category_votes is None else self._category_votes + seen
        return self._category_votes.argmax(axis=1)

    def _in_hand(self, i: int) -> bool:
        """Whether object ``i`` is the one the hand closes on or carries."""
        return i == self._target and self._phase in ("close", "adjust", "lift", "carry", "release")

    def _watch(self, meas: np.ndarray, tcp: np.ndarray) -> None:
        """Alpha-beta filter on the perceived positions (corrected by the learned camera offset).  An object the
        estimator does not see coasts on its track, or, once the hand closes on it, goes where the hand goes."""
        h = self.habits
        meas = meas.copy()
        meas[:, :2] -= self.calibration.perception_offset
        if self._est is None:
            self._est, self._vel = meas, np.zeros_like(meas)
            return
        pred = self._est + self._vel * self.dt
        r = meas - pred
        jumped = np.abs(r).max(axis=1) > 0.05  # picked up or knocked: start that object's track again
        est = pred + h.filter_alpha * r
        vel = self._vel + (h.filter_beta / self.dt) * r
        est[jumped], vel[jumped] = meas[jumped], 0.0
        # A person expects a hidden object to ride on with the belt, at the pace seen on the objects it carries.
        riding = [k for k in range(len(est)) if self._seen[k] and self._on_belt(est[k]) and not self._in_hand(k)]
        if riding:
            pace = float(np.mean(vel[riding, 1]))
            self._belt_pace = pace if self._belt_pace is None else self._belt_pace + 0.05 * (pace - self._belt_pace)
        hidden = ~self._seen
        if hidden.any():
            previous, previous_vel = self._tracks
            for k in np.flatnonzero(hidden):
                if self._in_hand(int(k)):
                    est[k], vel[k] = tcp - (0.0, 0.0, self.habits.grasp_offset), 0.0
                    continue
                on_belt = self._on_belt(previous[k])
                belt = np.array([0.0, self._belt_pace or 0.0, 0.0]) if on_belt else previous_vel[k]
                start = previous[k]
                if on_belt and self._glimpses.get(int(k)):
                    # Just lost from sight: where it rides now, from the last glimpses carried on with the belt.
                    start = np.mean([p + belt * (self._t - 1 - t) * self.dt for t, p in self._glimpses[int(k)]], axis=0)
                    self._glimpses[int(k)] = []
                est[k], vel[k] = start + belt * self.dt, belt
        for k in np.flatnonzero(self._seen):
            glimpses = self._glimpses.setdefault(int(k), [])
            glimpses.append((self._t, meas[k].copy()))
            del glimpses[: -self.habits.glimpses]
        self._est, self._vel = est, vel

    def _on_belt(self, p: np.ndarray) -> bool:
        lay = self.layout
        return abs(p[0] - lay.belt_center_x) < lay.belt_half_width and lay.belt_top < p[2] < lay.belt_top + 0.08

    def _attemptable(self, i: int) -> bool:
        p = self._tracks[0][i]
        return i not in self._done and self._on_belt(p) and p[1] > self.habits.reach_limit_y

    def _select(self) -> None:
        h = self.habits
        est = self._tracks[0]
        candidates = [i for i in range(len(est)) if self._attemptable(i) and est[i, 1] < h.reach_upstream_y]
        if self._target is not None and self._target not in candidates:
            self._target = None
        if not candidates:
            self._target = None
            if self._phase != "idle":
                self._begin("idle")
            return
        self._target = min(candidates, key=lambda k: est[k, 1])
        self._yaw = None
        self._begin("react")
        self._delay = self._reaction()

    # ------------------------------------------------------------------ movements
    def _begin(self, phase: str, distance: float = 0.0) -> None:
        self._phase, self._timer = phase, 0.0
        if phase == "lift":
            self._duration = self._movement_time(abs(distance), self.habits.carry_peak_speed)

    def _reaction(self) -> float:
        """A reaction time, s: log-normal around the style's mean (humans are right-skewed)."""
        s = self.style
        spread = 0.25 * s.variability
        z = self._rng.standard_normal() if spread > 0 else 0.0
        return s.reaction_time * self._alertness * float(np.exp(spread * z - 0.5 * spread**2))

    def _movement_time(self, distance: float, peak_speed: float) -> float:
        """Duration of a movement over ``distance`` m: Fitts' law, no faster than the peak speed allows, s."""
        h = self.habits
        fitts = h.fitts_a + h.fitts_b * math.log2(max(2.0 * distance / h.target_width, 1.0))
        minimum_jerk = 1.875 * distance / (peak_speed * self.style.speed)
        return max(fitts / self.style.speed, minimum_jerk) * self._tempo

    def _approach_offset(self, grasp_dz: float) -> np.ndarray:
        """Where a reach ends relative to the object: above it, or above the belt upstream of it."""
        h = self.habits
        if self.style.approach == "follow":
            return np.array([0.0, h.follow_behind, h.hover_height])
        return np.array([0.0, 0.0, h.hover_height])

    def _start_reach(self, tcp: np.ndarray, p: np.ndarray, v: np.ndarray, grasp_dz: float) -> None:
        h, s = self.habits, self.style
        rel = self._approach_offset(grasp_dz)
        distance = float(np.linalg.norm(p + rel - tcp))
        self._duration = self._movement_time(distance, h.peak_speed)
        self._rel = rel
        # Aim error of a fast reach: undershoot along the movement and scatter, growing with the distance.
        direction = (p + rel - tcp) / max(distance, 1e-6)
        if s.variability > 0.0:
            error = -0.04 * s.variability * distance * direction * self._rng.uniform(0.3, 1.0)
            error[:2] += 0.012 * s.variability * self._rng.standard_normal(2)
        else:
            error = -0.03 * distance * direction
        self._aim_error = error
        self._begin("reach")

    def _intercept(
        self, tcp: np.ndarray, p: np.ndarray, v: np.ndarray, lead: float, grasp_dz: float
    ) -> tuple[np.ndarray, np.ndarray, float]:
        """Goal, goal velocity and time left of the movement that brings the hand to the object."""
        h, s = self.habits, self.style
        phase = self._phase
        tau = max(self._duration - self._timer, 0.0)
        # Where the object will be when the hand gets there, plus the lead the cell's lag needs.
        goal = p + v * (tau + lead) + self._rel
        if phase == "reach":
            goal = goal + self._aim_error
        if tau > 0.0:
            return goal, v, tau
        # The movement is over: look where the hand is (once the lag has passed) and decide what comes next.
        if self._timer < self.calibration.lag_steps * self.dt:
            return goal, v, 0.0
        aim = p + v * lead + self._rel
        error = p + self._rel - tcp  # the hand trails the intended path by the lag, so it should be on the object
        if phase == "reach":
            self._corrections = 0
        off_aim = np.hypot(error[0], error[1]) > h.correction_tolerance
        if phase in ("reach", "correct", "hesitate") and off_aim and self._corrections < h.max_corrections:
            self._corrections += 1
            self._duration = 0.25 / s.speed * self._tempo
            self._begin("correct")
            return aim, v, self._duration
        if phase in ("reach", "correct") and self._rng.random() < h.hesitation_probability * s.variability:
            self._duration = self._rng.uniform(0.15, 0.4)
            self._begin("hesitate")
            return aim, v, self._duration
        if phase in ("reach", "correct", "hesitate"):
            if s.approach == "follow" and self._rel[1] > 0.0:  # close in along the belt, coming down behind it
                self._rel = np.array([0.0, 0.0, grasp_dz + h.follow_height])
                self._duration = h.follow_time / s.speed * self._tempo
                self._begin("approach")
            else:
                self._rel = np.array([0.0, 0.0, grasp_dz])
                self._duration = h.descend_time / s.speed * self._tempo
                self._begin("descend")
            return p + v * (self._duration + lead) + self._rel, v, self._duration
        if phase == "approach":
            self._rel = np.array([0.0, 0.0, grasp_dz])
            self._duration = 0.6 * h.descend_time / s.speed * self._tempo
            self._begin("descend")
            return p + v * (self._duration + lead) + self._rel, v, self._duration
        # descend finished: close the hand, riding along with the belt
        off = np.hypot(error[0], error[1]) > h.descend_tolerance or abs(error[2]) > h.descend_tolerance
        if off and self._timer < self._duration + 0.4:  # not there yet: keep tracking a moment longer
            return aim, v, 0.0
        self._anchor, self._anchor_v = self._path.copy(), v.copy()
        self._begin("close")
        self._schedule_closing(0.0)
        self._regrasp_pending = bool(self._rng.random() < h.regrasp_probability * s.variability)
        return self._anchor, v, 0.0

    def _advance(self, goal: np.ndarray, goal_v: np.ndarray, tau: float) -> None:
        """One control step along the minimum-jerk (quintic) path from the current intended state to ``goal``,
        arriving with velocity ``goal_v`` and zero acceleration after ``tau`` s (re-planned every step)."""
        dt = self.dt
        x0, v0, a0 = self._path, self._v, self._a
        if tau <= dt:
            x, v, a = goal + goal_v * dt if tau <= 0.0 else goal, goal_v.copy(), np.zeros(3)
            if tau <= 0.0:
                x = x0 + goal_v * dt + 0.5 * (goal - x0)  # hold on the (moving) goal
        else:
            d = goal - x0
            t2, t3 = tau * tau, tau * tau * tau
            c3 = (20.0 * d - (8.0 * goal_v + 12.0 * v0) * tau - 3.0 * a0 * t2) / (2.0 * t3)
            c4 = (-30.0 * d + (14.0 * goal_v + 16.0 * v0) * tau + 3.0 * a0 * t2) / (2.0 * t3 * tau)
            c5 = (12.0 * d - 6.0 * (goal_v + v0) * tau - a0 * t2) / (2.0 * t3 * t2)
            s = dt
            x = x0 + s * (v0 + s * (0.5 * a0 + s * (c3 + s * (c4 + s * c5))))
            v = v0 + s * (a0 + s * (3.0 * c3 + s * (4.0 * c4 + s * 5.0 * c5)))
            a = a0 + s * (6.0 * c3 + s * (12.0 * c4 + s * 20.0 * c5))
        self._history.append(x0)
        if len(self._history) > 8:
            del self._history[0]
        self._x, self._v, self._a = x, v, a

    # ------------------------------------------------------------------ grasp
    def _schedule_closing(self, start: float) -> None:
        """Onset of each digit's squeeze (index, middle, ring, thumb), s after the digits reach the object."""
        h, s = self.habits, self.style
        if s.grasp == "wrap":
            jitter = 1.0 + 0.2 * s.variability * self._rng.uniform(-1.0, 1.0, 4)
            onsets = start + h.stagger * np.array([0.0, 1.0, 2.0, 1.5]) * jitter
        else:
            onsets = np.full(4, start)
        self._onsets = onsets
        self._close_end = float(onsets.max() + h.close_time)

    def _closing(self, cat: str, t: float) -> np.ndarray:
        """Finger command while closing: each digit from open to touching (first half) to squeezing (second)."""
        open_q, touch_q, closed_q = self._postures[cat]
        h = self.habits
        half = 0.5 * h.close_time
        # Every digit reaches the object together (a digit arriving alone would shove it out of the hand) ...
        q = open_q + (touch_q - open_q) * min(t / half, 1.0)
        if t <= half:
            return self._finger_command(q)
        # ... then the digits squeeze in turn (a wrap) or together (a pinch), the fingers curling in a wrap.
        for k, digit in enumerate(_DIGITS):
            squeeze = min(max((t - half - self._onsets[k]) / half, 0.0), 1.0)
            if squeeze > 0.0:
                idx = _DIGIT_JOINTS[digit]
                q[idx] += (closed_q[idx] - touch_q[idx]) * squeeze
                if self.style.grasp == "wrap":
                    q[_CURL_JOINTS[digit]] += _CURL[digit] * squeeze
        return self._finger_command(q)

    def _holding(self, tcp: np.ndarray, meas: np.ndarray, i: int) -> bool:
        """Whether the hand still has object ``i``: the object is seen near it, or the hand hides it."""
        return not self._seen[i] or float(np.linalg.norm(meas[i] - tcp)) < self.habits.lost_distance

    def _fail_grasp(self, i: int) -> None:
        """The object did not come up with the hand: open, and try again while it is within reach."""
        self._attempts[i] = self._attempts.get(i, 0) + 1
        self._fingers = self._open
        if self._attempts[i] > self.habits.max_regrasps:
            self._done.add(i)
            self._target = None
            self._begin("idle")
            return
        self._begin("react")
        self._delay = 0.5 * self._reaction()

    def _begin_carry(self, cat: str) -> None:
        goal = self._release_point(cat)
        self._grasps += 1
        self._carried_unseen = not self._seen[self._target] if self._target is not None else False
        self._begin("carry")
        self._duration = self._movement_time(float(np.linalg.norm(goal - self._x)), self.habits.carry_peak_speed)

    def _release_point(self, cat: str) -> np.ndarray:
        h = self.habits
        c = self.layout.bin_centers[cat]
        return np.array([c[0], c[1], h.drop_height if self.style.release == "drop" else c[2] + h.place_height])

    def _ready_point(self) -> np.ndarray:
        return np.array([self.layout.belt_center_x - 0.05, 0.15, self.layout.belt_top + 0.2])

    def _grasp_yaw(self, obs: dict[str, np.ndarray], i: int, cat: str) -> float:
        """Yaw of the hand's pinch axis (``envs.hand.grasp_yaw``, Python's math): across a bar; for a cube or ball,
        the equivalent yaw nearest the belt direction (the belt's drag then pushes the object into a pad)."""
        return hand.grasp_yaw(obs["eef_quat"], obs["object_quat"].reshape(-1, 4)[i], cat)

    def _finger_command(self, q: np.ndarray) -> np.ndarray:
        """Finger commands for joint angles ``q`` on the rig's nominal joint limits, as the rig sends them."""
        return finger_command_for_range(self.layout.hand_joint_range, q).astype(np.float32)

    # ------------------------------------------------------------------ the rig
    def _command(self, tcp: np.ndarray, obs: dict[str, np.ndarray]) -> np.ndarray:
        """Action: the intended displacement plus a correction of the hand's error against where it was meant to
        be ``lag_steps`` ago (what the operator sees now)."""
        ctl, h = self.control, self.habits
        hist = self._history
        lag = self.calibration.lag_steps
        seen = hist[-lag] if 0 < lag <= len(hist) else self._x
        step = (self._x - hist[-1]) + h.feedback_gain * (seen - tcp)
        action = np.empty(6 + hand.N_FINGER, dtype=np.float32)
        action[:3] = np.clip(step / ctl.max_linear_step, -1.0, 1.0)
        cur = obs["eef_quat"].astype(float)
        yaw = hand.hand_yaw(cur) if self._yaw is None else self._yaw
        local, mat = np.empty(3), np.empty(9)
        mujoco.mju_subQuat(local, hand.down_quat(yaw), cur)
        mujoco.mju_quat2Mat(mat, cur)
        action[3:6] = np.clip(h.rotation_gain * (mat.reshape(3, 3) @ local) / ctl.max_angular_step, -1.0, 1.0)
        action[6:] = self._fingers
        return action

    # ------------------------------------------------------------------ practice
    def _practise(self, base: Any) -> Calibration:
        episodes = self.style.practice_episodes
        if episodes == 0:
            return Calibration()
        key = _practice_key(base, self.style)
        if key not in _CALIBRATIONS:
            reference = _practice_env(base, nominal=True)
            _CALIBRATIONS[key] = practise(_practice_env(base), self.style, episodes, reference)
        return _CALIBRATIONS[key]


def practise(env: gym.Env, style: OperatorStyle, episodes: int, reference: gym.Env | None = None) -> Calibration:
    """Warm-up: run ``episodes`` episodes in ``env`` and learn the cell's lag and camera offset from what is seen.

    The lag is the number of steps by which the measured hand best matches the intended path.  The camera offset
    shows where the hand meets objects: the closing digits centre a held object along the pinch axis (the hand's
    x axis), so along that axis the perceived object minus the hand is the camera's offset plus where that
    category sits in this hand.  The latter the operator knows from the simulator it trained on (``reference``,
    the nominal world, where perception is exact): the same practice there gives it.  Each episode uses what the
    previous ones taught.

    Args:
        env: A private copy of the cell (never the one that records demonstrations).
        style: The operator's style.
        episodes: Number of practice episodes.
        reference: The simulator of the nominal world (None: learn the lag only).

    Returns:
        The calibration.
    """
    seeds = [(int(a), int(b)) for a, b in np.random.default_rng(_PRACTICE_SEED).integers(0, 2**31, size=(episodes, 2))]
    in_hand: dict[int, float] = {}
    habit = Calibration().lag_steps
    reference_lag = habit
    if reference is not None:
        runs = [_rehearse(reference, style, Calibration(), seed) for seed in seeds]
        samples = [x for run in runs for x in run.carried]
        for cat in {c for c, _, _ in samples}:
            in_hand[cat] = float(np.mean([d for c, _, d in samples if c == cat]))
        seen = [run.lag for run in runs if run.lag is not None]
        reference_lag = int(round(float(np.median(seen)))) if seen else habit
    calibration = Calibration()
    lags: list[int] = []
    axes: list[np.ndarray] = []
    offsets: list[float] = []
    for k, seed in enumerate(seeds):
        run = _rehearse(env, style, calibration, seed)
        if run.lag is not None:
            lags.append(run.lag)
        for cat, axis, along in run.carried:
            if cat in in_hand:
                axes.append(axis)
                offsets.append(along - in_hand[cat])
        offset = _offset_estimate(np.array(axes), np.array(offsets)) if offsets else (0.0, 0.0)
        # How much more the hand trails here than in the simulator, on top of the habit that works there.  Half
        # of it becomes lead: the measured trailing includes the arm's slower response, which feedback absorbs.
        extra = float(np.median(lags)) - reference_lag if lags else 0.0
        lag = max(habit + int(round(0.5 * extra)), 0)
        calibration = Calibration(lag_steps=lag, perception_offset=offset, practice_episodes=k + 1)
    return calibration


@dataclasses.dataclass(frozen=True)
class _Rehearsal:
    """What one practice episode showed.

    Attributes:
        lag: Steps by which the measured hand trailed the intended path (None: too short to tell).
        carried: (category, pinch axis, perceived offset along it, m) of every object carried in sight (a hand
            that hides what it holds gives none: the operator then keeps its simulator habit, no offset).
    """

    lag: int | None
    carried: list[tuple[int, np.ndarray, float]]


def _rehearse(env: gym.Env, style: OperatorStyle, calibration: Calibration, seed: tuple[int, int]) -> _Rehearsal:
    """One practice episode (see ``_Rehearsal``)."""
    settings = {} if isinstance(env.unwrapped, LabEnv) else dataclasses.asdict(style)  # the lab knows its operator
    operator = Teleoperator(env, calibration=calibration, **settings)
    obs, _ = env.reset(seed=seed[0])
    operator.reset(seed=seed[1])
    intended, measured = [], []
    done = False
    while not done:
        action = operator.act(obs)
        intended.append(operator._path.copy())
        obs, _, terminated, truncated, _ = env.step(action)
        measured.append(obs["eef_pos"].astype(float))
        done = terminated or truncated
    samples = []
    for grasp in sorted({entry[0] for entry in operator._log}):  # one sample per carried object
        steps = [entry for entry in operator._log if entry[0] == grasp]
        cat, yaw = steps[0][1], steps[0][4]
        axis = np.array([math.cos(yaw), math.sin(yaw)])
        along = np.median([float(axis @ (seen[:2] - tcp[:2])) for _, _, tcp, seen, _ in steps])
        samples.append((cat, axis, float(along)))
    return _Rehearsal(_best_lag(np.array(intended), np.array(measured)), samples)


def _offset_estimate(axes: np.ndarray, along: np.ndarray, prior: float = 1.0) -> tuple[float, float]:
    """Least-squares camera offset (x, y), m, from its components ``along`` the pinch ``axes`` (one per carried
    object); ridge-regularized towards no offset with the weight of ``prior`` grasps, so a direction the grasps
    hardly probed stays near 0."""
    gram = axes.T @ axes + prior * np.eye(2)
    solution = np.linalg.solve(gram, axes.T @ along)
    return float(solution[0]), float(solution[1])


def _best_lag(intended: np.ndarray, measured: np.ndarray, longest: int = 8) -> int | None:
    """Steps by which ``measured`` trails ``intended`` best (least squared error); None for an episode too short
    to tell (under ``4 * longest`` steps)."""
    # measured[t] is observed after the action of step t, i.e. one step after intended[t] was meant.
    if len(intended) < 4 * longest:
        return None
    errors = []
    for lag in range(longest + 1):
        a, b = intended[: len(intended) - lag], measured[lag:]
        errors.append(float(np.mean(np.sum((a - b) ** 2, axis=1))))
    return int(np.argmin(errors))


def _practice_key(base: Any, style: OperatorStyle) -> tuple:
    lab = getattr(base, "_lab", None)
    cell = lab.sha256() if lab is not None else base.world_params.sha256()
    return (
        cell,
        style,
        base.num_objects,
        base.episode_steps,
        repr(base.randomization),
    )


def _practice_env(base: Any, nominal: bool = False) -> gym.Env:
    """A private copy of the cell for practice (the same lab, or simulated world, and episode settings), or with
    ``nominal`` the simulator of the nominal world the operator trained on."""
    kwargs = {
        "num_objects": base.num_objects,
        "episode_steps": base.episode_steps,
        "randomization": dataclasses.asdict(base.randomization),
    }
    if nominal:
        return PickSortEnv(world="nominal", **kwargs)
    lab = getattr(base, "_lab", None)
    if lab is not None:
        return LabEnv(lab=lab, **kwargs)
    return PickSortEnv(world=base.world_params, **kwargs)  # a simulator: the same world


def _operator_of(base: Any) -> OperatorStyle:
    """The style of the operator of the env's lab; the default operator in a simulator."""
    lab = getattr(base, "_lab", None)  # lab-internal: the operator is part of the lab it works in
    return lab.operator if lab is not None else OperatorStyle()


# ---------------------------------------------------------------------- digits (nominal hand, envs.hand)
_THUMB_JOINTS = ("cmc", "axl", "mcp", "ipl")
_FINGER_JOINTS = ("rot", "mcp", "pip", "dip")
_DIGIT_JOINTS = {
    d: np.array([hand.JOINT_INDEX[f"{d}_{j}"] for j in (_THUMB_JOINTS if d == "th" else _FINGER_JOINTS)])
    for d in _DIGITS
}
# Extra flexion of the distal joints of each digit in a wrap grasp, rad.
_CURL = {"if": 0.15, "mf": 0.15, "rf": 0.15, "th": 0.0}
_CURL_JOINTS = {d: _DIGIT_JOINTS[d][3:] if d == "th" else _DIGIT_JOINTS[d][2:] for d in _DIGITS}


register_demonstrator(Teleoperator.name, Teleoperator)
