"""The course's exercises: one per lesson, each on an exercise lab the student has not seen (docs/course.md).

An exercise names its lab (shipped with the package, sealed, and usable wherever a lab is accepted:
``gym.make("PickSort-Real-v0", lab="course-latency")``, ``--lab course-latency``), states the task, and says what
the answer file must hold.  ``r2s2r course labs`` prints these; ``r2s2r course check LESSON ANSWER.json`` grades
an answer (``r2s2r_envs.course.checks``).  Nothing here holds a solution: the checker reads the lab's config, a
student never does.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from r2s2r_envs.evaluation.protocol import EVALUATION_BASE_SEED

#: Lessons with an exercise.
LESSONS: tuple[int, ...] = tuple(range(9))

#: Base seed of the checker's planner episodes (lessons 5 and 8): episode i uses ``episode_seeds(SEED, i)``, the
#: legacy evaluation seeds (docs/protocol.md#dev-and-test-splits).
CHECK_BASE_SEED = EVALUATION_BASE_SEED

#: Lesson 5: planner episodes the checker runs in the student's world and in the lab (same seeds in both).
WORLD_CHECK_EPISODES = 20
#: Lesson 5: objects per episode (the env's default).
WORLD_CHECK_OBJECTS = 3

#: Lesson 6: the dataset sizes the exercise states.
COTRAIN_REAL_DEMOS = 40
COTRAIN_SIM_DEMOS = 600

#: Lesson 8: the policies to rank: the scripted planner with these settings (``PlannerConfig`` fields).
RANKING_POLICIES: tuple[dict[str, float], ...] = (
    {"lead_time": 0.0},
    {"lead_time": 0.12},
    {"lead_time": 0.3},
    {"position_gain": 0.25},
)
#: Lesson 8: episodes per policy and env, and objects per episode.
RANKING_EPISODES = 8
RANKING_OBJECTS = 2


@dataclasses.dataclass(frozen=True, kw_only=True)
class AnswerKey:
    """One entry of an answer file.

    Attributes:
        key: The JSON key.
        kind: What the value must be: ``"number"``, ``"vector3"`` (three numbers), ``"joint_pair"`` (two distinct
            arm joint indices, 0-6), ``"category"`` (``"cube"``, ``"ball"`` or ``"bar"``), ``"choice"`` (one of
            ``choices``), ``"world"`` (a mapping of ``WorldParams`` fields), ``"range"`` (two numbers, low <=
            high), ``"number_or_null"``.
        meaning: What it is, with its unit.
        tolerance: When it counts as right.
        required: Whether the key must be present.
        choices: Accepted strings of a ``"choice"`` key.
    """

    key: str
    kind: str
    meaning: str
    tolerance: str
    required: bool = True
    choices: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["choices"] = list(self.choices)
        return out


@dataclasses.dataclass(frozen=True, kw_only=True)
class Exercise:
    """The exercise of one lesson.

    Attributes:
        lesson: Lesson number, 0-8.
        topic: The lesson's layer of the gap or remedy.
        lab: Name of the exercise lab.
        task: What the student must find, and with what.
        answer: The answer file's keys.
        example: An answer file of the right form (placeholder values, not the solution).
        check: How the checker grades, what it runs and how long that takes.
        runs: For exercises graded by running episodes, what the checker runs, machine-readable: demonstrator,
            its settings (one entry per policy), env ids, episodes, objects per episode and base seed.
    """

    lesson: int
    topic: str
    lab: str
    task: str
    answer: tuple[AnswerKey, ...]
    example: dict[str, Any]
    check: str
    runs: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "lesson": self.lesson,
            "topic": self.topic,
            "lab": self.lab,
            "task": self.task,
            "answer": [k.to_dict() for k in self.answer],
            "example": self.example,
            "check": self.check,
            "runs": self.runs,
        }


_PLANNER = "the scripted planner (make_demonstrator(env, 'scripted'), also in the lab)"

EXERCISES: tuple[Exercise, ...] = (
    Exercise(
        lesson=0,
        topic="Tour: the task, the ids, the lab",
        lab="course-tour",
        task="The belt of course-tour runs at another speed than the nominal 0.08 m/s. Measure it from what the "
        "lab observes (object positions over time, or object velocities).",
        answer=(AnswerKey(key="belt_speed", kind="number", meaning="belt speed, m/s", tolerance="within 10 %"),),
        example={"belt_speed": 0.0},
        check="compares with the lab's belt speed; no episodes run",
    ),
    Exercise(
        lesson=1,
        topic="Interface mismatches: joint order, units, action scaling, camera channels",
        lab="course-interface",
        task="Two arm joints are swapped in course-interface's robot interface (its joint readings and joint "
        "commands). Find which two from logs: compare the lab's joint readings with the simulator's "
        "(PickSort-Ungrounded-v0) for the same seeds and commands.",
        answer=(
            AnswerKey(
                key="swapped_joints",
                kind="joint_pair",
                meaning="the two swapped arm joints, 0-based indices (0-6), in any order",
                tolerance="exact",
            ),
        ),
        example={"swapped_joints": [0, 6]},
        check="compares with the lab's interface; no episodes run",
    ),
    Exercise(
        lesson=2,
        topic="Timing: control latency",
        lab="course-latency",
        task="course-latency executes commands later than the nominal model (which has no latency). Measure its "
        "control latency from logs (r2s2r log-lab --lab course-latency, then r2s2r sysid --quick, or a step "
        "response of your own).",
        answer=(
            AnswerKey(key="control_latency", kind="number", meaning="control latency, s", tolerance="within 0.010 s"),
        ),
        example={"control_latency": 0.0},
        check="compares with the lab's latency; no episodes run",
    ),
    Exercise(
        lesson=3,
        topic="Actuators and contact: gains, friction, mass",
        lab="course-heavy",
        task="In course-heavy one object category is much heavier than its nominal mass (cube 0.10, ball 0.12, "
        "bar 0.20 kg). Find which, and its mass (grasp failures point to it; r2s2r sysid --quick measures masses "
        "from joint torques).",
        answer=(
            AnswerKey(
                key="heavier_category",
                kind="category",
                meaning="the heavier category: 'cube', 'ball' or 'bar'",
                tolerance="exact",
            ),
            AnswerKey(key="mass", kind="number", meaning="its mass, kg", tolerance="within 25 %"),
        ),
        example={"heavier_category": "cube", "mass": 0.0},
        check="compares with the lab's object masses; no episodes run",
    ),
    Exercise(
        lesson=4,
        topic="Sensing: noise, calibration offset, perception delay, belt fluctuation",
        lab="course-calibration",
        task="course-calibration's perception camera is miscalibrated: perceived object positions are offset by "
        "a constant vector. Measure it: place objects where you know they are (reset option 'setup', belt "
        "stopped) and compare what the lab perceives with what the simulator perceives for the same set-up. Its "
        "object estimator also reports each object as it was some time ago: measure that delay from objects "
        "placed on the running belt: a line through the perceived track at t = 0, less the placed spot and the "
        "offset, over the belt speed, averaged over several rides.",
        answer=(
            AnswerKey(
                key="object_pos_offset",
                kind="vector3",
                meaning="perceived minus true object position (x, y, z), m",
                tolerance="each component within 0.003 m",
            ),
            AnswerKey(
                key="perception_delay",
                kind="number",
                meaning="age of the perceived object positions, s",
                tolerance="within 0.010 s",
            ),
        ),
        example={"object_pos_offset": [0.0, 0.0, 0.0], "perception_delay": 0.0},
        check="compares with the lab's camera offset and perception delay; no episodes run",
    ),
    Exercise(
        lesson=5,
        topic="Remedies for the world: system identification versus domain randomization",
        lab="course-world",
        task="course-world differs from the nominal model in several ways at once. Identify its world from logs "
        "(r2s2r sysid --lab course-world --quick) and give it as WorldParams fields; fields you leave out take "
        "their nominal values.",
        answer=(
            AnswerKey(
                key="world",
                kind="world",
                meaning="WorldParams fields (r2s2r_envs/world/params.py has each unit), e.g. the 'world' of a "
                "grounding file",
                tolerance="the planner's success rate in your world within 10 points of its success in the lab",
            ),
        ),
        example={"world": {"belt_speed": 0.08, "control_latency": 0.0}},
        check=f"runs {_PLANNER} for {WORLD_CHECK_EPISODES} episodes ({WORLD_CHECK_OBJECTS} objects) in "
        f"PickSort-Ungrounded-v0 with your world and in the lab, on the evaluation protocol's first "
        f"{WORLD_CHECK_EPISODES} episodes (base seed {CHECK_BASE_SEED}): about 20-40 s on a laptop",
        runs={
            "demonstrator": "scripted",
            "settings": [{}],
            "env_ids": ["PickSort-Ungrounded-v0", "PickSort-Real-v0"],
            "episodes": WORLD_CHECK_EPISODES,
            "num_objects": WORLD_CHECK_OBJECTS,
            "base_seed": CHECK_BASE_SEED,
        },
    ),
    Exercise(
        lesson=6,
        topic="Real data: co-training with real_fraction, the mixing rule",
        lab="course-cotrain",
        task=f"You co-train on {COTRAIN_REAL_DEMOS} real demonstrations from course-cotrain (r2s2r generate "
        f"PickSort-Real-v0 --lab course-cotrain ...) and {COTRAIN_SIM_DEMOS} simulated ones. Which range of "
        "real_fraction does the mixing rule of thumb recommend?",
        answer=(
            AnswerKey(
                key="real_fraction",
                kind="range",
                meaning="[low, high]: the recommended range of the real share of each batch, as fractions",
                tolerance="each bound within 0.005",
            ),
        ),
        example={"real_fraction": [0.0, 1.0]},
        check="compares with the rule for the stated dataset sizes; no episodes run",
    ),
    Exercise(
        lesson=7,
        topic="Behavior: teleoperator versus planner, similarity metrics, the fitted generator",
        lab="course-operator",
        task="course-operator's demonstrations come from another operator than the default lab's. Find its style "
        "from its demonstrations (r2s2r generate PickSort-Real-v0 --lab course-operator ..., then compare their "
        "traits with r2s2r compare-behavior against teleoperators of known style in the simulator).",
        answer=(
            AnswerKey(
                key="approach",
                kind="choice",
                meaning="how the hand comes to a moving object",
                tolerance="exact",
                choices=("above", "follow"),
            ),
            AnswerKey(
                key="grasp", kind="choice", meaning="the grasp style", tolerance="exact", choices=("wrap", "pinch")
            ),
            AnswerKey(
                key="release",
                kind="choice",
                meaning="how objects are let go over the bin",
                tolerance="exact",
                choices=("drop", "place"),
            ),
            AnswerKey(
                key="reaction_time",
                kind="number",
                meaning="mean reaction time, s",
                tolerance="within 0.1 s",
                required=False,
            ),
        ),
        example={"approach": "above", "grasp": "wrap", "release": "drop"},
        check="compares with the lab's operator; no episodes run",
    ),
    Exercise(
        lesson=8,
        topic="Validating a simulator: does it rank policies the way the lab does",
        lab="course-ranking",
        task=f"Rank {len(RANKING_POLICIES)} policies, {_PLANNER} with the settings "
        f"{[dict(p) for p in RANKING_POLICIES]}, in the nominal simulator (PickSort-Ungrounded-v0) and in "
        f"course-ranking: success rate over the evaluation protocol's first {RANKING_EPISODES} episodes (base seed "
        f"{CHECK_BASE_SEED}, {RANKING_OBJECTS} objects per episode) in each. Give the Pearson correlation and the "
        "MMRV of the simulator's list against the lab's (r2s2r_envs.evaluation.ranking: pearson(sim, real), "
        "mmrv(sim, real)).",
        answer=(
            AnswerKey(
                key="pearson",
                kind="number_or_null",
                meaning="Pearson correlation (null when it is undefined)",
                tolerance="within 0.1 of the checker's",
            ),
            AnswerKey(
                key="mmrv",
                kind="number",
                meaning="mean maximum rank violation, as a fraction",
                tolerance="within 0.05 of the checker's",
            ),
        ),
        example={"pearson": 0.0, "mmrv": 0.0},
        check=f"runs the same {2 * len(RANKING_POLICIES) * RANKING_EPISODES} planner episodes itself "
        "(about 20-40 s on a laptop) and compares",
        runs={
            "demonstrator": "scripted",
            "settings": [dict(p) for p in RANKING_POLICIES],
            "env_ids": ["PickSort-Ungrounded-v0", "PickSort-Real-v0"],
            "episodes": RANKING_EPISODES,
            "num_objects": RANKING_OBJECTS,
            "base_seed": CHECK_BASE_SEED,
        },
    ),
)


def exercises() -> list[Exercise]:
    """Every exercise, by lesson."""
    return list(EXERCISES)


def exercise(lesson: int) -> Exercise:
    """The exercise of ``lesson``.

    Raises:
        KeyError: no such lesson; the message lists the lessons.
    """
    for e in EXERCISES:
        if e.lesson == lesson:
            return e
    raise KeyError(f"no exercise for lesson {lesson!r}; lessons: {list(LESSONS)}")
