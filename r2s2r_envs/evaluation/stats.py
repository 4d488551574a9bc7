"""Small statistics of the evaluation protocol (:mod:`r2s2r_envs.evaluation.protocol`), the CLI and the benchmarks.

Success rates are reported with a Wilson score interval (docs/protocol.md): unlike the normal approximation it
stays inside [0, 1] and is sensible at 0 or N successes out of N, which is common with scripted demonstrators.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from statistics import NormalDist
from typing import Any, cast

from r2s2r_envs.payloads import EpisodeSummary


def wilson_interval(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion.

    Args:
        successes: Number of successful trials, ``0 <= successes <= trials``.
        trials: Number of trials.  With no trials the interval is the uninformative ``(0.0, 1.0)``.
        confidence: Two-sided confidence level in (0, 1).

    Returns:
        ``(low, high)``, both in [0, 1].

    Raises:
        ValueError: counts out of range or a confidence outside (0, 1).
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if trials < 0 or not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials, got successes={successes!r}, trials={trials!r}")
    if trials == 0:
        return (0.0, 1.0)
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    p = successes / trials
    z2n = z * z / trials
    center = (p + z2n / 2.0) / (1.0 + z2n)
    half = z * math.sqrt(p * (1.0 - p) / trials + z2n / (4.0 * trials)) / (1.0 + z2n)
    # p = 0 or 1 gives a bound of exactly 0 or 1 analytically; floating point leaves ~1e-17 there.
    low = 0.0 if successes == 0 else max(0.0, center - half)
    high = 1.0 if successes == trials else min(1.0, center + half)
    return (low, high)


def summarize_episodes(episodes: Sequence[Mapping[str, Any]], failure_causes: Iterable[str] = ()) -> EpisodeSummary:
    """Aggregate per-episode results into the figures the protocol, the CLI and the benchmarks report.

    Args:
        episodes: One mapping per episode with ``is_success`` (bool, at the end of the episode),
            ``sort_accuracy`` (float in [0, 1]), ``failure_cause`` (str or None) and ``time_to_sort`` (seconds or
            None), i.e. the env's final ``info``; optionally ``success_any_step`` (bool: every object sorted at
            some step) and ``policy_error`` (str or None: the protocol stopped the episode for an unusable action).
        failure_causes: Causes to report even when they never occurred (so the keys are stable across runs).

    Returns:
        ``episodes`` (count), ``success_rate`` (at the end), ``success_rate_ci95`` ([low, high], Wilson 95%),
        ``sort_accuracy`` (mean), ``mean_time_to_sort`` (mean over successful episodes, None if there were none)
        and ``failure_causes`` (episodes per first failure cause).  When every episode has ``success_any_step``,
        also ``success_rate_any_step`` and ``success_rate_any_step_ci95``; when every episode has
        ``policy_error``, also ``policy_failures`` (episodes whose policy emitted an unusable action).
    """
    n = len(episodes)
    successes = sum(bool(e["is_success"]) for e in episodes)
    times = [float(e["time_to_sort"]) for e in episodes if e["is_success"] and e.get("time_to_sort") is not None]
    causes: Counter[str] = Counter({c: 0 for c in failure_causes})
    causes.update(str(e["failure_cause"]) for e in episodes if e.get("failure_cause") is not None)
    low, high = wilson_interval(successes, n)
    summary: dict[str, Any] = {
        "episodes": n,
        "success_rate": successes / n if n else 0.0,
        "success_rate_ci95": [low, high],
    }
    if n and all("success_any_step" in e for e in episodes):
        any_step = sum(bool(e["success_any_step"]) for e in episodes)
        summary["success_rate_any_step"] = any_step / n
        summary["success_rate_any_step_ci95"] = list(wilson_interval(any_step, n))
    summary.update(
        {
            "sort_accuracy": sum(float(e["sort_accuracy"]) for e in episodes) / n if n else 0.0,
            "mean_time_to_sort": sum(times) / len(times) if times else None,
            "failure_causes": dict(causes),
        }
    )
    if n and all("policy_error" in e for e in episodes):
        summary["policy_failures"] = sum(e["policy_error"] is not None for e in episodes)
    return cast(EpisodeSummary, summary)  # its keys, in the order result files list them
