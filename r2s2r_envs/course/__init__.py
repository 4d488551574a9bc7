"""The course kit's package side: the exercises, their labs and the checker (docs/course.md).

``exercises()`` lists the exercises (one per lesson, each on a sealed lab shipped in ``course/labs/``, usable
wherever a lab is accepted: ``gym.make("PickSort-Real-v0", lab="course-latency")``); ``check_answer(lesson,
answer)`` grades an answer.  The command line is ``r2s2r course labs`` and ``r2s2r course check``.
"""

from r2s2r_envs.course.checks import AnswerError, CheckResult, ItemResult, check_answer
from r2s2r_envs.course.exercises import AnswerKey, Exercise, exercise, exercises

__all__ = [
    "AnswerError",
    "AnswerKey",
    "CheckResult",
    "Exercise",
    "ItemResult",
    "check_answer",
    "exercise",
    "exercises",
]
