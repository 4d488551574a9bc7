"""r2s2r_envs: Gymnasium MuJoCo environments and benchmark suite for Real2Sim2Real sim-and-real co-training.

Importing the package registers the PickSort environments and the demonstrators that come with them.
"""

from r2s2r_envs.envs import ENV_IDS, register_envs
from r2s2r_envs import behavior as _behavior  # noqa: F401  (registers the demonstrators)

__version__ = "0.1.0"

register_envs()

__all__ = ["ENV_IDS", "__version__", "register_envs"]
