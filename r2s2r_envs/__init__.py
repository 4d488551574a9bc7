"""r2s2r_envs: Gymnasium MuJoCo environments and benchmark suite for Real2Sim2Real sim-and-real co-training.

Importing the package registers the PickSort environments and the demonstrators that come with them.
"""

import os as _os
import sys as _sys

# MuJoCo fixes its GL backend when it is first imported: on a Linux machine without a display, default to
# headless EGL so rendering works out of the box (an explicit MUJOCO_GL always wins).
if _sys.platform.startswith("linux") and not _os.environ.get("DISPLAY"):
    _os.environ.setdefault("MUJOCO_GL", "egl")

from r2s2r_envs import behavior as _behavior  # noqa: F401  (registers the demonstrators)
from r2s2r_envs._version import __version__
from r2s2r_envs.envs import ENV_IDS, register_envs, registered_ids

register_envs()

__all__ = ["ENV_IDS", "__version__", "register_envs", "registered_ids"]
