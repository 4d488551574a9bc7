"""Names of the PickSort scene's joints, actuators, sites, geoms and cameras, and the demonstrators' picking zone.

Task code resolves these names to ids once after the model compiles (see ``envs.pick_sort``); nothing
indexes ``qpos`` by bare numbers.  The names match ``assets/*.xml`` and the prefixes the builder adds when
it attaches the arm, the hand and the object slots.
"""

from __future__ import annotations

ARM_PREFIX = "arm/"
HAND_PREFIX = "hand/"


def object_prefix(i: int) -> str:
    """Prefix of the i-th object slot's names."""
    return f"obj{i}/"


ARM_JOINTS: tuple[str, ...] = tuple(f"{ARM_PREFIX}joint{i}" for i in range(1, 8))
ARM_ACTUATORS: tuple[str, ...] = ARM_JOINTS

FINGERS: tuple[str, ...] = ("if", "mf", "rf", "th")
_FINGER_JOINTS = ("rot", "mcp", "pip", "dip")
_THUMB_JOINTS = ("cmc", "axl", "mcp", "ipl")
HAND_JOINTS: tuple[str, ...] = tuple(
    f"{HAND_PREFIX}{f}_{j}" for f in FINGERS for j in (_THUMB_JOINTS if f == "th" else _FINGER_JOINTS)
)
HAND_ACTUATORS: tuple[str, ...] = HAND_JOINTS
FINGERTIP_SITES: tuple[str, ...] = tuple(f"{HAND_PREFIX}{f}_tip" for f in FINGERS)
HAND_BODY_PREFIX = HAND_PREFIX

FLANGE_SITE = f"{ARM_PREFIX}flange"
TCP_SITE = f"{HAND_PREFIX}tcp"
BELT_GEOM = "belt"
BELT_SITE = "belt_surface"
FLOOR_GEOM = "floor"

# Object categories, in the order of the one-hot observation and of WorldParams.object_mass.
CATEGORIES: tuple[str, ...] = ("cube", "ball", "bar")
BIN_SITES: dict[str, str] = {c: f"bin_{c}" for c in CATEGORIES}
OBJECT_JOINT = "object"

# The demonstrators' picking zone along the belt (world y, m; objects travel towards -y): the scripted planner and
# the lab's teleoperator attempt no object further downstream than REACH_LIMIT_Y and target none further upstream
# than REACH_UPSTREAM_Y yet (out of comfortable reach).
REACH_LIMIT_Y = -0.36
REACH_UPSTREAM_Y = 0.55

SCENE_CAMERA = "scene"
WRIST_CAMERA = f"{HAND_PREFIX}wrist"
CAMERAS: tuple[str, ...] = (SCENE_CAMERA, WRIST_CAMERA)

# Contact groups (contype bits) used in assets/*.xml.
CONTACT_STATIC = 1
CONTACT_OBJECT = 2
CONTACT_HAND = 4
CONTACT_ARM = 8
