"""World parameters: everything physical that can differ between the simulator and the real system.

``WorldParams`` is a frozen, keyword-only dataclass; presets are factory functions and variants are made with
``dataclasses.replace`` (or ``WorldParams.from_dict`` for JSON input).  Every field carries its unit and where
its default comes from.  The nominal values are the "spec sheet": what a team would type in before measuring
anything.  System identification (``r2s2r_envs.grounding``) produces other instances from lab logs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from r2s2r_envs.world.constants import CATEGORIES

N_ARM_JOINTS = 7


@dataclasses.dataclass(frozen=True, kw_only=True)
class WorldParams:
    """Physical parameters of a PickSort world.

    Attributes:
        belt_speed: Conveyor surface speed, m/s, objects travel towards -y.
            Ref: spec-sheet value chosen for the task (a dynamic pick needs ~2-4 s in reach).
        object_mass: Mass per category (order ``CATEGORIES``: cube, ball, bar), kg.
            Ref: solid ABS/wood parts of the nominal sizes in ``assets/objects.xml``.
        object_friction: Sliding friction coefficient of the objects against everything, dimensionless.
            Ref: MuJoCo's default 1.0 reduced to a typical plastic-on-rubber 0.8.
        object_size_scale: Scale applied to every object's nominal half-sizes, dimensionless.
        arm_damping: Joint viscous damping per arm joint, N*m*s/rad.  Ref: order of magnitude of Franka
            Panda identification papers (Gaz et al., RA-L 2019) rounded up.
        arm_armature: Reflected rotor inertia per arm joint, kg*m^2.  Ref: Gaz et al. 2019, rounded.
        arm_frictionloss: Coulomb friction per arm joint, N*m.  Ref: Gaz et al. 2019, rounded.
        arm_kp: Joint position servo stiffness per arm joint, N*m/rad.  Ref: MuJoCo Menagerie's Panda.
        arm_kv: Joint position servo damping per arm joint, N*m*s/rad.  Ref: MuJoCo Menagerie's Panda.
        arm_force_limit: Torque limit per arm joint, N*m.  Ref: Franka datasheet (87 / 12 N*m).
        finger_kp: Finger joint position servo stiffness, N*m/rad.  Ref: LEAP hand Dynamixel XC330 in
            current-limited position mode, linearised.
        finger_kv: Finger joint servo damping, N*m*s/rad.
        finger_force_limit: Finger joint torque limit, N*m.  Ref: XC330-M288 stall torque (~0.95 N*m).
        control_latency: Delay between an action being sent and the robot executing it, s.
            Ref: the spec sheet assumes none.
    """

    belt_speed: float = 0.08
    object_mass: tuple[float, float, float] = (0.10, 0.12, 0.20)
    object_friction: float = 0.8
    object_size_scale: float = 1.0
    arm_damping: tuple[float, ...] = (1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5)
    arm_armature: tuple[float, ...] = (0.1, 0.1, 0.1, 0.1, 0.05, 0.05, 0.05)
    arm_frictionloss: tuple[float, ...] = (0.2, 0.2, 0.2, 0.2, 0.1, 0.1, 0.1)
    arm_kp: tuple[float, ...] = (4500.0, 4500.0, 3500.0, 3500.0, 2000.0, 2000.0, 2000.0)
    arm_kv: tuple[float, ...] = (450.0, 450.0, 350.0, 350.0, 200.0, 200.0, 200.0)
    arm_force_limit: tuple[float, ...] = (87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0)
    finger_kp: float = 4.0
    finger_kv: float = 0.05
    finger_force_limit: float = 0.95
    control_latency: float = 0.0

    def __post_init__(self) -> None:
        lengths = {
            "object_mass": len(CATEGORIES),
            "arm_damping": N_ARM_JOINTS,
            "arm_armature": N_ARM_JOINTS,
            "arm_frictionloss": N_ARM_JOINTS,
            "arm_kp": N_ARM_JOINTS,
            "arm_kv": N_ARM_JOINTS,
            "arm_force_limit": N_ARM_JOINTS,
        }
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in lengths:
                # Accept lists from JSON but store tuples so the dataclass stays hashable.
                if not isinstance(value, (tuple, list)) or len(value) != lengths[f.name]:
                    raise ValueError(
                        f"WorldParams.{f.name} must be a sequence of {lengths[f.name]} numbers, got {value!r}"
                    )
                value = tuple(float(v) for v in value)
                object.__setattr__(self, f.name, value)
                values = value
            else:
                value = float(value)
                object.__setattr__(self, f.name, value)
                values = (value,)
            minimum_zero = f.name in ("control_latency", "arm_damping", "arm_armature", "arm_frictionloss",
                                      "finger_kv", "arm_kv", "belt_speed")
            for v in values:
                if not math.isfinite(v) or v < 0 or (v == 0 and not minimum_zero):
                    bound = ">= 0" if minimum_zero else "> 0"
                    raise ValueError(f"WorldParams.{f.name} must be finite and {bound}, got {value!r}")

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """Names of all parameters, in declaration order."""
        return tuple(f.name for f in dataclasses.fields(cls))

    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable dict of all parameters (tuples become lists)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], base: WorldParams | None = None) -> WorldParams:
        """Build params from a (possibly partial) mapping, on top of ``base`` (default: ``nominal()``).

        Raises:
            KeyError: a key is not a WorldParams field; the message lists the valid ones.
            ValueError: a value has the wrong length or is out of range.
        """
        unknown = sorted(set(values) - set(cls.field_names()))
        if unknown:
            raise KeyError(f"unknown WorldParams field(s) {unknown}; valid fields: {list(cls.field_names())}")
        return dataclasses.replace(base if base is not None else nominal(), **dict(values))


def nominal() -> WorldParams:
    """The spec-sheet world: the simulator's physics before any grounding."""
    return WorldParams()
