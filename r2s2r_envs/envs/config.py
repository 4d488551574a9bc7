"""Configuration of the PickSort task that is not physics: control, episode randomization, rewards.

All configs are frozen keyword-only dataclasses; presets are factory functions.  Randomization ranges are data,
sampled by one function (``sample_layout``), so what is documented is what is drawn.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, cast

import numpy as np

from r2s2r_envs.mappings import check_keys
from r2s2r_envs.world.constants import CATEGORIES
from r2s2r_envs.world.params import Bound, check_number


@dataclasses.dataclass(frozen=True, kw_only=True)
class ControlConfig:
    """How a normalized action in [-1, 1] becomes robot commands.

    Attributes:
        control_hz: Policy rate, Hz (teleoperation-like).
        max_linear_step: TCP displacement for an action component of 1, m per control step.
        max_angular_step: TCP rotation for an action component of 1, rad per control step.
        max_target_lead: Largest distance the commanded TCP target may run ahead of the measured TCP, m
            (prevents wind-up while the arm is blocked).
        ik_damping: Damping of the damped-least-squares inverse kinematics, dimensionless.
        nullspace_gain: Pull of the redundant arm DoF towards the home posture per control step, 1/step.
        workspace_low: Lower corner of the box the TCP target is clipped to, m (world frame).
        workspace_high: Upper corner of that box, m.
        home_arm_qpos: Arm joint angles at reset, rad: TCP 0.33 m above the floor, pointing down.
    """

    control_hz: float = 20.0
    max_linear_step: float = 0.02
    max_angular_step: float = 0.15
    max_target_lead: float = 0.06
    ik_damping: float = 0.05
    nullspace_gain: float = 0.05
    workspace_low: tuple[float, float, float] = (0.05, -0.55, 0.11)
    workspace_high: tuple[float, float, float] = (0.80, 0.55, 0.60)
    home_arm_qpos: tuple[float, ...] = (0.0, -0.4, 0.0, -2.4, 0.0, 2.0, 0.785)


@dataclasses.dataclass(frozen=True, kw_only=True)
class EpisodeRandomization:
    """Ranges (low, high) of everything drawn at reset; uniform unless stated.

    Attributes:
        first_object_y: Where the first object starts along the belt, m (workspace entry is y = 0.3).
        object_gap: Belt distance between successive objects, m (0.25-0.4 m is 3-5 s at the nominal speed).
        lateral_offset: Object offset across the belt from its centre line, m.
        yaw: Object yaw about the vertical, rad.
        arm_qpos_noise: Half-width of the uniform noise added to the home arm posture, rad.
        category_weights: Relative probability of each category (order ``CATEGORIES``).
    """

    first_object_y: tuple[float, float] = (0.35, 0.45)
    object_gap: tuple[float, float] = (0.25, 0.40)
    lateral_offset: tuple[float, float] = (-0.04, 0.04)
    yaw: tuple[float, float] = (-0.6, 0.6)
    arm_qpos_noise: float = 0.02
    category_weights: tuple[float, float, float] = (1.0, 1.0, 1.0)

    def __post_init__(self) -> None:
        # Validated where they are given, with the field named (not at the first reset, by numpy).
        for name, (low, high) in _RANGE_LIMITS.items():
            # A bound with a length: check_number returns a tuple.
            value = cast(
                "tuple[float, ...]",
                check_number("randomization", name, getattr(self, name), Bound(length=2, minimum=low, maximum=high)),
            )
            if value[0] > value[1]:
                raise ValueError(f"randomization.{name} must be a range (low, high) with low <= high, got {value!r}")
            object.__setattr__(self, name, value)
        object.__setattr__(
            self,
            "arm_qpos_noise",
            check_number("randomization", "arm_qpos_noise", self.arm_qpos_noise, Bound(maximum=0.5)),
        )
        weights = cast(
            "tuple[float, ...]",
            check_number("randomization", "category_weights", self.category_weights, Bound(length=len(CATEGORIES))),
        )
        if sum(weights) <= 0.0:
            raise ValueError(f"randomization.category_weights must have a positive sum, got {weights!r}")
        object.__setattr__(self, "category_weights", weights)


# Accepted (low, high) bounds of each range field: objects must start on the belt, apart from each other
# (the longest object, the bar, is 0.11 m), and inside the belt's width (0.2 m; the ball is 0.06 m across).
_RANGE_LIMITS: dict[str, tuple[float | None, float | None]] = {
    "first_object_y": (0.3, 1.5),
    "object_gap": (0.12, 1.0),
    "lateral_offset": (-0.06, 0.06),
    "yaw": (None, None),
}


@dataclasses.dataclass(frozen=True)
class ObjectPlacement:
    """One object's sampled start: category index, position on the belt (x, y) in m, yaw in rad."""

    category: int
    x: float
    y: float
    yaw: float


def sample_layout(
    rng: np.random.Generator, num_objects: int, belt_center_x: float, cfg: EpisodeRandomization
) -> list[ObjectPlacement]:
    """Draw the objects of one episode from ``cfg`` with ``rng``."""
    weights = np.asarray(cfg.category_weights, dtype=float)
    categories = rng.choice(len(CATEGORIES), size=num_objects, p=weights / weights.sum())
    y = rng.uniform(*cfg.first_object_y)
    placements = []
    for i in range(num_objects):
        if i > 0:
            y += rng.uniform(*cfg.object_gap)
        placements.append(
            ObjectPlacement(
                category=int(categories[i]),
                x=belt_center_x + float(rng.uniform(*cfg.lateral_offset)),
                y=float(y),
                yaw=float(rng.uniform(*cfg.yaw)),
            )
        )
    return placements


@dataclasses.dataclass(frozen=True, kw_only=True)
class RewardWeights:
    """Weight of each named reward term; the reward is the weighted sum, reported per term in ``info``.

    Terms: ``reach`` (1 - tanh(10 d), TCP to the object being worked on), ``grasp`` (1 while an object is held),
    ``transport`` (1 - tanh(5 d), held object to its bin, horizontal), ``sort`` (count of objects that just landed
    in their bin), ``failure`` (count of objects that just failed: missed, dropped, wrong bin, fell off).
    """

    reach: float = 0.1
    grasp: float = 0.25
    transport: float = 0.25
    sort: float = 5.0
    failure: float = -2.0

    @classmethod
    def term_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))


def dense_rewards() -> RewardWeights:
    """Shaped reward for RL: progress terms plus sort/failure events."""
    return RewardWeights()


def sparse_rewards() -> RewardWeights:
    """+1 per object sorted, nothing else."""
    return RewardWeights(reach=0.0, grasp=0.0, transport=0.0, sort=1.0, failure=0.0)


REWARD_MODES = {"dense": dense_rewards, "sparse": sparse_rewards}


def replace_checked(obj: Any, overrides: Mapping[str, Any], what: str) -> Any:
    """``dataclasses.replace`` that names the valid fields when a key is unknown."""
    valid = [f.name for f in dataclasses.fields(obj)]
    if not isinstance(overrides, Mapping):
        raise TypeError(f"{what} must be a mapping of field names to values, got {overrides!r}; valid keys: {valid}")
    check_keys(overrides, valid, what=f"{what} key")
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in overrides.items()}
    return dataclasses.replace(obj, **values)
