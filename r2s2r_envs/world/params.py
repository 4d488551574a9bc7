"""World parameters: everything physical, sensing and timing included, that can differ between a simulator and
the real system.

``WorldParams`` is a frozen, keyword-only dataclass; presets are factory functions (and JSON files, see
``world.presets``) and variants are made with ``dataclasses.replace`` (or ``WorldParams.from_dict`` for JSON
input).  Every field carries its unit and where its default comes from.  The nominal values are the "spec sheet":
what a team would type in before measuring anything, perfect sensors and a steady belt included.  A real team
does measure its sensors and calibrate its cameras, so sensing is part of the world a simulator can model
(docs/concepts.md#the-gap-layers); system identification (``r2s2r_envs.grounding``) produces other instances
from lab logs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any

from r2s2r_envs.mappings import check_choice, check_keys
from r2s2r_envs.world.constants import CATEGORIES

N_ARM_JOINTS = 7


@dataclasses.dataclass(frozen=True)
class Bound:
    """What a numeric config field accepts.

    Attributes:
        length: Number of entries of a sequence field, or None for a scalar.
        minimum: Smallest accepted value (None: any finite value, negative included).
        strict: Whether ``minimum`` itself is excluded.
        maximum: Largest accepted value (None: unbounded).
    """

    length: int | None = None
    minimum: float | None = 0.0
    strict: bool = False
    maximum: float | None = None

    def describe(self) -> str:
        parts = []
        if self.minimum is not None:
            parts.append(f"{'>' if self.strict else '>='} {self.minimum:g}")
        if self.maximum is not None:
            parts.append(f"<= {self.maximum:g}")
        values = "finite and " + " and ".join(parts) if parts else "finite"
        if self.length is None:
            return f"a number, {values}"
        return f"a sequence of {self.length} numbers, each {values}"


def check_number(owner: str, name: str, value: Any, bound: Bound) -> float | tuple[float, ...]:
    """Validate one numeric config field and return it as a float (or a tuple of floats).

    Raises:
        TypeError: not a number (or not a sequence of numbers); the message names ``owner.name`` and what is
            accepted.
        ValueError: wrong length, NaN/inf or out of range; same message style.
    """
    where = f"{owner}.{name}"
    if bound.length is None:
        items, scalar = [value], True
    else:
        if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__len__"):
            raise TypeError(f"{where} must be {bound.describe()}, got {value!r}")
        if len(value) != bound.length:
            raise ValueError(f"{where} must be {bound.describe()}, got {len(value)} entries: {value!r}")
        items, scalar = list(value), False
    out = []
    for v in items:
        if isinstance(v, bool) or not isinstance(v, (int, float)) and not _is_numpy_number(v):
            raise TypeError(f"{where} must be {bound.describe()}, got {value!r}")
        v = float(v)
        ok = math.isfinite(v)
        if ok and bound.minimum is not None:
            ok = v > bound.minimum if bound.strict else v >= bound.minimum
        if ok and bound.maximum is not None:
            ok = v <= bound.maximum
        if not ok:
            raise ValueError(f"{where} must be {bound.describe()}, got {value!r}")
        out.append(v)
    return out[0] if scalar else tuple(out)


def _is_numpy_number(v: Any) -> bool:
    import numpy as np

    return isinstance(v, np.generic) and np.issubdtype(type(v), np.number)


#: The groups of the sensing fields of ``WorldParams`` (``param(group=...)``): the sensors' white noise, the
#: perception camera's calibration, the object estimator.  A field without a group is the dynamics' (physics,
#: timing, the belt).
FIELD_GROUPS: tuple[str, ...] = ("sensor noise", "calibration", "perception")


def param(
    default: Any,
    unit: str | None = None,
    bound: Bound | None = None,
    *,
    group: str | None = None,
    choices: tuple[str, ...] | None = None,
) -> Any:
    """A config field with its metadata, declared once: its unit, what it accepts and its group.

    Args:
        default: The field's default value (immutable: a number, a string or a tuple).
        unit: Its unit, as its docstring states it (``"m/s"``, ``"dimensionless"``); None for a categorical field.
        bound: What a number (or each number of a sequence) accepts, checked by :func:`check_fields`.
        group: One of ``FIELD_GROUPS`` (``WorldParams``' sensing fields), else None.
        choices: The values a categorical field accepts.
    """
    if group is not None:
        check_choice(group, FIELD_GROUPS, what="field group")
    metadata = {"unit": unit, "bound": bound, "group": group, "choices": choices}
    return dataclasses.field(default=default, metadata=metadata)


def check_fields(obj: Any, owner: str) -> None:
    """Check every field of the frozen dataclass ``obj`` that declares a bound (:func:`param`), in declaration
    order, and store it back as a float (or a tuple of floats).

    Raises:
        TypeError / ValueError: as :func:`check_number`, naming ``owner.field``.
    """
    for f in dataclasses.fields(obj):
        bound = f.metadata.get("bound")
        if bound is not None:
            object.__setattr__(obj, f.name, check_number(owner, f.name, getattr(obj, f.name), bound))


def field_metadata(cls: Any, key: str) -> dict[str, Any]:
    """``{field: metadata[key]}`` for the fields of the dataclass ``cls`` that declare ``key``, in declaration
    order."""
    return {f.name: f.metadata[key] for f in dataclasses.fields(cls) if f.metadata.get(key) is not None}


def fields_in(cls: Any, *groups: str) -> tuple[str, ...]:
    """Names of the fields of ``cls`` in any of ``groups``, in declaration order."""
    return tuple(f.name for f in dataclasses.fields(cls) if f.metadata.get("group") in groups)


@dataclasses.dataclass(frozen=True, kw_only=True)
class WorldParams:
    """Physical, sensing and timing parameters of a PickSort world.

    Attributes:
        belt_speed: Conveyor surface speed, m/s, objects travel towards -y.
            Ref: spec-sheet value chosen for the task (a dynamic pick needs ~2-4 s in reach).
        belt_speed_fluctuation: Standard deviation of the belt speed's relative fluctuation, dimensionless
            (0.05 = 5 % of ``belt_speed``); an Ornstein-Uhlenbeck process.  Ref: spec sheet assumes a steady belt.
        belt_fluctuation_time: Correlation time of that fluctuation, s.  Ref: slow drive-controller wander, ~1 s.
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
        joint_pos_noise: Standard deviation of white noise on measured joint angles (arm and hand), rad.
            Ref: spec sheet assumes perfect encoders.
        joint_vel_noise: Standard deviation of white noise on measured joint velocities, rad/s.
        eef_pos_noise: Standard deviation of white noise on the measured TCP position, m.
        object_pos_noise: Standard deviation of white noise on perceived object positions, m (camera-based
            tracking).  Ref: spec sheet assumes perfect perception.
        object_vel_noise: Standard deviation of white noise on perceived object linear velocities, m/s.
        object_pos_offset: Constant offset of perceived object positions (x, y, z), m: the extrinsic
            calibration error of the perception camera.  Ref: spec sheet assumes a perfect calibration.
        arm_torque_noise: Standard deviation of white noise on measured arm joint torques (the opt-in
            ``arm_torque`` sensor), N*m.  Ref: spec sheet assumes perfect torque sensors.
        finger_current_noise: Standard deviation of white noise on the finger servos' measured effort (the
            opt-in ``finger_current`` sensor, expressed as joint torque), N*m.  Ref: spec sheet assumes none.

    The camera-based object estimator (``envs.perception``; docs/task.md#perception).  All zero in the nominal
    world (perception is exact there); a world with any of them non-zero runs the estimator, which then also
    applies ``object_pos_noise``, ``object_vel_noise`` and ``object_pos_offset``:

        perception_delay: Age of the object estimates, s (the image's exposure to the pose reaching the robot).
            Ref: camera-based pose tracking in a real cell reports 60-100 ms.
        object_pos_noise_speed: Extra standard deviation of the perceived position per unit object speed, s
            (m per m/s: motion blur and rolling shutter).
        object_pos_noise_occlusion: Extra standard deviation of the perceived position when the hand is about to
            cover the object (full at ``hand_occlusion_radius``, none beyond twice it), m.
        object_pos_rotation: Extrinsic rotation error of the perception camera about its own centre, as a rotation
            vector (x, y, z), rad: with ``object_pos_offset`` it makes the calibration error depend on where the
            object is.  Ref: a hand-eye calibration is good to about half a degree.
        object_quat_noise: Standard deviation of the perceived orientation's error about each axis, rad.
        object_dropout: Chance per object and control step that the estimator misses a visible object
            (probability).
        category_confusion: Chance per object and control step that the estimator reports another category
            (probability).
        hand_occlusion_radius: Radius around the TCP within which the hand hides an object from the camera, m
            (0: the hand hides nothing).  A hidden object keeps its last estimate and reads as not visible.
    """

    # Ref: picking conveyors run at 0.05-0.3 m/s; at 0.5 m/s an object crosses the arm's reach in under 2 s.
    belt_speed: float = param(0.08, "m/s", Bound(maximum=0.5))
    belt_speed_fluctuation: float = param(0.0, "dimensionless", Bound(maximum=0.5))  # relative std
    belt_fluctuation_time: float = param(1.0, "s", Bound(minimum=0.01, maximum=100.0))
    # Ref: the Panda's rated payload, 3 kg; the nominal parts weigh 0.1-0.2 kg.
    object_mass: tuple[float, float, float] = param(
        (0.10, 0.12, 0.20), "kg", Bound(length=len(CATEGORIES), strict=True, maximum=3.0)
    )
    # Ref: rubber on rubber reaches ~2; MuJoCo's default is 1.
    object_friction: float = param(0.8, "dimensionless", Bound(strict=True, maximum=3.0))
    object_size_scale: float = param(1.0, "dimensionless", Bound(minimum=0.5, maximum=2.0))
    # Ref: Gaz et al. 2019 identify damping ~0.1-1, armature ~0.1-0.3, friction ~0.1-1 for the Panda's joints;
    # the bounds allow 30-100x that.
    arm_damping: tuple[float, ...] = param(
        (1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5), "N*m*s/rad", Bound(length=N_ARM_JOINTS, maximum=100.0)
    )
    arm_armature: tuple[float, ...] = param(
        (0.1, 0.1, 0.1, 0.1, 0.05, 0.05, 0.05), "kg*m^2", Bound(length=N_ARM_JOINTS, maximum=10.0)
    )
    arm_frictionloss: tuple[float, ...] = param(
        (0.2, 0.2, 0.2, 0.2, 0.1, 0.1, 0.1), "N*m", Bound(length=N_ARM_JOINTS, maximum=20.0)
    )
    # Ref: MuJoCo Menagerie's Panda servos, kp 2000-4500 with kv a tenth of it; a servo without damping (kv 0)
    # oscillates, so kv is strictly positive.
    arm_kp: tuple[float, ...] = param(
        (4500.0, 4500.0, 3500.0, 3500.0, 2000.0, 2000.0, 2000.0),
        "N*m/rad",
        Bound(length=N_ARM_JOINTS, strict=True, maximum=20000.0),
    )
    arm_kv: tuple[float, ...] = param(
        (450.0, 450.0, 350.0, 350.0, 200.0, 200.0, 200.0),
        "N*m*s/rad",
        Bound(length=N_ARM_JOINTS, strict=True, maximum=2000.0),
    )
    # Ref: Franka datasheet, 87 / 12 N*m.
    arm_force_limit: tuple[float, ...] = param(
        (87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0), "N*m", Bound(length=N_ARM_JOINTS, strict=True, maximum=200.0)
    )
    # Ref: Dynamixel XC330 in current-limited position mode, linearised (kp ~4, stall torque ~0.95 N*m).
    finger_kp: float = param(4.0, "N*m/rad", Bound(strict=True, maximum=50.0))
    finger_kv: float = param(0.05, "N*m*s/rad", Bound(maximum=2.0))
    finger_force_limit: float = param(0.95, "N*m", Bound(strict=True, maximum=10.0))
    control_latency: float = param(0.0, "s", Bound(maximum=0.5))
    # Sensor noise: ten or more times what cheap encoders, cameras and torque sensors show.
    joint_pos_noise: float = param(0.0, "rad", Bound(maximum=0.1), group="sensor noise")
    joint_vel_noise: float = param(0.0, "rad/s", Bound(maximum=2.0), group="sensor noise")
    eef_pos_noise: float = param(0.0, "m", Bound(maximum=0.05), group="sensor noise")
    object_pos_noise: float = param(0.0, "m", Bound(maximum=0.05), group="sensor noise")
    object_vel_noise: float = param(0.0, "m/s", Bound(maximum=0.5), group="sensor noise")
    # Ref: a camera's extrinsic calibration error beyond 10 cm would miss the belt.
    object_pos_offset: tuple[float, float, float] = param(
        (0.0, 0.0, 0.0), "m", Bound(length=3, minimum=-0.1, maximum=0.1), group="calibration"
    )
    arm_torque_noise: float = param(0.0, "N*m", Bound(maximum=10.0), group="sensor noise")
    finger_current_noise: float = param(0.0, "N*m", Bound(maximum=1.0), group="sensor noise")
    # Ref: a pose estimate older than half a second is useless on a moving belt.
    perception_delay: float = param(0.0, "s", Bound(maximum=0.5), group="perception")
    object_pos_noise_speed: float = param(0.0, "s", Bound(maximum=0.5), group="perception")  # m per m/s
    object_pos_noise_occlusion: float = param(0.0, "m", Bound(maximum=0.05), group="perception")
    # Ref: 0.1 rad (5.7 degrees) of extrinsic rotation moves the belt by 10 cm as the camera sees it.
    object_pos_rotation: tuple[float, float, float] = param(
        (0.0, 0.0, 0.0), "rad", Bound(length=3, minimum=-0.1, maximum=0.1), group="perception"
    )
    object_quat_noise: float = param(0.0, "rad", Bound(maximum=0.5), group="perception")
    object_dropout: float = param(0.0, "probability", Bound(maximum=0.5), group="perception")
    category_confusion: float = param(0.0, "probability", Bound(maximum=0.5), group="perception")
    hand_occlusion_radius: float = param(0.0, "m", Bound(maximum=0.2), group="perception")

    def __post_init__(self) -> None:
        check_fields(self, "WorldParams")

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """Names of all parameters, in declaration order."""
        return tuple(f.name for f in dataclasses.fields(cls))

    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable dict of the parameters (tuples become lists).  The estimator's fields
        (``PERCEPTION_FIELDS``, added in 0.3) appear only where they differ from nominal, so a world without them
        has the dict, and the hash, it had before they existed."""
        out = {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}
        for name in PERCEPTION_FIELDS:
            if getattr(self, name) == _NOMINAL_PERCEPTION[name]:
                del out[name]
        return out

    @property
    def perceives(self) -> bool:
        """Whether objects are seen through the camera-based estimator (any ``PERCEPTION_FIELDS`` non-nominal)."""
        return any(getattr(self, name) != _NOMINAL_PERCEPTION[name] for name in PERCEPTION_FIELDS)

    def sha256(self) -> str:
        """SHA-256 of the canonical JSON of all parameters: equal worlds, equal hashes."""
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], base: WorldParams | None = None) -> WorldParams:
        """Build params from a (possibly partial) mapping, on top of ``base`` (default: ``nominal()``).

        Raises:
            KeyError: a key is not a WorldParams field; the message lists the valid ones.
            TypeError: ``values`` is not a mapping, or a value is not a number; the message names the field.
            ValueError: a value has the wrong length or is out of range; the message names the field.
        """
        if not isinstance(values, Mapping):
            raise TypeError(f"WorldParams.from_dict needs a mapping of field names to values, got {values!r}")
        check_keys(values, cls.field_names(), what="WorldParams field")
        return dataclasses.replace(base if base is not None else nominal(), **dict(values))


#: What each field accepts (sequence lengths and ranges, in the field's unit); checked on construction.  The
#: ranges are what is physically plausible for a tabletop conveyor cell with a Panda-class arm and a LEAP-class
#: hand, wide enough for every lab the suite draws (``r2s2r_envs.lab.draw``, 0.5-3x the
#: nominal arm values) and every fit's own bounds (``grounding.identify``), narrow enough that a typo (a mass of
#: 1e6 kg, a gain of 1e12) is refused rather than simulated (docs/lab.md#world-bounds).  Declared with each field.
FIELD_BOUNDS: dict[str, Bound] = field_metadata(WorldParams, "bound")

#: The unit of every field, as its docstring states it (tests/test_world.py checks both agree); declared with each
#: field.
FIELD_UNITS: dict[str, str] = field_metadata(WorldParams, "unit")

#: Standard deviations of the sensors' white noise (joints, TCP, objects, torques, finger currents).
SENSOR_NOISE_FIELDS: tuple[str, ...] = fields_in(WorldParams, "sensor noise")

#: The camera-based estimator's fields (``envs.perception``): nominal (zero) in a world that perceives exactly.
PERCEPTION_FIELDS: tuple[str, ...] = fields_in(WorldParams, "perception")

#: Fields that describe the sensors (measurement, not dynamics): changing them never touches the MuJoCo model.
#: The sensor noise, the camera's calibration offset and the estimator's fields, in declaration order.
SENSING_FIELDS: tuple[str, ...] = fields_in(WorldParams, "sensor noise", "calibration", "perception")

_NOMINAL_PERCEPTION: dict[str, Any] = {
    f.name: f.default for f in dataclasses.fields(WorldParams) if f.name in PERCEPTION_FIELDS
}


def nominal() -> WorldParams:
    """The spec-sheet world: the simulator's physics before any grounding (perfect sensors, a steady belt)."""
    return WorldParams()
