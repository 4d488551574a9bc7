"""Every registered PickSort id, in one place.

Entry points are strings and kwargs are JSON-serializable, so ``EnvSpec.to_json()`` round-trips and a dataset
records exactly which env made it.  The ids carry no Gymnasium ``TimeLimit``: the env's own ``episode_steps``
(recorded in the kwargs) is the one time limit, so every episode ends with every object given an outcome.  The
grounded variants are registered by the grounding pipelines, with their identified physics; there are no
placeholders here.

Every shipped id also has a native vector env (``envs.vector``): ``gym.make_vec(id, num_envs=N)`` returns a
``PickSortVectorEnv`` of N envs of the id's class whose physics runs in parallel threads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym

from r2s2r_envs.envs.pick_sort import DEFAULT_EPISODE_STEPS

ENV_PREFIX = "PickSort-"
# The vector entry point of each single-env class (``envs.vector``; called without the id, so one per class).
_VECTOR = {
    "r2s2r_envs.envs.pick_sort:PickSortEnv": "r2s2r_envs.envs.vector:ungrounded",
    "r2s2r_envs.grounding.variants:WorldGroundedEnv": "r2s2r_envs.envs.vector:world_grounded",
    "r2s2r_envs.grounding.variants:FullyGroundedEnv": "r2s2r_envs.envs.vector:fully_grounded",
    "r2s2r_envs.lab.lab_env:LabEnv": "r2s2r_envs.envs.vector:lab",
    "r2s2r_envs.behavior.variants:BehaviorGroundedEnv": "r2s2r_envs.envs.vector:behavior_grounded",
}

#: Each variant's env class and how its physics and demonstrator are chosen (the sources: a shipped world, grounding
#: file, behavior model or lab config, named per family below).
_VARIANTS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "Ungrounded": ("r2s2r_envs.envs.pick_sort:PickSortEnv", ("world",), "scripted"),
    # Physics identified from the lab's logs by `r2s2r sysid` (a grounding file shipped in
    # r2s2r_envs/grounding/groundings/; docs/grounding.md); the demonstrator is the scripted planner as tuned in that
    # world (the grounding file's demonstrator section; docs/grounding.md#tuning-the-demonstrator).
    "WorldGrounded": ("r2s2r_envs.grounding.variants:WorldGroundedEnv", ("grounding",), "scripted"),
    # Both axes: WorldGrounded's physics, BehaviorGrounded's demonstrator.
    "FullyGrounded": ("r2s2r_envs.grounding.variants:FullyGroundedEnv", ("grounding", "behavior"), "humanlike"),
    # The lab comes with its teleoperator (r2s2r_envs.lab.teleop), whose style is part of the lab config.
    "Real": ("r2s2r_envs.lab.lab_env:LabEnv", ("lab",), "teleoperator"),
    # Ungrounded's physics; its demonstrator is the human-like generator fitted to the lab's demonstrations.
    "BehaviorGrounded": ("r2s2r_envs.behavior.variants:BehaviorGroundedEnv", ("world", "behavior"), "humanlike"),
}


def _family(version: str, sources: Mapping[str, str], variants: tuple[str, ...]) -> dict[str, tuple[str, dict]]:
    """The ids of one family version: each variant's class with its sources, demonstrator and time limit."""
    family = {}
    for variant in variants:
        entry_point, keys, demonstrator = _VARIANTS[variant]
        kwargs = {k: sources[k] for k in keys} | {"demonstrator": demonstrator, "episode_steps": DEFAULT_EPISODE_STEPS}
        family[f"{ENV_PREFIX}{variant}-{version}"] = (entry_point, kwargs)
    return family


_SHIPPED: dict[str, tuple[str, dict]] = {
    # The default (v2) lab and the grounding and behavior model made from it.
    **_family(
        "v0", {"world": "nominal", "grounding": "default", "behavior": "default", "lab": "default"}, tuple(_VARIANTS)
    ),
    # The -v1 family: lab v3 (a camera-based object estimator, loop latency with jitter, late commands, finger
    # backlash, its own contact), the grounding identified from its logs (groundings/v3.json: `r2s2r sysid --lab
    # v3`, seed 0, the full budget, the planner tuned there) and the behavior model fitted to its 50 canonical demos
    # (behavior/models/v3.json.gz: `r2s2r fit-behavior`, seed 0); both made by experiments/lab-v3-chain.
    # Ungrounded-v1 is Ungrounded-v0 (same physics and demonstrator), so the family shares one version. The version
    # rule: docs/architecture.md#grounded-variants.
    **_family("v1", {"world": "nominal", "grounding": "v3", "behavior": "v3", "lab": "v3"}, tuple(_VARIANTS)),
}


def register_envs() -> None:
    """Register the shipped PickSort ids with Gymnasium (idempotent)."""
    for env_id, (entry_point, kwargs) in _SHIPPED.items():
        if env_id in gym.registry:
            continue
        gym.register(
            id=env_id,
            entry_point=entry_point,
            vector_entry_point=_VECTOR[entry_point],
            max_episode_steps=None,
            kwargs=dict(kwargs),
        )


def registered_ids() -> tuple[str, ...]:
    """Every PickSort id in Gymnasium's registry: the shipped ones and any registered later (grounded variants,
    a user's own), sorted."""
    return tuple(sorted(k for k in gym.registry if k.startswith(ENV_PREFIX)))


class UnknownEnvError(ValueError):
    """An id that is not registered (or not a PickSort id where one is needed); the message lists the PickSort ids."""


class EnvArgumentError(ValueError):
    """The env refused its arguments (``gym.make`` failed); the message passes on what the env accepts."""


def check_env_id(env_id: Any, *, picksort_only: bool = True) -> str:
    """Return ``env_id`` if it is a registered id: a ``PickSort-`` one, or any Gymnasium id with
    ``picksort_only=False`` (datasets can be generated from a user's own env).

    Raises:
        UnknownEnvError: not a str (an ``EnvSpec`` is never made), not registered, or not a PickSort id; the
            message lists the registered PickSort ids.
    """
    known = list(registered_ids())
    if not isinstance(env_id, str):
        raise UnknownEnvError(
            f"cannot make env {env_id!r}: envs are made from registered env ids only (a str; register an env with "
            f"gymnasium.register first); registered PickSort ids: {known}"
        )
    if env_id not in gym.registry or (picksort_only and not env_id.startswith(ENV_PREFIX)):
        what = "PickSort id" if picksort_only else "id"
        raise UnknownEnvError(f"cannot make env {env_id!r}: not a registered {what}; registered PickSort ids: {known}")
    return env_id


def make_env(env_id: str, env_kwargs: Mapping[str, Any] | None = None, *, picksort_only: bool = True) -> gym.Env:
    """``gym.make(env_id, **env_kwargs)`` for a registered id (see :func:`check_env_id`).

    Raises:
        UnknownEnvError: ``env_id`` is not a registered (PickSort) id.
        EnvArgumentError: the env refused an argument; the message passes on what it accepts.
    """
    check_env_id(env_id, picksort_only=picksort_only)
    kwargs = dict(env_kwargs or {})
    try:
        return gym.make(env_id, **kwargs)
    except (gym.error.Error, TypeError, ValueError, KeyError, FileNotFoundError) as e:  # the env names what is valid
        detail = e.args[0] if isinstance(e, KeyError) and e.args else e
        raise EnvArgumentError(f"cannot make env {env_id!r} with {kwargs}: {detail}") from e


register_envs()
#: The PickSort ids registered when the package was imported (``registered_ids()`` sees later ones too).
ENV_IDS: tuple[str, ...] = registered_ids()
