"""r2s2r_envs: Gymnasium MuJoCo environments and benchmark suite for Real2Sim2Real sim-and-real co-training.

Importing the package registers the PickSort environments and the demonstrators that come with them.
"""

import os as _os
import sys as _sys

# MuJoCo fixes its GL backend when it is first imported: on a Linux machine without a display, default to
# headless EGL so rendering works out of the box (an explicit MUJOCO_GL always wins).
if _sys.platform.startswith("linux") and not _os.environ.get("DISPLAY"):
    _os.environ.setdefault("MUJOCO_GL", "egl")

from typing import Any

from r2s2r_envs import behavior as _behavior  # registers the demonstrators
from r2s2r_envs._version import __version__
from r2s2r_envs.envs import ENV_IDS, register_envs, registered_ids


def _teleoperator(env: Any, **settings: Any) -> Any:
    # The lab's teleoperator (r2s2r_envs.lab.teleop, which registers itself under the same name once imported),
    # imported on first use: importing the package must leave the lab unloaded (tests/test_layering.py).
    from r2s2r_envs.lab.teleop import Teleoperator

    return Teleoperator(env, **settings)


_behavior.register_demonstrator("teleoperator", _teleoperator)
register_envs()

__all__ = ["ENV_IDS", "__version__", "register_envs", "registered_ids"]
