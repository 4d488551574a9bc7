"""Evaluation: the protocol every score goes through, and its statistics (docs/protocol.md).

``evaluate(env_id, policy_or_factory, episodes=N)`` runs the fixed protocol and returns an ``EvaluationResult``
(``to_json`` / ``from_json``); see :mod:`r2s2r_envs.evaluation.protocol`.
"""

from r2s2r_envs.evaluation.protocol import (
    EVALUATION_BASE_SEED,
    EpisodeRecord,
    EvaluationResult,
    Policy,
    evaluate,
    evaluation_seeds,
)
from r2s2r_envs.evaluation.stats import summarize_episodes, wilson_interval

__all__ = [
    "EVALUATION_BASE_SEED",
    "EpisodeRecord",
    "EvaluationResult",
    "Policy",
    "evaluate",
    "evaluation_seeds",
    "summarize_episodes",
    "wilson_interval",
]
