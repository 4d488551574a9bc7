"""What physics (sensing and timing included) a PickSort world has: parameters, presets and the model builder."""

from r2s2r_envs.world.params import WorldParams, nominal
from r2s2r_envs.world.presets import available_worlds, load_world

__all__ = ["WorldParams", "available_worlds", "load_world", "nominal"]
