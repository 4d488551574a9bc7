"""The lab: the real-system stand-in (``PickSort-Real-v0``).  Grounding code must not import this package."""

from r2s2r_envs.lab.config import LabConfig, UnmodeledEffects, available_labs, load_lab

__all__ = ["LabConfig", "UnmodeledEffects", "available_labs", "load_lab"]
