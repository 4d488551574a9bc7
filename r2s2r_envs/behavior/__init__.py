"""Demonstrators: the scripted planner and the human-like generator, the registry, and behavior metrics.

* ``scripted``: the planner that comes with the simulated variants.
* ``scripted-reactive``: the same planner deciding from each observation alone (``behavior.reactive``): the
  labelling expert of DAgger.
* ``humanlike``: the generator fitted to real demonstrations (``behavior.fit``, ``behavior.humanlike``;
  docs/behavior.md), the demonstrator of ``PickSort-BehaviorGrounded-v0`` (``behavior.variants``).
* ``behavior.metrics``: how alike two demonstration sets move.
* ``behavior.card``: the grasp section of every dataset's data card (registered here with
  ``card_sections.register_card_section``).
"""

from typing import Any

from r2s2r_envs.behavior.reactive import ReactivePlanner
from r2s2r_envs.behavior.scripted import PlannerConfig, ScriptedPlanner
from r2s2r_envs.card_sections import register_card_section
from r2s2r_envs.envs.demonstrators import Demonstrator, demonstrator_names, make_demonstrator, register_demonstrator


def _humanlike(env: Any, **settings: Any) -> Any:
    # Imported on first use: the generator's segmentation needs scipy.signal, which would add most of a second to
    # `import r2s2r_envs`.  behavior.humanlike registers its own factory under the same name once imported.
    from r2s2r_envs.behavior.humanlike import make_humanlike

    return make_humanlike(env, **settings)


def _grasp_card(dataset: Any) -> Any:
    # Imported on first use, like the generator: the segmentation needs scipy.signal.
    from r2s2r_envs.behavior.card import grasp_section

    return grasp_section(dataset)


def __getattr__(name: str) -> Any:
    if name == "HumanlikeGenerator":
        from r2s2r_envs.behavior.humanlike import HumanlikeGenerator

        return HumanlikeGenerator
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


register_demonstrator("humanlike", _humanlike)
register_card_section("grasps", _grasp_card)

__all__ = [
    "Demonstrator",
    "HumanlikeGenerator",
    "PlannerConfig",
    "ReactivePlanner",
    "ScriptedPlanner",
    "demonstrator_names",
    "make_demonstrator",
    "register_demonstrator",
]
