"""What the identification stages (``grounding.identify``) share: the estimates they accumulate, a t quantile for
intervals, and setters of one ``WorldParams`` field or element for the fits that vary them."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from r2s2r_envs.world.params import WorldParams, nominal


class FitState:
    """Accumulates estimates, intervals and reasons while the stages run."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.intervals: dict[str, list] = {}
        self.reasons: dict[str, str] = {}
        self.details: dict[str, Any] = {}

    def set(self, field: str, value: Any, interval: Sequence) -> None:
        self.values[field] = value
        self.intervals[field] = (
            [list(map(float, iv)) for iv in interval] if np.ndim(value) else list(map(float, interval))
        )
        self.reasons.pop(field, None)

    def flag(self, field: str, reason: str) -> None:
        if field not in self.values:
            self.reasons.setdefault(field, reason)  # the first, most specific reason stays

    def world(self, base: WorldParams | None = None) -> WorldParams:
        w = base or nominal()
        values: dict[str, Any] = {k: tuple(v) if np.ndim(v) else float(v) for k, v in self.values.items()}
        return dataclasses.replace(w, **values)


def t_quantile(dof: int) -> float:
    """The 97.5% quantile of Student's t with ``dof`` degrees of freedom (at least 1): a 95% interval's factor."""
    from scipy import stats

    return float(stats.t.ppf(0.975, max(dof, 1)))


def replace_field(field: str) -> Callable[[WorldParams, float], WorldParams]:
    """``apply(world, value)``: ``world`` with its scalar ``field`` set to ``value``."""

    def apply(w: WorldParams, v: float) -> WorldParams:
        changes: dict[str, Any] = {field: v}
        return dataclasses.replace(w, **changes)

    return apply


def replace_element(field: str, k: int) -> Callable[[WorldParams, float], WorldParams]:
    """``apply(world, value)``: ``world`` with element ``k`` of its vector ``field`` set to ``value``."""

    def apply(w: WorldParams, v: float) -> WorldParams:
        values = list(getattr(w, field))
        values[k] = v
        changes: dict[str, Any] = {field: tuple(values)}
        return dataclasses.replace(w, **changes)

    return apply
