"""Demonstrators: the scripted planner (and, later, the human-like generator) plus the registry."""

from r2s2r_envs.behavior.base import Demonstrator, demonstrator_names, make_demonstrator, register_demonstrator
from r2s2r_envs.behavior.scripted import PlannerConfig, ScriptedPlanner

__all__ = [
    "Demonstrator",
    "PlannerConfig",
    "ScriptedPlanner",
    "demonstrator_names",
    "make_demonstrator",
    "register_demonstrator",
]
