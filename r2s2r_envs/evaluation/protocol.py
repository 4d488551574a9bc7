"""The evaluation protocol: how a policy is scored on a PickSort env, and the result file that records it.

One function, :func:`evaluate`, runs ``episodes`` episodes of a policy on a registered PickSort id and returns an
:class:`EvaluationResult`: one :class:`EpisodeRecord` per episode, their summary (success rate with a Wilson 95%
interval, at the end of the episode and at any step, sort accuracy, time to sort, failure causes) and what is
needed to reproduce and compare it (env id and arguments, the env's own ``provenance()``, the policy's name and
settings, the base seed, the seeding convention, package versions).  ``r2s2r demo``, the benchmarks and the
baselines all score through it; docs/protocol.md explains the choices.

Conditions and seeds: by default a policy is evaluated under the standard mix of conditions (``nominal`` and the
shifts of :mod:`r2s2r_envs.envs.conditions`), each condition at its own base seed ``S`` of the ``test`` split
(:mod:`r2s2r_envs.evaluation.splits`: ``dev`` for development choices, ``legacy`` = ``EVALUATION_BASE_SEED``, the
seeds of every result before the splits).  Episode ``i`` of a condition resets the env with ``env_seed`` and the
policy with ``policy_seed``, ``(env_seed, policy_seed) = episode_seeds(S, i)`` (:mod:`r2s2r_envs.envs.seeding`, the
suite's one convention; :func:`evaluation_seeds` lists them).  An episode is determined by its condition and
``(S, i)``, so a result does not depend on the number of worker processes.

Episodes end when the env ends them: every object has an outcome (terminated), or the env's own time limit
``episode_steps`` ran out or the simulation diverged (truncated), or the policy emitted an action the env cannot
take (NaN/inf, the wrong shape, not numbers): then the protocol ends the episode as a ``policy_failure`` and
records why, instead of crashing the run.  The env is a black box here: for the lab
(``PickSort-Real-v0``) only what its ``provenance()`` discloses is recorded, never its physics.

Example::

    import r2s2r_envs
    from r2s2r_envs.behavior import make_demonstrator
    from r2s2r_envs.evaluation.protocol import evaluate

    result = evaluate("PickSort-Ungrounded-v0", make_demonstrator, episodes=20)
    print(result.summary["success_rate"], result.summary["success_rate_ci95"])
    text = result.to_json()  # EvaluationResult.from_json(text) reads it back

This module is the protocol's public face; the code lives in :mod:`~r2s2r_envs.evaluation.policy` (what a policy
is, how a factory becomes one), :mod:`~r2s2r_envs.evaluation.episode` (one episode and its record),
:mod:`~r2s2r_envs.evaluation.results` (the result and its file) and :mod:`~r2s2r_envs.evaluation.runner`
(:func:`evaluate` and the ways it runs episodes: serial, batched, in worker processes).
"""

from __future__ import annotations

from r2s2r_envs.envs.registration import ENV_PREFIX, EnvArgumentError, UnknownEnvError, check_env_id, make_env
from r2s2r_envs.envs.seeding import SEEDING_CONVENTION
from r2s2r_envs.evaluation.episode import RENDER_HINT, RenderError, run_episode
from r2s2r_envs.evaluation.policy import (
    Policy,
    PolicyError,
    PolicyFactory,
    PolicyOrFactory,
    action_problem,
    resolve_policy,
    with_policy_inputs,
    with_policy_sensors,
)
from r2s2r_envs.evaluation.results import (
    LAB_WITHHELD,
    POLICY_FAILURE,
    RECORD_FAILURE_CAUSES,
    EpisodeRecord,
    EvaluationResult,
    method_record,
)
from r2s2r_envs.evaluation.runner import EVALUATION_BASE_SEED, evaluate, evaluation_seeds, picksort_env_ids
from r2s2r_envs.evaluation.schema import (
    METHOD_KEYS,
    READABLE_SCHEMA_VERSIONS,
    RESULT_FORMAT,
    RESULT_SCHEMA_VERSION,
    ResultSchemaError,
    result_schema,
    validate_result,
)
from r2s2r_envs.evaluation.splits import ConditionRun

__all__ = [
    "ENV_PREFIX",
    "EVALUATION_BASE_SEED",
    "LAB_WITHHELD",
    "METHOD_KEYS",
    "POLICY_FAILURE",
    "READABLE_SCHEMA_VERSIONS",
    "RECORD_FAILURE_CAUSES",
    "RENDER_HINT",
    "RESULT_FORMAT",
    "RESULT_SCHEMA_VERSION",
    "SEEDING_CONVENTION",
    "EnvArgumentError",
    "ConditionRun",
    "EpisodeRecord",
    "EvaluationResult",
    "Policy",
    "PolicyError",
    "PolicyFactory",
    "PolicyOrFactory",
    "RenderError",
    "ResultSchemaError",
    "UnknownEnvError",
    "check_env_id",
    "evaluate",
    "evaluation_seeds",
    "action_problem",
    "make_env",
    "method_record",
    "picksort_env_ids",
    "resolve_policy",
    "result_schema",
    "run_episode",
    "validate_result",
    "with_policy_inputs",
    "with_policy_sensors",
]
