"""The PickSort environment, its controllers, outcome rules, scene view, seeding convention and registration."""

from r2s2r_envs.envs.outcomes import FAILURE_CAUSES, OUTCOMES
from r2s2r_envs.envs.pick_sort import ENV_ARGUMENTS, OBS_MODES, PickSortEnv
from r2s2r_envs.envs.registration import (
    ENV_IDS,
    EnvArgumentError,
    UnknownEnvError,
    check_env_id,
    make_env,
    register_envs,
    registered_ids,
)
from r2s2r_envs.envs.scene import SceneView
from r2s2r_envs.envs.seeding import episode_seeds

__all__ = [
    "ENV_ARGUMENTS",
    "ENV_IDS",
    "EnvArgumentError",
    "FAILURE_CAUSES",
    "OBS_MODES",
    "OUTCOMES",
    "PickSortEnv",
    "SceneView",
    "UnknownEnvError",
    "check_env_id",
    "episode_seeds",
    "make_env",
    "register_envs",
    "registered_ids",
]
