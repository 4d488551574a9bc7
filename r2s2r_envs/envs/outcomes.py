"""The PickSort outcome rules: what happened to each object, decided from its pose alone.

Pure functions of arrays (no simulation), so every rule can be tested with hand-made poses, and the env calls
them once per control step for all objects at once.

An object is ``pending`` until one rule fires, then its outcome is final:

* ``sorted`` / ``wrong_bin``: inside a bin's region (between its walls, below ``bin_top``) and slower than
  ``settled_speed`` (it may still bounce out while moving); sorted if it is the bin of its category.
* ``dropped`` / ``fell_off_belt``: below the belt surface (by ``below_belt``) outside every bin: on its way to the
  floor (a rolling ball never settles, so this fires at once).  ``dropped`` if it had been lifted.
* ``dropped`` / ``missed``: past the end of the arm's reach (``reach_limit_y``) near belt height.
* ``timeout`` (the episode's time limit) and ``unstable`` (the simulation diverged) are assigned by the env.
"""

from __future__ import annotations

import dataclasses

import numpy as np

OUTCOMES: tuple[str, ...] = (
    "pending", "sorted", "missed", "dropped", "wrong_bin", "fell_off_belt", "timeout", "unstable",
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

    @property
    def bin_top(self) -> np.ndarray:
        """(3,) top of each bin's region."""
        return self.bin_center[:, 2] + self.bin_half_size[:, 2]


def bin_index(pos: np.ndarray, geometry: TaskGeometry) -> np.ndarray:
    """(N,) index of the bin whose region holds each object centre (between its walls, below its top), or -1.

    Args:
        pos: (N, 3) object centres.
    """
    offset = np.abs(pos[:, None, :2] - geometry.bin_center[None, :, :2])  # (N, bins, 2)
    inside = np.all(offset <= geometry.bin_half_size[None, :, :2], axis=2) & (pos[:, None, 2] <= geometry.bin_top)
    return np.where(inside.any(axis=1), inside.argmax(axis=1), -1)


def classify(
    pos: np.ndarray,
    speed: np.ndarray,
    bottom: np.ndarray,
    lifted: np.ndarray,
    category: np.ndarray,
    geometry: TaskGeometry,
    rules: OutcomeRules,
) -> tuple[list[str | None], np.ndarray]:
    """Apply the rules to every object.

    Args:
        pos: (N, 3) object centres, m.
        speed: (N,) object linear speeds, m/s.
        bottom: (N,) heights of the objects' lowest points, m.
        lifted: (N,) whether each object has been lifted earlier in the episode.
        category: (N,) category index of each object.
        geometry: Belt and bins.
        rules: Thresholds.

    Returns:
        The outcome each object reaches now (None: still pending) and the updated ``lifted`` flags (an object
        lifted now counts as lifted for the rules already).
    """
    lifted = lifted | (bottom > geometry.belt_top + rules.lift_height)
    in_bin = bin_index(pos, geometry)
    landed = (in_bin >= 0) & (speed < rules.settled_speed)
    off_belt = (in_bin < 0) & (pos[:, 2] < geometry.belt_top - rules.below_belt)
    passed = (in_bin < 0) & ~off_belt & (pos[:, 1] < rules.reach_limit_y)
    passed &= pos[:, 2] < geometry.belt_top + rules.reach_band
    outcomes: list[str | None] = []
    for i in range(len(pos)):
        if landed[i]:
            outcomes.append("sorted" if in_bin[i] == category[i] else "wrong_bin")
        elif off_belt[i]:
            outcomes.append("dropped" if lifted[i] else "fell_off_belt")
        elif passed[i]:
            outcomes.append("dropped" if lifted[i] else "missed")
        else:
            outcomes.append(None)
    return outcomes, lifted


def held(pos: np.ndarray, bottom: np.ndarray, tcp: np.ndarray, geometry: TaskGeometry, rules: OutcomeRules) -> np.ndarray:
    """(N,) whether each object is held: lifted off the belt and close to the TCP."""
    near = np.sum((pos - tcp) ** 2, axis=1) < rules.hold_distance**2
    return (bottom > geometry.belt_top + 0.5 * rules.lift_height) & near


def first_failure(outcomes: list[str], steps: list[int]) -> str | None:
    """The failure that happened first (ties: object order), or None if nothing failed."""
    failures = [(s, i, o) for i, (o, s) in enumerate(zip(outcomes, steps)) if o not in ("pending", "sorted")]
    return min(failures)[2] if failures else None
