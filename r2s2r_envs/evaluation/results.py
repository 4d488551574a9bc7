"""The result of an evaluation: one :class:`EpisodeRecord` per episode, the :class:`EvaluationResult` that holds them
with their summary and provenance, and its file (``to_json`` / ``from_json``, checked against the published schema,
``evaluation/schema.py``; files of schema versions 1 and 2 are read and upgraded).

:func:`r2s2r_envs.evaluation.protocol.evaluate` makes results (docs/protocol.md); the leaderboard reads their files
(docs/leaderboard.md#schema).  The sections a result takes from the policy and the env are made here too
(:func:`method_record`, :func:`policy_record`, :func:`env_provenance`, :func:`recorded_env_kwargs`): plain JSON data,
a lab given inline withheld.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Mapping
from typing import Any

import gymnasium as gym

from r2s2r_envs.envs import FAILURE_CAUSES
from r2s2r_envs.envs.conditions import CONDITIONS, CONDITIONS_VERSION
from r2s2r_envs.envs.seeding import SEEDING_CONVENTION, episode_seeds
from r2s2r_envs.evaluation.policy import Policy, qualified_name
from r2s2r_envs.evaluation.schema import (
    METHOD_KEYS,
    RESULT_FORMAT,
    RESULT_SCHEMA_VERSION,
    ResultSchemaError,
    validate_method,
    validate_result,
)
from r2s2r_envs.evaluation.splits import CUSTOM_SPLIT, LEGACY_BASE_SEED, SPLITS, ConditionRun, condition_base_seed
from r2s2r_envs.evaluation.stats import summarize_episodes
from r2s2r_envs.mappings import check_keys
from r2s2r_envs.payloads import EpisodeSummary
from r2s2r_envs.safe_json import (
    CONTENT_HASH_FIELD,
    ContentHashError,
    JSONFileError,
    check_content_hash,
    loads,
    plain_json,
    with_content_hash,
)

#: Failure cause (and object outcome) of an episode the protocol stopped because the policy emitted an action
#: the env cannot take: the wrong shape, NaN/inf or not a number (the record's ``policy_error`` says which).
POLICY_FAILURE = "policy_failure"
#: Every failure cause a record can hold: the env's (``r2s2r_envs.envs.FAILURE_CAUSES``) and the policy failure.
RECORD_FAILURE_CAUSES: tuple[str, ...] = (*FAILURE_CAUSES, POLICY_FAILURE)
#: Written instead of a lab given as a dict or object (its parameters) in a result's ``env_kwargs``.
LAB_WITHHELD = "withheld: a lab given inline is not written into results (the lab is a black box)"


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
        check_keys(data, names, what="key", where="episode record", required=names, error=ResultSchemaError)
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
    def summary(self) -> EpisodeSummary:
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
    def condition_summaries(self) -> dict[str, EpisodeSummary]:
        """The :attr:`summary` of each condition's records (success rate with its Wilson 95% interval, ...)."""
        return {
            name: summarize_episodes([r.to_dict() for r in records], FAILURE_CAUSES)
            for name, records in self.condition_records().items()
        }

    @property
    def shifted_summary(self) -> EpisodeSummary | None:
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
def recorded_env_kwargs(env_kwargs: Mapping[str, Any], domain: str) -> dict[str, Any]:
    recorded = {}
    for key, value in env_kwargs.items():
        if domain == "real" and key == "lab" and not isinstance(value, (str, os.PathLike)):
            recorded[key] = LAB_WITHHELD  # an inline lab is its parameters
        else:
            recorded[key] = plain_json(value, f"env_kwargs[{key!r}]")
    return recorded


def env_provenance(env: gym.Env) -> dict[str, Any]:
    unwrapped = env.unwrapped
    provenance_fn = getattr(unwrapped, "provenance", None)
    prov = dict(provenance_fn()) if callable(provenance_fn) else {}
    prov.setdefault("domain", str(getattr(unwrapped, "domain", "sim")))
    prov = plain_json(prov, "provenance")
    if prov["domain"] == "real" and ("world_params" in prov or "world" in prov):
        raise RuntimeError(
            f"{env.spec.id if env.spec else type(unwrapped).__name__}.provenance() discloses the "
            "lab's physics; the lab must only disclose its name (a bug in the lab)"
        )
    return prov


def policy_record(policy: Policy) -> dict[str, Any]:
    name = getattr(policy, "name", None)
    return {
        "name": None if name is None else str(name),
        "class": qualified_name(type(policy)),
        "settings": plain_json(getattr(policy, "settings", None), "policy.settings"),
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
    record.update(plain_json(dict(metadata or {}), "policy.metadata"))
    record.update(plain_json(dict(override or {}), "method"))
    if not record["method"]:
        record["method"] = str(getattr(policy, "name", None) or type(policy).__name__)
    if not record["policy_class"]:
        record["policy_class"] = qualified_name(type(policy))
    validate_method(record)
    return record
