"""The pieces of an ablation design: its vocabulary (variants, methods, the lab's env id), the datasets
(:class:`DataSpec`), the policies (:class:`PolicySpec`) and the units of work (:class:`Task`) keyed by their
:func:`config_hash`.

Every task is identified by its **config hash**: the SHA-256 of its kind, its resolved configuration, the hashes of
the tasks it depends on and the package version. Results are stored under that hash, so a re-run skips every task
whose result exists and reruns only what changed downstream of a changed setting (docs/ablation.md, "Design").
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from r2s2r_envs._version import __version__
from r2s2r_envs.mappings import check_choice

#: The four grounding variants, in the order of the 2 x 2 table: (world grounded?, behavior grounded?).
VARIANTS: tuple[str, ...] = ("Ungrounded", "WorldGrounded", "BehaviorGrounded", "FullyGrounded")
#: Which axes each variant grounds: ``(world, behavior)``.
VARIANT_AXES: dict[str, tuple[bool, bool]] = {
    "Ungrounded": (False, False),
    "WorldGrounded": (True, False),
    "BehaviorGrounded": (False, True),
    "FullyGrounded": (True, True),
}
#: The row label of policies trained on real data only.
REAL_ONLY = "real-only"
#: The lab's env id: every policy is evaluated there.
LAB_ENV_ID = "PickSort-Real-v0"
#: Methods of the ablation (``r2s2r_envs.policies.config.METHODS`` holds every trainable one).
DEFAULT_METHODS: tuple[str, ...] = ("flow", "flow-cfg-adda")
#: The method that trains the real-only and sim-only policies of methods that need both domains (CFG and ADDA
#: condition on or align two domains; with one domain they reduce to plain flow matching).
SINGLE_DOMAIN_METHOD = "flow"
#: The real_fraction sweep of the fully grounded variant: numbers, or ``"low"`` / ``"high"``, the mixing rule's ends.
DEFAULT_SWEEP: tuple[float | str, ...] = (0.0, 0.05, "low", "high", 0.5, 1.0)
#: A swept number closer than this to a rule end the sweep names is that end (the same mixture within the sweep's
#: resolution: 0.05 and the default data's low end 0.048 differ by two real samples in a batch of 1,024).
SWEEP_RESOLUTION = 0.005
#: Version of the ablation's task definitions; part of every config hash (a change re-runs everything). 2: a
#: training task's configuration holds its recipe's resolved values, so a recipe that changes re-runs its tasks.
TASK_VERSION = 2

Kind = Literal["sysid", "data", "behavior", "train", "eval", "mixture"]
#: The chain stage whose output each grounding axis's env takes, as ``(env argument, task kind)``.
AXIS_INPUTS: dict[str, tuple[str, str]] = {"world": ("grounding", "sysid"), "behavior": ("behavior", "behavior")}
RuleEnd = Literal["low", "high"]


class DesignError(ValueError):
    """A design that cannot run (unknown variant or method, a bad number); the message names what is accepted."""


def env_id_of(variant: str) -> str:
    """The registered env id of a grounding variant (``"FullyGrounded"`` -> ``"PickSort-FullyGrounded-v0"``)."""
    return f"PickSort-{variant}-v0"


def canonical_sim_name(variant: str, episodes: int = 1000) -> str:
    """The canonical dataset name of a variant's sim data (``"fullygrounded-1000"``)."""
    return f"{variant.lower()}-{episodes}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class DataSpec:
    """One dataset of the ablation: a canonical dataset (or its first demos), or one the ablation generates.

    Attributes:
        label: short name used in file names and reports (``"lab-50"``, ``"fullygrounded-50"``).
        domain: ``"real"`` (lab demos) or ``"sim"``.
        canonical: canonical dataset name (``r2s2r datasets list``) read from the cache, or ``None`` to generate.
        env_id: the env that makes the data (the canonical dataset's env when ``canonical`` is set).
        episodes: demos used: all of a canonical dataset, or its first ``episodes`` (a subset file is written),
            or the number to generate.
        seed: generation base seed (ignored for canonical data).
        env_kwargs: env arguments of a generated dataset, e.g. ``{"num_objects": 1}``.
        episode_steps: time limit of generated episodes in control steps (``None``: the env's own).
        max_attempts: give up generating after this many attempts (``None``: the generator's default, 20 x).
        generate_kwargs: further arguments of the datasets API's ``generate`` (``obs_mode``, ``demonstrator``,
            ``action_noise``), e.g. a canonical dataset's recipe (:func:`canonical_recipe`).
        recipe_of: the canonical dataset whose recipe a generated dataset follows (with fewer demos), or ``None``.
    """

    label: str
    domain: Literal["real", "sim"]
    canonical: str | None = None
    env_id: str
    episodes: int
    seed: int = 0
    env_kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    episode_steps: int | None = None
    max_attempts: int | None = None
    generate_kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    recipe_of: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form (the task's config)."""
        d = dataclasses.asdict(self)
        d["env_kwargs"] = dict(self.env_kwargs)
        d["generate_kwargs"] = dict(self.generate_kwargs)
        return d


def canonical_recipe(name: str, episodes: int, label: str) -> DataSpec:
    """A dataset made the way canonical dataset ``name`` is (env, seed, observation mode, demonstrator, action
    noise: the spec shipped in ``r2s2r_envs/datasets/canonical.json``), with ``episodes`` demos.

    Raises:
        DesignError: ``name`` is not in the canonical spec.
    """
    from r2s2r_envs.datasets.canonical import load_spec

    entries = {e.name: e for e in load_spec()}
    entry = entries[check_choice(name, sorted(entries), what="canonical dataset", error=DesignError)]
    extra: dict[str, Any] = {"obs_mode": entry.obs_mode}
    if entry.demonstrator:
        extra["demonstrator"] = entry.demonstrator
    if getattr(entry, "action_noise", 0.0):
        extra["action_noise"] = float(entry.action_noise)
    # The lab's demos are real data, whichever lab id made them (``PickSort-Real-v0``, ``-v1``, ...).
    domain: Literal["real", "sim"] = "real" if entry.env_id.startswith(LAB_ENV_ID.rsplit("-", 1)[0] + "-") else "sim"
    return DataSpec(
        label=label,
        domain=domain,
        env_id=entry.env_id,
        episodes=episodes,
        seed=entry.seed,
        env_kwargs=dict(entry.env_kwargs),
        generate_kwargs=extra,
        recipe_of=name,
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class PolicySpec:
    """One policy to train.

    Attributes:
        method: training method (``flow``, ``flow-cfg-adda``, ...).
        variant: grounding variant of the sim data, or ``None`` for real-only and ``real_fraction`` 1.
        real_fraction: expected share of real samples per batch.
        seed: training seed.
    """

    method: str
    variant: str | None
    real_fraction: float
    seed: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class Task:
    """One unit of work: its kind, configuration, dependencies and the resources it declares.

    Attributes:
        kind: ``"data"``, ``"train"``, ``"eval"`` or ``"mixture"``; with a lab also ``"sysid"`` and ``"behavior"``
            (the chain's stages, :mod:`r2s2r_envs.ablation.chain`).
        key: the config hash (:func:`config_hash`), the name of its result in the store.
        config: the resolved configuration (JSON).
        deps: keys of the tasks whose results it reads.
        num_cpus: CPU cores it uses (declared to Ray).
        label: human-readable name for logs and reports.
        num_gpus: share of a GPU it uses (declared to Ray; trainings on a GPU only).
        batch: episodes an evaluation steps together (``evaluate(..., batch=)``, whose records do not depend on
            it); not part of the key.
    """

    kind: Kind
    key: str
    config: Mapping[str, Any]
    deps: tuple[str, ...]
    num_cpus: float
    label: str
    num_gpus: float = 0.0
    batch: int = 1

    @classmethod
    def of(
        cls,
        kind: Kind,
        config: Mapping[str, Any],
        deps: tuple[str, ...] = (),
        *,
        label: str,
        num_cpus: float = 1,
        num_gpus: float = 0.0,
        batch: int = 1,
    ) -> Task:
        """The task of ``kind`` with ``config`` and ``deps``, keyed by their :func:`config_hash`."""
        key = config_hash(kind, config, deps)
        return cls(
            kind=kind, key=key, config=config, deps=deps, num_cpus=num_cpus, label=label, num_gpus=num_gpus, batch=batch
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON form (what a Ray task receives)."""
        return {
            "kind": self.kind,
            "key": self.key,
            "config": json.loads(json.dumps(self.config)),
            "deps": list(self.deps),
            "num_cpus": self.num_cpus,
            "num_gpus": self.num_gpus,
            "label": self.label,
            "batch": self.batch,
        }


def config_hash(kind: str, config: Mapping[str, Any], deps: Sequence[str] = ()) -> str:
    """The key of a task: SHA-256 (first 20 hex digits) of its kind, config, dependency keys and versions.

    The package version is part of it, so results made by another version of the suite are not reused.
    """
    payload = {
        "kind": kind,
        "config": config,
        "deps": sorted(deps),
        "task_version": TASK_VERSION,
        "r2s2r_envs": __version__,
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def policy_label(policy: PolicySpec) -> str:
    """``"flow-cfg-adda / FullyGrounded @ 0.22 / seed 0"``."""
    variant = policy.variant or REAL_ONLY
    return f"{policy.method} / {variant} @ {policy.real_fraction:g} / seed {policy.seed}"
