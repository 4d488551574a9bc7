"""What defines a lab: its hidden physics, the effects the simulator does not model, and (later) its operator.

A lab is a JSON file (see ``configs/default.json``) or an equivalent dict.  A partial dict is applied on top of
the default lab, so a course exercise can change one thing (``{"world": {"control_latency": 0.1}}``).
Grounding code never reads these values: it only steps ``PickSort-Real-v0`` and reads its logs.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from r2s2r_envs.envs.config import replace_checked
from r2s2r_envs.world.params import WorldParams

DEFAULT_LAB = "default"


@dataclasses.dataclass(frozen=True, kw_only=True)
class UnmodeledEffects:
    """Effects of the lab that the PickSort simulator has no parameter for.

    Attributes:
        joint_pos_noise: Std of white noise on measured joint angles (arm and hand), rad.
        joint_vel_noise: Std of white noise on measured joint velocities, rad/s.
        object_pos_noise: Std of white noise on perceived object positions, m (camera-based tracking).
        object_pos_bias: Constant offset of perceived object positions (x, y, z), m (extrinsic calibration error).
        object_vel_noise: Std of white noise on perceived object velocities, m/s.
        eef_pos_noise: Std of white noise on the measured TCP position, m.
        belt_speed_jitter: Std of the belt speed's relative fluctuation (Ornstein-Uhlenbeck), dimensionless.
        belt_jitter_time: Correlation time of that fluctuation, s.
        arm_command_gain: Executed / commanded arm joint displacement per control step, per joint
            (a mis-tuned low-level controller), dimensionless.
    """

    joint_pos_noise: float = 0.0
    joint_vel_noise: float = 0.0
    object_pos_noise: float = 0.0
    object_pos_bias: tuple[float, float, float] = (0.0, 0.0, 0.0)
    object_vel_noise: float = 0.0
    eef_pos_noise: float = 0.0
    belt_speed_jitter: float = 0.0
    belt_jitter_time: float = 1.0
    arm_command_gain: tuple[float, ...] = (1.0,) * 7

    def __post_init__(self) -> None:
        if len(self.object_pos_bias) != 3:
            raise ValueError(f"object_pos_bias must have 3 entries, got {self.object_pos_bias!r}")
        if len(self.arm_command_gain) != 7:
            raise ValueError(f"arm_command_gain must have 7 entries, got {self.arm_command_gain!r}")
        for name in ("joint_pos_noise", "joint_vel_noise", "object_pos_noise", "object_vel_noise",
                     "eef_pos_noise", "belt_speed_jitter"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if self.belt_jitter_time <= 0:
            raise ValueError(f"belt_jitter_time must be > 0, got {self.belt_jitter_time!r}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class LabConfig:
    """A complete lab.

    Attributes:
        name: Identifier recorded in datasets and results (the parameters themselves are never recorded).
        world: The lab's true physics.
        effects: What the simulator does not model.
    """

    name: str
    world: WorldParams
    effects: UnmodeledEffects

    def to_dict(self) -> dict[str, Any]:
        effects = {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self.effects).items()}
        return {"name": self.name, "world": self.world.to_dict(), "effects": effects}


_TOP_KEYS = ("name", "world", "effects")


def _default_path() -> Path:
    return Path(str(resources.files("r2s2r_envs.lab").joinpath("configs", f"{DEFAULT_LAB}.json")))


def available_labs() -> list[str]:
    """Names of the labs shipped with the package."""
    return sorted(p.stem for p in _default_path().parent.glob("*.json"))


def _from_mapping(raw: Mapping[str, Any], base: LabConfig | None) -> LabConfig:
    unknown = sorted(set(raw) - set(_TOP_KEYS))
    if unknown:
        raise KeyError(f"unknown lab key(s) {unknown}; valid keys: {list(_TOP_KEYS)}")
    if base is None:
        missing = [k for k in _TOP_KEYS if k not in raw]
        if missing:
            raise KeyError(f"lab config is missing key(s) {missing}; a full lab has {list(_TOP_KEYS)}")
        world = WorldParams.from_dict(raw["world"])
        effects = replace_checked(UnmodeledEffects(), raw["effects"], "lab effects")
        return LabConfig(name=str(raw["name"]), world=world, effects=effects)
    return LabConfig(
        name=str(raw.get("name", f"{base.name}+overrides")),
        world=WorldParams.from_dict(raw.get("world", {}), base=base.world),
        effects=replace_checked(base.effects, raw.get("effects", {}), "lab effects"),
    )


def load_lab(lab: str | Path | Mapping[str, Any] | LabConfig | None = None) -> LabConfig:
    """Load a lab from a shipped name, a JSON file path, or a (partial) dict over the default lab.

    Raises:
        FileNotFoundError: neither a shipped lab name nor an existing file; lists the shipped labs.
        KeyError: an unknown key at any level; the message lists the valid ones.
    """
    if isinstance(lab, LabConfig):
        return lab
    default_raw = json.loads(_default_path().read_text())
    default = _from_mapping(default_raw, None)
    if lab is None:
        return default
    if isinstance(lab, Mapping):
        return _from_mapping(lab, default)
    path = Path(lab)
    if str(lab) in available_labs():
        path = _default_path().parent / f"{lab}.json"
    if not path.is_file():
        raise FileNotFoundError(f"lab {str(lab)!r} is neither a shipped lab {available_labs()} nor a JSON file")
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"lab file {path} is not valid JSON: {e}") from e
    if not isinstance(raw, dict):
        raise ValueError(f"lab file {path} must hold a JSON object with keys {list(_TOP_KEYS)}")
    return _from_mapping(raw, None)
