"""The lab: the real-system stand-in (``PickSort-Real-v0``) and its teleoperator.  Grounding code must not import
this package.

Importing it registers the demonstrator ``"teleoperator"`` (``r2s2r_envs.behavior.make_demonstrator``).
"""

from r2s2r_envs.lab.config import (
    DRAW_PREFIX,
    InterfaceFaults,
    LabConfig,
    OperatorStyle,
    UnmodeledEffects,
    available_labs,
    load_lab,
    seal_lab,
)
from r2s2r_envs.lab.draw import draw_lab
from r2s2r_envs.lab.teleop import Calibration, Teleoperator

__all__ = [
    "DRAW_PREFIX",
    "Calibration",
    "InterfaceFaults",
    "LabConfig",
    "OperatorStyle",
    "Teleoperator",
    "UnmodeledEffects",
    "available_labs",
    "draw_lab",
    "load_lab",
    "seal_lab",
]
