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

The class is built in layers, one module each: ``teleop_state`` (``Habits``, ``Calibration`` and the state of an
episode), ``teleop_perception`` (watching the objects), ``teleop_motion`` (movements, grasp and the rig's
commands); this module holds the decisions (``act``), practice and the registration.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import gymnasium as gym
import numpy as np

from r2s2r_envs.envs import hand
from r2s2r_envs.envs.config import ControlConfig, replace_checked
from r2s2r_envs.envs.demonstrators import register_demonstrator
from r2s2r_envs.envs.pick_sort import PickSortEnv
from r2s2r_envs.lab.config import OperatorStyle
from r2s2r_envs.lab.lab_env import LabEnv
from r2s2r_envs.lab.teleop_motion import Motion
from r2s2r_envs.lab.teleop_state import Calibration, Habits
from r2s2r_envs.world import constants as C
from r2s2r_envs.world.builder import SceneLayout, scene_layout

# The practice episodes' seeds: fixed, so the calibration is the same in every process.
_PRACTICE_SEED = 8_675_309
_HORIZONTAL = np.array([1.0, 1.0, 0.0])

_CALIBRATIONS: dict[tuple, Calibration] = {}


class Teleoperator(Motion):
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
                self._yaw = hand.object_grasp_yaw(obs, i, cat)  # Python's math (envs.hand)
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


register_demonstrator(Teleoperator.name, Teleoperator)


__all__ = ["Calibration", "Habits", "Teleoperator", "practise"]
