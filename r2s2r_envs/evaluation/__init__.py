"""Evaluation: the protocol every score goes through, its statistics, the leaderboard (docs/protocol.md,
docs/leaderboard.md).

``evaluate(env_id, policy_or_factory, episodes=N)`` runs the fixed protocol and returns an ``EvaluationResult``
(``to_json`` / ``from_json``, checked against the published schema); see :mod:`r2s2r_envs.evaluation.protocol`.
``build_leaderboard(results_dir, out_dir)`` groups result files into the leaderboard, and ``pearson`` / ``mmrv``
measure whether a simulator ranks policies as the lab does.  ``evaluate_panel(policy, "standard")`` runs a policy on
every lab of a lab panel (:mod:`r2s2r_envs.evaluation.panels`).
"""

from r2s2r_envs.evaluation.leaderboard import build_leaderboard
from r2s2r_envs.evaluation.panels import PANELS, evaluate_panel, get_panel
from r2s2r_envs.evaluation.protocol import (
    EVALUATION_BASE_SEED,
    POLICY_FAILURE,
    EpisodeRecord,
    EvaluationResult,
    Policy,
    evaluate,
    evaluation_seeds,
)
from r2s2r_envs.evaluation.ranking import mmrv, pearson
from r2s2r_envs.evaluation.schema import RESULT_SCHEMA_VERSION, ResultSchemaError, validate_result
from r2s2r_envs.evaluation.splits import SPLITS, STANDARD, condition_base_seed, plan_conditions
from r2s2r_envs.evaluation.stats import summarize_episodes, wilson_interval

__all__ = [
    "EVALUATION_BASE_SEED",
    "PANELS",
    "POLICY_FAILURE",
    "RESULT_SCHEMA_VERSION",
    "SPLITS",
    "STANDARD",
    "EpisodeRecord",
    "EvaluationResult",
    "Policy",
    "ResultSchemaError",
    "build_leaderboard",
    "condition_base_seed",
    "evaluate",
    "evaluate_panel",
    "evaluation_seeds",
    "get_panel",
    "mmrv",
    "pearson",
    "plan_conditions",
    "summarize_episodes",
    "validate_result",
    "wilson_interval",
]
