"""Sections of a dataset's data card that layers above ``datasets`` compute (``datasets.card``).

A registry with nothing else in it, so that registering a section (``r2s2r_envs.behavior`` registers the grasp
section when the package is imported) does not import the datasets layer and h5py with ``import r2s2r_envs``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: A section: ``compute(file)`` -> ``(summary, per-episode rows in demo order)`` for an open ``DatasetFile``.
CardSection = Callable[[Any], tuple[dict[str, Any], list[dict[str, Any]]]]
#: The registered sections by name, in registration order.
SECTIONS: dict[str, CardSection] = {}


def register_card_section(name: str, compute: CardSection) -> None:
    """Adds section ``name`` to every card: ``compute(file)`` returns its summary and per-episode rows."""
    SECTIONS[name] = compute


__all__ = ["SECTIONS", "CardSection", "register_card_section"]
