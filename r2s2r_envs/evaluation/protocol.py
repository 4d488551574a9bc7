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
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import pickle
import sys
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Protocol, cast, runtime_checkable

import gymnasium as gym
import mujoco
import numpy as np

from r2s2r_envs.envs import FAILURE_CAUSES
from r2s2r_envs.envs.conditions import CONDITIONS, CONDITIONS_VERSION
from r2s2r_envs.envs.registration import (
    ENV_PREFIX,
    EnvArgumentError,
    UnknownEnvError,
    check_env_id,
    make_env,
    registered_ids,
)
from r2s2r_envs.envs.seeding import SEEDING_CONVENTION, episode_seeds
from r2s2r_envs.evaluation.batched import batch_capable, make_batch_env, run_batched
from r2s2r_envs.evaluation.schema import (
    METHOD_KEYS,
    READABLE_SCHEMA_VERSIONS,
    RESULT_FORMAT,
    RESULT_SCHEMA_VERSION,
    ResultSchemaError,
    result_schema,
    validate_method,
    validate_result,
)
from r2s2r_envs.evaluation.splits import (
    CUSTOM_SPLIT,
    LEGACY_BASE_SEED,
    SPLITS,
    STANDARD,
    ConditionRun,
    condition_base_seed,
    plan_conditions,
)
from r2s2r_envs.evaluation.stats import summarize_episodes
from r2s2r_envs.evaluation.tracks import check_track, evaluation_arguments, get_track, training_samples
from r2s2r_envs.paths import check_output_file
from r2s2r_envs.provenance import versions
from r2s2r_envs.workers import WorkerDiedError, first_cause, worker_death

#: Base seed of the evaluation protocol before its seed splits, now the ``legacy`` split's
#: (docs/protocol.md#dev-and-test-splits); what ``evaluate(..., episodes=N)`` still runs, so that old results
#: reproduce.  It never changes (``tests/test_protocol.py`` pins the seeds it gives).
EVALUATION_BASE_SEED = LEGACY_BASE_SEED
#: Failure cause (and object outcome) of an episode the protocol stopped because the policy emitted an action
#: the env cannot take: the wrong shape, NaN/inf or not a number (the record's ``policy_error`` says which).
POLICY_FAILURE = "policy_failure"
#: Every failure cause a record can hold: the env's (``r2s2r_envs.envs.FAILURE_CAUSES``) and the policy failure.
RECORD_FAILURE_CAUSES: tuple[str, ...] = (*FAILURE_CAUSES, POLICY_FAILURE)
#: Written instead of a lab given as a dict or object (its parameters) in a result's ``env_kwargs``.
LAB_WITHHELD = "withheld: a lab given inline is not written into results (the lab is a black box)"
# MuJoCo picks its OpenGL backend when it is first imported, so MUJOCO_GL must be set before Python starts.
RENDER_HINT = (
    "offscreen rendering failed. On a headless Linux machine run with MUJOCO_GL=egl (e.g. "
    "`MUJOCO_GL=egl r2s2r demo ...`) and make sure the EGL libraries are installed "
    "(Debian/Ubuntu: apt-get install -y libegl1 libegl-mesa0 libgl1-mesa-dri)"
)


# ---------------------------------------------------------------------- errors
class RenderError(RuntimeError):
    """Offscreen rendering (for a video) is not available; the message says how to enable it."""


class PolicyError(TypeError):
    """A policy the protocol cannot run: not a Policy and not callable, or a factory that raised or returned
    something that is not a Policy; the message names the factory and what went wrong."""


# ---------------------------------------------------------------------- policies
@runtime_checkable
class Policy(Protocol):
    """What :func:`evaluate` runs: the demonstrators of :mod:`r2s2r_envs.behavior` satisfy it.

    Optional attributes, recorded in the result when present: ``name`` (str), ``settings`` (JSON-serializable
    configuration) and ``metadata`` (a mapping: how the policy was made, the result's ``method`` section;
    ``METHOD_KEYS`` lists what the leaderboard reads, docs/leaderboard.md#schema). An optional method
    ``set_domain(domain)`` is called with the env's domain (``"real"`` for the lab, ``"sim"`` for a simulator)
    before the first episode: a domain-conditioned policy acts as in that domain. An optional attribute ``sensors``
    (opt-in sensor names, e.g. ``("object_visible",)``) asks for those observation keys: the protocol makes every
    env with them (added to ``env_kwargs["sensors"]``, and recorded so).

    Optional batch methods, used by ``evaluate(..., batch=N)`` (docs/protocol.md#batched-policies):
    ``reset_batch(seeds, mask=None)`` starts an episode in each row ``i`` of a batch of ``len(seeds)`` envs where
    ``mask[i]`` is true (every row without a mask), as ``reset(seeds[i])`` would; ``act_batch(obs)`` returns the
    ``(B, A)`` actions for observations ``{key: (B, ...)}``, row ``i`` what ``act`` would give in row ``i``'s
    episode.  A policy without them is called per env, one copy per row.
    """

    def reset(self, seed: int | None) -> None:
        """Start an episode; all of the policy's own randomness must come from ``seed``."""
        ...

    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """The action for an observation of the env."""
        ...


#: ``f(env) -> Policy``, called once per env the protocol makes (once per worker process).
PolicyFactory = Callable[[gym.Env], Policy]
PolicyOrFactory = Policy | PolicyFactory


def _is_policy(obj: Any) -> bool:
    # A class has `reset` and `act` attributes too; it is a factory (called with the env), not a policy.
    return isinstance(obj, Policy) and not isinstance(obj, type)


def resolve_policy(policy: PolicyOrFactory, env: gym.Env) -> Policy:
    """``policy`` itself if it is a :class:`Policy`, else ``policy(env)``.

    Raises:
        PolicyError: ``policy`` is neither a policy nor callable, the factory raised (its error is named, and
            kept as the cause), or it returned something that is not a policy.
    """
    if _is_policy(policy):
        return _tell_domain(policy, env)  # type: ignore[arg-type]
    if callable(policy):
        try:
            made = policy(env)
        except PolicyError:
            raise
        except Exception as e:  # noqa: BLE001 - the factory is the user's code: any error is named, not relayed raw
            raise PolicyError(f"the policy factory {_qualified_name(policy)} raised {type(e).__name__}: {e}") from e
        if not _is_policy(made):
            raise PolicyError(
                f"the policy factory {_qualified_name(policy)} returned a {type(made).__name__}, which is not a "
                "Policy: it needs methods reset(seed) and act(obs)"
            )
        return _tell_domain(made, env)
    raise PolicyError(
        f"policy must be a Policy (an object with methods reset(seed) and act(obs)) or a factory f(env) -> Policy, "
        f"got a {type(policy).__name__}"
    )


def _tell_domain(policy: Policy, env: gym.Env) -> Policy:
    """Calls the policy's optional ``set_domain`` with the env's domain (a public label, not its state)."""
    set_domain = getattr(policy, "set_domain", None)
    if callable(set_domain):
        set_domain(str(getattr(env.unwrapped, "domain", "sim")))
    return policy


def with_policy_sensors(policy: Policy, env_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``env_kwargs`` with the opt-in sensors the policy's optional ``sensors`` names added to ``sensors`` (a copy;
    unchanged when it names none the arguments lack).

    Raises:
        PolicyError: ``sensors`` is not a sequence of names.
    """
    asked = getattr(policy, "sensors", None) or ()
    if isinstance(asked, str) or not all(isinstance(k, str) for k in asked):
        raise PolicyError(f"a policy's sensors must be a sequence of sensor names, got {asked!r}")
    have = list(env_kwargs.get("sensors", ()))
    missing = [k for k in asked if k not in have]
    return {**env_kwargs, "sensors": [*have, *missing]} if missing else dict(env_kwargs)


def _qualified_name(obj: Any) -> str:
    """``module.qualname`` of a class or function (of the type of anything else)."""
    target = obj if hasattr(obj, "__qualname__") else type(obj)
    return f"{getattr(target, '__module__', '?')}.{target.__qualname__}"


def _policy_record(policy: Policy) -> dict[str, Any]:
    name = getattr(policy, "name", None)
    return {
        "name": None if name is None else str(name),
        "class": _qualified_name(type(policy)),
        "settings": _jsonable(getattr(policy, "settings", None), "policy.settings"),
    }


def method_record(policy: Policy, override: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The result's ``method`` section: the policy's ``metadata`` (if any), then ``override``, over defaults.

    Keys the metadata does not give are null (``datasets``: an empty list); ``method`` defaults to the policy's
    ``name`` (else its class name) and ``policy_class`` to its qualified class.  Extra metadata keys are kept.

    Raises:
        TypeError: ``metadata`` is not a mapping, or holds something that is not JSON data.
        ResultSchemaError: a value the schema refuses (e.g. ``real_fraction`` 1.5); the message names the key.
    """
    metadata = getattr(policy, "metadata", None)
    if metadata is not None and not isinstance(metadata, Mapping):
        raise TypeError(f"policy.metadata must be a mapping (or absent), got a {type(metadata).__name__}")
    record: dict[str, Any] = dict.fromkeys(METHOD_KEYS)
    record["datasets"] = []
    record.update(_jsonable(dict(metadata or {}), "policy.metadata"))
    record.update(_jsonable(dict(override or {}), "method"))
    if not record["method"]:
        record["method"] = str(getattr(policy, "name", None) or type(policy).__name__)
    if not record["policy_class"]:
        record["policy_class"] = _qualified_name(type(policy))
    validate_method(record)
    return record


def action_problem(action: Any, shape: tuple[int, ...]) -> str | None:
    """Why ``action`` cannot be sent to an env whose actions have ``shape`` (None when it can).

    The env itself would raise on these; the protocol records them as a policy failure instead. An exception the
    policy raised instead of answering (passed here as the action) is one too.
    """
    if isinstance(action, BaseException):
        text = " ".join(str(action).split())[:300]
        return f"the policy raised {type(action).__name__}{': ' + text if text else ''}"
    try:
        a = np.asarray(action)
        if a.dtype.kind == "c":
            return "the action holds complex numbers; the env takes real numbers"
        a = np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError):
        return f"the action is not an array of numbers (got a {type(action).__name__})"
    if a.shape != tuple(shape):
        return f"the action has shape {a.shape}; the env takes shape {tuple(shape)}"
    bad = np.flatnonzero(~np.isfinite(a.ravel()))
    if bad.size:
        return f"the action has NaN/inf at indices {bad[:8].tolist()}{' ...' if bad.size > 8 else ''}"
    return None


# ---------------------------------------------------------------------- envs and seeds
def picksort_env_ids() -> list[str]:
    """Every registered id whose name starts with ``PickSort-`` (``r2s2r_envs.envs.registered_ids()``, a list)."""
    return list(registered_ids())


def evaluation_seeds(episodes: int, base_seed: int = EVALUATION_BASE_SEED) -> list[tuple[int, int]]:
    """``(env_seed, policy_seed)`` of episodes ``0 .. episodes - 1`` of base seed ``base_seed``.

    With the default base seed these are the episodes of the fixed protocol.

    Raises:
        ValueError: a negative ``episodes`` or ``base_seed``.
    """
    if isinstance(episodes, bool) or not isinstance(episodes, (int, np.integer)) or episodes < 0:
        raise ValueError(f"episodes must be an integer >= 0, got {episodes!r}")
    return [episode_seeds(base_seed, i) for i in range(int(episodes))]


# ---------------------------------------------------------------------- records
@dataclasses.dataclass(frozen=True, kw_only=True)
class EpisodeRecord:
    """What one episode did, from the env's final ``info``.

    Attributes:
        index: Episode index ``i`` within the run.
        env_seed: Seed of ``env.reset`` (``episode_seeds(base_seed, index)[0]``).
        policy_seed: Seed of ``policy.reset`` (``episode_seeds(base_seed, index)[1]``).
        is_success: Every object sorted at the end of the episode.
        success_any_step: Every object sorted at some step of the episode.
        sort_accuracy: Share of the objects sorted, in [0, 1].
        time_to_sort: Seconds until the last object was sorted; None unless every object was.
        failure_cause: Outcome of the first object that failed (``RECORD_FAILURE_CAUSES``); None if none failed.
            ``policy_failure`` when the policy emitted an unusable action before any object failed.
        object_outcomes: Outcome per object (``r2s2r_envs.envs.OUTCOMES``, or ``policy_failure`` for the objects
            still pending when the policy failed).
        steps: Control steps taken.
        episode_return: Sum of the rewards.
        terminated: The episode ended because every object had an outcome.
        truncated: The episode ended at the env's time limit or because the simulation diverged.
        unstable: The simulation diverged.
        policy_error: Why the protocol stopped the episode early: the policy emitted an action of the wrong shape,
            NaN/inf or not numbers (at which step); None when the policy never did.
    """

    index: int
    env_seed: int
    policy_seed: int
    is_success: bool
    success_any_step: bool
    sort_accuracy: float
    time_to_sort: float | None
    failure_cause: str | None
    object_outcomes: tuple[str, ...]
    steps: int
    episode_return: float
    terminated: bool
    truncated: bool
    unstable: bool
    policy_error: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "object_outcomes", tuple(str(o) for o in self.object_outcomes))

    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable dict (``object_outcomes`` as a list)."""
        d = dataclasses.asdict(self)
        d["object_outcomes"] = list(self.object_outcomes)
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EpisodeRecord:
        """Inverse of :meth:`to_dict`.

        Raises:
            ResultSchemaError: missing or unknown keys; the message lists the expected ones.
        """
        names = [f.name for f in dataclasses.fields(cls)]
        missing = [k for k in names if k not in data]
        unknown = sorted(set(data) - set(names))
        if missing or unknown:
            raise ResultSchemaError(
                f"episode record has missing keys {missing} / unknown keys {unknown}; expected keys: {names}"
            )
        return cls(**{k: data[k] for k in names})


#: The default of ``EvaluationResult.method``: ``None``, which ``__post_init__`` replaces with the defaults of
#: :func:`method_record`. Typed ``Any`` so that the field keeps its own type: a built result always holds a dict.
FROM_POLICY: Any = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class EvaluationResult:
    """An evaluation: its episodes, their summary, and what is needed to reproduce it.

    Attributes:
        env_id: The registered PickSort id evaluated.
        env_kwargs: Arguments of ``gym.make`` (JSON form; a lab given inline is withheld).
        provenance: The env's ``provenance()``, as the env discloses it (for the lab: its name, never its physics).
        policy: ``name`` and ``settings`` of the policy (None when it has none) and its ``class``.
        method: How the policy was made (``METHOD_KEYS``: method, policy class, ``real_fraction``, grounding
            variant of its sim data, content hashes of its datasets, training seed, numbers of real and sim
            demos), from the policy's ``metadata``; None gives the defaults of :func:`method_record`.
        base_seed: Base seed ``S``; episode ``i`` used ``episode_seeds(S, i)``.
        records: One record per episode, in episode order.
        versions: Versions of r2s2r_envs, MuJoCo, Gymnasium, NumPy and Python that produced the result.
        seeding_convention: The seeding convention in words.
        video: Path of the video of the first episode, if one was written.
        wall_time_s: Wall-clock time of the evaluation, s (the only field that differs between identical runs).
        schema_version: Version of the result format.
        split: The seed split (``splits.RESULT_SPLITS``); None: ``legacy`` at ``EVALUATION_BASE_SEED``, else
            ``custom``.
        conditions: The conditions run, in record order (each one's records follow the previous one's); None: one
            nominal condition of every record at ``base_seed``.
        conditions_version: Version of the condition definitions (``envs.conditions.CONDITIONS_VERSION``).
        panel: The lab panel this result is one lab of (``panels.evaluate_panel``: name, version, ``lab``, and every
            lab's identity ``{lab, name, config_sha256}``); None outside a panel (the key is then left out).
        track: The track the result was evaluated for (``tracks.TrackCheck.to_record``: name, version, whether it is
            on it and why not, training samples and budget, the datasets' builds); None when it names none (the key
            is then left out).
    """

    env_id: str
    env_kwargs: dict[str, Any]
    provenance: dict[str, Any]
    policy: dict[str, Any]
    base_seed: int
    records: tuple[EpisodeRecord, ...]
    versions: dict[str, str]
    method: dict[str, Any] = FROM_POLICY
    seeding_convention: str = SEEDING_CONVENTION
    video: str | None = None
    wall_time_s: float | None = None
    schema_version: int = RESULT_SCHEMA_VERSION
    split: str = FROM_POLICY
    conditions: tuple[ConditionRun, ...] = FROM_POLICY
    conditions_version: int = CONDITIONS_VERSION
    panel: dict[str, Any] | None = None
    track: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "records", tuple(self.records))
        if self.split is None:
            object.__setattr__(self, "split", "legacy" if self.base_seed == LEGACY_BASE_SEED else CUSTOM_SPLIT)
        if self.conditions is None:
            object.__setattr__(self, "conditions", (ConditionRun("nominal", self.base_seed, len(self.records)),))
        object.__setattr__(self, "conditions", tuple(self.conditions))
        if self.method is None:
            default = dict.fromkeys(METHOD_KEYS)
            default.update(
                method=self.policy.get("name") or self.policy["class"].rpartition(".")[2],
                policy_class=self.policy["class"],
                datasets=[],
            )
            object.__setattr__(self, "method", default)

    @property
    def episodes(self) -> int:
        """Number of episodes."""
        return len(self.records)

    @property
    def summary(self) -> dict[str, Any]:
        """``summarize_episodes`` of the records: success rate at the end and at any step (each with its Wilson
        95% interval), sort accuracy, mean time to sort, failure causes (episodes per first failure, policy
        failures included) and ``policy_failures`` (episodes stopped for an unusable action).  Every env cause is
        listed, zeros included; ``policy_failure`` only when it occurred."""
        return summarize_episodes([r.to_dict() for r in self.records], FAILURE_CAUSES)

    def condition_records(self) -> dict[str, tuple[EpisodeRecord, ...]]:
        """The records of each condition, by name, in the result's order."""
        out, start = {}, 0
        for run in self.conditions:
            out[run.condition] = self.records[start : start + run.episodes]
            start += run.episodes
        return out

    @property
    def condition_summaries(self) -> dict[str, dict[str, Any]]:
        """The :attr:`summary` of each condition's records (success rate with its Wilson 95% interval, ...)."""
        return {
            name: summarize_episodes([r.to_dict() for r in records], FAILURE_CAUSES)
            for name, records in self.condition_records().items()
        }

    @property
    def shifted_summary(self) -> dict[str, Any] | None:
        """The :attr:`summary` of the records of every shifted condition pooled ("all shifted"); None without one."""
        by_name = self.condition_records()
        shifted = [r.to_dict() for run in self.conditions if run.shifted for r in by_name[run.condition]]
        return summarize_episodes(shifted, FAILURE_CAUSES) if shifted else None

    def to_dict(self) -> dict[str, Any]:
        """The result file's content (checked against ``result_schema.json``)."""
        summaries = self.condition_summaries
        return {
            "format": RESULT_FORMAT,
            "schema_version": self.schema_version,
            "env_id": self.env_id,
            "env_kwargs": self.env_kwargs,
            "provenance": self.provenance,
            "policy": self.policy,
            "method": self.method,
            "base_seed": self.base_seed,
            "seeding_convention": self.seeding_convention,
            "episodes": self.episodes,
            "summary": self.summary,
            "split": self.split,
            "conditions_version": self.conditions_version,
            "conditions": [
                {
                    "name": run.condition,
                    "shifted": run.shifted,
                    "base_seed": run.base_seed,
                    "episodes": run.episodes,
                    "summary": summaries[run.condition],
                }
                for run in self.conditions
            ],
            "shifted": self.shifted_summary,
            "records": [r.to_dict() for r in self.records],
            "versions": self.versions,
            "video": self.video,
            "wall_time_s": self.wall_time_s,
            **({} if self.panel is None else {"panel": self.panel}),
            **({} if self.track is None else {"track": self.track}),
        }

    def to_json(self, indent: int | None = None) -> str:
        """The result as JSON text (strict JSON: no NaN or infinity), with ``content_sha256``, the hash of its own
        content (:func:`r2s2r_envs.safe_json.with_content_hash`) that :meth:`from_dict` verifies."""
        from r2s2r_envs.safe_json import with_content_hash

        return json.dumps(with_content_hash(self.to_dict()), indent=indent, allow_nan=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EvaluationResult:
        """Read a result dict, checking it against the schema and for internal consistency.

        A file of schema version 1 is checked against its own schema and upgraded (no policy failures, a method
        section from the policy record); the result is then of the current version.

        A ``content_sha256`` field (written by :meth:`to_json`) must be the hash of the rest of the result; a
        result without one (older files) is read as before.

        Raises:
            ResultSchemaError: not a result, its ``content_sha256`` does not match its content, an unsupported
                ``schema_version``, a field that breaks the schema,
                records out of order or with seeds that do not follow the seeding convention, or a summary
                that does not match the records.
        """
        from r2s2r_envs.safe_json import CONTENT_HASH_FIELD, ContentHashError, check_content_hash

        if isinstance(data, Mapping) and CONTENT_HASH_FIELD in data:  # written by to_json: verify, then drop it
            try:
                data = check_content_hash(
                    dict(data),
                    "this result",
                    fix="re-run the evaluation or restore the file (written by r2s2r evaluate, not by hand)",
                )
            except ContentHashError as e:
                raise ResultSchemaError(str(e)) from None
        version = validate_result(data)
        if version == 1:
            data = _upgrade_v1(data)
        if version <= 2:
            data = _upgrade_v2(data)
        records = tuple(EpisodeRecord.from_dict(r) for r in data["records"])
        conditions = tuple(
            ConditionRun(c["name"], c["base_seed"], c["episodes"], c["shifted"]) for c in data["conditions"]
        )
        result = cls(
            env_id=data["env_id"],
            env_kwargs=dict(data["env_kwargs"]),
            provenance=dict(data["provenance"]),
            policy=dict(data["policy"]),
            base_seed=data["base_seed"],
            records=records,
            versions=dict(data["versions"]),
            method=FROM_POLICY if data["method"] is None else dict(data["method"]),
            seeding_convention=data["seeding_convention"],
            video=data["video"],
            wall_time_s=data["wall_time_s"],
            split=data["split"],
            conditions=conditions,
            conditions_version=data["conditions_version"],
            panel=data.get("panel"),
            track=data.get("track"),
        )
        _check_panel(result)
        if result.track is not None and result.track["on_track"] == bool(result.track["reasons"]):
            raise ResultSchemaError(
                f"result.track says on_track={result.track['on_track']} with {len(result.track['reasons'])} "
                "reason(s) to be off it; a result is on its track exactly when it has none"
            )
        if data["episodes"] != len(records):
            raise ResultSchemaError(f"result says episodes={data['episodes']} but holds {len(records)} records")
        _check_conditions(result)
        starts = [sum(c.episodes for c in conditions[:k]) for k in range(len(conditions))]
        for i, r in enumerate(records):
            if r.index != i:
                raise ResultSchemaError(f"result.records[{i}] has index {r.index}; records must be in episode order")
            k = max(j for j, start in enumerate(starts) if start <= i)
            seed, local = conditions[k].base_seed, i - starts[k]
            if result.seeding_convention == SEEDING_CONVENTION and (r.env_seed, r.policy_seed) != episode_seeds(
                seed, local
            ):
                raise ResultSchemaError(
                    f"result.records[{i}] has seeds ({r.env_seed}, {r.policy_seed}) but the seeding convention "
                    f"gives {episode_seeds(seed, local)} for episode {local} of condition "
                    f"{conditions[k].condition!r} at base seed {seed}"
                )
        if not _same_json(data["summary"], result.summary):
            raise ResultSchemaError(
                f"result.summary does not match its records (edited by hand?); the records give {result.summary}"
            )
        summaries = result.condition_summaries
        for k, c in enumerate(data["conditions"]):
            if not _same_json(c["summary"], summaries[c["name"]]):
                raise ResultSchemaError(f"result.conditions[{k}].summary does not match its records (edited by hand?)")
        if not _same_json(data["shifted"], result.shifted_summary):
            raise ResultSchemaError("result.shifted does not match the records of its shifted conditions")
        return result

    @classmethod
    def from_json(cls, text: str) -> EvaluationResult:
        """Read :meth:`to_json` output; see :meth:`from_dict`.

        Raises:
            ResultSchemaError: not JSON, or not a valid result (see :meth:`from_dict`).
        """
        from r2s2r_envs.safe_json import JSONFileError, loads

        try:
            data = loads(text, what="an evaluation result")
        except JSONFileError as e:
            raise ResultSchemaError(f"{e}; an evaluation result must be JSON (r2s2r evaluate writes it)") from None
        return cls.from_dict(data)


def _upgrade_v1(data: Mapping[str, Any]) -> dict[str, Any]:
    """A valid version-1 result as version 2: its summary checked first (against version 1's own figures)."""
    if not _same_json(data["summary"], summarize_episodes(list(data["records"]), FAILURE_CAUSES)):
        raise ResultSchemaError("result.summary does not match its records (edited by hand?)")
    upgraded = {k: v for k, v in data.items() if k != "summary"}
    upgraded["schema_version"] = RESULT_SCHEMA_VERSION
    upgraded["records"] = [{**r, "policy_error": None} for r in data["records"]]
    upgraded["summary"] = summarize_episodes(upgraded["records"], FAILURE_CAUSES)
    upgraded["method"] = None
    return upgraded


def _upgrade_v2(data: Mapping[str, Any]) -> dict[str, Any]:
    """A valid version-2 result as version 3: one nominal condition of every record, split ``legacy`` at the
    legacy base seed (else ``custom``); the condition definitions' first version, whose nominal is every world as
    it was."""
    upgraded = dict(data)
    upgraded["schema_version"] = RESULT_SCHEMA_VERSION
    upgraded["split"] = "legacy" if data["base_seed"] == LEGACY_BASE_SEED else CUSTOM_SPLIT
    upgraded["conditions_version"] = 1
    nominal = {"name": "nominal", "shifted": False, "base_seed": data["base_seed"], "episodes": data["episodes"]}
    upgraded["conditions"] = [{**nominal, "summary": data["summary"]}]
    upgraded["shifted"] = None
    return upgraded


def _check_conditions(result: EvaluationResult) -> None:
    """A result's conditions against its split and (for the current definitions) the registry and its seeds."""
    names = [c.condition for c in result.conditions]
    if len(set(names)) != len(names):
        raise ResultSchemaError(f"result.conditions names a condition twice: {names}")
    if sum(c.episodes for c in result.conditions) != result.episodes:
        raise ResultSchemaError(
            f"result.conditions hold {sum(c.episodes for c in result.conditions)} episodes but the result "
            f"{result.episodes} records"
        )
    if result.base_seed != result.conditions[0].base_seed:
        raise ResultSchemaError(
            f"result.base_seed is {result.base_seed}, but its first condition's base seed "
            f"{result.conditions[0].base_seed}"
        )
    current = result.conditions_version == CONDITIONS_VERSION
    for k, c in enumerate(result.conditions):
        where = f"result.conditions[{k}]"
        if current and c.condition not in CONDITIONS:
            raise ResultSchemaError(
                f"{where}: unknown condition {c.condition!r} of conditions version {CONDITIONS_VERSION}; valid: "
                f"{list(CONDITIONS)}"
            )
        if current and c.shifted != CONDITIONS[c.condition].shifted:
            raise ResultSchemaError(f"{where}: {c.condition!r} has shifted={CONDITIONS[c.condition].shifted}")
        if result.split in SPLITS and current:
            expected = condition_base_seed(result.split, c.condition)
            if c.base_seed != expected:
                raise ResultSchemaError(
                    f"{where}: base seed {c.base_seed}, but the {result.split!r} split's seed of {c.condition!r} is "
                    f"{expected} (a base seed of your own makes the split {CUSTOM_SPLIT!r})"
                )


def _check_panel(result: EvaluationResult) -> None:
    """A panel result's lab is one of its panel's, and its provenance discloses that lab's identity."""
    if result.panel is None:
        return
    entries = {e["lab"]: {k: v for k, v in e.items() if k != "lab"} for e in result.panel["labs"]}
    lab = result.panel["lab"]
    if lab not in entries:
        raise ResultSchemaError(f"result.panel.lab {lab!r} is not one of the panel's labs {list(entries)}")
    if result.env_id != "PickSort-Real-v0" or result.provenance.get("lab") != entries[lab]:
        raise ResultSchemaError(
            f"result.panel says lab {lab!r} is {entries[lab]}, but the result was made on {result.env_id} with lab "
            f"{result.provenance.get('lab')}"
        )


def _same_json(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and math.isclose(a, b, abs_tol=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_json(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b))
    return a == b


# ---------------------------------------------------------------------- JSON forms
def _jsonable(value: Any, where: str) -> Any:
    """``value`` as plain JSON data (WorldParams-like objects through their ``to_dict``)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float, np.integer, np.floating)):
        value = value.item() if isinstance(value, np.generic) else value
        if isinstance(value, float) and not math.isfinite(value):
            raise TypeError(f"{where} is {value!r}; a result holds finite numbers only")
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v, f"{where}[{k!r}]") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist(), where)
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return _jsonable(to_dict(), where)
    raise TypeError(
        f"{where}: a {type(value).__name__} cannot be written into a result; use JSON data "
        "(numbers, strings, lists, dicts) or an object with a to_dict() method"
    )


def _recorded_env_kwargs(env_kwargs: Mapping[str, Any], domain: str) -> dict[str, Any]:
    recorded = {}
    for key, value in env_kwargs.items():
        if domain == "real" and key == "lab" and not isinstance(value, (str, os.PathLike)):
            recorded[key] = LAB_WITHHELD  # an inline lab is its parameters
        else:
            recorded[key] = _jsonable(value, f"env_kwargs[{key!r}]")
    return recorded


def _env_provenance(env: gym.Env) -> dict[str, Any]:
    unwrapped = env.unwrapped
    provenance_fn = getattr(unwrapped, "provenance", None)
    prov = dict(provenance_fn()) if callable(provenance_fn) else {}
    prov.setdefault("domain", str(getattr(unwrapped, "domain", "sim")))
    prov = _jsonable(prov, "provenance")
    if prov["domain"] == "real" and ("world_params" in prov or "world" in prov):
        raise RuntimeError(
            f"{env.spec.id if env.spec else type(unwrapped).__name__}.provenance() discloses the "
            "lab's physics; the lab must only disclose its name (a bug in the lab)"
        )
    return prov


# ---------------------------------------------------------------------- running
def run_episode(
    env: gym.Env, policy: Policy, *, env_seed: int, policy_seed: int, index: int = 0, writer: Any = None
) -> EpisodeRecord:
    """Run one episode: ``env.reset(seed=env_seed)``, ``policy.reset(policy_seed)``, step until it ends.

    An action the env cannot take (wrong shape, NaN/inf, complex, not numbers), or an exception raised by the
    policy's ``reset`` or ``act``, ends the episode as a policy failure: the objects still pending get the outcome
    ``policy_failure``, the record's ``policy_error`` says what was wrong, and the evaluation goes on.

    Args:
        env: A PickSort env.
        policy: The policy.
        env_seed: Seed of ``env.reset``.
        policy_seed: Seed of ``policy.reset``.
        index: Episode index recorded in the result.
        writer: Optional imageio writer; every ``env.render()`` frame is appended to it, the reset frame
            included (streamed, so memory stays flat however long the episode).

    Returns:
        The episode's record.

    Raises:
        RuntimeError: the env did not end the episode within its ``episode_steps``.
    """
    obs, info = env.reset(seed=int(env_seed))
    success_any_step = bool(info.get("is_success", False))
    try:
        policy.reset(int(policy_seed))
    except Exception as e:  # noqa: BLE001 - the policy is the user's code: its error is its failure, recorded
        error = f"reset: {action_problem(e, ())}"
        return _policy_failure(info, error, index, env_seed, policy_seed, 0, 0.0, success_any_step)
    if writer is not None:
        writer.append_data(env.render())
    limit = getattr(env.unwrapped, "episode_steps", None)
    total, steps = 0.0, 0
    terminated = truncated = False
    shape = cast(tuple[int, ...], env.action_space.shape)  # a Box: never None
    while not (terminated or truncated):
        if limit is not None and steps >= limit:
            raise RuntimeError(f"the env did not end episode {index} within its episode_steps={limit} steps")
        try:
            action: Any = policy.act(obs)
        except Exception as e:  # noqa: BLE001 - the policy is the user's code: its error is its failure, recorded
            action = e
        problem = action_problem(action, shape)
        if problem is not None:
            error = f"step {steps}: {problem}"
            return _policy_failure(info, error, index, env_seed, policy_seed, steps, total, success_any_step)
        obs, reward, terminated, truncated, info = env.step(action)
        total += float(reward)
        steps += 1
        success_any_step = success_any_step or bool(info["is_success"])
        if writer is not None:
            writer.append_data(env.render())
    return _episode_record(info, index, env_seed, policy_seed, steps, total, success_any_step, terminated, truncated)


def _episode_record(
    info: Mapping[str, Any],
    index: int,
    env_seed: int,
    policy_seed: int,
    steps: int,
    total: float,
    success_any_step: bool,
    terminated: bool,
    truncated: bool,
) -> EpisodeRecord:
    """The record of an episode the env ended (``info``: its last)."""
    return EpisodeRecord(
        index=int(index),
        env_seed=int(env_seed),
        policy_seed=int(policy_seed),
        is_success=bool(info["is_success"]),
        success_any_step=success_any_step,
        sort_accuracy=float(info["sort_accuracy"]),
        time_to_sort=None if info["time_to_sort"] is None else float(info["time_to_sort"]),
        failure_cause=None if info["failure_cause"] is None else str(info["failure_cause"]),
        object_outcomes=tuple(info["object_outcomes"]),
        steps=steps,
        episode_return=total,
        terminated=bool(terminated),
        truncated=bool(truncated),
        unstable=bool(info.get("unstable", False)),
    )


def _policy_failure(
    info: Mapping[str, Any],
    error: str,
    index: int,
    env_seed: int,
    policy_seed: int,
    steps: int,
    total: float,
    success_any_step: bool,
) -> EpisodeRecord:
    """The record of an episode stopped because the policy emitted an unusable action or raised (``info``: the
    last)."""
    outcomes = [POLICY_FAILURE if o == "pending" else str(o) for o in info["object_outcomes"]]
    return EpisodeRecord(
        index=int(index),
        env_seed=int(env_seed),
        policy_seed=int(policy_seed),
        is_success=False,  # an action is only asked for while some object is pending
        success_any_step=success_any_step,
        sort_accuracy=float(info["sort_accuracy"]),
        time_to_sort=None,
        failure_cause=POLICY_FAILURE if info["failure_cause"] is None else str(info["failure_cause"]),
        object_outcomes=tuple(outcomes),
        steps=steps,
        episode_return=total,
        terminated=False,
        truncated=True,
        unstable=False,
        policy_error=error,
    )


def _filmed_episode(env: gym.Env, policy: Policy, seeds: tuple[int, int], video: str) -> EpisodeRecord:
    try:
        env.reset(seed=seeds[0])  # the episode resets again from the same seed: this only checks rendering
        env.render()
    except mujoco.FatalError as e:
        raise RenderError(f"{RENDER_HINT} (MuJoCo said: {e})") from e
    import imageio.v2 as imageio

    Path(video).parent.mkdir(parents=True, exist_ok=True)
    # libx264 + yuv420p plays everywhere; the render size (480x640) is a multiple of the 16-px macro block.
    writer = imageio.get_writer(
        video, format="FFMPEG", fps=env.metadata.get("render_fps", 20), codec="libx264", pixelformat="yuv420p"
    )
    try:
        return run_episode(env, policy, env_seed=seeds[0], policy_seed=seeds[1], index=0, writer=writer)
    finally:
        writer.close()


# State of a worker process: its env and policy, made once by _worker_init.
_WORKER: dict[str, Any] = {}


def _worker_init(env_id: str, env_kwargs: dict[str, Any], policy: PolicyOrFactory) -> None:
    _WORKER.update(env_id=env_id, env_kwargs=env_kwargs, policy=policy, envs={})


def _worker_episode(index: int, env_seed: int, policy_seed: int, condition: str = "nominal") -> EpisodeRecord:
    envs = _WORKER["envs"]
    if condition not in envs:  # one env (and policy) per condition, made at its first episode
        env = make_env(_WORKER["env_id"], _condition_kwargs(_WORKER["env_kwargs"], condition))
        envs[condition] = (env, resolve_policy(_WORKER["policy"], env))
    env, policy = envs[condition]
    return run_episode(env, policy, env_seed=env_seed, policy_seed=policy_seed, index=index)


def _condition_kwargs(env_kwargs: Mapping[str, Any], condition: str) -> dict[str, Any]:
    """``gym.make`` arguments of the env under ``condition`` (nominal: the arguments as given)."""
    return dict(env_kwargs) if condition == "nominal" else {**env_kwargs, "condition": condition}


def _plan(
    episodes: int | None,
    base_seed: int | None,
    conditions: str | Sequence[str] | Mapping[str, int] | None,
    split: str | None,
) -> tuple[str, tuple[ConditionRun, ...]]:
    """The split and condition runs of an ``evaluate`` call (see its ``conditions`` argument)."""
    if conditions is not None or split is not None or (episodes is None and base_seed is None):
        if base_seed is not None:
            raise ValueError(
                f"base_seed={base_seed!r} cannot be combined with conditions= or split=: a split fixes every "
                f"condition's seeds (splits {list(SPLITS)}); give base_seed with episodes alone for seeds of your own"
            )
        split = "test" if split is None else split
        return split, plan_conditions(conditions, split, episodes)
    for name, value, low in (("episodes", episodes, 1), ("base_seed", base_seed, 0)):
        if value is None and name == "episodes":
            raise ValueError("episodes is needed with base_seed (an integer >= 1)")
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low):
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    seed = EVALUATION_BASE_SEED if base_seed is None else int(base_seed)
    split = "legacy" if seed == LEGACY_BASE_SEED else CUSTOM_SPLIT
    return split, (ConditionRun("nominal", seed, int(cast(int, episodes))),)


def _batched_episodes(
    env_id: str,
    env_kwargs: dict[str, Any],
    policy: PolicyOrFactory,
    episodes: list[tuple[int, int, int]],
    batch: int,
    done: Callable[[EpisodeRecord], None] | None = None,
    threads: int | None = None,
) -> list[EpisodeRecord]:
    """Episodes ``(index, env_seed, policy_seed)`` run ``batch`` at a time in the vector env (``batched``), its
    physics in ``threads`` threads (default: the vector env's)."""

    def record(slot: Any, terminated: bool, truncated: bool) -> EpisodeRecord:
        return _episode_record(
            slot.info, slot.index, slot.env_seed, slot.policy_seed, slot.steps, slot.total, slot.success_any_step,
            terminated, truncated,
        )  # fmt: skip

    try:
        vec = make_batch_env(env_id, env_kwargs, min(batch, len(episodes)), threads)
    except (TypeError, ValueError, KeyError, FileNotFoundError) as e:  # the env names what is valid
        raise EnvArgumentError(f"cannot make the vector env of {env_id} with {env_kwargs}: {e}") from e
    try:
        return run_batched(
            vec, policy, episodes, resolve=resolve_policy, action_problem=action_problem, record=record,
            failure=_policy_failure, done=done,
        )  # fmt: skip
    finally:
        vec.close()


def _worker_batch(
    env_id: str,
    env_kwargs: dict[str, Any],
    policy: PolicyOrFactory,
    episodes: list[tuple[int, int, int]],
    batch: int,
    threads: int,
) -> list[EpisodeRecord]:
    return _batched_episodes(env_id, env_kwargs, policy, episodes, batch, threads=threads)


def _split(items: list[Any], parts: int) -> list[list[Any]]:
    """``items`` in ``parts`` contiguous runs of near-equal length (none empty)."""
    parts = min(parts, len(items))
    size, extra = divmod(len(items), parts)
    out, start = [], 0
    for k in range(parts):
        end = start + size + (k < extra)
        out.append(items[start:end])
        start = end
    return out


def _check_picklable(obj: Any, what: str) -> None:
    try:
        pickle.dumps(obj)
    except Exception as e:  # noqa: BLE001 - pickling raises many kinds of errors
        raise TypeError(
            f"{what} cannot be sent to worker processes ({type(e).__name__}: {e}); use workers=1, or "
            "pass a policy or factory defined at module level (not a lambda or local function)"
        ) from e


def evaluate(
    env_id: str,
    policy: PolicyOrFactory,
    *,
    episodes: int | None = None,
    base_seed: int | None = None,
    conditions: str | Sequence[str] | Mapping[str, int] | None = None,
    split: str | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    progress: bool = True,
    video: str | os.PathLike[str] | None = None,
    workers: int = 1,
    method: Mapping[str, Any] | None = None,
    batch: int = 1,
    threads: int | None = None,
    track: str | None = None,
) -> EvaluationResult:
    """Evaluate a policy on a PickSort env with the suite's protocol.

    Without ``episodes`` and ``base_seed`` this is the protocol's evaluation (docs/protocol.md#conditions): the
    standard mix of conditions (nominal 50 episodes, fast-belt 25, novel-objects 25) on the ``test`` split's seeds.
    ``conditions=`` and ``split=`` choose others.  ``episodes=N`` alone runs N nominal episodes at the legacy base
    seed ``EVALUATION_BASE_SEED``, as every evaluation did before the splits (``base_seed=S``: at your own seeds,
    split ``custom``).  Episode ``i`` of a condition at base seed ``S`` resets the env with ``env_seed`` and the
    policy with ``policy_seed``, where ``(env_seed, policy_seed) = episode_seeds(S, i)``, and steps until the env
    ends it.  Records come in the order of the conditions, indexed from 0 over the whole result.

    Args:
        env_id: A registered id starting with ``PickSort-``.
        policy: A :class:`Policy`, or a factory ``f(env) -> Policy`` (e.g. ``r2s2r_envs.behavior.make_demonstrator``
            for the env's own demonstrator).  A factory is called once per env made (per condition and worker).
        episodes: Episodes of each condition (default: each condition's own count in the standard mix); alone, the
            number of nominal episodes at the legacy seeds.
        base_seed: Base seed ``S`` of a nominal run at seeds of your own (with ``episodes``; split ``custom``).
        conditions: ``"standard"`` (the default), a condition name (``envs.conditions.CONDITIONS``), a list of
            names or a mapping of names to episode counts.
        split: ``"test"`` (the default: reported figures), ``"dev"`` (every choice made while developing a method)
            or ``"legacy"`` (the seeds of results made before the splits).
        env_kwargs: Arguments of ``gym.make``, e.g. ``num_objects``, ``episode_steps`` (the episode's time limit),
            ``obs_mode``, or ``lab`` for ``PickSort-Real-v0`` (not ``condition``: give ``conditions``).
        progress: Show a tqdm progress bar on stderr.
        video: Path of an MP4 of the first episode (the env is made with ``render_mode="rgb_array"``).
        workers: Worker processes (spawned).  Records come back in episode order and do not depend on the number
            of workers.  With more than one, ``policy`` is pickled to the workers, and a script calling this
            must guard its entry point with ``if __name__ == "__main__":``; ids registered at run time by the
            caller are not known to workers.
        method: Entries of the result's ``method`` section that override the policy's ``metadata``
            (:func:`method_record`), e.g. ``{"method": "my-method"}``.
        batch: Envs stepped together in the native vector env (``gym.make_vec``; their physics in parallel
            threads), with the policy's ``act_batch`` answering for all of them at once (docs/protocol.md#batched-
            policies).  A policy without it is called per env (said once).  Records are identical to
            ``batch=1``'s.  With ``workers`` > 1 each worker runs its share of the episodes ``batch`` at a time.
        threads: Threads that step a batch's physics in each process (default: the machine's cores shared among
            the workers, ``max(1, cores // workers)``, at most ``batch``); 1 steps it in the calling thread (a
            process given one core, as an ablation evaluation task).  Records do not depend on it.
        track: A track (``tracks.TRACKS``, docs/leaderboard.md#tracks): its conditions and split are the
            evaluation's (``conditions``/``split`` may repeat them; ``episodes``/``base_seed`` are refused) and the
            result records whether it is on the track (datasets, training samples, evaluation) and why not;
            off-track is said in a warning before the first episode.

    Returns:
        The result: records, summary (all records), per-condition and "all shifted" summaries, provenance.

    Raises:
        UnknownEnvError: ``env_id`` is not a registered PickSort id (the message lists them).
        EnvArgumentError: the env refused ``env_kwargs`` (the message passes on what it accepts).
        RenderError: ``video`` was asked for but offscreen rendering is not available.
        TypeError: ``policy`` is not a policy or factory, or cannot be pickled for workers.
        ResultSchemaError: the policy's ``metadata`` or ``method`` holds a value the result schema refuses.
        ValueError: an unknown condition, split or track (the message lists the valid ones), another evaluation
            than ``track``'s (naming both), ``episodes`` < 1,
            ``workers`` < 1, ``batch`` < 1 or larger than the episodes of a condition, ``base_seed`` < 0 or given
            with ``conditions`` or ``split``, or ``condition`` in ``env_kwargs``.
    """
    from tqdm import tqdm

    check_env_id(env_id)
    on_track = None if track is None else get_track(track)
    if on_track is not None:
        conditions, split = evaluation_arguments(
            on_track, episodes=episodes, base_seed=base_seed, conditions=conditions, split=split
        )
    split, runs = _plan(episodes, base_seed, conditions, split)
    checks = [("workers", workers, 1), ("batch", batch, 1)]
    if threads is not None:
        checks.append(("threads", threads, 1))
    for name, value, low in checks:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    workers, batch = int(workers), int(batch)
    fewest = min(run.episodes for run in runs)
    if batch > fewest:
        raise ValueError(
            f"batch={batch} is larger than the {fewest} episodes asked{' of a condition' if len(runs) > 1 else ''}: "
            f"batch must be in [1, {fewest}] "
            "(the envs stepped together)"
        )
    kwargs = dict(env_kwargs or {})
    if "condition" in kwargs:
        raise ValueError(
            f"env_kwargs holds 'condition' ({kwargs['condition']!r}); give conditions= instead (one of "
            f"{list(CONDITIONS)}, a list of them or {STANDARD!r}): the protocol makes each condition's env and "
            "records it"
        )
    # Every episode: (index over the result, condition, env_seed, policy_seed), conditions in order.
    todo_all: list[tuple[int, str, int, int]] = []
    for run in runs:
        todo_all += [
            (len(todo_all) + k, run.condition, *s) for k, s in enumerate(evaluation_seeds(run.episodes, run.base_seed))
        ]
    total = len(todo_all)
    video = None if video is None else os.fspath(check_output_file(video, option="video", suffix=".mp4"))
    start = time.perf_counter()
    render = {"render_mode": "rgb_array"} if video is not None else {}
    env = make_env(env_id, {**kwargs, **render})
    envs: dict[str, tuple[gym.Env, Policy]] = {}  # the main process's env and policy per condition
    try:
        main_policy = resolve_policy(policy, env)
        wanted = with_policy_sensors(main_policy, kwargs)
        if wanted != kwargs:  # the policy reads opt-in sensors: every env of the run is made with them
            kwargs = wanted
            env.close()
            env = make_env(env_id, {**kwargs, **render})
            main_policy = resolve_policy(policy, env)
        provenance = _env_provenance(env)
        recorded_kwargs = _recorded_env_kwargs(kwargs, provenance["domain"])
        envs["nominal"] = (env, main_policy)
        policy_record = _policy_record(main_policy)
        method_section = method_record(main_policy, method)
        track_record = None
        if on_track is not None:
            checked = check_track(
                on_track,
                method=method_section,
                training_samples=training_samples(method_section, getattr(main_policy, "config", None)),
                split=split,
                conditions=[(run.condition, run.episodes) for run in runs],
                conditions_version=CONDITIONS_VERSION,
                panel=None,
            )
            track_record = checked.to_record()
            if not checked.on_track:
                warnings.warn(
                    f"this result will be off track {on_track.name!r} (v{on_track.version}): "
                    + "; ".join(checked.reasons),
                    stacklevel=2,
                )

        def env_of(condition: str) -> tuple[gym.Env, Policy]:
            if condition not in envs:
                made = make_env(env_id, _condition_kwargs({**kwargs, **render}, condition))
                envs[condition] = (made, resolve_policy(policy, made))
            return envs[condition]

        first = 1 if video is not None else 0
        rest = todo_all[first:]
        parallel = workers > 1 and len(rest) > 1
        batched = batch > 1 and len(rest) > 1
        if batched:
            if not batch_capable(main_policy):
                warnings.warn(
                    f"policy {policy_record['name'] or policy_record['class']} has no act_batch/reset_batch: "
                    f"batch={batch} steps {batch} envs together but calls the policy once per env "
                    "(docs/protocol.md#batched-policies)",
                    stacklevel=2,
                )
        if parallel:
            _check_picklable(policy, "the policy")
            _check_picklable(kwargs, "env_kwargs")
        records: list[EpisodeRecord | None] = [None] * total
        # Each condition's episodes of ``rest`` as (index, env_seed, policy_seed), for the batched paths.
        by_condition: dict[str, list[tuple[int, int, int]]] = {}
        for i, condition, env_seed, policy_seed in rest:
            by_condition.setdefault(condition, []).append((i, env_seed, policy_seed))

        def film() -> None:
            _, condition, env_seed, policy_seed = todo_all[0]
            filmed_env, filmed_policy = env_of(condition)
            records[0] = _filmed_episode(filmed_env, filmed_policy, (env_seed, policy_seed), cast(str, video))
            bar.update()

        with tqdm(total=total, desc=env_id, unit="ep", file=sys.stderr, disable=not progress) as bar:
            if not parallel:
                if video is not None:
                    film()
                if batched:

                    def done(record: EpisodeRecord) -> None:
                        records[record.index] = record
                        bar.update()

                    for condition, todo in by_condition.items():
                        _batched_episodes(
                            env_id, _condition_kwargs(kwargs, condition), policy, todo, min(batch, len(todo)), done,
                            threads=threads,
                        )  # fmt: skip
                for i, condition, env_seed, policy_seed in rest if not batched else ():
                    run_env, run_policy = env_of(condition)
                    records[i] = run_episode(run_env, run_policy, env_seed=env_seed, policy_seed=policy_seed, index=i)
                    bar.update()
            elif batched:
                parts = [
                    (condition, part) for condition, todo in by_condition.items() for part in _split(todo, workers)
                ]
                pool = ProcessPoolExecutor(max_workers=min(workers, len(parts)), mp_context=get_context("spawn"))
                workers_started: list[Any] = []
                try:
                    # Each worker's physics threads share the cores with the other workers' (no oversubscription).
                    per_worker = threads or max(1, (os.cpu_count() or 1) // min(workers, len(parts)))
                    futures = [
                        pool.submit(
                            _worker_batch,
                            env_id,
                            _condition_kwargs(kwargs, condition),
                            policy,
                            part,
                            min(batch, len(part)),
                            per_worker,
                        )  # fmt: skip
                        for condition, part in parts
                    ]
                    workers_started = list(getattr(pool, "_processes", {}).values())
                    if video is not None:
                        film()
                    for future in as_completed(futures):
                        for record in future.result():
                            records[record.index] = record
                            bar.update()
                except BrokenProcessPool as e:
                    done_count = sum(r is not None for r in records)
                    pool.shutdown(wait=True, cancel_futures=True)
                    code = first_cause([p.exitcode for p in workers_started])
                    raise WorkerDiedError(worker_death(code, done=done_count, call="evaluate()")) from e
                finally:
                    pool.shutdown(wait=True, cancel_futures=True)
            else:
                workers_started = []
                pool = ProcessPoolExecutor(
                    max_workers=min(workers, len(rest)),
                    mp_context=get_context("spawn"),
                    initializer=_worker_init,
                    initargs=(env_id, kwargs, policy),
                )
                try:
                    pending = [
                        pool.submit(_worker_episode, i, env_seed, policy_seed, condition)
                        for i, condition, env_seed, policy_seed in rest
                    ]
                    workers_started = list(getattr(pool, "_processes", {}).values())  # their exit codes, if they die
                    if video is not None:  # filmed here while the workers run the other episodes
                        film()
                    for episode in as_completed(pending):
                        finished = episode.result()
                        records[finished.index] = finished
                        bar.update()
                except BrokenProcessPool as e:
                    done_count = sum(r is not None for r in records)
                    pool.shutdown(wait=True, cancel_futures=True)  # reaps the workers: their exit codes are known
                    code = first_cause([p.exitcode for p in workers_started])
                    raise WorkerDiedError(worker_death(code, done=done_count, call="evaluate()")) from e
                finally:
                    pool.shutdown(wait=True, cancel_futures=True)
    finally:
        for made, _ in envs.values():
            if made is not env:
                made.close()
        env.close()
    return EvaluationResult(
        env_id=env_id,
        env_kwargs=recorded_kwargs,
        provenance=provenance,
        policy=policy_record,
        method=method_section,
        base_seed=runs[0].base_seed,
        records=tuple(r for r in records if r is not None),  # all filled: every episode ran or raised
        versions=versions("r2s2r_envs", "mujoco", "gymnasium", "numpy", "python"),
        video=video,
        wall_time_s=time.perf_counter() - start,
        split=split,
        conditions=runs,
        track=track_record,
    )


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
    "with_policy_sensors",
]
