"""Grading of the course's exercises: ``check_answer(lesson, answer)`` (``r2s2r course check``).

The checker is the teacher's side: it reads the exercise lab's config (``r2s2r_envs.lab.load_lab``), which the
lessons and grounding code never do.  It says per answer key whether the answer is right, with a hint that never
reveals the true value (by how much a number may be off, never in which direction or what the value is).

Bad input (an unknown lesson, an answer that is not a JSON object, a missing or unknown key, a value of the wrong
kind) raises ``AnswerError``, whose message names the problem and what is accepted.

Lessons 5 and 8 run planner episodes (``r2s2r_envs.course.exercises`` fixes their seeds and counts); the figures
of the lab side are cached per process.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from r2s2r_envs.course.exercises import (
    CHECK_BASE_SEED,
    COTRAIN_REAL_DEMOS,
    COTRAIN_SIM_DEMOS,
    LESSONS,
    RANKING_EPISODES,
    RANKING_OBJECTS,
    RANKING_POLICIES,
    WORLD_CHECK_EPISODES,
    WORLD_CHECK_OBJECTS,
    AnswerKey,
    exercise,
)
from r2s2r_envs.mappings import check_keys
from r2s2r_envs.world.constants import CATEGORIES
from r2s2r_envs.world.params import N_ARM_JOINTS, WorldParams

LAB_ID = "PickSort-Real-v0"
SIM_ID = "PickSort-Ungrounded-v0"


class AnswerError(ValueError):
    """An answer the checker cannot grade: unknown lesson, not a JSON object, missing or unknown key, wrong kind."""


@dataclasses.dataclass(frozen=True)
class ItemResult:
    """The grade of one answer key.

    Attributes:
        key: The answer key.
        passed: Whether it is right.
        message: ``"<key>: right (...)"`` or ``"<key>: wrong (...)"``, never with the true value.
    """

    key: str
    passed: bool
    message: str


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """The grade of an answer.

    Attributes:
        lesson: The lesson.
        lab: The exercise lab.
        items: One result per graded key.
    """

    lesson: int
    lab: str
    items: tuple[ItemResult, ...]

    @property
    def passed(self) -> bool:
        """Whether every graded key is right."""
        return all(item.passed for item in self.items)

    def to_dict(self) -> dict[str, Any]:
        return {
            "lesson": self.lesson,
            "lab": self.lab,
            "passed": self.passed,
            "items": [dataclasses.asdict(item) for item in self.items],
        }


# ---------------------------------------------------------------------- input validation
def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _check_kind(spec: AnswerKey, value: Any) -> Any:
    """The value of ``spec.key`` in a normalised form, or AnswerError naming what is accepted."""
    key, kind = spec.key, spec.kind
    if kind == "number":
        if not _is_number(value):
            raise AnswerError(f"answer key {key!r} must be a finite number ({spec.meaning}), got {value!r}")
        return float(value)
    if kind == "number_or_null":
        if value is not None and not _is_number(value):
            raise AnswerError(f"answer key {key!r} must be a finite number or null ({spec.meaning}), got {value!r}")
        return None if value is None else float(value)
    if kind in ("vector3", "range"):
        n = 3 if kind == "vector3" else 2
        if not isinstance(value, list) or len(value) != n or not all(_is_number(v) for v in value):
            raise AnswerError(
                f"answer key {key!r} must be a list of {n} finite numbers ({spec.meaning}), got {value!r}"
            )
        if kind == "range" and value[0] > value[1]:
            raise AnswerError(
                f"answer key {key!r} must be [low, high] with low <= high ({spec.meaning}), got {value!r}"
            )
        return [float(v) for v in value]
    if kind == "joint_pair":
        ok = isinstance(value, list) and len(value) == 2
        ok = ok and all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < N_ARM_JOINTS for v in value)
        if not ok or value[0] == value[1]:
            raise AnswerError(
                f"answer key {key!r} must be a list of two different arm joint indices in 0-{N_ARM_JOINTS - 1} "
                f"({spec.meaning}), got {value!r}"
            )
        return sorted(value)
    if kind == "category":
        if value not in CATEGORIES:
            raise AnswerError(f"answer key {key!r} must be one of {list(CATEGORIES)}, got {value!r}")
        return value
    if kind == "choice":
        if value not in spec.choices:
            raise AnswerError(f"answer key {key!r} must be one of {list(spec.choices)}, got {value!r}")
        return value
    if kind == "world":
        if not isinstance(value, Mapping):
            raise AnswerError(f"answer key {key!r} must be a JSON object of WorldParams fields, got {value!r}")
        try:
            return WorldParams.from_dict(value)
        except (KeyError, TypeError, ValueError) as e:
            raise AnswerError(f"answer key {key!r}: {e.args[0] if e.args else e}") from e
    raise AssertionError(f"unknown answer kind {kind!r}")  # a bug in EXERCISES, not bad input


def _parse(lesson: Any, answer: Any) -> tuple[int, dict[str, Any]]:
    if isinstance(lesson, bool) or not isinstance(lesson, int) or lesson not in LESSONS:
        raise AnswerError(f"unknown lesson {lesson!r}; lessons with an exercise: {list(LESSONS)}")
    specs = exercise(lesson).answer
    accepted = [s.key for s in specs]
    if not isinstance(answer, Mapping):
        raise AnswerError(
            f"an answer must be a JSON object with the key(s) {accepted}, got {type(answer).__name__}: {answer!r}"
        )
    required = [s.key for s in specs if s.required]
    check_keys(answer, accepted, what="answer key", where=f"lesson {lesson}", required=required, error=AnswerError)
    return lesson, {s.key: _check_kind(s, answer[s.key]) for s in specs if s.key in answer}


# ---------------------------------------------------------------------- grading helpers
def _lab(name: str) -> Any:
    from r2s2r_envs.lab.config import load_lab  # the teacher's side reads the lab; nothing else may

    return load_lab(name)


def _item(key: str, passed: bool, tolerance: str, wrong: str) -> ItemResult:
    return ItemResult(key, passed, f"{key}: right ({tolerance})" if passed else f"{key}: wrong ({wrong})")


def _relative(key: str, value: float, truth: float, tolerance: float) -> ItemResult:
    ok = abs(value - truth) <= tolerance * abs(truth)
    pct = f"{100 * tolerance:g} %"
    return _item(key, ok, f"within {pct}", f"off by more than {pct}")


def _absolute(key: str, value: float, truth: float, tolerance: float, unit: str = "") -> ItemResult:
    ok = abs(value - truth) <= tolerance + 1e-12
    bound = f"{tolerance:g} {unit}".strip()
    return _item(key, ok, f"within {bound}", f"off by more than {bound}")


def _exact(key: str, value: Any, truth: Any) -> ItemResult:
    return _item(key, value == truth, "exact", f"not the lab's {key}")


# ---------------------------------------------------------------------- lessons
def _lesson_0(answer: dict[str, Any], lab: Any) -> list[ItemResult]:
    return [_relative("belt_speed", answer["belt_speed"], lab.world.belt_speed, 0.10)]


def _lesson_1(answer: dict[str, Any], lab: Any) -> list[ItemResult]:
    order = lab.interface.arm_joint_order
    swapped = sorted(i for i in range(N_ARM_JOINTS) if order[i] != i)
    given = answer["swapped_joints"]
    if given == swapped:
        return [_item("swapped_joints", True, "exact", "")]
    common = len(set(given) & set(swapped))
    hint = "one of the two joints is right" if common == 1 else "neither joint is swapped"
    return [_item("swapped_joints", False, "", hint)]


def _lesson_2(answer: dict[str, Any], lab: Any) -> list[ItemResult]:
    return [_absolute("control_latency", answer["control_latency"], lab.world.control_latency, 0.010, "s")]


def _heaviest(lab: Any) -> int:
    # The category whose mass grew most relative to the nominal model.
    nominal = WorldParams().object_mass
    ratios = [m / n for m, n in zip(lab.world.object_mass, nominal)]
    return max(range(len(ratios)), key=ratios.__getitem__)


def _lesson_3(answer: dict[str, Any], lab: Any) -> list[ItemResult]:
    k = _heaviest(lab)
    return [
        _exact("heavier_category", answer["heavier_category"], CATEGORIES[k]),
        _relative("mass", answer["mass"], lab.world.object_mass[k], 0.25),
    ]


def _lesson_4(answer: dict[str, Any], lab: Any) -> list[ItemResult]:
    given, truth = answer["object_pos_offset"], lab.world.object_pos_offset
    off = [axis for axis, g, t in zip("xyz", given, truth) if abs(g - t) > 0.003 + 1e-12]
    return [
        _item(
            "object_pos_offset",
            not off,
            "each component within 3 mm",
            f"{', '.join(off)} off by more than 3 mm",
        ),
        # The hint in ms, as the lesson states the tolerance.
        _absolute("perception_delay", 1000 * answer["perception_delay"], 1000 * lab.world.perception_delay, 10, "ms"),
    ]


def _lesson_5(answer: dict[str, Any], lab: Any) -> list[ItemResult]:
    lab_rate = world_check_lab_rate(lab.name)
    sim_rate = planner_success(SIM_ID, {"world": answer["world"].to_dict()}, WORLD_CHECK_EPISODES, WORLD_CHECK_OBJECTS)
    ok = abs(sim_rate - lab_rate) <= 0.10 + 1e-9
    n = WORLD_CHECK_EPISODES
    figures = f"planner success {100 * sim_rate:.0f}% in your world, {100 * lab_rate:.0f}% in the lab, {n} episodes"
    return [
        _item("world", ok, f"{figures}: within 10 points", f"{figures}: more than 10 points apart"),
    ]


def _lesson_6(answer: dict[str, Any], lab: Any) -> list[ItemResult]:
    low, high = mixing_rule(COTRAIN_REAL_DEMOS, COTRAIN_SIM_DEMOS)
    given = answer["real_fraction"]
    off = [name for name, g, t in (("low", given[0], low), ("high", given[1], high)) if abs(g - t) > 0.005]
    return [_item("real_fraction", not off, "each bound within 0.005", f"{' and '.join(off)} off by more than 0.005")]


def _lesson_7(answer: dict[str, Any], lab: Any) -> list[ItemResult]:
    op = lab.operator
    items = [_exact(key, answer[key], getattr(op, key)) for key in ("approach", "grasp", "release")]
    if "reaction_time" in answer:
        items.append(_absolute("reaction_time", answer["reaction_time"], op.reaction_time, 0.1, "s"))
    return items


def _lesson_8(answer: dict[str, Any], lab: Any) -> list[ItemResult]:
    truth = ranking_figures(lab.name)
    items = []
    if truth["pearson"] is None or answer["pearson"] is None:
        ok = truth["pearson"] is None and answer["pearson"] is None
        items.append(_item("pearson", ok, "exact", "not the checker's (defined or undefined)"))
    else:
        items.append(_absolute("pearson", answer["pearson"], truth["pearson"], 0.1))
    items.append(_absolute("mmrv", answer["mmrv"], truth["mmrv"], 0.05))
    return items


_GRADERS: dict[int, Callable[[dict[str, Any], Any], list[ItemResult]]] = {
    0: _lesson_0,
    1: _lesson_1,
    2: _lesson_2,
    3: _lesson_3,
    4: _lesson_4,
    5: _lesson_5,
    6: _lesson_6,
    7: _lesson_7,
    8: _lesson_8,
}


def check_answer(lesson: int, answer: Mapping[str, Any]) -> CheckResult:
    """Grade an answer to a lesson's exercise.

    Args:
        lesson: Lesson number, 0-8.
        answer: The answer, as read from the answer JSON file (``exercises()`` gives each lesson's keys).

    Returns:
        The grade: ``.passed`` and one ``ItemResult`` per graded key.

    Raises:
        AnswerError: an unknown lesson, an answer that is not a mapping, a missing or unknown key, or a value of the
            wrong kind; the message names the problem and what is accepted.
    """
    lesson, parsed = _parse(lesson, answer)
    ex = exercise(lesson)
    return CheckResult(lesson, ex.lab, tuple(_GRADERS[lesson](parsed, _lab(ex.lab))))


# ---------------------------------------------------------------------- reference figures (teacher side)
def mixing_rule(n_real: int, n_sim: int) -> tuple[float, float]:
    """The mixing rule of thumb's range of ``real_fraction`` for ``n_real`` real and ``n_sim`` simulated
    demonstrations: ``N / (N + M)`` to ``sqrt(N / M)`` (docs/concepts.md)."""
    return n_real / (n_real + n_sim), math.sqrt(n_real / n_sim)


def planner_success(
    env_id: str, env_kwargs: Mapping[str, Any], episodes: int, num_objects: int, **settings: float
) -> float:
    """Success rate of the scripted planner (with ``settings``) over the protocol's first ``episodes`` episodes
    (base seed ``CHECK_BASE_SEED``) of ``env_id``."""
    from r2s2r_envs.behavior import make_demonstrator
    from r2s2r_envs.evaluation.protocol import evaluate

    # mypy: **settings might name make_demonstrator's env; they are planner settings (PlannerConfig fields).
    factory = functools.partial(make_demonstrator, name="scripted", **settings)  # type: ignore[arg-type]
    result = evaluate(
        env_id,
        factory,
        episodes=episodes,
        base_seed=CHECK_BASE_SEED,
        env_kwargs={**env_kwargs, "num_objects": num_objects},
        progress=False,
    )
    return float(result.summary["success_rate"])


@functools.cache
def world_check_lab_rate(lab: str) -> float:
    """Lesson 5: the planner's success in the lab over the checker's episodes (cached per process)."""
    return planner_success(LAB_ID, {"lab": lab}, WORLD_CHECK_EPISODES, WORLD_CHECK_OBJECTS)


@functools.cache
def ranking_figures(lab: str) -> dict[str, Any]:
    """Lesson 8: the policies' success in the nominal sim and in ``lab``, with Pearson and MMRV (cached)."""
    from r2s2r_envs.evaluation.ranking import mmrv, pearson

    sim: list[float] = []
    real: list[float] = []
    for settings in RANKING_POLICIES:
        sim.append(planner_success(SIM_ID, {}, RANKING_EPISODES, RANKING_OBJECTS, **settings))
        real.append(planner_success(LAB_ID, {"lab": lab}, RANKING_EPISODES, RANKING_OBJECTS, **settings))
    return {"sim": sim, "real": real, "pearson": pearson(sim, real), "mmrv": mmrv(sim, real)}


def runs_episodes(lesson: int) -> bool:
    """Whether grading ``lesson`` runs planner episodes (lessons 5 and 8)."""
    return lesson in (5, 8)


__all__: Sequence[str] = ["AnswerError", "CheckResult", "ItemResult", "check_answer", "mixing_rule"]
