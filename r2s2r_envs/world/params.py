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

from r2s2r_envs.mappings import check_keys
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

    belt_speed: float = 0.08
    belt_speed_fluctuation: float = 0.0
    belt_fluctuation_time: float = 1.0
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
    joint_pos_noise: float = 0.0
    joint_vel_noise: float = 0.0
    eef_pos_noise: float = 0.0
    object_pos_noise: float = 0.0
    object_vel_noise: float = 0.0
    object_pos_offset: tuple[float, float, float] = (0.0, 0.0, 0.0)
    arm_torque_noise: float = 0.0
    finger_current_noise: float = 0.0
    perception_delay: float = 0.0
    object_pos_noise_speed: float = 0.0
    object_pos_noise_occlusion: float = 0.0
    object_pos_rotation: tuple[float, float, float] = (0.0, 0.0, 0.0)
    object_quat_noise: float = 0.0
    object_dropout: float = 0.0
    category_confusion: float = 0.0
    hand_occlusion_radius: float = 0.0

    def __post_init__(self) -> None:
        for name, bound in FIELD_BOUNDS.items():
            object.__setattr__(self, name, check_number("WorldParams", name, getattr(self, name), bound))

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
#: 1e6 kg, a gain of 1e12) is refused rather than simulated (docs/lab.md#world-bounds).
FIELD_BOUNDS: dict[str, Bound] = {
    # Ref: picking conveyors run at 0.05-0.3 m/s; at 0.5 m/s an object crosses the arm's reach in under 2 s.
    "belt_speed": Bound(maximum=0.5),  # m/s
    "belt_speed_fluctuation": Bound(maximum=0.5),  # dimensionless (relative std)
    "belt_fluctuation_time": Bound(minimum=0.01, maximum=100.0),  # s
    # Ref: the Panda's rated payload, 3 kg; the nominal parts weigh 0.1-0.2 kg.
    "object_mass": Bound(length=len(CATEGORIES), strict=True, maximum=3.0),  # kg
    # Ref: rubber on rubber reaches ~2; MuJoCo's default is 1.
    "object_friction": Bound(strict=True, maximum=3.0),  # dimensionless
    "object_size_scale": Bound(minimum=0.5, maximum=2.0),  # dimensionless
    # Ref: Gaz et al. 2019 identify damping ~0.1-1, armature ~0.1-0.3, friction ~0.1-1 for the Panda's joints;
    # the bounds allow 30-100x that.
    "arm_damping": Bound(length=N_ARM_JOINTS, maximum=100.0),  # N*m*s/rad
    "arm_armature": Bound(length=N_ARM_JOINTS, maximum=10.0),  # kg*m^2
    "arm_frictionloss": Bound(length=N_ARM_JOINTS, maximum=20.0),  # N*m
    # Ref: MuJoCo Menagerie's Panda servos, kp 2000-4500 with kv a tenth of it; a servo without damping (kv 0)
    # oscillates, so kv is strictly positive.
    "arm_kp": Bound(length=N_ARM_JOINTS, strict=True, maximum=20000.0),  # N*m/rad
    "arm_kv": Bound(length=N_ARM_JOINTS, strict=True, maximum=2000.0),  # N*m*s/rad
    # Ref: Franka datasheet, 87 / 12 N*m.
    "arm_force_limit": Bound(length=N_ARM_JOINTS, strict=True, maximum=200.0),  # N*m
    # Ref: Dynamixel XC330 in current-limited position mode, linearised (kp ~4, stall torque ~0.95 N*m).
    "finger_kp": Bound(strict=True, maximum=50.0),  # N*m/rad
    "finger_kv": Bound(maximum=2.0),  # N*m*s/rad
    "finger_force_limit": Bound(strict=True, maximum=10.0),  # N*m
    "control_latency": Bound(maximum=0.5),  # s
    # Sensor noise: ten or more times what cheap encoders, cameras and torque sensors show.
    "joint_pos_noise": Bound(maximum=0.1),  # rad
    "joint_vel_noise": Bound(maximum=2.0),  # rad/s
    "eef_pos_noise": Bound(maximum=0.05),  # m
    "object_pos_noise": Bound(maximum=0.05),  # m
    "object_vel_noise": Bound(maximum=0.5),  # m/s
    # Ref: a camera's extrinsic calibration error beyond 10 cm would miss the belt.
    "object_pos_offset": Bound(length=3, minimum=-0.1, maximum=0.1),  # m
    "arm_torque_noise": Bound(maximum=10.0),  # N*m
    "finger_current_noise": Bound(maximum=1.0),  # N*m
    # Ref: a pose estimate older than half a second is useless on a moving belt.
    "perception_delay": Bound(maximum=0.5),  # s
    "object_pos_noise_speed": Bound(maximum=0.5),  # s (m per m/s)
    "object_pos_noise_occlusion": Bound(maximum=0.05),  # m
    # Ref: 0.1 rad (5.7 degrees) of extrinsic rotation moves the belt by 10 cm as the camera sees it.
    "object_pos_rotation": Bound(length=3, minimum=-0.1, maximum=0.1),  # rad
    "object_quat_noise": Bound(maximum=0.5),  # rad
    "object_dropout": Bound(maximum=0.5),  # probability
    "category_confusion": Bound(maximum=0.5),  # probability
    "hand_occlusion_radius": Bound(maximum=0.2),  # m
}

#: The unit of every field, as its docstring states it (tests/test_world.py checks both agree); a new field needs
#: its unit here.
FIELD_UNITS = {
    "belt_speed": "m/s",
    "belt_speed_fluctuation": "dimensionless",
    "belt_fluctuation_time": "s",
    "object_mass": "kg",
    "object_friction": "dimensionless",
    "object_size_scale": "dimensionless",
    "arm_damping": "N*m*s/rad",
    "arm_armature": "kg*m^2",
    "arm_frictionloss": "N*m",
    "arm_kp": "N*m/rad",
    "arm_kv": "N*m*s/rad",
    "arm_force_limit": "N*m",
    "finger_kp": "N*m/rad",
    "finger_kv": "N*m*s/rad",
    "finger_force_limit": "N*m",
    "control_latency": "s",
    "joint_pos_noise": "rad",
    "joint_vel_noise": "rad/s",
    "eef_pos_noise": "m",
    "object_pos_noise": "m",
    "object_vel_noise": "m/s",
    "object_pos_offset": "m",
    "arm_torque_noise": "N*m",
    "finger_current_noise": "N*m",
    "perception_delay": "s",
    "object_pos_noise_speed": "s",
    "object_pos_noise_occlusion": "m",
    "object_pos_rotation": "rad",
    "object_quat_noise": "rad",
    "object_dropout": "probability",
    "category_confusion": "probability",
    "hand_occlusion_radius": "m",
}

#: Fields that describe the sensors (measurement, not dynamics): changing them never touches the MuJoCo model.
SENSING_FIELDS: tuple[str, ...] = (
    "joint_pos_noise",
    "joint_vel_noise",
    "eef_pos_noise",
    "object_pos_noise",
    "object_vel_noise",
    "object_pos_offset",
    "arm_torque_noise",
    "finger_current_noise",
    "perception_delay",
    "object_pos_noise_speed",
    "object_pos_noise_occlusion",
    "object_pos_rotation",
    "object_quat_noise",
    "object_dropout",
    "category_confusion",
    "hand_occlusion_radius",
)

#: The camera-based estimator's fields (``envs.perception``): nominal (zero) in a world that perceives exactly.
PERCEPTION_FIELDS: tuple[str, ...] = (
    "perception_delay",
    "object_pos_noise_speed",
    "object_pos_noise_occlusion",
    "object_pos_rotation",
    "object_quat_noise",
    "object_dropout",
    "category_confusion",
    "hand_occlusion_radius",
)
_NOMINAL_PERCEPTION: dict[str, Any] = {
    f.name: f.default for f in dataclasses.fields(WorldParams) if f.name in PERCEPTION_FIELDS
}


def nominal() -> WorldParams:
    """The spec-sheet world: the simulator's physics before any grounding (perfect sensors, a steady belt)."""
    return WorldParams()
