"""Demonstrators: the scripted planner and the human-like generator, the registry, and behavior metrics.

* ``scripted``: the planner that comes with the simulated variants.
* ``humanlike``: the generator fitted to real demonstrations (``behavior.fit``, ``behavior.humanlike``;
  docs/behavior.md), the demonstrator of ``PickSort-BehaviorGrounded-v0`` (``behavior.variants``).
* ``behavior.metrics``: how alike two demonstration sets move.
"""

from r2s2r_envs.behavior.base import Demonstrator, demonstrator_names, make_demonstrator, register_demonstrator
from r2s2r_envs.behavior.humanlike import HumanlikeGenerator
from r2s2r_envs.behavior.scripted import PlannerConfig, ScriptedPlanner

__all__ = [
    "Demonstrator",
    "HumanlikeGenerator",
    "PlannerConfig",
    "ScriptedPlanner",
    "demonstrator_names",
    "make_demonstrator",
    "register_demonstrator",
]
