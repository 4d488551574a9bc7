"""The PickSort outcome rules: what happened to each object, decided from its pose alone.

Pure functions of arrays (no simulation), so every rule can be tested with hand-made poses, and the env calls
them once per control step for all objects at once.

An object is ``pending`` until one rule fires, then its outcome is final:

* ``sorted`` / ``wrong_bin``: inside a bin's region (between its walls, below its top) and slower than
  ``settled_speed`` (it may still bounce out while moving); sorted if it is the bin of its category.
* ``dropped`` / ``fell_off_belt``: below the belt surface (by ``below_belt``) outside every bin: on its way to the
  floor (a rolling ball never settles, so this fires at once).  ``dropped`` if it had been lifted.
* ``dropped`` / ``missed``: past the end of the arm's reach (``reach_limit_y``) near belt height.
* ``timeout`` (the episode's time limit) and ``unstable`` (the simulation diverged) are assigned by the env.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

OUTCOMES: tuple[str, ...] = (
    "pending",
    "sorted",
    "missed",
    "dropped",
    "wrong_bin",
    "fell_off_belt",
    "timeout",
    "unstable",
)
FAILURE_CAUSES: tuple[str, ...] = OUTCOMES[2:]


@dataclasses.dataclass(frozen=True, kw_only=True)
class OutcomeRules:
    """Thresholds of the outcome rules (m, m/s; heights relative to the belt surface).

    Attributes:
        lift_height: Object bottom this far above the belt counts as lifted.
        reach_limit_y: Past this y (downstream) the object is out of the arm's reach.
        reach_band: Height above the belt within which an object past ``reach_limit_y`` counts as left behind.
        settled_speed: An object in a bin slower than this has landed.
        below_belt: An object centre this far below the belt surface is off the belt.
        hold_distance: Object centre within this of the TCP, while lifted by half ``lift_height``, counts as held.
    """

    lift_height: float = 0.04
    reach_limit_y: float = -0.45
    reach_band: float = 0.1
    settled_speed: float = 0.05
    below_belt: float = 0.02
    hold_distance: float = 0.06


@dataclasses.dataclass(frozen=True, kw_only=True)
class TaskGeometry:
    """The static geometry the rules need (m, world frame).

    Attributes:
        belt_top: Height of the belt surface.
        bin_center: (3, 3) centre of each bin's region (order ``constants.CATEGORIES``).
        bin_half_size: (3, 3) half-extents of each bin's region.
    """

    belt_top: float
    bin_center: np.ndarray
    bin_half_size: np.ndarray
    if TYPE_CHECKING:  # set by __post_init__; declared to the type checker only, so not a field at run time
        _boxes: tuple[tuple[float, ...], ...] = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        # Bin regions as plain-float boxes (x_lo, x_hi, y_lo, y_hi, z_top): the rules run every control step on a
        # handful of objects, where Python float comparisons beat numpy's per-call overhead several times over.
        c, h = np.asarray(self.bin_center, float), np.asarray(self.bin_half_size, float)
        boxes = [
            (c[k, 0] - h[k, 0], c[k, 0] + h[k, 0], c[k, 1] - h[k, 1], c[k, 1] + h[k, 1], c[k, 2] + h[k, 2])
            for k in range(len(c))
        ]
        object.__setattr__(self, "_boxes", tuple(tuple(float(v) for v in b) for b in boxes))

    def bin_of(self, x: float, y: float, z: float) -> int:
        """Index of the bin whose region holds the point (between its walls, below its top), or -1."""
        for k, (x_lo, x_hi, y_lo, y_hi, z_top) in enumerate(self._boxes):
            if x_lo <= x <= x_hi and y_lo <= y <= y_hi and z <= z_top:
                return k
        return -1


def bin_index(pos: np.ndarray, geometry: TaskGeometry) -> np.ndarray:
    """(N,) index of the bin whose region holds each object centre (between its walls, below its top), or -1.

    Args:
        pos: (N, 3) object centres.
    """
    return np.array([geometry.bin_of(x, y, z) for x, y, z in np.asarray(pos).tolist()], dtype=int)


class Judge:
    """The rules for one object at a time, their thresholds resolved once for a geometry and a rule set.

    ``classify`` and ``held`` apply it to every object; the env applies it object by object within its own pass
    over the objects each control step (one implementation of every rule either way).

    Args:
        geometry: Belt and bins.
        rules: Thresholds.
    """

    __slots__ = (
        "geometry",
        "rules",
        "_bin_of",
        "_lift_z",
        "_off_z",
        "_band_z",
        "_settled",
        "_reach_y",
        "_hold_z",
        "_hold_d2",
    )

    def __init__(self, geometry: TaskGeometry, rules: OutcomeRules) -> None:
        self.geometry, self.rules = geometry, rules
        belt = geometry.belt_top
        self._bin_of = geometry.bin_of
        self._lift_z, self._off_z, self._band_z = (
            belt + rules.lift_height,
            belt - rules.below_belt,
            belt + rules.reach_band,
        )
        self._settled, self._reach_y = rules.settled_speed, rules.reach_limit_y
        self._hold_z, self._hold_d2 = belt + 0.5 * rules.lift_height, rules.hold_distance**2

    def outcome(
        self, x: float, y: float, z: float, speed: float, bottom: float, lifted: bool, category: int
    ) -> tuple[str | None, bool]:
        """The outcome an object at centre ``(x, y, z)`` reaches now (None: still pending) and whether it has been
        lifted (``lifted``: earlier in the episode; an object lifted now counts as lifted for the rules already)."""
        lifted = lifted or bottom > self._lift_z
        k = self._bin_of(x, y, z)
        if k >= 0:
            return ("sorted" if k == category else "wrong_bin") if speed < self._settled else None, lifted
        if z < self._off_z:
            return "dropped" if lifted else "fell_off_belt", lifted
        if y < self._reach_y and z < self._band_z:
            return "dropped" if lifted else "missed", lifted
        return None, lifted

    def is_held(self, x: float, y: float, z: float, bottom: float, tcp: Sequence[float]) -> bool:
        """Whether an object at centre ``(x, y, z)`` is held: lifted off the belt and close to the TCP."""
        tx, ty, tz = tcp
        return bottom > self._hold_z and (x - tx) ** 2 + (y - ty) ** 2 + (z - tz) ** 2 < self._hold_d2


def classify(
    pos: np.ndarray,
    speed: np.ndarray,
    bottom: np.ndarray,
    lifted: np.ndarray,
    category: np.ndarray,
    geometry: TaskGeometry,
    rules: OutcomeRules,
) -> tuple[list[str | None], list[bool]]:
    """Apply the rules to every object (arguments may be numpy arrays or lists).

    Args:
        pos: (N, 3) object centres, m.
        speed: (N,) object linear speeds, m/s.
        bottom: (N,) heights of the objects' lowest points, m.
        lifted: (N,) whether each object has been lifted earlier in the episode.
        category: (N,) category index of each object.
        geometry: Belt and bins.
        rules: Thresholds.

    Returns:
        The outcome each object reaches now (None: still pending) and the updated ``lifted`` flags as a list (an
        object lifted now counts as lifted for the rules already).
    """
    judge = Judge(geometry, rules)
    now_lifted, outcomes = [], []
    for (x, y, z), v, b, up, cat in zip(_rows(pos), _rows(speed), _rows(bottom), _rows(lifted), _rows(category)):
        outcome, up = judge.outcome(x, y, z, v, b, up, cat)
        now_lifted.append(up)
        outcomes.append(outcome)
    return outcomes, now_lifted


def held(
    pos: np.ndarray, bottom: np.ndarray, tcp: np.ndarray, geometry: TaskGeometry, rules: OutcomeRules
) -> list[bool]:
    """Whether each object is held: lifted off the belt and close to the TCP (arrays or lists)."""
    judge, tcp_xyz = Judge(geometry, rules), _rows(tcp)
    return [judge.is_held(x, y, z, b, tcp_xyz) for (x, y, z), b in zip(_rows(pos), _rows(bottom))]


def _rows(values: np.ndarray | Sequence) -> Sequence:
    # Arrays become (nested) lists of Python scalars; other sequences pass through as they are (only read).
    return values.tolist() if isinstance(values, np.ndarray) else values


def first_failure(outcomes: list[str], steps: list[int]) -> str | None:
    """The failure that happened first (ties: object order), or None if nothing failed."""
    failures = [(s, i, o) for i, (o, s) in enumerate(zip(outcomes, steps)) if o not in ("pending", "sorted")]
    return min(failures)[2] if failures else None
