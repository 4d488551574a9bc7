"""Every registered PickSort id, in one place.

Entry points are strings and kwargs are JSON-serializable, so ``EnvSpec.to_json()`` round-trips and a dataset
records exactly which env made it.  The grounded variants are registered by the grounding pipelines' issues,
with their identified physics; there are no placeholders here.
"""

from __future__ import annotations

import gymnasium as gym

from r2s2r_envs.envs.pick_sort import DEFAULT_MAX_EPISODE_STEPS

ENV_IDS: tuple[str, ...] = ("PickSort-Ungrounded-v0", "PickSort-Real-v0")


def register_envs() -> None:
    """Register the PickSort ids with Gymnasium (idempotent)."""
    specs = {
        "PickSort-Ungrounded-v0": ("r2s2r_envs.envs.pick_sort:PickSortEnv", {"demonstrator": "scripted"}),
        # The lab comes with the teleoperator once it exists; until then the scripted planner is its demonstrator.
        "PickSort-Real-v0": ("r2s2r_envs.lab.lab_env:LabEnv", {"lab": "default", "demonstrator": "scripted"}),
    }
    for env_id, (entry_point, kwargs) in specs.items():
        if env_id in gym.registry:
            continue
        gym.register(
            id=env_id,
            entry_point=entry_point,
            max_episode_steps=DEFAULT_MAX_EPISODE_STEPS,
            kwargs=kwargs,
        )
