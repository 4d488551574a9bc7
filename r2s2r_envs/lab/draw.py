"""Labs nobody tuned for: :func:`draw_lab` draws a whole lab config from documented ranges.

A drawn lab differs from the nominal model in every world field, has every unmodeled effect and an operator of
its own style, within the ranges of :data:`WORLD_DRAW`, :data:`EFFECT_DRAW` and :data:`OPERATOR_DRAW`
(docs/lab.md#drawn-labs). The ranges are those of a plausible conveyor cell, narrower than what a lab config
accepts (``world.params.FIELD_BOUNDS``), so the task stays feasible for a careful operator: a pipeline that works
only on the shipped default lab can be checked on labs it has never seen (``r2s2r ablation --lab draw:SEED``).

The same seed gives the same lab, on any machine (numpy's ``default_rng``; the fields are drawn in a fixed order).

Two versions of the ranges exist (:data:`DRAW_VERSIONS`); a lab is named by its seed *and* version:

- version 1 (:data:`DRAW_VERSION`, the default; ``"draw:SEED"``, named ``drawn-SEED``): the tables named above; the
  estimator, the lab's cameras, its contact model, late commands and finger backlash nominal.  Frozen: recorded
  results, the ``standard`` lab panel and the drawn ablations name these labs.
- version 2 (``draw_lab(seed, version=2)``, ``"draw2:SEED"``, named ``drawn2-SEED``): also draws lab v3's structure,
  the estimator's fields, two cameras' calibration errors, delay jitter, the contact model, late commands and finger
  backlash, from ranges set by real-world references and centred on lab v3's values (:data:`WORLD_DRAW_V2`,
  :data:`EFFECT_DRAW_V2`, :data:`PERCEPTION_DRAW_V2`, :data:`CONTACT_DRAW_V2`); belt, actuation latency and the
  operator's approach (:data:`OPERATOR_DRAW_V2`) are narrowed to lab v3's, so its teleoperator still sorts most episodes
  (experiments/drawn-labs-v2).  Its own random stream: ``draw2:7`` is not ``draw:7`` with more fields.
- version 3 (``"draw3:SEED"``, named ``drawn3-SEED``): version 2's lab of the same seed, and an ``appearance``
  (``world.appearance``) drawn from :data:`APPEARANCE_DRAW_V3` on a stream of its own: ``draw3:7`` is ``draw2:7``
  as its cameras see it, so the two tell the visual gap apart from the rest.

Example::

    import gymnasium as gym
    from r2s2r_envs.lab.draw import draw_lab

    config = draw_lab(7)                                # a dict in the lab config format, named "drawn-7"
    env = gym.make("PickSort-Real-v0", lab=config)      # checked like any lab file
    env = gym.make("PickSort-Real-v0", lab="draw2:7")   # version 2: draw_lab(7, version=2), named "drawn2-7"
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from r2s2r_envs.mappings import check_keys
from r2s2r_envs.world.appearance import Colours
from r2s2r_envs.world.params import N_ARM_JOINTS, PERCEPTION_FIELDS, WorldParams, nominal

#: World fields: ``("uniform", low, high)`` draws the value; ``("scale", low, high)`` multiplies each nominal value
#: by its own uniform draw; ``("offset", high)`` draws each axis in ``[-high, high]``; ``("nominal",)`` keeps the
#: nominal value and draws nothing.  Every ``WorldParams`` field
#: appears, in the order the values are drawn.
WORLD_DRAW: dict[str, tuple[Any, ...]] = {
    "belt_speed": ("uniform", 0.06, 0.12),  # m/s
    "belt_speed_fluctuation": ("uniform", 0.0, 0.08),
    "belt_fluctuation_time": ("uniform", 0.5, 2.5),  # s
    "object_mass": ("scale", 0.7, 1.4),
    "object_friction": ("uniform", 0.4, 1.0),
    "object_size_scale": ("uniform", 0.95, 1.05),
    "arm_damping": ("scale", 0.5, 2.5),
    "arm_armature": ("scale", 0.5, 2.0),
    "arm_frictionloss": ("scale", 0.5, 3.0),
    "arm_kp": ("scale", 0.85, 1.15),
    "arm_kv": ("scale", 0.85, 1.15),
    "arm_force_limit": ("scale", 0.9, 1.1),
    "finger_kp": ("uniform", 2.0, 6.0),
    "finger_kv": ("uniform", 0.02, 0.1),
    "finger_force_limit": ("uniform", 0.6, 1.2),
    "control_latency": ("uniform", 0.0, 0.1),  # s
    "joint_pos_noise": ("uniform", 0.0005, 0.004),
    "joint_vel_noise": ("uniform", 0.005, 0.04),
    "eef_pos_noise": ("uniform", 0.0003, 0.002),
    "object_pos_noise": ("uniform", 0.001, 0.005),
    "object_vel_noise": ("uniform", 0.003, 0.02),
    "object_pos_offset": ("offset", (0.01, 0.01, 0.005)),  # m, per axis
    "arm_torque_noise": ("uniform", 0.01, 0.1),
    "finger_current_noise": ("uniform", 0.002, 0.01),
    # The object estimator (docs/lab.md#perception): drawn labs perceive exactly until the drawn ranges of lab v3.
    **{field: ("nominal",) for field in PERCEPTION_FIELDS},
}
#: Unmodeled effects: ``arm_command_gain`` per arm joint, the variations one value each.
EFFECT_DRAW: dict[str, tuple[float, float]] = {
    "arm_command_gain": (0.85, 1.0),
    "object_mass_variation": (0.0, 0.15),
    "object_friction_variation": (0.0, 0.15),
}
#: The operator: numbers uniform in the range, categorical settings one of the choices with equal chance.
OPERATOR_DRAW: dict[str, tuple[Any, ...]] = {
    "reaction_time": (0.2, 0.5),  # s
    "speed": (0.7, 1.2),
    "approach": ("above", "follow"),
    "grasp": ("wrap", "pinch"),
    "release": ("drop", "place"),
    "variability": (0.2, 0.5),
}
#: The version ``draw_lab(seed)`` and ``"draw:SEED"`` draw (frozen: recorded results name these labs).
DRAW_VERSION = 1
#: Every version ``draw_lab`` accepts, and the lab string and name of each (``SEED`` the seed).
DRAW_VERSIONS: dict[int, tuple[str, str]] = {
    1: ("draw:SEED", "drawn-SEED"),
    2: ("draw2:SEED", "drawn2-SEED"),
    3: ("draw3:SEED", "drawn3-SEED"),
}

# Version 2 (docs/lab.md#drawn-labs).  Each range spans lab v3's value (lab/configs/v3.json; docs/lab.md#lab-v3)
# within its real-world reference.  The world table is version 1's with these entries replaced (same order).
#: Version 2's world fields, as :data:`WORLD_DRAW`.
WORLD_DRAW_V2: dict[str, tuple[Any, ...]] = {
    **WORLD_DRAW,
    # v3 runs 0.075 m/s; at 0.092 its operator sorts half its episodes (experiments/lab-v3).  First drawn up to 0.085:
    # the three of twelve labs drawn above 0.08 m/s sorted 35-60% of their episodes, the seven at or below 0.075 70-90%
    # (experiments/drawn-labs-v2).
    "belt_speed": ("uniform", 0.065, 0.08),  # m/s
    # Actuation and perception latency add up: teleoperation loops run about 100 ms end to end (v3: 40 + 80 ms).
    "control_latency": ("uniform", 0.02, 0.06),  # s
    # Camera-based pose estimation: errors of about a centimetre, growing with speed and occlusion (v3: 4 mm,
    # 0.03 s x speed, 10 mm near the hand), delays of 60-100 ms (v3: 80 ms).
    "object_pos_noise": ("uniform", 0.002, 0.006),  # m
    # A shared calibration error (the robot base's registration), a few mm and a fraction of a degree; the
    # cameras' own errors come on top (PERCEPTION_DRAW_V2).  v3: (3, -2, 0) mm, no shared rotation.
    "object_pos_offset": ("offset", (0.005, 0.005, 0.002)),  # m, per axis
    "perception_delay": ("uniform", 0.04, 0.12),  # s
    "object_pos_noise_speed": ("uniform", 0.01, 0.05),  # s (m per m/s)
    "object_pos_noise_occlusion": ("uniform", 0.005, 0.015),  # m
    "object_pos_rotation": ("offset", (0.003, 0.003, 0.003)),  # rad, per axis
    # Orientation noise of a few degrees (v3: 0.05 rad); occasional misses (v3: 3% per step), rare category
    # confusions (v3: 1%); a hand covers what is within a few cm of it (v3: 6 cm).
    "object_quat_noise": ("uniform", 0.02, 0.08),  # rad
    "object_dropout": ("uniform", 0.01, 0.05),  # per object and step
    "category_confusion": ("uniform", 0.0, 0.02),  # per object and step
    "hand_occlusion_radius": ("uniform", 0.04, 0.08),  # m
}
#: Version 2's unmodeled effects: version 1's, and a few percent late commands (v3: 5%), a few hundredths of a
#: radian of finger backlash (v3: 0.03).
EFFECT_DRAW_V2: dict[str, tuple[float, float]] = {
    **EFFECT_DRAW,
    "late_command_probability": (0.02, 0.08),
    "finger_backlash": (0.01, 0.05),  # rad
}
#: Version 2's cameras: lab v3's two, at its positions, each with its own extrinsic calibration error drawn per axis
#: in ``[-high, high]`` (hand-eye calibration is good to about half a degree and a few mm; v3: 0.3-0.5 degrees, 3-5
#: mm); ``delay_jitter`` uniform (a frame or so on a shared GPU; v3: 15 ms).
PERCEPTION_DRAW_V2: dict[str, Any] = {
    "cameras": (("scene", (0.95, -0.42, 0.72)), ("head", (0.95, 0.42, 0.72))),  # name, position (m)
    "rotation_error": 0.008,  # rad, per axis
    "translation_error": 0.005,  # m, per axis
    "delay_jitter": (0.005, 0.025),  # s
}
#: Version 2's operator: version 1's, approaching from above only (lab v3's).  The operator model's ``"follow"``
#: approach copes poorly with lab v3's structure: in six version-2 labs first drawn with both approaches, the five
#: that drew ``"follow"`` sorted 40-70% of their episodes, and each sorted 90-95% (one 55%) with lab v3's operator in
#: place of the drawn one, while lab v3's structure in place of the drawn one did not help (experiments/drawn-labs-v2).
OPERATOR_DRAW_V2: dict[str, tuple[Any, ...]] = {**OPERATOR_DRAW, "approach": ("above",)}
#: Version 2's contact model, uniform: softer than the simulator's 0.02 s (real parts and pads; v3: 0.03 s), a
#: little rolling friction (v3: 1 mm).
CONTACT_DRAW_V2: dict[str, tuple[float, float]] = {
    "object_timeconst": (0.02, 0.04),  # s
    "rolling_friction": (0.0005, 0.0015),  # m
}


#: Version 3's appearance (docs/lab.md#appearance; ``world.appearance`` states each field's real-world reference).
#: Each camera (scene, then wrist): ``focal_error``, ``translation_error`` and ``rotation_error`` per axis uniform in
#: ``[-high, high]`` (a camera calibrated, but not perfectly: 2 % of focal length, 1 cm, 0.015 rad or 0.9 degrees);
#: ``blur``, ``noise`` and ``exposure`` uniform (1-2.5 px of a 640 px image at most, 0.3-2 % noise, +-1/3 stop).
#: The light: tilted ``light_tilt`` rad off vertical towards a uniform azimuth, its colour ``light_warmth`` of the
#: way from white (6500 K) to 3000 K (1, 0.69, 0.43) (that is 6500-3800 K), ``intensity`` and ``ambient`` uniform.
#: Colours: belt and table a grey of uniform level with each channel x``surface_tint``; bins and objects their
#: spec-sheet colour with each channel x``part_tint`` (clipped to 1: the categories still read red, green, blue);
#: patterns one of the choices with equal chance.  Clutter: ``clutter`` items (uniform count), each of a uniform shape,
#: upstream of the robot, between it and the belt as the scene camera sees them (``clutter_radius`` m from the base,
#: ``clutter_azimuth`` degrees from +x), standing on the floor, half-sizes ``clutter_size`` m, a uniform colour.
APPEARANCE_DRAW_V3: dict[str, Any] = {
    "focal_error": 0.02,
    "translation_error": 0.01,  # m, per axis
    "rotation_error": 0.015,  # rad, per axis
    "blur": (0.0, 0.004),  # image widths
    "noise": (0.003, 0.02),  # full scale
    "exposure": (0.8, 1.25),
    "light_tilt": (0.0, 0.5),  # rad
    "light_warmth": (0.0, 0.6),
    "intensity": (0.75, 1.3),
    "ambient": (0.7, 1.3),
    "belt_grey": (0.06, 0.3),
    "table_grey": (0.35, 0.75),
    "surface_tint": (0.9, 1.1),
    "part_tint": (0.85, 1.15),
    "belt_pattern": ("plain", "speckle"),
    "table_pattern": ("plain", "checker", "speckle"),
    "clutter": (0, 4),  # items, inclusive
    "clutter_radius": (1.0, 1.7),  # m
    "clutter_azimuth": (85.0, 125.0),  # degrees from +x
    "clutter_size": (0.03, 0.15),  # m
}
_WARM_3000K = (1.0, 0.69, 0.43)


def draw_lab(
    seed: int, *, name: str | None = None, operator: bool = True, version: int = DRAW_VERSION
) -> dict[str, Any]:
    """A lab config (docs/lab.md#format) drawn from the ranges of this module.

    Args:
        seed: the draw's seed (an integer >= 0): the same seed gives the same lab.
        name: the lab's name (default ``"drawn-<seed>"``, ``"drawn2-<seed>"`` in version 2).
        operator: also draw the operator's style (else the lab has the default operator).
        version: which ranges (:data:`DRAW_VERSIONS`): 1, the default and frozen; 2, also lab v3's structure; 3,
            version 2's lab with an appearance.

    Returns:
        The config as a JSON-ready dict (``name``, ``world``, ``effects``, from version 2 ``perception`` and
        ``contact``, in version 3 ``appearance``, and with ``operator``, ``operator``).

    Raises:
        ValueError: ``seed`` is not an integer >= 0, or ``version`` is not one of :data:`DRAW_VERSIONS` (the message
            lists them).
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    if isinstance(version, bool) or not isinstance(version, (int, np.integer)) or version not in DRAW_VERSIONS:
        valid = ", ".join(f"{v} ({form!r})" for v, (form, _) in DRAW_VERSIONS.items())
        raise ValueError(f"unknown drawn-lab version {version!r}; valid versions: {valid}")
    if version == 2:
        return _draw_v2(int(seed), name=name, operator=operator)
    if version == 3:
        seen = _draw_v2(int(seed), name=f"drawn3-{int(seed)}" if name is None else name, operator=operator)
        return {**seen, "appearance": draw_appearance(int(seed))}
    rng = np.random.default_rng(int(seed))
    world = _draw_world(rng, WORLD_DRAW)
    config: dict[str, Any] = {
        "name": f"drawn-{int(seed)}" if name is None else name,
        "world": world,
        "effects": _draw_effects(rng, EFFECT_DRAW),
    }
    if operator:
        config["operator"] = _draw_operator(rng)
    return config


def _draw_world(rng: np.random.Generator, table: dict[str, tuple[Any, ...]]) -> dict[str, Any]:
    u = rng.uniform
    base = nominal()
    world: dict[str, Any] = {}
    for field, (kind, *args) in table.items():
        if kind == "uniform":
            world[field] = float(u(*args))
        elif kind == "scale":
            world[field] = [float(v * u(*args)) for v in getattr(base, field)]
        elif kind == "offset":
            world[field] = [float(u(-h, h)) for h in args[0]]
        # "nominal": not written (the world's nominal value)
    return world


def _draw_effects(rng: np.random.Generator, table: dict[str, tuple[float, float]]) -> dict[str, Any]:
    # arm_command_gain one value per arm joint, first; the others one value each, in the table's order.
    low, high = table["arm_command_gain"]
    effects: dict[str, Any] = {"arm_command_gain": [float(rng.uniform(low, high)) for _ in range(N_ARM_JOINTS)]}
    effects.update({k: float(rng.uniform(*r)) for k, r in table.items() if k != "arm_command_gain"})
    return effects


def _draw_operator(rng: np.random.Generator, table: dict[str, tuple[Any, ...]] = OPERATOR_DRAW) -> dict[str, Any]:
    style: dict[str, Any] = {}
    for field, values in table.items():
        if isinstance(values[0], str):
            style[field] = str(values[int(rng.integers(len(values)))])
        else:
            style[field] = float(rng.uniform(*values))
    return style


def _draw_v2(seed: int, *, name: str | None, operator: bool) -> dict[str, Any]:
    # Its own stream (entropy [seed, 2]); world, effects, perception, contact, then the operator, so that a lab
    # drawn without its operator has the same physics and perception.
    rng = np.random.default_rng([seed, 2])
    u = rng.uniform
    world = _draw_world(rng, WORLD_DRAW_V2)
    effects = _draw_effects(rng, EFFECT_DRAW_V2)
    rotation, translation = PERCEPTION_DRAW_V2["rotation_error"], PERCEPTION_DRAW_V2["translation_error"]
    cameras = [
        {
            "name": camera,
            "position": list(position),
            "rotation_error": [float(u(-rotation, rotation)) for _ in range(3)],
            "translation_error": [float(u(-translation, translation)) for _ in range(3)],
        }
        for camera, position in PERCEPTION_DRAW_V2["cameras"]
    ]
    perception = {"cameras": cameras, "delay_jitter": float(u(*PERCEPTION_DRAW_V2["delay_jitter"]))}
    contact = {k: float(u(*r)) for k, r in CONTACT_DRAW_V2.items()}
    config: dict[str, Any] = {
        "name": f"drawn2-{seed}" if name is None else name,
        "world": world,
        "effects": effects,
        "perception": perception,
        "contact": contact,
    }
    if operator:
        config["operator"] = _draw_operator(rng, OPERATOR_DRAW_V2)
    return config


def draw_appearance(seed: int) -> dict[str, Any]:
    """Version 3's appearance for ``seed`` (:data:`APPEARANCE_DRAW_V3`; the ``appearance`` of ``draw3:SEED``), as a
    JSON-ready dict, on its own stream (entropy ``[seed, 3]``): scene camera, wrist camera, light, colours, clutter."""
    rng = np.random.default_rng([seed, 3])
    u, t = rng.uniform, APPEARANCE_DRAW_V3
    cameras = {}
    for camera in ("scene_camera", "wrist_camera"):
        cameras[camera] = {
            "focal_error": float(u(-t["focal_error"], t["focal_error"])),
            "translation_error": [float(u(-t["translation_error"], t["translation_error"])) for _ in range(3)],
            "rotation_error": [float(u(-t["rotation_error"], t["rotation_error"])) for _ in range(3)],
            **{k: float(u(*t[k])) for k in ("blur", "noise", "exposure")},
        }
    tilt, azimuth, warmth = float(u(*t["light_tilt"])), float(u(0.0, 2.0 * math.pi)), float(u(*t["light_warmth"]))
    lighting = {
        "direction": [math.sin(tilt) * math.cos(azimuth), math.sin(tilt) * math.sin(azimuth), -math.cos(tilt)],
        "colour": [1.0 - warmth * (1.0 - w) for w in _WARM_3000K],
        "intensity": float(u(*t["intensity"])),
        "ambient": float(u(*t["ambient"])),
    }
    spec = Colours()
    colours: dict[str, Any] = {}
    for surface in ("belt", "table"):
        grey = float(u(*t[f"{surface}_grey"]))
        colours[surface] = [min(1.0, grey * float(u(*t["surface_tint"]))) for _ in range(3)]
    for parts in ("bins", "objects"):
        colours[parts] = [min(1.0, v * float(u(*t["part_tint"]))) for v in getattr(spec, parts)]
    for key in ("belt_pattern", "table_pattern"):
        colours[key] = str(t[key][int(rng.integers(len(t[key])))])
    clutter = []
    for _ in range(int(rng.integers(t["clutter"][0], t["clutter"][1] + 1))):
        shape = ("box", "cylinder", "sphere")[int(rng.integers(3))]
        radius, angle = float(u(*t["clutter_radius"])), math.radians(float(u(*t["clutter_azimuth"])))
        size = [float(u(*t["clutter_size"])) for _ in range(3)]
        lift = {"box": size[2], "cylinder": size[1], "sphere": size[0]}[shape]  # standing on the floor
        clutter.append(
            {
                "shape": shape,
                "position": [radius * math.cos(angle), radius * math.sin(angle), lift],
                "size": size,
                "colour": [float(u(0.1, 0.9)) for _ in range(3)],
            }
        )
    return {**cameras, "lighting": lighting, "colours": colours, "clutter": clutter}


def _check_tables() -> None:
    # A new world field must get a range here (an import-time error, caught by the tests).
    fields = WorldParams.field_names()
    for table_name, table in (("WORLD_DRAW", WORLD_DRAW), ("WORLD_DRAW_V2", WORLD_DRAW_V2)):
        check_keys(
            table, fields, what="WorldParams field", where=f"lab.draw.{table_name}", required=fields, error=RuntimeError
        )


_check_tables()
