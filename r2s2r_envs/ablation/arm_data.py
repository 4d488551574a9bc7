"""How the control arms' datasets are made (docs/ablation.md#control-arms): a demonstrator's pace measured from
demonstrations and calibrated to a target pace in a simulated world, the scenes every variant's demonstrator solved,
and the sensing of a grounding file.

**Pace** (:func:`measure_pace`) is read from a dataset as the behavior metrics read it (``behavior.segments``: only
commands and sensor readings, so lab and simulated datasets alike), per object of an episode its last grasp (the
one that held it), over the successful episodes:

* ``arrival_to_closure_s``: the object entering the workspace (y < ``segments.ARRIVAL_Y``) to the closure onset (the
  data card's figure, ``behavior.card``);
* ``transport_s``: the lift to the fingers opening over the bin.

The medians over the grasps are the pace. :func:`calibrate` sets a demonstrator's pace settings (:data:`KNOBS`: the
planner's ``reach_upstream_y`` and ``carry_speed``, the generator's ``reach_tempo`` and ``carry_tempo``) so that its
pace, measured the same way on up to :data:`CALIBRATION_EPISODES` attempts per round in the arm's simulated world
(base seed :data:`CALIBRATION_SEED`, apart from every dataset's and protocol's seeds), meets the target within
:func:`tolerance`: each setting moves the figure it steers, by a secant (regula falsi once the target is bracketed),
for at most :data:`CALIBRATION_ROUNDS` rounds, and the round nearest the target is kept. The target comes from a
training dataset of the design (the lab's demos for the slowed planner, the Ungrounded data for the generator at the
planner's pace), never from an evaluation episode: the lab is read only through its recorded training demos.

**Matched scenes** (:func:`matched_attempts`): datasets generated from one base seed give attempt ``i`` the same
env seed in every variant; the attempts every dataset's demonstrator solved, among those every dataset made, are the
scenes all variants kept.

**Sensing** (:func:`sensing_world`): the sensing fields (``world.params.SENSING_FIELDS``: sensor noise, calibration,
the camera-based estimator) of a grounding file's identified world, as the ``world`` argument of a nominal env.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from r2s2r_envs.behavior.humanlike import PACE_BOUNDS
from r2s2r_envs.behavior.scripted import PlannerConfig
from r2s2r_envs.behavior.segments import ARRIVAL_Y, DT, BehaviorDataError, load_demos
from r2s2r_envs.world.constants import REACH_LIMIT_Y, REACH_UPSTREAM_Y
from r2s2r_envs.world.params import SENSING_FIELDS, WorldParams

#: The figures of a pace, s, in the order reports show them.
PACE_FIGURES: tuple[str, ...] = ("arrival_to_closure_s", "transport_s")
#: A calibrated figure meets its target within the larger of these (s; share of the target).
TOLERANCE_S = 0.25
TOLERANCE_SHARE = 0.1
#: Base seed of the calibration attempts (no dataset or protocol of the suite uses it).
CALIBRATION_SEED = 5_000_000
#: Attempts per calibration round (at most; :func:`calibration_episodes`), and the most rounds.
CALIBRATION_EPISODES = 24
CALIBRATION_ROUNDS = 8


class PaceError(ValueError):
    """A pace that cannot be measured (no state observations, no grasp) or a demonstrator without pace settings."""


def calibration_episodes(episodes: int) -> int:
    """Attempts per calibration round for a dataset of ``episodes`` demos: as many, within 8 and
    :data:`CALIBRATION_EPISODES` (fewer scenes leave a median's noise larger than the tolerance)."""
    return min(CALIBRATION_EPISODES, max(8, episodes))


def tolerance(target: float) -> float:
    """How far a calibrated figure may lie from its ``target``, s."""
    return max(TOLERANCE_S, TOLERANCE_SHARE * abs(target))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Pace:
    """A demonstrator's pace (see the module docstring): medians in s (``None``: nothing to measure), and how many
    grasps and episodes they come from."""

    arrival_to_closure_s: float | None
    transport_s: float | None
    grasps: int
    episodes: int

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def errors(self, target: Pace) -> dict[str, float]:
        """Per figure, the distance to ``target`` in units of its tolerance (``inf``: not measured)."""
        out = {}
        for name in PACE_FIGURES:
            value, goal = getattr(self, name), getattr(target, name)
            out[name] = math.inf if value is None or goal is None else abs(value - goal) / tolerance(goal)
        return out

    def meets(self, target: Pace) -> bool:
        """Whether every figure lies within its tolerance of ``target``'s."""
        return all(e <= 1.0 for e in self.errors(target).values())


def measure_pace(path: str | Path) -> Pace:
    """The pace of a dataset's demonstrator (the successful episodes; every episode when none succeeded).

    Raises:
        PaceError: the file cannot be segmented (no state observations, another task) or holds no grasp.
    """
    try:
        demos = load_demos(path, verify="quick")
    except BehaviorDataError as exc:
        raise PaceError(f"the pace of {path} cannot be measured: {exc}") from None
    traces = [t for t in demos.traces if t.success] or list(demos.traces)
    closure, transport, grasps = [], [], 0
    for trace in traces:
        last = {g.obj: g for g in trace.grasps}  # per object its last grasp, the one that held it
        grasps += len(last)
        for g in last.values():
            if g.arrival <= g.close:
                closure.append((g.close - g.arrival) * DT)
            if g.release is not None:
                transport.append((g.release - g.lift) * DT)
    if not grasps:
        raise PaceError(f"the pace of {path} cannot be measured: no grasp in {len(traces)} episodes")
    return Pace(
        arrival_to_closure_s=_median(closure),
        transport_s=_median(transport),
        grasps=grasps,
        episodes=len(traces),
    )


def _median(values: list[float]) -> float | None:
    return round(float(np.median(values)), 4) if values else None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Knob:
    """A demonstrator setting that steers one pace figure.

    Attributes:
        setting: the demonstrator's setting.
        figure: the pace figure it steers (:data:`PACE_FIGURES`).
        low, high: the values calibration may give it.
        default: the demonstrator's own value.
        start: the first round's value (``None``: ``default``).
        log: steer in the logarithm of the setting (a speed: the figure goes as its inverse).
        slope: the first guess of d figure / d setting (d figure / d log setting with ``log``: ``None``, minus the
            figure itself, as for an inverse).
    """

    setting: str
    figure: str
    low: float
    high: float
    default: float
    start: float | None = None
    log: bool = False
    slope: float | None = None

    @property
    def first(self) -> float:
        return self.default if self.start is None else self.start


_PLANNER = PlannerConfig()
#: Each demonstrator's pace settings. The planner starts an object once it has passed ``reach_upstream_y`` (so a
#: lower line reaches later, at the nominal belt speed 1 / belt_speed s per m; calibration starts at the arrival
#: line) and carries at ``carry_speed``; the generator replays the operator's approach and closure at
#: ``reach_tempo``, its transport at ``carry_tempo``.
KNOBS: dict[str, tuple[Knob, ...]] = {
    "scripted": (
        Knob(
            setting="reach_upstream_y",
            figure="arrival_to_closure_s",
            low=REACH_LIMIT_Y + 0.2,  # leaves the planner 0.2 m of belt to grasp in
            high=REACH_UPSTREAM_Y,
            default=_PLANNER.reach_upstream_y,
            start=ARRIVAL_Y,  # upstream of the arrival line the planner's pace hardly changes: a flat start
            slope=-1.0 / WorldParams().belt_speed,
        ),
        Knob(setting="carry_speed", figure="transport_s", low=0.1, high=1.0, default=_PLANNER.carry_speed, log=True),
    ),
    "humanlike": tuple(
        # A tempo multiplies the generator's own pace (1.0), within the bounds the generator accepts.
        Knob(setting=tempo, figure=figure, low=PACE_BOUNDS[tempo][0], high=PACE_BOUNDS[tempo][1], default=1.0, log=True)
        for tempo, figure in (("reach_tempo", "arrival_to_closure_s"), ("carry_tempo", "transport_s"))
    ),
}


def knobs_of(demonstrator: str) -> tuple[Knob, ...]:
    """The pace settings of ``demonstrator``.

    Raises:
        PaceError: a demonstrator without pace settings (the message names those with).
    """
    if demonstrator not in KNOBS:
        raise PaceError(f"demonstrator {demonstrator!r} has no pace settings; those with: {sorted(KNOBS)}")
    return KNOBS[demonstrator]


@dataclasses.dataclass(frozen=True)
class PacedDemonstrator:
    """A registered demonstrator with given settings, as the factory ``generate`` takes (``f(env)``); picklable.

    Attributes:
        name: the registered demonstrator.
        settings: its settings, as ``(name, value)`` pairs.
    """

    name: str
    settings: tuple[tuple[str, float], ...]

    def __call__(self, env: Any) -> Any:
        from r2s2r_envs.envs.demonstrators import make_demonstrator

        return make_demonstrator(env, self.name, **dict(self.settings))


def next_setting(knob: Knob, history: Sequence[tuple[float, float | None]], target: float) -> float:
    """The next value of ``knob`` from the ``(value, figure)`` pairs measured so far (oldest first): by regula falsi
    between the nearest values on either side of ``target`` once it is bracketed, else by the secant of the last two
    (when its slope is usable), else by the knob's first-guess slope; within the knob's range."""
    points = [(math.log(x) if knob.log else x, f) for x, f in history if f is not None and (x > 0 or not knob.log)]
    last = history[-1][0]
    if not points:
        return last
    u, f = points[-1]
    below = [p for p in points if p[1] < target]
    above = [p for p in points if p[1] > target]
    slope = None
    if below and above:
        (u0, f0), (u1, f1) = max(below, key=lambda p: p[1]), min(above, key=lambda p: p[1])
        if u0 != u1:
            slope = (f1 - f0) / (u1 - u0)
            u, f = u0, f0
    elif len(points) >= 2:
        (u0, f0), (u1, f1) = points[-2], points[-1]
        guess = knob.slope if knob.slope is not None else -f1
        if u1 != u0 and (f1 - f0) / (u1 - u0) * guess > 0:  # the sign the knob is known to have
            # No steeper than measured, no flatter than the first guess: a flat stretch (the planner reaching
            # before the object has even arrived) must not send the next value to the end of the range.
            slope = math.copysign(max(abs((f1 - f0) / (u1 - u0)), abs(guess)), guess)
    if slope is None or slope == 0:
        slope = knob.slope if knob.slope is not None else -max(f, 1e-3)
    step = (target - f) / slope
    value = math.exp(u + step) if knob.log else u + step
    return float(min(max(value, knob.low), knob.high))


def calibrate(
    demonstrator: str,
    target: Pace,
    measure: Any,
    *,
    rounds: int = CALIBRATION_ROUNDS,
) -> dict[str, Any]:
    """Pace settings of ``demonstrator`` that meet ``target`` (see the module docstring).

    Args:
        demonstrator: ``"scripted"`` or ``"humanlike"`` (:data:`KNOBS`).
        target: the pace to meet.
        measure: ``measure(settings, round) -> Pace``: the demonstrator's pace with those settings.
        rounds: the most rounds.

    Returns:
        ``settings`` (the round nearest the target), ``meets`` (whether it is within tolerance), ``rounds`` (each
        round's settings, pace and errors in tolerance units) and ``tolerance``.
    """
    knobs = knobs_of(demonstrator)
    settings = {k.setting: k.first for k in knobs}
    history: dict[str, list[tuple[float, float | None]]] = {k.setting: [] for k in knobs}
    trace: list[dict[str, Any]] = []
    for r in range(rounds):
        pace = measure(dict(settings), r)
        errors = pace.errors(target)
        trace.append({"settings": dict(settings), "pace": pace.to_dict(), "errors": errors})
        if pace.meets(target):
            break
        before = dict(settings)
        for knob in knobs:
            goal = getattr(target, knob.figure)
            history[knob.setting].append((settings[knob.setting], getattr(pace, knob.figure)))
            if goal is not None:
                settings[knob.setting] = round(next_setting(knob, history[knob.setting], goal), 4)
        if settings == before:  # at the ends of the knobs' ranges: another round would measure the same
            break
    best = min(trace, key=lambda t: max(t["errors"].values()))
    return {
        "settings": best["settings"],
        "meets": max(best["errors"].values()) <= 1.0,
        "rounds": trace,
        "tolerance": {"seconds": TOLERANCE_S, "share": TOLERANCE_SHARE},
    }


def calibrate_generation(
    demonstrator: str,
    target: Pace,
    *,
    env_id: str,
    env_kwargs: Mapping[str, Any],
    episode_steps: int | None,
    generate_kwargs: Mapping[str, Any],
    workdir: Path,
    episodes: int = CALIBRATION_EPISODES,
    rounds: int = CALIBRATION_ROUNDS,
) -> dict[str, Any]:
    """:func:`calibrate` with each round's pace measured on ``episodes`` attempts (every one kept) generated in the
    arm's env, as its data will be (the recipe's action noise included), with state observations (the segmentation
    reads them), from :data:`CALIBRATION_SEED`. The round files are deleted afterwards."""
    from r2s2r_envs.datasets.generate import generate

    workdir.mkdir(parents=True, exist_ok=True)
    extra = {k: v for k, v in generate_kwargs.items() if k not in ("demonstrator", "obs_mode")}

    def measure(settings: dict[str, float], r: int) -> Pace:
        path = workdir / f"round-{r}.hdf5"
        generate(
            env_id,
            episodes,
            path,
            seed=CALIBRATION_SEED,
            successes_only=False,
            env_kwargs=dict(env_kwargs),
            episode_steps=episode_steps,
            demonstrator=PacedDemonstrator(demonstrator, tuple(sorted(settings.items()))),
            obs_mode="state",
            overwrite=True,
            progress=False,
            handle_signals=False,
            **extra,
        )
        try:
            return measure_pace(path)
        except PaceError:  # nothing grasped with these settings: every figure unmeasured
            return Pace(arrival_to_closure_s=None, transport_s=None, grasps=0, episodes=episodes)
        finally:
            for leftover in (path, path.with_name(path.name + ".lock")):
                leftover.unlink(missing_ok=True)

    out = calibrate(demonstrator, target, measure, rounds=rounds)
    out.update(episodes_per_round=episodes, seed=CALIBRATION_SEED)
    return out


def matched_attempts(files: Sequence[str | Path]) -> dict[str, Any]:
    """The attempts every file's demonstrator solved, among the attempts every file made (files generated from one
    base seed: attempt ``i`` is the same scene in each).

    Returns:
        ``attempts`` (sorted attempt indices), ``compared`` (attempts every file made), ``solved`` (per file, its
        successful attempts among them) and ``positions`` (per file, the positions of those attempts' demos in its
        demo order).

    Raises:
        PaceError: the files were made from different base seeds (their scenes differ).
    """
    from r2s2r_envs.datasets.reader import open_dataset

    found: list[tuple[int, dict[int, int]]] = []
    seeds = set()
    for path in files:
        with open_dataset(path, verify="quick") as f:
            seeds.add(f.generation.get("seed", f.provenance.get("seed")))
            solved = {}
            for position, demo_id in enumerate(f.demo_ids):
                attrs = f.demo_attrs(demo_id)
                if attrs.get("success") and int(attrs.get("attempt", -1)) >= 0:
                    solved[int(attrs["attempt"])] = position
            found.append((f.attempts, solved))
    if len(seeds) != 1:
        raise PaceError(
            f"matched scenes need one base seed for every variant's data, got {sorted(map(str, seeds))}: attempt i "
            "is the same scene only from the same base seed"
        )
    compared = min(attempts for attempts, _ in found)
    common = set.intersection(*({a for a in solved if a < compared} for _, solved in found))
    attempts = sorted(common)
    return {
        "attempts": attempts,
        "compared": compared,
        "solved": [sum(1 for a in solved if a < compared) for _, solved in found],
        "positions": [[solved[a] for a in attempts] for _, solved in found],
    }


def sensing_world(world: WorldParams) -> dict[str, Any]:
    """The sensing fields of ``world`` (``SENSING_FIELDS``) as a ``world`` argument over the nominal world."""
    values = {name: getattr(world, name) for name in SENSING_FIELDS}
    return {k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}
