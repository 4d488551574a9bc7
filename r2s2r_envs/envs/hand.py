"""Hand geometry of the nominal hand: finger postures, the hand's yaw, the downward orientation, finger commands.

The demonstrators that drive the hand from what a person in the room knows (the scripted planner, its reactive
variant, the human-like generator, the lab's teleoperator) and the excitation protocols of the lab logs share
this one home.  It reads the nominal layout (``r2s2r_envs.world.builder.scene_layout``), never a simulation.

* Postures: ``finger_posture`` sets the flexion and abduction joints of a pinch; ``grasp_postures`` gives a
  category's (open, touching, squeezing) postures from the hand geometry and the object's nominal half-width.
* Orientation: ``hand_yaw`` reads the yaw of the hand's x axis (the pinch axis) from a quaternion, ``quat_yaw``
  the same in closed form for arrays of them; ``down_quat`` is the orientation with the palm facing down at a yaw;
  ``grasp_yaw`` is the yaw a pinch of an object takes (``object_grasp_yaw``: of object ``i`` of an observation).
* Commands: finger joint angles become normalized commands through ``r2s2r_envs.envs.controller``'s
  ``finger_command_for_range`` (on the nominal layout's joint limits).

``numpy_math``: the scripted planner (and everything built on its grasp) computes its trigonometry with numpy's
ufuncs, the teleoperator and the human-like generator with Python's ``math``.  The two can differ in the last bit
where numpy dispatches to vectorized kernels (SVML on AVX-512 machines), and numpy keeps a float32 quaternion's
precision where ``math`` widens it to float64; the canonical datasets were recorded with each demonstrator's own
choice, so both are kept, selected explicitly, and a demonstrator's actions stay bit-identical.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import mujoco
import numpy as np

from r2s2r_envs.world import constants as C
from r2s2r_envs.world.builder import SceneLayout

#: Number of finger joints (``constants.HAND_JOINTS``).
N_FINGER = len(C.HAND_JOINTS)
#: Index of each finger joint in ``HAND_JOINTS`` order, by its name without the hand prefix (``"if_mcp"``, ...).
JOINT_INDEX: dict[str, int] = {name.removeprefix(C.HAND_PREFIX): k for k, name in enumerate(C.HAND_JOINTS)}

# Ref: the scripted planner's tuned defaults (behavior.scripted.PlannerConfig); the teleoperator's habits use
# the same values.
#: Flexion short of contact while approaching, rad (the hand opens just enough).
PRESHAPE_MARGIN = 0.22
#: Thumb flexion commanded beyond touching the object, rad (the grip force).
SQUEEZE = 0.2
#: Index/ring abduction towards the middle finger for small objects (cube, ball), rad.
ADDUCTION = 0.2
#: Index/ring abduction away from the middle finger for bars, rad.
BAR_SPREAD = 0.2


def finger_posture(flex: float, thumb_flex: float, adduct: float) -> np.ndarray:
    """(16,) finger joint angles, rad, of a pinch: index, middle and ring flexed by ``flex`` at the knuckle, the
    thumb by ``thumb_flex``, index and ring turned ``adduct`` towards the middle finger; every other joint 0."""
    q = np.zeros(N_FINGER)
    for f in ("if", "mf", "rf"):
        q[JOINT_INDEX[f"{f}_mcp"]] = flex
    q[JOINT_INDEX["if_rot"]] = -adduct
    q[JOINT_INDEX["rf_rot"]] = adduct
    q[JOINT_INDEX["th_mcp"]] = thumb_flex
    return q


def open_posture(margin: float = PRESHAPE_MARGIN) -> np.ndarray:
    """(16,) finger joint angles, rad, of the flat open hand (every digit ``margin`` back from straight)."""
    return finger_posture(-margin, -margin, 0.0)


def grasp_postures(
    layout: SceneLayout,
    category: str,
    *,
    margin: float = PRESHAPE_MARGIN,
    squeeze: float = SQUEEZE,
    adduction: float = ADDUCTION,
    bar_spread: float = BAR_SPREAD,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Finger postures for an object category: (open, touching, squeezing) joint angles, rad.

    The flexion at which a digit's pad touches the object follows from the hand geometry and the object's nominal
    half-width; the squeeze is split so the three fingers' force balances the thumb's.

    Args:
        layout: The nominal layout (hand geometry and object sizes).
        category: One of ``constants.CATEGORIES``.
        margin: Flexion short of contact of the open posture, rad.
        squeeze: Thumb flexion beyond touching, rad; the fingers get the share that balances it.
        adduction: Index/ring abduction towards the middle finger for a cube or ball, rad.
        bar_spread: Index/ring abduction away from the middle finger for a bar, rad.
    """
    size = layout.object_half_sizes[category]
    half_width = size[1] if category == "bar" else size[0]
    gap = lambda base: base - layout.tip_radius - half_width  # noqa: E731
    finger_contact = float(np.arcsin(np.clip(gap(layout.finger_base_x) / layout.finger_length, -1.0, 1.0)))
    thumb_contact = float(np.arcsin(np.clip(gap(layout.thumb_base_x) / layout.thumb_length, -1.0, 1.0)))
    # Torque balance at the pads: 3 * kp * d_f / L_f = kp * d_t / L_t.
    finger_squeeze = squeeze * layout.thumb_length / (3.0 * layout.finger_length)
    adduct = adduction if category in ("cube", "ball") else -bar_spread
    return (
        finger_posture(finger_contact - margin, thumb_contact - margin, adduct),
        finger_posture(finger_contact, thumb_contact, adduct),
        finger_posture(finger_contact + finger_squeeze, thumb_contact + squeeze, adduct),
    )


def _atan2(numpy_math: bool) -> Any:
    return np.arctan2 if numpy_math else math.atan2


def hand_yaw(quat: np.ndarray, *, numpy_math: bool = False) -> float:
    """Yaw of the hand's x axis (the pinch axis) in the world's horizontal plane, rad, for a (w, x, y, z)
    quaternion (``numpy_math``: see the module docstring)."""
    mat = np.empty(9)
    mujoco.mju_quat2Mat(mat, np.asarray(quat, dtype=float))
    return float(_atan2(numpy_math)(mat[3], mat[0]))


def quat_yaw(quat: np.ndarray) -> np.ndarray:
    """Yaw of a body's x axis in the horizontal plane, rad, for (..., 4) quaternions (w, x, y, z).

    The closed form, vectorized over recorded traces (the behavior fit and the human-like generator read the hand's
    and the objects' yaw with it).  It is not ``hand_yaw`` (which goes through MuJoCo's rotation matrix, one
    quaternion at a time) and differs from it in the last bits, so each demonstrator keeps the one it was made with.
    """
    w, x, y, z = np.moveaxis(np.asarray(quat, dtype=float), -1, 0)
    return np.arctan2(2.0 * (x * y + w * z), 1.0 - 2.0 * (y * y + z * z))


def down_quat(yaw: float, *, numpy_math: bool = False) -> np.ndarray:
    """Orientation (w, x, y, z) with the hand's z axis pointing down and its x axis at ``yaw`` (rad)
    (``numpy_math``: see the module docstring)."""
    if numpy_math:
        c, s = np.cos(yaw), np.sin(yaw)
    else:
        c, s = math.cos(yaw), math.sin(yaw)
    quat = np.empty(4)
    mujoco.mju_mat2Quat(quat, np.array([c, s, 0.0, s, -c, 0.0, 0.0, 0.0, -1.0]))
    return quat


def grasp_yaw(eef_quat: np.ndarray, object_quat: np.ndarray, category: str, *, numpy_math: bool = False) -> float:
    """Yaw of the hand's pinch axis for grasping an object, rad.

    The pinch goes across a bar; for a cube or ball, among the equivalent yaws, the one closest to the belt
    direction, so the belt's drag on the object pushes it into a pad rather than along the finger row.

    Args:
        eef_quat: The hand's (w, x, y, z) orientation now.
        object_quat: The object's (w, x, y, z) orientation (its yaw about the vertical is used).
        category: The object's category.
        numpy_math: See the module docstring.
    """
    current = hand_yaw(eef_quat, numpy_math=numpy_math)
    along_belt = np.pi / 2 + np.pi * np.round((current - np.pi / 2) / np.pi)  # +-pi/2 nearest the hand
    if category == "ball":
        return float(along_belt)
    q = object_quat
    obj_yaw = 2.0 * _atan2(numpy_math)(q[3], q[0])
    period = np.pi / 2 if category == "cube" else np.pi
    base = obj_yaw + (np.pi / 2 if category == "bar" else 0.0)
    reference = along_belt if category == "cube" else current
    return float(base + period * np.round((reference - base) / period))


def object_grasp_yaw(obs: Mapping[str, np.ndarray], i: int, category: str, *, numpy_math: bool = False) -> float:
    """``grasp_yaw`` for object ``i`` of a state observation (its ``eef_quat`` and ``object_quat``), rad."""
    return grasp_yaw(obs["eef_quat"], obs["object_quat"].reshape(-1, 4)[i], category, numpy_math=numpy_math)
