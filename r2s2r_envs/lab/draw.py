"""Labs nobody tuned for: :func:`draw_lab` draws a whole lab config from documented ranges.

A drawn lab differs from the nominal model in every world field, has every unmodeled effect and an operator of
its own style, within the ranges of :data:`WORLD_DRAW`, :data:`EFFECT_DRAW` and :data:`OPERATOR_DRAW`
(docs/lab.md#drawn-labs). The ranges are those of a plausible conveyor cell, narrower than what a lab config
accepts (``world.params.FIELD_BOUNDS``), so the task stays feasible for a careful operator: a pipeline that works
only on the shipped default lab can be checked on labs it has never seen (``r2s2r ablation --lab draw:SEED``).

The same seed gives the same lab, on any machine (numpy's ``default_rng``; the fields are drawn in a fixed order).

Example::

    import gymnasium as gym
    from r2s2r_envs.lab.draw import draw_lab

    config = draw_lab(7)                                # a dict in the lab config format, named "drawn-7"
    env = gym.make("PickSort-Real-v0", lab=config)      # checked like any lab file
"""

from __future__ import annotations

from typing import Any

import numpy as np

from r2s2r_envs.world.params import PERCEPTION_FIELDS, WorldParams, nominal

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
_ARM_JOINTS = 7


def draw_lab(seed: int, *, name: str | None = None, operator: bool = True) -> dict[str, Any]:
    """A lab config (docs/lab.md#format) drawn from the ranges of this module.

    Args:
        seed: the draw's seed (an integer >= 0): the same seed gives the same lab.
        name: the lab's name (default ``"drawn-<seed>"``).
        operator: also draw the operator's style (else the lab has the default operator).

    Returns:
        The config as a JSON-ready dict (``name``, ``world``, ``effects`` and, with ``operator``, ``operator``).

    Raises:
        ValueError: ``seed`` is not an integer >= 0.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    rng = np.random.default_rng(int(seed))
    u = rng.uniform
    base = nominal()
    world: dict[str, Any] = {}
    for field, (kind, *args) in WORLD_DRAW.items():
        if kind == "uniform":
            world[field] = float(u(*args))
        elif kind == "scale":
            world[field] = [float(v * u(*args)) for v in getattr(base, field)]
        elif kind == "offset":
            world[field] = [float(u(-h, h)) for h in args[0]]
        # "nominal": not written (the world's nominal value)
    low, high = EFFECT_DRAW["arm_command_gain"]
    effects: dict[str, Any] = {"arm_command_gain": [float(u(low, high)) for _ in range(_ARM_JOINTS)]}
    effects.update({k: float(u(*r)) for k, r in EFFECT_DRAW.items() if k != "arm_command_gain"})
    config: dict[str, Any] = {
        "name": f"drawn-{int(seed)}" if name is None else name,
        "world": world,
        "effects": effects,
    }
    if operator:
        style: dict[str, Any] = {}
        for field, values in OPERATOR_DRAW.items():
            if isinstance(values[0], str):
                style[field] = str(values[int(rng.integers(len(values)))])
            else:
                style[field] = float(u(*values))
        config["operator"] = style
    return config


def _check_tables() -> None:
    missing = set(WorldParams.field_names()) ^ set(WORLD_DRAW)
    if missing:  # a new world field must get a range here (an import-time error, caught by the tests)
        raise RuntimeError(f"lab.draw.WORLD_DRAW does not match WorldParams' fields: {sorted(missing)}")


_check_tables()
