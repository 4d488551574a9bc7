"""The shapes of the dict payloads users read, as ``TypedDict``s: what ``env.step`` puts in ``info`` and the summary
of a set of evaluated episodes (an evaluation result's episodes are ``evaluation.results.EpisodeRecord``).

They describe plain dicts (the values stay JSON-ready and the files unchanged) so a type checker can follow a key
from the env to the result file; ``tests/test_payloads.py`` checks every declared key against a real step and a
real summary, so a key added or dropped in one place and not the other fails there.

Example::

    from r2s2r_envs.payloads import StepInfo

    def sorted_count(info: StepInfo) -> int:
        return info["object_outcomes"].count("sorted")
"""

from __future__ import annotations

from typing import TypedDict


class StepInfo(TypedDict):
    """``info`` of ``reset`` and ``step`` of every PickSort env (docs/task.md#outcomes).

    ``object_outcomes`` holds one of ``pending``, ``sorted``, ``wrong_bin``, ``dropped``, ``missed``,
    ``fell_off_belt``, ``timeout``, ``unstable`` per object; ``failure_cause`` is the first failure's outcome (None
    while none failed); ``time_to_sort`` the time at which the last object was sorted (None until then), s. The
    ``reward_*`` terms are already weighted; the reward is their sum.
    """

    is_success: bool
    object_outcomes: list[str]
    failure_cause: str | None
    time_to_sort: float | None
    sort_accuracy: float
    unstable: bool
    elapsed_time: float
    reward_reach: float
    reward_grasp: float
    reward_transport: float
    reward_sort: float
    reward_failure: float


class _EpisodeSummaryRequired(TypedDict):
    episodes: int
    success_rate: float
    success_rate_ci95: list[float]
    sort_accuracy: float
    mean_time_to_sort: float | None
    failure_causes: dict[str, int]


class EpisodeSummary(_EpisodeSummaryRequired, total=False):
    """The summary of a set of episodes (a result's ``summary`` and each condition's): counts, the success rate with
    its Wilson 95% interval, mean sort accuracy, mean time to sort over the successful episodes (s; None without
    one), episodes per first failure cause; the ``success_rate_any_step`` pair and ``policy_failures`` where every
    episode records them."""

    success_rate_any_step: float
    success_rate_any_step_ci95: list[float]
    policy_failures: int


__all__ = ["EpisodeSummary", "StepInfo"]
