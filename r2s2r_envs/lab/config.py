"""What defines a lab: its hidden world (physics, sensing, timing), the effects no simulator parameter can express,
its operator (the style of the person who makes the lab's demonstrations, ``lab.teleop``), how its cameras see it
(``appearance``, ``world.appearance``) and, opt-in, faults of its robot interface.

A lab is a JSON file (see ``configs/default.json``; the format is documented in docs/lab.md), plain or sealed
(``seal_lab``, as the course's exercise labs are), or an equivalent dict.  A partial dict is applied on top of the
default lab, so a course exercise can change one thing (``{"world": {"control_latency": 0.1}}``).  Grounding code
never reads these values: it only steps ``PickSort-Real-v0`` and reads its logs.  Files name a lab by its ``name``
and ``sha256()`` only.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import json
import numbers
import zlib
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from r2s2r_envs.envs.config import replace_checked
from r2s2r_envs.lab.draw import DRAW_VERSIONS, draw_lab
from r2s2r_envs.mappings import check_keys
from r2s2r_envs.safe_json import MAX_BYTES, loads
from r2s2r_envs.world.appearance import Appearance
from r2s2r_envs.world.params import N_ARM_JOINTS, Bound, WorldParams, check_fields, field_metadata, param
from r2s2r_envs.world.presets import read_json_config

DEFAULT_LAB = "default"

# Keys that were lab effects in r2s2r_envs 0.1 and are world fields now (a simulator can model them).
_MOVED_TO_WORLD = {
    "joint_pos_noise": "joint_pos_noise",
    "joint_vel_noise": "joint_vel_noise",
    "object_pos_noise": "object_pos_noise",
    "object_pos_bias": "object_pos_offset",
    "object_vel_noise": "object_vel_noise",
    "eef_pos_noise": "eef_pos_noise",
    "belt_speed_jitter": "belt_speed_fluctuation",
    "belt_jitter_time": "belt_fluctuation_time",
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class UnmodeledEffects:
    """Effects of the lab that no ``WorldParams`` field can express: what grounding always leaves as a residual.

    Attributes:
        arm_command_gain: Executed / commanded arm joint displacement per control step, per joint,
            dimensionless (a mis-tuned low-level controller; 1 = well tuned).  A world fit absorbs it partly as
            extra latency and damping.
        object_mass_variation: Standard deviation of each object's mass around its category's value, relative
            (0.1 = 10 %); drawn per object and episode (real parts differ from piece to piece; a simulator has
            one mass per category).
        object_friction_variation: Same for each object's friction coefficient, relative.
        late_command_probability: Chance that a command reaches the robot one control period late, per control
            step (0-0.5): the robot holds its last command for that period and executes the late one with the
            next (a task-space step is not lost, it comes late).  Ref: a 20 Hz command stream over a
            non-real-time network misses its slot a few percent of the time.
        finger_backlash: Dead band of each finger joint's position command, rad (0-0.1): a target moves only
            once the command leaves the band, so a reversal waits and a grip squeezes that much less.  Ref: the
            gear backlash and tendon slack of a low-cost dexterous hand, a few hundredths of a radian.
    """

    arm_command_gain: tuple[float, ...] = param(
        (1.0,) * N_ARM_JOINTS, "dimensionless", Bound(length=N_ARM_JOINTS, strict=True, maximum=2.0)
    )
    object_mass_variation: float = param(0.0, "relative", Bound(maximum=0.3))
    object_friction_variation: float = param(0.0, "relative", Bound(maximum=0.3))
    late_command_probability: float = param(0.0, "probability", Bound(maximum=0.5))
    finger_backlash: float = param(0.0, "rad", Bound(maximum=0.1))

    def __post_init__(self) -> None:
        check_fields(self, "lab effects")


@dataclasses.dataclass(frozen=True, kw_only=True)
class OperatorStyle:
    """How the lab's operator moves (the teleoperator, ``r2s2r_envs.lab.teleop``; docs/lab.md#operator).

    Attributes:
        reaction_time: Mean delay between an object becoming the next target and the hand starting to move, s
            (0.1-1.0; people react in 0.2-0.4 s).
        speed: Movement speed relative to a typical operator, dimensionless (0.4-1.6; 1 = a reach of 0.3 m in
            about a second).  Scales every reach, carry and descent duration by ``1 / speed``.
        approach: How the hand comes to a moving object: ``"above"`` (reach to a point above where the object
            will be, then descend onto it) or ``"follow"`` (come in low from upstream, ride along the belt
            behind the object, close in on it, then descend the last few centimetres).
        grasp: ``"wrap"`` (whole hand: each digit closes in turn, the fingers curl around the object) or
            ``"pinch"`` (all digits close together, straight fingers, as a gripper would).
        release: ``"drop"`` (open the hand high above the bin) or ``"place"`` (lower the object into the bin,
            then open).
        variability: How much the operator differs from one movement and one episode to the next,
            dimensionless (0-1; 0 = the same every time: no random timing, endpoint errors, hesitations or
            deliberate re-grasps).
        practice_episodes: Warm-up episodes the operator runs in the lab before the first recorded one, to learn
            the cell's timing and its camera offset (0-10; 0 = no practice, sim-tuned habits).
    """

    reaction_time: float = param(0.3, "s", Bound(minimum=0.1, maximum=1.0))
    speed: float = param(1.0, "dimensionless", Bound(minimum=0.4, maximum=1.6))
    approach: str = param("above", choices=("above", "follow"))
    grasp: str = param("wrap", choices=("wrap", "pinch"))
    release: str = param("drop", choices=("drop", "place"))
    variability: float = param(0.4, "dimensionless", Bound(maximum=1.0))
    practice_episodes: int = param(3, "episodes", Bound(maximum=10.0))

    def __post_init__(self) -> None:
        check_fields(self, "lab operator")
        check_choices(self, "lab operator")
        episodes = self.practice_episodes
        if isinstance(episodes, bool) or not float(episodes).is_integer():
            raise ValueError(f"lab operator.practice_episodes must be an integer in [0, 10], got {episodes!r}")
        object.__setattr__(self, "practice_episodes", int(episodes))


def check_choices(obj: Any, owner: str) -> None:
    """Check every categorical field of ``obj`` (``param(choices=...)``), in declaration order.

    Raises:
        ValueError: a value not among its field's choices; the message names ``owner.field`` and lists them.
    """
    for name, choices in field_metadata(type(obj), "choices").items():
        value = getattr(obj, name)
        if value not in choices:
            raise ValueError(f"{owner}.{name} must be one of {list(choices)}, got {value!r}")


#: Accepted values of the operator's categorical settings (declared with the fields).
OPERATOR_CHOICES: dict[str, tuple[str, ...]] = field_metadata(OperatorStyle, "choices")

# Effects added in 0.3: written only when on, so a lab without them keeps its dict and hash.
_NEW_EFFECTS = {"late_command_probability": 0.0, "finger_backlash": 0.0}


_CALIBRATION_ERROR = Bound(length=3, minimum=-0.05, maximum=0.05)


@dataclasses.dataclass(frozen=True, kw_only=True)
class LabCamera:
    """One camera of the lab's object estimator (docs/lab.md#perception).

    Attributes:
        name: The camera's name (for messages and docs).
        position: Where it is, m (world frame).
        rotation_error: Its extrinsic calibration error, a rotation about its centre as a rotation vector,
            rad (each within +-0.05).  Ref: hand-eye calibration is good to about half a degree (0.009 rad).
        translation_error: Its extrinsic calibration error, a translation, m (each within +-0.05).
    """

    name: str
    position: tuple[float, float, float] = dataclasses.field(
        metadata={"unit": "m", "bound": Bound(length=3, minimum=-3.0, maximum=3.0)}  # within the room
    )
    rotation_error: tuple[float, float, float] = param((0.0, 0.0, 0.0), "rad", _CALIBRATION_ERROR)
    translation_error: tuple[float, float, float] = param((0.0, 0.0, 0.0), "m", _CALIBRATION_ERROR)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"lab perception camera name must be a non-empty string, got {self.name!r}")
        check_fields(self, f"lab perception camera {self.name!r}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class LabPerception:
    """How the lab's cameras see its objects, beyond what a simulator's one-camera estimator models
    (``envs.perception``; the delay, noise, dropout and occlusion radius are world fields).

    Attributes:
        cameras: The cameras the lab's estimator fuses, each with its own calibration error (empty: the scene
            camera alone, as in a simulator).  An object is the mean of the cameras that see it, so its error
            changes where the hand hides it from one camera.  At most 4.
        delay_jitter: Standard deviation of the estimate's per-frame delay variation, s (0-0.05).  Ref: pose
            estimators on a shared GPU vary by a frame or so.
    """

    cameras: tuple[LabCamera, ...] = ()
    delay_jitter: float = param(0.0, "s", Bound(maximum=0.05))

    def __post_init__(self) -> None:
        cameras = self.cameras
        if isinstance(cameras, (str, bytes, Mapping)) or not isinstance(cameras, (list, tuple)) or len(cameras) > 4:
            raise TypeError(
                f"lab perception.cameras must be a list of at most 4 cameras ({{'name', 'position', "
                f"'rotation_error', 'translation_error'}}), got {cameras!r}"
            )
        parsed = tuple(c if isinstance(c, LabCamera) else replace_checked_camera(c) for c in cameras)
        object.__setattr__(self, "cameras", parsed)
        check_fields(self, "lab perception")

    def to_dict(self) -> dict[str, Any]:
        return {
            "cameras": [
                {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(c).items()}
                for c in self.cameras
            ],
            "delay_jitter": self.delay_jitter,
        }


def replace_checked_camera(raw: Any) -> LabCamera:
    """A ``LabCamera`` from a mapping, naming the valid keys when one is unknown or missing."""
    valid = [f.name for f in dataclasses.fields(LabCamera)]
    if not isinstance(raw, Mapping):
        raise TypeError(f"lab perception camera must be a mapping with keys {valid}, got {raw!r}")
    check_keys(raw, valid, what="key", where="lab perception camera", required=("name", "position"))
    values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()}
    return LabCamera(**values)


@dataclasses.dataclass(frozen=True, kw_only=True)
class LabContact:
    """Contact physics of the lab's objects that no simulator parameter expresses (docs/lab.md#contact).

    Attributes:
        object_timeconst: Time constant of the objects' contacts, s (0: the simulator's, MuJoCo's 0.02 s;
            else 0.004-0.1).  Larger is softer: real parts and rubber pads give more than rigid bodies.
        rolling_friction: Rolling friction of the objects, m (0: none, as the simulator; else up to 0.01):
            real parts do not roll freely on a belt or in a hand.
    """

    object_timeconst: float = param(0.0, "s", Bound(maximum=0.1))
    rolling_friction: float = param(0.0, "m", Bound(maximum=0.01))

    def __post_init__(self) -> None:
        check_fields(self, "lab contact")
        if 0.0 < self.object_timeconst < 0.004:
            raise ValueError(
                f"lab contact.object_timeconst must be 0 (the simulator's) or within [0.004, 0.1] s (at least twice "
                f"the physics step), got {self.object_timeconst!r}"
            )


@dataclasses.dataclass(frozen=True, kw_only=True)
class InterfaceFaults:
    """Faults in the lab's robot interface: how its drivers report readings and take commands
    (docs/lab.md#interface-faults).  None by default; a course exercise turns one on.

    Entry ``i`` of what the interface exchanges is arm joint ``arm_joint_order[i]``: the readings ``arm_qpos``,
    ``arm_qvel`` and ``arm_torque``, the arm part of a joint-mode command (``control_mode="joint"``) and the
    operator set-up's ``arm_qpos``.  The task-space controller runs in the cell, on the true joints.

    Attributes:
        arm_joint_order: A permutation of the 7 arm joint indices, 0-based (identity: no fault).
        arm_joint_units: Unit of the arm joint readings and of the set-up's ``arm_qpos``: ``"rad"`` (rad and
            rad/s, as the simulator) or ``"deg"`` (degrees and degrees per second).
        task_action_scale: Executed / nominal task-space step for the same command, dimensionless (0-4): a +1
            TCP command moves ``task_action_scale`` x 0.02 m (and rotates that many times 0.15 rad).
        camera_channels: Channel order of the camera images (``scene_image``, ``wrist_image``): ``"rgb"`` or
            ``"bgr"``.
    """

    arm_joint_order: tuple[int, ...] = tuple(range(N_ARM_JOINTS))
    arm_joint_units: str = param("rad", choices=("rad", "deg"))
    task_action_scale: float = param(1.0, "dimensionless", Bound(strict=True, maximum=4.0))
    camera_channels: str = param("rgb", choices=("rgb", "bgr"))

    def __post_init__(self) -> None:
        order = self.arm_joint_order
        ok = isinstance(order, (list, tuple)) and all(
            isinstance(i, numbers.Integral) and not isinstance(i, bool) for i in order
        )
        if not ok or sorted(order) != list(range(N_ARM_JOINTS)):
            raise ValueError(
                f"lab interface.arm_joint_order must be a permutation of the arm joint indices "
                f"{list(range(N_ARM_JOINTS))} (0-based), got {order!r}"
            )
        object.__setattr__(self, "arm_joint_order", tuple(int(i) for i in order))
        check_fields(self, "lab interface")
        check_choices(self, "lab interface")

    @property
    def faulty(self) -> bool:
        """Whether any fault is on."""
        return self != InterfaceFaults()


#: Accepted values of the interface's categorical settings (declared with the fields).
INTERFACE_CHOICES: dict[str, tuple[str, ...]] = field_metadata(InterfaceFaults, "choices")


@dataclasses.dataclass(frozen=True, kw_only=True)
class LabConfig:
    """A complete lab.

    Attributes:
        name: Identifier recorded in datasets and results (the parameters themselves are never recorded).
        world: The lab's true world: physics, sensing and timing.
        effects: What no simulator parameter expresses.
        operator: The style of the person who makes the lab's demonstrations.
        interface: Faults of the robot interface (none by default).
        perception: The lab's cameras and delay jitter (default: the scene camera alone, no jitter).
        contact: Contact physics of the lab's objects (default: the simulator's).
        appearance: How the lab's cameras see it: their calibration and sensor, its light, colours and clutter
            (default: the spec sheet, as the simulators render it; docs/lab.md#appearance).
    """

    name: str
    world: WorldParams
    effects: UnmodeledEffects
    operator: OperatorStyle = OperatorStyle()
    interface: InterfaceFaults = InterfaceFaults()
    perception: LabPerception = LabPerception()
    contact: LabContact = LabContact()
    appearance: Appearance = Appearance()

    def to_dict(self) -> dict[str, Any]:
        """The canonical JSON form.  ``interface`` appears only when a fault is on, so a lab without interface
        faults has the dict (and the hash) it had before interface faults existed."""
        effects = {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self.effects).items()}
        for key, off in _NEW_EFFECTS.items():
            if effects[key] == off:
                del effects[key]
        operator = dataclasses.asdict(self.operator)
        out = {"name": self.name, "world": self.world.to_dict(), "effects": effects, "operator": operator}
        # Sections added in 0.3 appear only when they differ from the default, like ``interface``.
        if self.perception != LabPerception():
            out["perception"] = self.perception.to_dict()
        if self.contact != LabContact():
            out["contact"] = dataclasses.asdict(self.contact)
        if self.appearance != Appearance():
            out["appearance"] = self.appearance.to_dict()
        if self.interface.faulty:
            out["interface"] = {
                k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self.interface).items()
            }
        return out

    def sha256(self) -> str:
        """SHA-256 of the lab's canonical JSON (operator included): tells two labs apart (same or different)
        without revealing them."""
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()

    def identity(self) -> dict[str, str]:
        """Everything a dataset or result file may say about this lab: its name and config hash."""
        return {"name": self.name, "config_sha256": self.sha256()}


_TOP_KEYS = ("name", "world", "effects", "operator", "interface", "perception", "contact", "appearance")
# A lab file must have these; a file without "operator" (written before the operator existed) gets the default one,
# one without "interface" a fault-free interface.
_REQUIRED_KEYS = ("name", "world", "effects")
#: The one key of a sealed lab file (``seal_lab``).
SEALED_KEY = "sealed_lab"


def _default_path() -> Path:
    return Path(str(resources.files("r2s2r_envs.lab").joinpath("configs", f"{DEFAULT_LAB}.json")))


def _shipped_dirs() -> tuple[Path, ...]:
    # The lab's own configs, then the course's exercise labs (data files only: nothing of the course package is
    # imported here).
    root = resources.files("r2s2r_envs")
    return (_default_path().parent, Path(str(root.joinpath("course", "labs"))))


def _shipped_paths() -> dict[str, Path]:
    paths: dict[str, Path] = {}
    for folder in _shipped_dirs():
        for p in sorted(folder.glob("*.json")) if folder.is_dir() else ():
            paths.setdefault(p.stem, p)
    return paths


def available_labs() -> list[str]:
    """Names of the labs shipped with the package: ``default`` and the course's exercise labs (``course-*``)."""
    return sorted(_shipped_paths())


def seal_lab(lab: LabConfig | Mapping[str, Any]) -> dict[str, str]:
    """A lab in sealed form, ``{"sealed_lab": base64(zlib(JSON))}``: a file a student cannot read at a glance.

    Sealing hides nothing from someone who decodes it; it keeps an exercise's answer out of sight.  ``load_lab``
    reads sealed files like plain ones.
    """
    raw = lab.to_dict() if isinstance(lab, LabConfig) else dict(lab)
    text = json.dumps(raw, sort_keys=True, separators=(",", ":"))
    return {SEALED_KEY: base64.b64encode(zlib.compress(text.encode(), 9)).decode("ascii")}


def _unseal(raw: dict[str, Any], path: Path) -> dict[str, Any]:
    if SEALED_KEY not in raw:
        return raw
    if set(raw) != {SEALED_KEY} or not isinstance(raw[SEALED_KEY], str):
        raise ValueError(f"sealed lab file {path} must hold exactly {{{SEALED_KEY!r}: <base64 text>}}")
    try:
        # Bounded: a small sealed file must not inflate into gigabytes.
        inflate = zlib.decompressobj()
        text = inflate.decompress(base64.b64decode(raw[SEALED_KEY], validate=True), MAX_BYTES + 1)
        if len(text) > MAX_BYTES or inflate.unconsumed_tail:
            raise ValueError(f"it inflates to more than {MAX_BYTES} bytes")
        inner = loads(text, what="the sealed lab")
    except (binascii.Error, zlib.error, ValueError) as e:
        raise ValueError(f"sealed lab file {path} is corrupt (expected base64 of zlib-compressed JSON): {e}") from None
    if not isinstance(inner, dict):
        raise ValueError(f"sealed lab file {path} must seal a JSON object with keys {list(_TOP_KEYS)}")
    return inner


def _effects(raw: Any, base: UnmodeledEffects) -> UnmodeledEffects:
    if isinstance(raw, Mapping):
        moved = sorted(k for k in raw if k in _MOVED_TO_WORLD)
        if moved:
            hint = ", ".join(f"{k} -> world.{_MOVED_TO_WORLD[k]}" for k in moved)
            raise KeyError(
                f"lab effects {moved} are world fields now (sensing and belt fluctuation are part of the world a "
                f"simulator can model): move them under 'world' ({hint}); valid effects keys: "
                f"{[f.name for f in dataclasses.fields(UnmodeledEffects)]}"
            )
    return replace_checked(base, raw, "lab effects")


def _from_mapping(raw: Mapping[str, Any], base: LabConfig | None) -> LabConfig:
    check_keys(raw, _TOP_KEYS, what="lab key")
    if "name" in raw and not isinstance(raw["name"], str):
        raise TypeError(f"lab name must be a string, got {raw['name']!r}")
    if base is None:
        check_keys(raw, _TOP_KEYS, what="lab key", where="lab config", required=_REQUIRED_KEYS)
        world = WorldParams.from_dict(raw["world"])
        return LabConfig(
            name=raw["name"],
            world=world,
            effects=_effects(raw["effects"], UnmodeledEffects()),
            operator=replace_checked(OperatorStyle(), raw.get("operator", {}), "lab operator"),
            interface=replace_checked(InterfaceFaults(), raw.get("interface", {}), "lab interface"),
            perception=_perception(raw.get("perception", {}), LabPerception()),
            contact=replace_checked(LabContact(), raw.get("contact", {}), "lab contact"),
            appearance=Appearance.from_dict(raw.get("appearance", {}), where="lab appearance"),
        )
    return LabConfig(
        name=raw.get("name", f"{base.name}+overrides"),
        world=WorldParams.from_dict(raw.get("world", {}), base=base.world),
        effects=_effects(raw.get("effects", {}), base.effects),
        operator=replace_checked(base.operator, raw.get("operator", {}), "lab operator"),
        interface=replace_checked(base.interface, raw.get("interface", {}), "lab interface"),
        perception=_perception(raw.get("perception", {}), base.perception),
        contact=replace_checked(base.contact, raw.get("contact", {}), "lab contact"),
        appearance=Appearance.from_dict(raw.get("appearance", {}), base.appearance, where="lab appearance"),
    )


def _perception(raw: Any, base: LabPerception) -> LabPerception:
    if isinstance(raw, Mapping) and "cameras" in raw and isinstance(raw["cameras"], list):
        raw = {**raw, "cameras": tuple(raw["cameras"])}
    return replace_checked(base, raw, "lab perception")


#: ``"draw:SEED"`` names the lab ``r2s2r_envs.lab.draw.draw_lab(SEED)`` wherever a lab is accepted;
#: ``"drawN:SEED"`` the lab ``draw_lab(SEED, version=N)`` (``lab.draw.DRAW_VERSIONS``: 2, 3).
DRAW_PREFIX = "draw:"


def parse_drawn_lab(lab: str) -> tuple[int, int] | None:
    """The seed and draw version of a drawn-lab string (``"draw:SEED"``: version 1, ``"drawN:SEED"``: version N),
    ``None`` for a string of another form (``draw`` then digits then ``:`` is a drawn lab's form).

    Raises:
        ValueError: an unknown version (the message lists the valid forms), or what follows ``:`` is not an integer
            >= 0.
    """
    head, colon, text = lab.partition(":")
    if not colon or not head.startswith("draw") or not (head == "draw" or head[4:].isdigit()):
        return None
    version = int(head[4:]) if head != "draw" else 1
    form = DRAW_VERSIONS.get(version, ("",))[0]
    if not form.startswith(f"{head}:"):
        valid = ", ".join(f"{f!r} (version {v})" for v, (f, _) in DRAW_VERSIONS.items())
        raise ValueError(f"lab {lab!r}: unknown drawn-lab form {head + ':'!r}; valid forms: {valid}")
    if not text.isdigit():
        raise ValueError(f"lab {lab!r}: a drawn lab is {form!r} with SEED an integer >= 0, e.g. {form[:-4] + '7'!r}")
    return int(text), version


def load_lab(lab: str | Path | Mapping[str, Any] | LabConfig | None = None) -> LabConfig:
    """Load a lab from a shipped name (``available_labs()``), a JSON file path (plain or sealed), ``"draw:SEED"``
    (a lab drawn from documented ranges: ``r2s2r_envs.lab.draw``), or a (partial) dict over the default lab.

    Raises:
        FileNotFoundError: neither a shipped lab name nor an existing file; lists the shipped labs.
        KeyError: an unknown key at any level; the message lists the valid ones.
        TypeError / ValueError: a malformed file or an invalid value; the message names the field.
    """
    if isinstance(lab, LabConfig):
        return lab
    if lab is None or isinstance(lab, Mapping):
        default = _from_mapping(json.loads(_default_path().read_text()), None)
        return default if lab is None else _from_mapping(lab, default)
    if not isinstance(lab, (str, Path)):
        raise TypeError(
            f"lab must be a shipped lab name {available_labs()}, a JSON file path, '{DRAW_PREFIX}SEED' or a dict, "
            f"got {lab!r}"
        )
    drawn = parse_drawn_lab(lab) if isinstance(lab, str) else None
    if drawn is not None:
        return load_lab(draw_lab(drawn[0], version=drawn[1]))
    shipped = _shipped_paths()
    ref = shipped.get(str(lab), Path(lab))
    if not ref.is_file():
        raise FileNotFoundError(f"lab {str(lab)!r} is neither a shipped lab {sorted(shipped)} nor a JSON file")
    raw, path = read_json_config(ref, ref.parent, kind="lab", shipped_as="lab", keys=_TOP_KEYS)
    try:
        return _from_mapping(_unseal(raw, path), None)
    except (KeyError, TypeError, ValueError) as e:
        message = e.args[0] if e.args else str(e)
        raise type(e)(message if str(path) in message else f"lab file {path}: {message}") from None
