"""The teleoperator's make-up (``lab.teleop``): the motor habits every operator has, what practice taught it about
the cell, and the state it keeps through an episode (``OperatorState.reset``)."""

from __future__ import annotations

import dataclasses

import numpy as np

from r2s2r_envs.envs.config import ControlConfig
from r2s2r_envs.lab.config import OperatorStyle
from r2s2r_envs.world import constants as C
from r2s2r_envs.world.builder import SceneLayout


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
    reach_limit_y: float = C.REACH_LIMIT_Y
    reach_upstream_y: float = C.REACH_UPSTREAM_Y
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


class OperatorState:
    """What the teleoperator keeps through an episode (``reset``), on what it was set up with.

    Attributes:
        style: The operator's style (``OperatorStyle``: what differs between people).
        habits: Its motor habits (``Habits``: the same in every cell).
        control: The rig's control settings (rate, step sizes).
        dt: The control period, s.
        layout: The nominal layout of the cell (belt, bins), as a person in the room knows it.
        calibration: What practice taught it about this cell.
    """

    style: OperatorStyle
    habits: Habits
    control: ControlConfig
    dt: float
    layout: SceneLayout
    calibration: Calibration
    _postures: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]  # (open, touching, squeezing) per category
    _preshape: dict[str, np.ndarray]  # finger commands of the open posture per category
    _open: np.ndarray  # finger command of the flat open hand

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
