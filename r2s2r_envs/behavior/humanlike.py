"""The human-like generator: a demonstrator for any simulated world that moves the way the real operator did, closed
loop, with the tracking and lead that world needs.

Design: object-centric segments of the real demonstrations (MimicGen's idea, extended to a conveyor;
docs/behavior.md#generator), *tracked* in the moving object's frame. A fitted model (``behavior.fit``) holds
segmented grasps of real demonstrations: the operator's strategy (when the reach starts after an object's arrival,
the approach path, the grasp's finger commands and their staggering, the transport and the release) as the
operator's hand carried it out. For each new object the generator picks a source grasp of the same category (of the
4 whose object was nearest where this one is when their approach began, the 2 whose path starts nearest the hand,
one at random) and carries it out:

1. **Approach**: every waypoint is a blend of where the source hand was in the world and where it was relative
   to its object, weighted by the source hand's distance to the object (far: world frame, so a resting hand
   stays still; near: the moving object's frame, so each waypoint lands where the object is *now*). The start
   mismatch with the source fades out with a minimum-jerk profile. **Retiming for the belt**: the source's pause
   is stretched or cut so the reach starts as long after this object's arrival as the source's did after its
   own (the operator's reaction); it is cut at once when the object is already where the source's was when its
   reach began, or would otherwise leave the reach (then the replay's pace doubles), and the retreat before it
   runs at double pace while the object is further along the belt than the source's was.
2. **Closure**: the source's finger commands, step by step, while the hand dead-reckons along with the belt
   (the closing fingers push the object; chasing that push would walk the hand across the belt).
3. **Transport and release**: the source's world path to the bin (bins do not move) and its finger commands,
   so the release happens where and how the operator released. An object that slips from under the closing hand
   or out of it on the way is grasped again at once (a re-grasp skips the retreat and the pause).

**Closed loop.** Each step the command is the scripted planner's control law applied to the operator's path: a
share (``tracking_gain``) of the error between the waypoint and the *measured* hand, plus the path's own motion
over the next step taken ``lead`` steps ahead (the world's latency in control steps, plus one for the servos'
lag). The task-space controller integrates the commands into its target, so a steady lag is worked off: the hand
is where the operator's was when the operator's was there, whatever the world's latency and arm, as a person
leads a slow arm until the hand is where they want it. (Generator v1 put the controller's target on the path:
the hand trailed it by each world's own lag; in the identified world it solved 46% of episodes, in the lab 28%.)
What the generator knows of its world (:class:`WorldKnowledge`) comes from the env's grounding file when it has
one (the identified latency and perception offset, the planner's gain as tuned there), from the nominal model
otherwise, or is given; never from the lab. Perceived object positions are corrected by the known perception
offset before the operator's hand-to-object offsets are applied.

The hand's yaw follows the source's, turned by the object's yaw difference; among the grasps the object's
symmetry makes equivalent, the one that needs the least turn of the wrist.

Why segments rather than a parametric motion model: every trait the metrics measure -- bell-shaped or skewed
speed profiles, corrective sub-movements, hesitations, the approach path, staggered finger closure, release
height and their variability -- is carried by the recorded segments themselves, with their correlations intact,
whatever the operator's style. A parametric model would need a form chosen in advance for each trait (and would
miss whatever that form does not express), while tracking in the object's frame needs no model of the
operator's strategy: a "follow" operator's tracking along the belt and an "above" operator's descent both come
out of the same code. What it cannot produce is a motion unlike any in the data; for the task's object arrivals
the object-frame transform and the retiming cover the variation.

Waypoints are where the operator's hand *was* (the measured TCP, low-passed at 3 Hz), not the commands: the
commands that moved it there were shaped by the lab's own arm (its lag, its gains: the operator pushed a slow arm
harder). Where the hand starts away from the source's path, the mismatch fades no faster than half the source
hand's own peak speed. Finger commands are the source's own, step by step, and the hand settles at the source's
grasp height before the fingers close. The generator sees only the state observation, like a policy. It never
emits NaN or actions outside [-1, 1].
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import mujoco
import numpy as np

from r2s2r_envs.behavior.fit import DEFAULT_MODEL, load_model, model_sha256
from r2s2r_envs.behavior.scripted import PlannerConfig
from r2s2r_envs.behavior.segments import ARRIVAL_Y, DT
from r2s2r_envs.behavior.simulator_view import demonstrator_view
from r2s2r_envs.envs.demonstrators import register_demonstrator
from r2s2r_envs.envs.hand import N_FINGER, down_quat, quat_yaw
from r2s2r_envs.mappings import check_keys
from r2s2r_envs.world import constants as C
from r2s2r_envs.world.builder import scene_layout
from r2s2r_envs.world.params import WorldParams

# Yaw symmetry of each category's grasp, rad (a ball looks the same at every yaw).
_YAW_PERIOD = {"cube": math.pi / 2, "ball": 0.0, "bar": math.pi}
# Distance before the end of the operator's reach along the belt by which a grasp should be done, m.
_REACH_MARGIN = 0.05
# Sources drawn from, nearest first by where their object was when their approach began.
_CANDIDATES = 4
# Of those, the ones whose path starts nearest the hand, drawn from at random.
_NEAREST_START = 2
# Source hand-to-object distances between which a waypoint moves from the world frame to the object's, m.
_FAR, _NEAR = 0.20, 0.06
# Steps over which the start mismatch with a source fades out (at least).
_BLEND_STEPS = 10
_ROTATION_GAIN = 0.5
# How far an object may be further along the belt than the source's before the replay hurries, m.
_SYNC_MARGIN = 0.01
# Horizontal TCP error above which the closure waits (at most _MAX_WAIT steps), m.
_ALIGN_TOLERANCE = 0.015
_MAX_WAIT = 10
# Height above the grasp height within which the fingers start closing, m, and the most steps they wait for it.
_SETTLE_TOLERANCE = 0.008
_MAX_SETTLE = 12
# Lowest TCP height above the belt while grasping, m (the fingertips stay off the belt).
_MIN_GRASP_HEIGHT = 0.03
# Horizontal object-to-TCP distance while closing beyond which the object has slid away, m.
_SLIPPED_DISTANCE = 0.04
# Object-to-TCP distance while carrying beyond which the object counts as lost, m.
_LOST_DISTANCE = 0.1
#: The pace settings' ranges (``reach_tempo``, ``carry_tempo``: see :class:`HumanlikeGenerator`).
PACE_BOUNDS: dict[str, tuple[float, float]] = {"reach_tempo": (0.25, 4.0), "carry_tempo": (0.25, 4.0)}


@dataclasses.dataclass(frozen=True, kw_only=True)
class WorldKnowledge:
    """What the generator knows of the world it runs in: what a team knows of its own simulator, or of the real
    cell once it has identified it (the grounding file). Never read from the lab.

    Attributes:
        control_latency: Delay between a command and its execution, s. Ref: the grounding's identified
            ``control_latency``; in a world without one the nominal model's (``WorldParams``, 0).
        perception_offset: Constant offset of perceived object positions, m (x, y, z). Ref: the grounding's
            identified ``object_pos_offset``; nominally zero.
        tracking_gain: Share of the hand's tracking error corrected per control step. Ref: the scripted planner's
            ``position_gain`` as tuned in that world (the grounding's ``demonstrator`` section), else its default:
            the same control law, so the gain that world's tuning found stable.
        object_lead: How far ahead the object's motion is predicted beyond the latency, s. Ref: the planner's
            ``lead_time``, tuned the same way.
        source: Where these values come from (recorded in the generator's settings).
    """

    control_latency: float = WorldParams().control_latency
    perception_offset: tuple[float, ...] = tuple(WorldParams().object_pos_offset)
    tracking_gain: float = PlannerConfig().position_gain
    object_lead: float = PlannerConfig().lead_time
    source: str = "nominal model"

    def __post_init__(self) -> None:
        checks = {
            "control_latency": (self.control_latency, 0.0, 0.5),
            "tracking_gain": (self.tracking_gain, 0.01, 1.0),
            "object_lead": (self.object_lead, 0.0, 0.5),
        }
        for name, (value, lo, hi) in checks.items():
            if not (isinstance(value, (int, float)) and math.isfinite(value) and lo <= value <= hi):
                raise ValueError(f"world knowledge: {name} must be a number in [{lo}, {hi}], got {value!r}")
        off = self.perception_offset
        if not (
            isinstance(off, (list, tuple))
            and len(off) == 3
            and all(isinstance(v, (int, float)) and math.isfinite(v) and abs(v) <= 0.1 for v in off)
        ):
            raise ValueError(f"world knowledge: perception_offset must be three numbers within 0.1 m, got {off!r}")
        object.__setattr__(self, "perception_offset", tuple(float(v) for v in off))

    @classmethod
    def from_grounding(cls, grounding: Any, source: str = "grounding") -> WorldKnowledge:
        """What a grounding (``r2s2r_envs.grounding.Grounding``: its ``world`` and tuned ``demonstrator``) says."""
        section = getattr(grounding, "demonstrator", None) or {}
        tuned = dict(section.get("settings") or {}) if section.get("name") == "scripted" else {}
        planner = PlannerConfig()
        return cls(
            control_latency=float(grounding.world.control_latency),
            perception_offset=tuple(float(v) for v in grounding.world.object_pos_offset),
            tracking_gain=float(tuned.get("position_gain", planner.position_gain)),
            object_lead=float(tuned.get("lead_time", planner.lead_time)),
            source=source,
        )


def world_knowledge(env: gym.Env, world: Mapping[str, Any] | WorldKnowledge | None = None) -> WorldKnowledge:
    """The generator's knowledge of ``env``'s world: ``world`` when given (a ``WorldKnowledge`` or its fields), else
    the env's grounding when it has one (``PickSort-FullyGrounded-v0``), else the nominal model's. Never the lab's
    parameters: run in the lab, the generator knows what it is told (e.g. the lab's grounding file).

    Raises:
        ValueError: unknown fields or values outside their ranges; the message names them.
    """
    if isinstance(world, WorldKnowledge):
        return world
    if world is not None:
        if not isinstance(world, Mapping):
            raise ValueError(f"world must be a mapping of WorldKnowledge fields, got {world!r}")
        fields = sorted(f.name for f in dataclasses.fields(WorldKnowledge))
        check_keys(world, fields, what="field", where="world knowledge", error=ValueError)
        return WorldKnowledge(**world)
    grounding = getattr(env.unwrapped, "grounding", None)
    if grounding is not None and hasattr(grounding, "world"):
        return WorldKnowledge.from_grounding(grounding, source=f"env grounding {getattr(grounding, 'source', '')}")
    return WorldKnowledge()


class HumanlikeGenerator:
    """Human-like demonstrator replaying a fitted model's segments (see the module docstring).

    Args:
        env: a PickSort env with task-space control and state observations.
        model: a shipped model name (``"default"``), a model file, or a model dict; default: the env's
            ``behavior`` if it has one, else ``"default"``.
        reach_tempo: pace of everything before the lift (:data:`PACE_BOUNDS`): a source grasp's approach (retreat,
            pause, reach) and closure resampled to ``1 / reach_tempo`` of their duration, its delay between the
            object's arrival and the reach divided by it; 1: the operator's own pace.
        carry_tempo: the same for the transport and the move after the release. Both are pace settings a control
            arm calibrates (the generator at the planner's pace, docs/ablation.md#control-arms); at their defaults
            the generator is unchanged.

    Raises:
        ValueError: joint-space control, or a pace setting out of range (named, with its range).
        r2s2r_envs.behavior.fit.BehaviorModelError: a missing or malformed model.
    """

    name = "humanlike"

    def __init__(
        self,
        env: gym.Env,
        model: str | Path | dict[str, Any] | None = None,
        world: Mapping[str, Any] | WorldKnowledge | None = None,
        reach_tempo: float = 1.0,
        carry_tempo: float = 1.0,
    ) -> None:
        base: Any = env.unwrapped  # a PickSort env (gym.Env declares none of the attributes read here)
        self._env = base
        if getattr(base, "control_mode", "task") != "task":
            raise ValueError("the humanlike generator drives task-space control: make the env with control_mode='task'")
        for name, value in (("reach_tempo", reach_tempo), ("carry_tempo", carry_tempo)):
            low, high = PACE_BOUNDS[name]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
                raise ValueError(f"humanlike generator: {name} must be a number in [{low:g}, {high:g}], got {value!r}")
        self.reach_tempo, self.carry_tempo = float(reach_tempo), float(carry_tempo)
        choice = model if model is not None else getattr(base, "behavior", DEFAULT_MODEL)
        self._fitted = load_model(choice)
        self._fitted_name = "<dict>" if isinstance(choice, dict) else str(choice)
        self._fitted_hash = model_sha256(self._fitted)
        self.control = base.control
        self.knowledge = world_knowledge(env, world)
        know = self.knowledge
        # The command sent now acts after the latency and one step of the servos' own lag: the reference is led by
        # that many steps, and objects are predicted that far ahead (plus the tuned lead).
        self._lead_steps = int(round(know.control_latency / DT)) + 1
        self._predict_s = know.control_latency + know.object_lead
        self._perception_offset = np.asarray(know.perception_offset, dtype=float)
        self.layout = scene_layout()
        lim = self._fitted["limits"]
        self._reach_limit_y = float(lim["reach_limit_y"])
        self._reach_upstream_y = float(lim["reach_upstream_y"])
        offset = np.asarray(self._fitted["calibration"]["grasp_offset_xy"], dtype=float)
        self._sources = [
            _Source(retimed(s, self.reach_tempo, self.carry_tempo), offset) for s in self._fitted["sources"]
        ]
        self._by_category = {c: [s for s in self._sources if s.category == c] for c in C.CATEGORIES}
        self.reset()

    @property
    def settings(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "model": self._fitted_name,
            "model_sha256": self._fitted_hash,
            "world": dataclasses.asdict(self.knowledge),
        }
        if (self.reach_tempo, self.carry_tempo) != (1.0, 1.0):  # recorded only when set: defaults keep their records
            out["pace"] = {"reach_tempo": self.reach_tempo, "carry_tempo": self.carry_tempo}
        return out

    def reset(self, seed: int | None = None) -> None:
        self._rng = np.random.default_rng(seed)
        self._phase = "idle"
        self._target: int | None = None
        self._src: _Source | None = None
        self._k = 0
        self._done: set[int] = set()
        self._fingers = np.zeros(N_FINGER)
        self._yaw_offset: float | None = 0.0
        self._hold: np.ndarray | None = None
        self._prev_goal: np.ndarray | None = None
        self._retry = False

    # ------------------------------------------------------------------ policy
    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        tcp = np.asarray(obs["eef_pos"], dtype=float)
        # Where the objects are: in a world that models perception, as the simulator knows them
        # (``behavior.simulator_view``); else by what this world is known to add to their perceived positions.
        obs, true_state = demonstrator_view(self._env, obs)
        offset = np.zeros(3) if true_state else self._perception_offset
        pos = np.asarray(obs["object_pos"], dtype=float).reshape(-1, 3) - offset
        vel = np.asarray(obs["object_vel"], dtype=float).reshape(-1, 6)[:, :3]
        quat = np.asarray(obs["object_quat"], dtype=float).reshape(-1, 4)
        cats = np.asarray(obs["object_category"], dtype=float).reshape(-1, len(C.CATEGORIES)).argmax(axis=1)
        if not (np.all(np.isfinite(tcp)) and np.all(np.isfinite(pos)) and np.all(np.isfinite(vel))):
            return self._command(tcp if np.all(np.isfinite(tcp)) else None, None, None, None, obs)

        if self._phase in ("idle", "tail") or (self._phase == "approach" and not self._attemptable(self._target, pos)):
            target = self._choose_target(pos)
            if target is not None and (self._phase != "approach" or target != self._target):
                self._start_approach(target, C.CATEGORIES[cats[target]], tcp, pos[target])
            elif target is None and self._phase == "approach":
                self._phase, self._target = "idle", None
        if self._phase == "approach":
            return self._approach(tcp, pos[self._target], vel[self._target], quat[self._target], obs)
        if self._phase == "close":
            return self._close(tcp, pos[self._target], obs)
        if self._phase == "transport":
            return self._transport(tcp, pos[self._target], obs)
        if self._phase == "tail":
            return self._tail(tcp, obs)
        if self._phase == "recover":
            self._k += 1
            if self._k >= 10:
                self._phase = "idle"
            return self._command(tcp, self._hold, self._open_hand(), None, obs)
        if self._hold is None:
            self._hold = tcp.copy()
        return self._command(tcp, self._hold, self._fingers, None, obs)

    # ------------------------------------------------------------------ phases
    def _start_approach(self, target: int, category: str, tcp: np.ndarray, obj: np.ndarray) -> None:
        pool = self._by_category[category] or self._sources
        first = [s for s in pool if s.first == (not self._done)]
        pool = first or pool
        # MimicGen-style choice: among the sources whose object was where this one is when their approach began
        # (the nearest few along the belt), one at random, so the source's timing suits this object's arrival.
        near = sorted(pool, key=lambda s: abs(s.object_y_segment - float(obj[1])))[:_CANDIDATES]
        # Of those, one of the few whose path starts nearest the hand: a far start would have to be made up by a
        # move of the generator's own.
        start = (lambda s: s.reach) if self._retry else (lambda s: 0)
        near = sorted(near, key=lambda s: float(np.linalg.norm(tcp - s.waypoint(start(s), obj))))[:_NEAREST_START]
        src = near[int(self._rng.integers(len(near)))]
        self._src, self._target, self._phase = src, target, "approach"
        self._yaw_offset = None
        self._k, self._rest_steps, self._waited, self._released = 0, 0, 0, False
        self._steps, self._blend = 0, max(_BLEND_STEPS, src.rest)
        if self._retry:
            # A re-grasp goes straight for the object: no retreat, no pause.
            self._k, self._released, self._blend, self._retry = src.reach, True, _BLEND_STEPS, False
        self._delta = tcp - src.waypoint(self._k, obj)
        # The start mismatch is removed no faster than half the source hand's own peak speed (a minimum-jerk move
        # of distance d over T peaks at 1.875 d / T), so the correction never outruns the operator's motion.
        mismatch_steps = 1.875 * float(np.linalg.norm(self._delta)) / (0.5 * src.peak_speed * DT)
        self._blend = max(self._blend, int(math.ceil(mismatch_steps)))
        self._prev_goal = None

    @property
    def _source(self) -> _Source:
        """The grasp being followed (chosen when the approach to an object starts)."""
        if self._src is None:
            raise RuntimeError("no source grasp chosen yet: the approach to an object has not started")
        return self._src

    def _approach(self, tcp, obj, vel, quat, obs) -> np.ndarray:
        src = self._source
        k = self._k
        hold = False
        if not self._released and src.rest <= k <= src.reach:
            # The source's pause, stretched or cut so the reach starts as long after this object's arrival (or
            # after the hand came to rest) as the source's did; cut at once if the object would leave the reach.
            # Arrival as the operator saw it: on the perceived position, as the source's delay was measured.
            seen_y = float(obj[1] + self._perception_offset[1])
            speed = max(abs(float(vel[1])), 0.02)
            since_arrival = (ARRIVAL_Y - seen_y) / speed
            since_rest = self._rest_steps * DT
            remaining = (src.n_approach - src.reach) * DT
            late = float(obj[1]) + float(vel[1]) * remaining < self._reach_limit_y + _REACH_MARGIN
            # Behind the source: this object is already where the source's was when its reach began.
            late = late or seen_y <= src.object_y_start
            self._rest_steps += 1
            if min(since_arrival, since_rest) >= src.delay_s or late:
                k = self._k = src.reach
                self._released = True
            else:
                hold = k >= src.reach - 1
        # Closed loop (docs/behavior.md#generator): the hand tracks the operator's path, which moves with the
        # object near it. The correction acts on where the hand is now; the feed-forward is the path's own motion
        # ``lead`` steps ahead (the command acts after the world's latency and the servos' lag), so the hand is
        # where the operator's was when the operator's was there, instead of trailing by this world's lag.
        pace = 0 if hold else self._pace(k, obj, vel)
        if pace == 1 and k < src.reach and not self._released:
            # Before the reach, an object further along the belt than the source's was at this point of its
            # approach makes the retreat and pause run at double speed: the operator hurries, the reach keeps its
            # own pace.
            pace = 2 if float(obj[1] + self._perception_offset[1]) < src.object_y_path[k] - _SYNC_MARGIN else 1
        lead, n = self._lead_steps, src.n_approach - 1
        ahead = obj + vel * self.knowledge.object_lead
        goal = self._approach_ref(k, ahead, self._steps)
        k_lead, k_next = min(k + pace * lead, n), min(k + pace * (lead + 1), n)
        ff = self._approach_ref(k_next, ahead + vel * (lead + 1) * DT, self._steps + lead + 1) - self._approach_ref(
            k_lead, ahead + vel * lead * DT, self._steps + lead
        )
        self._steps += 1
        self._yaw_offset = self._object_yaw_offset(quat, obs)
        fingers = src.approach_fingers[k]
        action = self._command(tcp, goal, fingers, src.approach_yaw[k] + self._yaw_offset, obs, ff)
        if hold:
            return action
        if k + 1 >= src.n_approach:
            if np.linalg.norm((goal - tcp)[:2]) < _ALIGN_TOLERANCE or self._waited >= _MAX_WAIT:
                self._phase, self._k, self._close_steps = "close", 0, 0
                self._anchor, self._belt = goal.copy(), np.array([0.0, float(vel[1]), 0.0])
            else:
                self._waited += 1  # a human-like hesitation: line up before closing
        else:
            self._k = min(k + pace, n)
        return action

    def _approach_ref(self, k: int, obj: np.ndarray, steps: int) -> np.ndarray:
        """Approach waypoint ``k`` for an object at ``obj``, with the start mismatch as it is ``steps`` steps in
        (it fades by the steps taken, not by the replay's index, which jumps when a pause is cut)."""
        return self._source.waypoint(k, obj) + self._delta * (1.0 - _minjerk(steps / self._blend))

    def _pace(self, k: int, obj: np.ndarray, vel: np.ndarray) -> int:
        # Retiming for the belt: an object that would pass the reach before the source's grasp time makes the
        # replay run at double speed (an operator hurries for a late object).
        speed = -float(vel[1])
        if speed < 0.01:
            return 1
        steps_left = (float(obj[1]) - self._reach_limit_y - _REACH_MARGIN) / (speed * DT)
        return 2 if self._source.n_approach - 1 - k > 0.8 * steps_left else 1

    def _close(self, tcp, obj, obs) -> np.ndarray:
        src, k = self._source, self._k
        if np.linalg.norm((obj - tcp)[:2]) > _SLIPPED_DISTANCE:
            # The object slid away from under the closing hand: open, back off and grasp again.
            self._phase, self._k, self._target, self._retry = "recover", 0, None, True
            self._hold = tcp + np.array([0.0, 0.0, 0.05])
            return self._command(tcp, self._hold, self._open_hand(), None, obs)
        self._close_steps += 1
        goal = self._anchor + self._belt * self._close_steps * DT + (src.close_rel[k] - src.close_rel[0])
        # The hand settles at the source's grasp height before the fingers close on the object, instead of closing
        # on the way down: fingers closing above the object's widest part would push it away.
        goal[2] = max(src.close_rel[-1, 2], self.layout.belt_top + _MIN_GRASP_HEIGHT)
        # Feed-forward: the belt's motion and the source's own motion relative to the object over the next step.
        ff = self._belt * DT + (src.close_rel[min(k + 1, src.n_close - 1)] - src.close_rel[k])
        ff[2] = 0.0
        action = self._command(tcp, goal, src.close_fingers[k], src.close_yaw[k] + self._yaw_offset, obs, ff)
        if k == 0 and tcp[2] - goal[2] > _SETTLE_TOLERANCE and self._close_steps < _MAX_SETTLE:
            return action  # still descending: the fingers wait
        self._k += 1
        if self._k >= src.n_close:
            self._phase, self._k = "transport", 0
            self._delta = tcp - src.transport_world[0]
            self._prev_goal = None
        return action

    def _transport(self, tcp, obj, obs) -> np.ndarray:
        src, k = self._source, self._k
        if k > 5 and k < src.n_transport - 2 and np.linalg.norm(obj - tcp) > _LOST_DISTANCE:
            self._phase, self._k, self._target, self._retry = "recover", 0, None, True
            self._hold = tcp + np.array([0.0, 0.0, 0.05])
            return self._command(tcp, self._hold, self._open_hand(), None, obs)
        blend = min(_BLEND_STEPS * 2, src.n_transport)
        ref = lambda j: src.transport_world[min(j, src.n_transport - 1)] + self._delta * (1.0 - _minjerk(j / blend))  # noqa: E731
        goal, lead = ref(k), self._lead_steps
        fingers = src.transport_fingers[k]
        action = self._command(
            tcp, goal, fingers, src.transport_yaw[k] + self._yaw_offset, obs, ref(k + lead + 1) - ref(k + lead)
        )
        self._k += 1
        if self._k >= src.n_transport:
            if self._target is not None:  # set with the source when the approach started
                self._done.add(self._target)
            self._phase, self._k, self._target = "tail", 0, None
            self._delta = tcp - src.tail_world[0]
            self._prev_goal = None
        return action

    def _tail(self, tcp, obs) -> np.ndarray:
        src = self._source
        k = min(self._k, src.n_tail - 1)
        goal = src.tail_world[k] + self._delta
        ahead = min(k + self._lead_steps, src.n_tail - 1)
        ff = src.tail_world[min(ahead + 1, src.n_tail - 1)] - src.tail_world[ahead]
        self._k += 1
        if self._k >= src.n_tail:
            self._phase, self._hold = "idle", goal.copy()
        return self._command(tcp, goal, src.tail_fingers[k], src.tail_yaw[k] + self._yaw_offset, obs, ff)

    def _open_hand(self) -> np.ndarray:
        return self._src.approach_fingers[0] if self._src is not None else self._fingers

    # ------------------------------------------------------------------ targets
    def _attemptable(self, i: int | None, pos: np.ndarray) -> bool:
        if i is None or i in self._done:
            return False
        p, lay = pos[i], self.layout
        on_belt = abs(p[0] - lay.belt_center_x) < lay.belt_half_width and lay.belt_top < p[2] < lay.belt_top + 0.08
        return bool(on_belt and p[1] > self._reach_limit_y)

    def _choose_target(self, pos: np.ndarray) -> int | None:
        candidates = [i for i in range(len(pos)) if self._attemptable(i, pos) and pos[i, 1] < self._reach_upstream_y]
        return min(candidates, key=lambda i: pos[i, 1]) if candidates else None

    def _object_yaw_offset(self, quat: np.ndarray, obs: dict[str, np.ndarray]) -> float:
        """Yaw added to the source's hand yaw: the object's yaw difference from the source's object, among the
        grasps the object's symmetry makes equivalent the one that needs the least turn of the wrist (a ball
        needs none); chosen when the approach starts, then kept nearest that choice as the object turns."""
        src = self._source
        period = _YAW_PERIOD[src.category]
        hand = np.asarray(obs["eef_quat"], dtype=float)
        if self._yaw_offset is None:
            current = float(quat_yaw(hand)) if np.all(np.isfinite(hand)) else float(src.close_yaw[0])
            if period == 0.0 or not np.all(np.isfinite(quat)):
                reference = current - src.close_yaw[0]
                return float(reference - 2.0 * math.pi * round(reference / (2.0 * math.pi)))
            base = float(quat_yaw(quat)) - src.object_yaw_close
            return float(base + period * round((current - (src.close_yaw[0] + base)) / period))
        if period == 0.0 or not np.all(np.isfinite(quat)):
            return self._yaw_offset
        d = float(quat_yaw(quat)) - src.object_yaw_close
        return float(d - period * round((d - self._yaw_offset) / period))

    # ------------------------------------------------------------------ action
    def _command(self, tcp, goal, fingers, yaw, obs, feedforward=None) -> np.ndarray:
        ctl = self.control
        action = np.zeros(6 + N_FINGER)
        if tcp is not None and goal is not None and np.all(np.isfinite(goal)):
            # The scripted planner's control law (the gain this world's tuning found stable): correct a share of
            # the error between where the hand should be and where it is measured, plus the path's own motion.
            # The controller's target integrates the commands, so a steady lag is worked off, as a person leads a
            # slow arm until the hand is where they want it.
            self._prev_goal = goal.copy()
            step = self.knowledge.tracking_gain * (goal - tcp)
            limit = ctl.max_linear_step
            norm = float(np.linalg.norm(step))
            if norm > limit:
                step *= limit / norm
            if feedforward is not None and np.all(np.isfinite(feedforward)):
                step = step + feedforward
            norm = float(np.linalg.norm(step))
            if norm > limit:
                step *= limit / norm
            action[:3] = step / limit
        cur = np.asarray(obs["eef_quat"], dtype=float)
        if yaw is not None and math.isfinite(yaw) and np.all(np.isfinite(cur)) and np.linalg.norm(cur) > 0.5:
            cur = cur / np.linalg.norm(cur)
            local = np.empty(3)
            mujoco.mju_subQuat(local, down_quat(yaw), cur)
            rot = np.empty(9)
            mujoco.mju_quat2Mat(rot, cur)
            action[3:6] = _ROTATION_GAIN * (rot.reshape(3, 3) @ local) / ctl.max_angular_step
        if fingers is not None:
            self._fingers = np.asarray(fingers, dtype=float)
        action[6:] = self._fingers
        action = np.nan_to_num(action, nan=0.0, posinf=1.0, neginf=-1.0)
        return np.clip(action, -1.0, 1.0).astype(np.float32)


class _Source:
    """One source grasp of the model as arrays."""

    def __init__(self, s: dict[str, Any], offset_xy: np.ndarray) -> None:
        a, c, t, tail = s["approach"], s["close"], s["transport"], s["tail"]
        self.category = s["category"]
        self.first = bool(s["first"])
        self.object_y_segment = float(s["object_y_segment"])
        self.object_y_start, self.object_y_close = float(s["object_y_start"]), float(s["object_y_close"])
        # Where the source's object was along the belt at each approach step (perceived, as recorded).
        self.object_y_path = np.asarray(a["world"], dtype=float)[:, 1] - np.asarray(a["relative"], dtype=float)[:, 1]
        self.rest, self.reach = int(s["rest"]), int(s["reach"])
        self.delay_s = float(s["delay_s"])
        self.object_yaw_close = float(s["object_yaw_close"])
        self.approach_world = np.asarray(a["world"], dtype=float)
        # The object's frame holds the horizontal part only (less the perception's offset): heights come from
        # the world path, since the object rides the belt at a fixed height and perceived heights carry the
        # camera's error.
        self.approach_rel = np.asarray(a["relative"], dtype=float)
        self.approach_rel[:, :2] -= offset_xy
        self.approach_rel[:, 2] = 0.0
        self.approach_fingers = np.asarray(a["fingers"], dtype=float)
        self.approach_yaw = np.asarray(a["yaw"], dtype=float)
        self.close_rel = np.asarray(c["relative"], dtype=float)
        self.close_rel[:, 2] = np.asarray(c["world"], dtype=float)[:, 2]
        self.close_fingers = np.asarray(c["fingers"], dtype=float)
        self.close_yaw = np.asarray(c["yaw"], dtype=float)
        self.transport_world = np.asarray(t["world"], dtype=float)
        self.transport_fingers = np.asarray(t["fingers"], dtype=float)
        self.transport_yaw = np.asarray(t["yaw"], dtype=float)
        if tail["world"]:
            self.tail_world = np.asarray(tail["world"], dtype=float)
            self.tail_fingers = np.asarray(tail["fingers"], dtype=float)
            self.tail_yaw = np.asarray(tail["yaw"], dtype=float)
        else:
            self.tail_world = self.transport_world[-1:]
            self.tail_fingers = self.transport_fingers[-1:]
            self.tail_yaw = self.transport_yaw[-1:]
        self.n_approach, self.n_close = len(self.approach_world), len(self.close_rel)
        steps = np.linalg.norm(np.diff(self.approach_world, axis=0), axis=1) / DT
        self.peak_speed = max(float(steps.max()) if len(steps) else 0.0, 0.05)
        self.n_transport, self.n_tail = len(self.transport_world), len(self.tail_world)
        dist = np.linalg.norm(np.asarray(a["relative"], dtype=float), axis=1)
        # Weight of the object's frame per approach waypoint: by the source hand's distance to its object, never
        # decreasing (once the hand homes in on the object it stays with it), 1 over the last steps.
        w = np.clip((_FAR - dist) / (_FAR - _NEAR), 0.0, 1.0)
        w = np.maximum.accumulate(w)
        w[-min(5, len(w)) :] = 1.0
        self.weight = w

    def waypoint(self, k: int, obj: np.ndarray) -> np.ndarray:
        w = self.weight[k]
        out = (1.0 - w) * self.approach_world[k] + w * (obj + self.approach_rel[k])
        out[2] = self.approach_world[k, 2]
        return out


def retimed(source: dict[str, Any], reach_tempo: float, carry_tempo: float) -> dict[str, Any]:
    """A model's source grasp at another pace: its approach and closure resampled (linearly) to ``1 / reach_tempo``
    of their duration, with the pause and reach indices and the delay after arrival, its transport and tail to
    ``1 / carry_tempo``; the source itself at ``(1, 1)``."""
    if reach_tempo == 1.0 and carry_tempo == 1.0:
        return source
    out = dict(source)
    for segments, tempo in ((("approach", "close"), reach_tempo), (("transport", "tail"), carry_tempo)):
        for segment in segments:
            out[segment] = {k: _resampled(v, tempo) for k, v in source[segment].items()}
    last = len(out["approach"]["world"]) - 1
    out["rest"] = min(int(round(source["rest"] / reach_tempo)), last)
    out["reach"] = min(max(int(round(source["reach"] / reach_tempo)), out["rest"]), last)
    out["delay_s"] = float(source["delay_s"]) / reach_tempo
    return out


def _resampled(values: Any, tempo: float) -> list[Any]:
    """A per-step array sampled every ``tempo`` steps (its first and last samples kept)."""
    a = np.asarray(values, dtype=float)
    if len(a) <= 1 or tempo == 1.0:
        return a.tolist()
    t = np.arange(int(round((len(a) - 1) / tempo)) + 1) * tempo
    t[-1] = len(a) - 1
    t = np.minimum(t, len(a) - 1)
    i = np.minimum(np.floor(t).astype(int), len(a) - 2)
    w = (t - i).reshape(-1, *([1] * (a.ndim - 1)))
    return (a[i] * (1.0 - w) + a[i + 1] * w).tolist()


def _minjerk(x: float) -> float:
    x = min(max(x, 0.0), 1.0)
    return x * x * x * (10.0 - 15.0 * x + 6.0 * x * x)


def make_humanlike(env: gym.Env, **settings: Any) -> HumanlikeGenerator:
    """Registry factory: ``make_demonstrator(env, "humanlike", model=...)``."""
    return HumanlikeGenerator(env, **settings)


register_demonstrator(HumanlikeGenerator.name, make_humanlike)
