"""Turn ``WorldParams`` into a compiled PickSort ``MjModel`` through ``mujoco.MjSpec``.

The MJCF in ``assets/`` describes geometry; this module attaches the parts (arm at ``robot_mount``, hand at the
arm's ``flange``, ``num_objects`` object slots) and writes every physical parameter from ``WorldParams`` into
the spec before compiling.  Compiled models are cached per ``(params, num_objects)``; callers get a copy, so
per-episode edits of ``MjModel`` fields (object category, belt speed) never leak between environments.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
from importlib import resources
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from r2s2r_envs.world import constants as C
from r2s2r_envs.world.appearance import Appearance
from r2s2r_envs.world.params import SENSING_FIELDS, WorldParams

#: Geom size multiplier per object category (order ``constants.CATEGORIES``) and axis.
ObjectShape = tuple[tuple[float, float, float], ...]

ASSET_PACKAGE = "r2s2r_envs.assets"
SCENE_FILE = "pick_sort_scene.xml"
ARM_FILE = "panda_arm.xml"
HAND_FILE = "leap_hand.xml"
OBJECT_FILE = "objects.xml"

# Where unused object slots wait: below the floor, far from everything, frozen by the env.
PARKING_Z = -1.0


def _asset_dir() -> Path:
    # Installed (wheel or editable): the package r2s2r_envs.assets.  Imported straight from a source checkout
    # (the repo root on sys.path shadows the editable finder): the checkout's top-level assets/.
    try:
        return Path(str(resources.files(ASSET_PACKAGE)))
    except ModuleNotFoundError:
        return Path(__file__).resolve().parents[2] / "assets"


def asset_path(name: str) -> str:
    """Absolute path of a shipped MJCF file (works from a source checkout and from an installed wheel)."""
    directory = _asset_dir()
    path = directory / name
    if not path.is_file():
        available = sorted(p.name for p in directory.glob("*.xml"))
        raise FileNotFoundError(f"asset {name!r} not found in {directory}; available: {available}")
    return str(path)


@functools.lru_cache(maxsize=1)
def _nominal_object_sizes() -> dict[str, tuple[float, ...]]:
    spec = mujoco.MjSpec.from_file(asset_path(OBJECT_FILE))  # parsed once: set_world calls this per change
    return {c: tuple(float(v) for v in spec.geom(c).size) for c in C.CATEGORIES}


def object_half_sizes(params: WorldParams, shape: ObjectShape | None = None) -> dict[str, np.ndarray]:
    """Geom ``size`` vector per category after ``object_size_scale`` (box: half-extents; sphere: radius) and, when
    given, ``shape``: a multiplier per category (order ``CATEGORIES``) and axis (an evaluation condition's)."""
    sizes = {c: np.array(size) * params.object_size_scale for c, size in _nominal_object_sizes().items()}
    if shape is not None:
        sizes = {c: sizes[c] * np.asarray(shape[k]) for k, c in enumerate(C.CATEGORIES)}
    return sizes


def category_inertia(category: str, mass: float, size: np.ndarray) -> np.ndarray:
    """Principal moments of inertia (kg*m^2) of a solid primitive of the given category and geom size."""
    if category == "ball":
        return np.full(3, 0.4 * mass * size[0] ** 2)
    a, b, c = 2.0 * size[:3]
    return mass / 12.0 * np.array([b * b + c * c, a * a + c * c, a * a + b * b])


def build_spec(
    params: WorldParams,
    num_objects: int,
    object_shape: ObjectShape | None = None,
    appearance: Appearance | None = None,
) -> mujoco.MjSpec:
    """Assemble the PickSort scene for ``params`` (objects reshaped by ``object_shape``, see ``object_half_sizes``;
    seen as ``appearance`` looks, see ``apply_appearance``; None: the spec sheet) as an (uncompiled) ``MjSpec``."""
    if not isinstance(num_objects, int) or num_objects < 1:
        raise ValueError(f"num_objects must be a positive integer, got {num_objects!r}")
    scene = mujoco.MjSpec.from_file(asset_path(SCENE_FILE))
    arm = mujoco.MjSpec.from_file(asset_path(ARM_FILE))
    hand = mujoco.MjSpec.from_file(asset_path(HAND_FILE))

    scene.attach(arm, prefix=C.ARM_PREFIX, frame=scene.frame("robot_mount"))
    scene.attach(hand, prefix=C.HAND_PREFIX, site=scene.site(C.FLANGE_SITE))

    sizes = object_half_sizes(params, object_shape)
    for i in range(num_objects):
        obj = mujoco.MjSpec.from_file(asset_path(OBJECT_FILE))
        for c in C.CATEGORIES:
            obj.geom(c).size = sizes[c]
            obj.geom(c).friction = [params.object_friction, *obj.geom(c).friction[1:]]
        frame = scene.worldbody.add_frame(pos=[0.0, 0.0, PARKING_Z - 0.2 * i])
        scene.attach(obj, prefix=C.object_prefix(i), frame=frame)

    scene.geom(C.BELT_GEOM).surfacevel = np.array([0.0, -params.belt_speed, 0.0, 0.0, 0.0, 0.0])

    samples = int(math.ceil(params.control_latency / scene.option.timestep - 1e-9))
    for k, name in enumerate(C.ARM_JOINTS):
        joint = scene.joint(name)
        joint.damping = [params.arm_damping[k], 0.0, 0.0]
        joint.armature = params.arm_armature[k]
        joint.frictionloss = params.arm_frictionloss[k]
        act = scene.actuator(name)
        _set_position_gains(act, params.arm_kp[k], params.arm_kv[k], params.arm_force_limit[k])
        _set_delay(act, params.control_latency, samples)
    for name in C.HAND_ACTUATORS:
        act = scene.actuator(name)
        _set_position_gains(act, params.finger_kp, params.finger_kv, params.finger_force_limit)
        _set_delay(act, params.control_latency, samples)
    if appearance is not None:
        apply_appearance(scene, appearance, num_objects)
    return scene


def _set_position_gains(act: mujoco.MjsActuator, kp: float, kv: float, force_limit: float) -> None:
    # A position servo: force = kp * (ctrl - q) - kv * qdot, clamped to +-force_limit.
    act.gainprm[0] = kp
    act.biasprm[0:3] = [0.0, -kp, -kv]
    act.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
    act.forcerange = [-force_limit, force_limit]


def _set_delay(act: mujoco.MjsActuator, latency: float, samples: int) -> None:
    # MuJoCo's actuator delay buffers ctrl; the command reaches the servo `latency` seconds after it was sent.
    if samples > 0:
        act.nsample = samples + 1
        act.delay = latency


#: Fields that never reach the MuJoCo model: the sensors and the belt's fluctuation live in the env.
ENV_ONLY_FIELDS: tuple[str, ...] = (*SENSING_FIELDS, "belt_speed_fluctuation", "belt_fluctuation_time")


def model_params(params: WorldParams) -> WorldParams:
    """``params`` with every env-only field at its nominal value: the part of a world the compiled model holds
    (so worlds that differ only in their sensors share one compiled model)."""
    nominal = WorldParams()
    return dataclasses.replace(params, **{f: getattr(nominal, f) for f in ENV_ONLY_FIELDS})


@functools.lru_cache(maxsize=16)
def _compiled(
    params: WorldParams,
    num_objects: int,
    object_shape: ObjectShape | None = None,
    appearance: Appearance | None = None,
) -> mujoco.MjModel:
    return build_spec(params, num_objects, object_shape, appearance).compile()


def build_model(
    params: WorldParams,
    num_objects: int = 3,
    object_shape: ObjectShape | None = None,
    appearance: Appearance | None = None,
) -> mujoco.MjModel:
    """Compiled PickSort model for ``params`` with ``num_objects`` object slots (a private copy); ``object_shape``
    reshapes the objects (see ``object_half_sizes``); ``appearance`` changes how the scene looks, never its physics
    (see ``apply_appearance``; None: the spec sheet)."""
    shape = None if object_shape is None else tuple(tuple(a) for a in object_shape)
    if appearance is not None:
        return copy.copy(_compiled(model_params(params), num_objects, shape, appearance))
    if shape is None:  # the cache key of every call without a shape, as before
        return copy.copy(_compiled(model_params(params), num_objects))
    return copy.copy(_compiled(model_params(params), num_objects, shape))


def spec_camera_position(camera: str) -> np.ndarray:
    """Where the spec sheet puts ``camera`` (``constants.CAMERAS``) in its parent body's frame, m (the world's for
    the scene camera), whatever a model's appearance moves it to."""
    return _compiled(WorldParams(), 1).camera(camera).pos.copy()


# ---------------------------------------------------------------------- appearance
#: The distractors' body (``Appearance.clutter``): one static body, added last, so every other id stays.
CLUTTER_BODY = "clutter"
_GEOM_TYPES = {
    "box": mujoco.mjtGeom.mjGEOM_BOX,
    "cylinder": mujoco.mjtGeom.mjGEOM_CYLINDER,
    "sphere": mujoco.mjtGeom.mjGEOM_SPHERE,
}


def apply_appearance(spec: mujoco.MjSpec, appearance: Appearance, num_objects: int) -> None:
    """Write ``appearance`` into the assembled scene ``spec``: the lights, the cameras' focal length and pose, the
    surfaces' colours and patterns, and the distractors (a static body of geoms that collide with nothing).  Only
    what the renderer reads changes: masses, contacts, joints and every existing id stay as they were.  The
    cameras' sensor (blur, noise, exposure) is applied to the images (``appearance.sensor_image``)."""
    light = appearance.lighting
    colour = np.asarray(light.colour)
    top = spec.light("top")
    top.dir = np.asarray(light.direction) / np.linalg.norm(light.direction)
    top.diffuse = np.asarray(top.diffuse) * light.intensity * colour
    top.specular = np.asarray(top.specular) * light.intensity * colour
    head = spec.visual.headlight
    head.diffuse = np.asarray(head.diffuse) * light.intensity * colour
    head.ambient = np.asarray(head.ambient) * light.ambient * colour

    for name in C.CAMERAS:
        _move_camera(spec.camera(name), name, appearance.camera(name))

    colours = appearance.colours
    _paint(spec, spec.geom(C.BELT_GEOM), colours.belt, colours.belt_pattern, repeat=(4.0, 4.0))
    _paint(spec, spec.geom(C.FLOOR_GEOM), colours.table, colours.table_pattern, repeat=(8.0, 8.0))
    for k, c in enumerate(C.CATEGORIES):
        for geom in spec.body(C.BIN_SITES[c]).geoms:
            geom.rgba = [*colours.bins[3 * k : 3 * k + 3], 1.0]
        for i in range(num_objects):
            spec.geom(f"{C.object_prefix(i)}{c}").rgba = [*colours.objects[3 * k : 3 * k + 3], 1.0]

    if appearance.clutter:
        body = spec.worldbody.add_body(name=CLUTTER_BODY)
        for i, item in enumerate(appearance.clutter):
            body.add_geom(
                name=f"{CLUTTER_BODY}_{i}",
                type=_GEOM_TYPES[item.shape],
                size=list(item.size),
                pos=list(item.position),
                rgba=[*item.colour, 1.0],
                contype=0,
                conaffinity=0,
                group=1,
            )


def _move_camera(camera: mujoco.MjsCamera, name: str, look: Any) -> None:
    # The spec sheet's pose in the parent body's frame (the compiled nominal model's), then the error in the
    # camera's own frame: position + R t, orientation R * R_error.  The focal length scales tan(fovy / 2) by
    # 1 / (1 + focal_error).
    nominal = _compiled(WorldParams(), 1).camera(name)
    if any(look.translation_error) or any(look.rotation_error):
        rotation = np.empty(9)
        mujoco.mju_quat2Mat(rotation, nominal.quat)
        camera.pos = nominal.pos + rotation.reshape(3, 3) @ np.asarray(look.translation_error)
        error = np.empty(4)
        mujoco.mju_axisAngle2Quat(error, *_axis_angle(look.rotation_error))
        quat = np.empty(4)
        mujoco.mju_mulQuat(quat, nominal.quat, error)
        camera.alt.type = mujoco.mjtOrientation.mjORIENTATION_QUAT
        camera.quat = quat
    if look.focal_error != 0.0:
        half = math.radians(float(nominal.fovy[0])) / 2.0
        camera.fovy = math.degrees(2.0 * math.atan(math.tan(half) / (1.0 + look.focal_error)))


def _axis_angle(rotation_vector: tuple[float, float, float]) -> tuple[np.ndarray, float]:
    v = np.asarray(rotation_vector, dtype=float)
    angle = float(np.linalg.norm(v))
    return (v / angle if angle > 0.0 else np.array([1.0, 0.0, 0.0])), angle


def _paint(
    spec: mujoco.MjSpec, geom: mujoco.MjsGeom, rgb: tuple[float, ...], pattern: str, repeat: tuple[float, float]
) -> None:
    # "plain": the colour; else a 2D texture of it (a checkerboard with a 30 % darker shade, or dark speckles),
    # repeated per metre, which the geom's white rgba leaves as it is.
    if pattern == "plain":
        geom.rgba = [*rgb, 1.0]
        return
    dark = [0.7 * v for v in rgb]
    name = f"{geom.name}_{pattern}"
    texture = spec.add_texture(name=name, type=mujoco.mjtTexture.mjTEXTURE_2D, width=64, height=64)
    if pattern == "checker":
        texture.builtin = mujoco.mjtBuiltin.mjBUILTIN_CHECKER
        texture.rgb1, texture.rgb2 = list(rgb), dark
    else:
        texture.builtin = mujoco.mjtBuiltin.mjBUILTIN_FLAT
        texture.rgb1 = texture.rgb2 = list(rgb)
        texture.mark = mujoco.mjtMark.mjMARK_RANDOM
        texture.random = 0.15
        texture.markrgb = [0.5 * v for v in rgb]
    material = spec.add_material(name=name, texrepeat=list(repeat), texuniform=True)
    material.textures[mujoco.mjtTextureRole.mjTEXROLE_RGB] = name
    geom.material = name
    geom.rgba = [1.0, 1.0, 1.0, 1.0]


def delay_samples(model: mujoco.MjModel, latency: float) -> int:
    """Control-latency buffer length in physics steps (0: no delay buffer)."""
    return int(math.ceil(latency / model.opt.timestep - 1e-9))


def update_model(
    model: mujoco.MjModel, params: WorldParams, num_objects: int, object_shape: ObjectShape | None = None
) -> bool:
    """Write ``params`` into a compiled PickSort model in place, as ``build_model`` would have compiled them.

    Object masses and inertias are per-episode (the env writes them at reset, then calls ``mj_setConst``, which
    also recomputes the constants that depend on armature and masses).  Returns False, changing nothing, when
    the change is structural and needs ``build_model``: another object size (geometry) or a latency that needs
    a delay buffer of another length.
    """
    acts = [model.actuator(n).id for n in (*C.ARM_ACTUATORS, *C.HAND_ACTUATORS)]
    samples = delay_samples(model, params.control_latency)
    current = model.actuator_history[acts[0], 0]
    if samples != (current - 1 if current > 0 else 0):
        return False
    sizes = object_half_sizes(params, object_shape)
    geoms = [(model.geom(f"{C.object_prefix(i)}{c}").id, c) for i in range(num_objects) for c in C.CATEGORIES]
    if any(not np.allclose(model.geom_size[g], sizes[c]) for g, c in geoms):
        return False
    for g, _ in geoms:
        model.geom_friction[g, 0] = params.object_friction
    model.geom_surfacevel[model.geom(C.BELT_GEOM).id, 1] = -params.belt_speed
    for k, name in enumerate(C.ARM_JOINTS):
        dof = model.joint(name).dofadr[0]
        model.dof_damping[dof] = params.arm_damping[k]
        model.dof_armature[dof] = params.arm_armature[k]
        model.dof_frictionloss[dof] = params.arm_frictionloss[k]
        _write_position_gains(
            model, model.actuator(name).id, params.arm_kp[k], params.arm_kv[k], params.arm_force_limit[k]
        )
    for name in C.HAND_ACTUATORS:
        _write_position_gains(
            model, model.actuator(name).id, params.finger_kp, params.finger_kv, params.finger_force_limit
        )
    if samples > 0:
        model.actuator_delay[acts] = params.control_latency
    return True


def _write_position_gains(model: mujoco.MjModel, act: int, kp: float, kv: float, force_limit: float) -> None:
    # Same servo as _set_position_gains, written into a compiled model.
    model.actuator_gainprm[act, 0] = kp
    model.actuator_biasprm[act, 0:3] = [0.0, -kp, -kv]
    model.actuator_forcerange[act] = [-force_limit, force_limit]


@dataclasses.dataclass(frozen=True)
class SceneLayout:
    """Task geometry a demonstrator may know, read from the nominal model (the cell's drawing, not physics).

    Attributes:
        bin_centers: Centre of each bin's region per category (the box in which an object counts as in
            the bin), m (world frame).
        bin_half_size: Inner half-extent of a bin (x, y), m.
        belt_top: Height of the belt surface, m.
        belt_center_x: x of the belt's centre line, m.
        belt_half_width: Half-width of the belt, m.
        belt_upstream_y: y of the belt's upstream end, m (objects are queued downstream of it).
        hand_joint_range: (16, 2) finger joint limits, rad (order ``constants.HAND_JOINTS``).
        object_half_sizes: Nominal geom size per category (see ``object_half_sizes``).
        finger_base_x: Distance of the finger (index/middle/ring) flexion axes from the palm centre line, m.
        thumb_base_x: Same for the thumb's flexion axis, m.
        finger_length: Flexion axis to the centre of the fingertip pad, fingers, m.
        thumb_length: Flexion axis to the centre of the fingertip pad, thumb, m.
        tip_radius: Distance from a finger's axis to the face of its fingertip pad, m.
    """

    bin_centers: dict[str, np.ndarray]
    bin_half_size: np.ndarray
    belt_top: float
    belt_center_x: float
    belt_half_width: float
    belt_upstream_y: float
    hand_joint_range: np.ndarray
    object_half_sizes: dict[str, np.ndarray]
    finger_base_x: float
    thumb_base_x: float
    finger_length: float
    thumb_length: float
    tip_radius: float


@functools.lru_cache(maxsize=1)
def scene_layout() -> SceneLayout:
    """The nominal scene's layout (cached)."""
    params = WorldParams()
    m = _compiled(params, 1)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    bins = {}
    for c in C.CATEGORIES:
        s = m.site(C.BIN_SITES[c])
        bins[c] = d.site_xpos[s.id].copy()
    belt = m.site(C.BELT_SITE)
    # Hand geometry in the palm frame at zero joint angles (fingers straight along the approach axis).
    palm = m.body(f"{C.HAND_PREFIX}palm").id
    to_palm = lambda p: d.xmat[palm].reshape(3, 3).T @ (p - d.xpos[palm])  # noqa: E731
    mcp = to_palm(d.xanchor[m.joint(f"{C.HAND_PREFIX}mf_mcp").id])
    th_mcp = to_palm(d.xanchor[m.joint(f"{C.HAND_PREFIX}th_mcp").id])
    tip = to_palm(d.geom_xpos[m.geom(f"{C.HAND_PREFIX}mf_tip").id])
    th_tip = to_palm(d.geom_xpos[m.geom(f"{C.HAND_PREFIX}th_tip").id])
    return SceneLayout(
        bin_centers=bins,
        bin_half_size=m.site(C.BIN_SITES[C.CATEGORIES[0]]).size[:2].copy(),
        belt_top=float(belt.pos[2]),
        belt_center_x=float(belt.pos[0]),
        belt_half_width=float(belt.size[0]),
        belt_upstream_y=float(belt.pos[1] + belt.size[1]),
        hand_joint_range=m.jnt_range[[m.joint(n).id for n in C.HAND_JOINTS]].copy(),
        object_half_sizes=object_half_sizes(params),
        finger_base_x=float(mcp[0]),
        thumb_base_x=float(-th_mcp[0]),
        finger_length=float(tip[2] - mcp[2]),
        thumb_length=float(th_tip[2] - th_mcp[2]),
        tip_radius=float(abs(m.geom(f"{C.HAND_PREFIX}mf_tip").pos[0]) + m.geom(f"{C.HAND_PREFIX}mf_tip").size[0]),
    )
