"""The PickSort environment and its registration."""

from r2s2r_envs.envs.pick_sort import FAILURE_CAUSES, OBS_MODES, OUTCOMES, PickSortEnv
from r2s2r_envs.envs.registration import ENV_IDS, register_envs

__all__ = ["ENV_IDS", "FAILURE_CAUSES", "OBS_MODES", "OUTCOMES", "PickSortEnv", "register_envs"]
