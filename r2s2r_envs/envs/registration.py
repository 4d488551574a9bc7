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

_SHIPPED: dict[str, tuple[str, dict]] = {
    "PickSort-Ungrounded-v0": (
        "r2s2r_envs.envs.pick_sort:PickSortEnv",
        {"world": "nominal", "demonstrator": "scripted", "episode_steps": DEFAULT_EPISODE_STEPS},
    ),
    # Physics identified from the default lab's logs by `r2s2r sysid` (the grounding file shipped in
    # r2s2r_envs/grounding/groundings/default.json; docs/grounding.md); the demonstrator is the scripted planner as
    # tuned in that world (the grounding file's demonstrator section; docs/grounding.md#tuning-the-demonstrator).
    "PickSort-WorldGrounded-v0": (
        "r2s2r_envs.grounding.variants:WorldGroundedEnv",
        {"grounding": "default", "demonstrator": "scripted", "episode_steps": DEFAULT_EPISODE_STEPS},
    ),
    # Both axes: WorldGrounded's physics, BehaviorGrounded's demonstrator.
    "PickSort-FullyGrounded-v0": (
        "r2s2r_envs.grounding.variants:FullyGroundedEnv",
        {
            "grounding": "default",
            "behavior": "default",
            "demonstrator": "humanlike",
            "episode_steps": DEFAULT_EPISODE_STEPS,
        },
    ),
    # The lab comes with its teleoperator (r2s2r_envs.lab.teleop), whose style is part of the lab config.
    "PickSort-Real-v0": (
        "r2s2r_envs.lab.lab_env:LabEnv",
        {"lab": "default", "demonstrator": "teleoperator", "episode_steps": DEFAULT_EPISODE_STEPS},
    ),
    # Ungrounded's physics; its demonstrator is the human-like generator fitted to the lab's demonstrations.
    "PickSort-BehaviorGrounded-v0": (
        "r2s2r_envs.behavior.variants:BehaviorGroundedEnv",
        {
            "world": "nominal",
            "behavior": "default",
            "demonstrator": "humanlike",
            "episode_steps": DEFAULT_EPISODE_STEPS,
        },
    ),
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


register_envs()
#: The PickSort ids registered when the package was imported (``registered_ids()`` sees later ones too).
ENV_IDS: tuple[str, ...] = registered_ids()
