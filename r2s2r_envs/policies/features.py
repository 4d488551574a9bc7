"""Feature stages: what a policy sees, computed from the observation alone (numpy; no torch, no simulator).

A feature stage maps stacked raw observations ``{key: (B, F, ...)}`` (the loader's samples at training, the
:class:`~r2s2r_envs.policies.pipeline.FrameStacker`'s stack at inference) to one feature array ``(B, F, D)``.
The same function runs in training and at inference, on observations only: it never reads simulator state, so
it runs unchanged on the lab's observations (docs/concepts.md, "Honesty rules").

Three stages (:data:`FEATURE_SETS`):

* ``"raw"``: the observation keys concatenated as they are, in a fixed order (the first policies' input).
* ``"proprio"`` (:class:`ProprioFeatures`): the same, of the robot's own keys only (:data:`PROPRIO_KEYS`: joint
  encoders and the hand's pose computed from them, and the opt-in torque and current sensors where the data has
  them, :data:`ROBOT_SENSOR_KEYS`). Object poses, categories and visibility are the object estimator's output,
  privileged perception in this benchmark; an image policy reads its cameras and this stage, nothing else.
* ``"task"`` (:class:`TaskFeatures`): the hand's pose with a continuous rotation (two columns of the rotation
  matrix instead of a quaternion, whose sign is arbitrary: ``eef_quat`` flips from ``q`` to ``-q`` where the
  hand yaws through about -90 degrees), proprioception, and the objects *relative to the hand*, next object
  first. Each object's status (on the belt, held, in a bin, elsewhere) is inferred from its perceived position
  against the cell's fixed geometry (belt and bin boxes), as a robot would infer it from its sensors; the
  order (held first, then reachable objects on the belt from the most downstream, then the rest) is decided on
  the stack's newest frame and used for every frame of the stack, so a slot holds one object across its frames.
  Per object: position relative to the hand and in the world, velocity, category, status, its yaw relative to
  the hand's with the symmetries of the shapes (``sin``/``cos`` of 2 and 4 times the angle: a bar looks the same
  after half a turn, a cube after a quarter), and its category's bin relative to the hand. Where the observations
  carry ``object_visible`` (the estimator's visibility, :data:`VISIBILITY_KEY`), each object's flag is one more
  feature: a hidden object keeps its last estimate, and the flag tells "not seen" from "here".

The cell's geometry (:class:`CellGeometry`) is that of the scene (belt, bins), the same in every world: worlds
change physics, sensing and the operator, not where the belt and bins are.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np

from r2s2r_envs.world.constants import REACH_LIMIT_Y

FeatureSet = Literal["raw", "task", "proprio"]
#: The feature stages a policy can be trained with.
FEATURE_SETS: tuple[str, ...] = ("raw", "task", "proprio")
#: The stages that concatenate observation keys as they are (normalized key by key with the stored statistics).
KEYWISE_SETS: tuple[str, ...] = ("raw", "proprio")
#: The robot's own observation keys, which every ``obs_mode`` of PickSort has (its docstring's table: "all").
PROPRIO_KEYS: tuple[str, ...] = ("arm_qpos", "arm_qvel", "hand_qpos", "hand_qvel", "eef_pos", "eef_quat")
#: The robot's opt-in sensors (``sensors=``; the drivers' joint torques and finger currents): proprioception too.
ROBOT_SENSOR_KEYS: tuple[str, ...] = ("arm_torque", "finger_current")

#: Observation keys the task features read.
TASK_KEYS: tuple[str, ...] = (
    "arm_qpos",
    "arm_qvel",
    "hand_qpos",
    "hand_qvel",
    "eef_pos",
    "eef_quat",
    "object_pos",
    "object_quat",
    "object_vel",
    "object_category",
)
#: The optional key the task features read when the observations carry it (the object estimator's visibility).
VISIBILITY_KEY = "object_visible"
_PROPRIO = ("arm_qpos", "arm_qvel", "hand_qpos", "hand_qvel")
_CATEGORIES = 3
_STATUSES = ("belt", "held", "bin", "elsewhere")
_PER_OBJECT = 3 + 3 + 3 + _CATEGORIES + len(_STATUSES) + 4 + 3


class FeatureError(ValueError):
    """Observations that a feature stage cannot use (a key it needs is missing, or of the wrong shape)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class CellGeometry:
    """The fixed geometry of the work cell the task features compare perceived positions with (m, world frame).

    Attributes:
        belt_top: height of the belt surface.
        belt_center_x: x of the belt's centre line.
        belt_half_width: half-width of the belt.
        belt_band: height above the belt top within which an object counts as riding the belt.
        bin_center: (3, 3) centre of each bin's region, in category order (cube, ball, bar).
        bin_half_size: (3, 3) half-extents of each bin's region.
        reach_limit_y: objects on the belt downstream of this y are past the arm's picking zone (the
            demonstrators' ``world.constants.REACH_LIMIT_Y``).
        hold_distance: an object off the belt and out of the bins within this distance of the hand counts as held.
    """

    belt_top: float
    belt_center_x: float
    belt_half_width: float
    belt_band: float = 0.08
    bin_center: np.ndarray
    bin_half_size: np.ndarray
    reach_limit_y: float = REACH_LIMIT_Y
    hold_distance: float = 0.1

    @classmethod
    @functools.cache
    def nominal(cls) -> CellGeometry:
        """The scene's geometry (read once from the nominal model)."""
        from r2s2r_envs.world.builder import build_model, scene_layout
        from r2s2r_envs.world.constants import BIN_SITES, CATEGORIES
        from r2s2r_envs.world.params import WorldParams

        lay = scene_layout()
        model = build_model(WorldParams(), 1)
        half = np.stack([model.site(BIN_SITES[c]).size[:3] for c in CATEGORIES])  # each bin's region, as the rules
        return cls(
            belt_top=lay.belt_top,
            belt_center_x=lay.belt_center_x,
            belt_half_width=lay.belt_half_width,
            bin_center=np.stack([lay.bin_centers[c] for c in CATEGORIES]),
            bin_half_size=half.astype(np.float64),
        )


class RawFeatures:
    """The observation keys concatenated per frame, in ``keys`` order (``(B, F, sum of key sizes)``).

    Args:
        keys: the low-dimensional observation keys.
        shapes: each key's shape (without batch and frame axes).
    """

    name = "raw"

    def __init__(self, keys: Sequence[str], shapes: Mapping[str, Sequence[int]]) -> None:
        self.keys = list(keys)
        self.sizes = [int(np.prod(shapes[k])) for k in self.keys]

    @property
    def dim(self) -> int:
        """Features per frame."""
        return sum(self.sizes)

    def names(self) -> list[str]:
        """One name per feature, ``key[i]``."""
        return [f"{k}[{i}]" for k, n in zip(self.keys, self.sizes) for i in range(n)]

    def __call__(self, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        parts = [np.asarray(obs[k], dtype=np.float32).reshape(*np.shape(obs[k])[:2], -1) for k in self.keys]
        return np.concatenate(parts, axis=-1)


class ProprioFeatures(RawFeatures):
    """The robot's own observation keys concatenated per frame (``(B, F, sum of key sizes)``).

    Args:
        keys: the keys, each one of :data:`PROPRIO_KEYS` or :data:`ROBOT_SENSOR_KEYS`.
        shapes: each key's shape (without batch and frame axes).

    Raises:
        FeatureError: a key that is not the robot's own (the message names it and the keys allowed).
    """

    name = "proprio"

    def __init__(self, keys: Sequence[str], shapes: Mapping[str, Sequence[int]]) -> None:
        robot = (*PROPRIO_KEYS, *ROBOT_SENSOR_KEYS)
        other = [k for k in keys if k not in robot]
        if other:
            raise FeatureError(
                f"features='proprio' reads the robot's own keys {list(robot)}; {other} are not (object state is "
                "privileged perception): drop them from obs_keys, or train with features='raw'"
            )
        super().__init__(keys, shapes)


class TaskFeatures:
    """Hand-relative, next-object-first features (see the module docstring), ``(B, F, 55 + 23 N)`` for N objects
    (``55 + 24 N`` with visibility).

    Args:
        num_objects: objects per observation (``object_pos`` holds ``3 N`` numbers).
        geometry: the cell's geometry (default: the scene's).
        visibility: read ``object_visible`` (N,) too: one more feature per object.
    """

    name = "task"

    def __init__(self, num_objects: int, geometry: CellGeometry | None = None, *, visibility: bool = False) -> None:
        if num_objects < 1:
            raise FeatureError(f"task features need at least one object, got num_objects={num_objects}")
        self.num_objects = int(num_objects)
        self.geometry = geometry or CellGeometry.nominal()
        self.visibility = bool(visibility)

    @property
    def keys(self) -> list[str]:
        """The observation keys the stage reads."""
        return task_keys([VISIBILITY_KEY] if self.visibility else [])

    @classmethod
    def for_shapes(cls, shapes: Mapping[str, Sequence[int]]) -> TaskFeatures:
        """The stage for observations of these shapes (with visibility where they have ``object_visible``).

        Raises:
            FeatureError: a key the task features need is missing (the message names it and what the data has) or
                the object keys disagree on the number of objects.
        """
        missing = [k for k in TASK_KEYS if k not in shapes]
        if missing:
            raise FeatureError(
                f"features='task' needs observation key(s) {missing}, which the data lacks (it has {sorted(shapes)}); "
                "record state observations (obs_mode 'state') or train with features='raw'"
            )
        sizes = {k: int(np.prod(shapes[k])) for k in ("object_pos", "object_quat", "object_vel", "object_category")}
        n = sizes["object_pos"] // 3
        expected = {"object_pos": 3 * n, "object_quat": 4 * n, "object_vel": 6 * n, "object_category": 3 * n}
        if n < 1 or sizes != expected:
            raise FeatureError(f"object observation sizes {sizes} do not describe one number of objects")
        visibility = VISIBILITY_KEY in shapes
        if visibility and int(np.prod(shapes[VISIBILITY_KEY])) != n:
            raise FeatureError(
                f"{VISIBILITY_KEY} has {int(np.prod(shapes[VISIBILITY_KEY]))} numbers, not one per object ({n})"
            )
        return cls(n, visibility=visibility)

    @property
    def dim(self) -> int:
        """Features per frame."""
        return 3 + 6 + 7 + 7 + 16 + 16 + (_PER_OBJECT + int(self.visibility)) * self.num_objects

    def names(self) -> list[str]:
        """One name per feature (in order)."""
        names = [f"eef_pos[{i}]" for i in range(3)] + [f"eef_rot6[{i}]" for i in range(6)]
        names += [f"{k}[{i}]" for k, n in zip(_PROPRIO, (7, 7, 16, 16)) for i in range(n)]
        per = (
            [f"rel_pos[{i}]" for i in range(3)]
            + [f"pos[{i}]" for i in range(3)]
            + [f"vel[{i}]" for i in range(3)]
            + [f"category[{c}]" for c in ("cube", "ball", "bar")]
            + [f"status[{s}]" for s in _STATUSES]
            + ["yaw_sin2", "yaw_cos2", "yaw_sin4", "yaw_cos4"]
            + [f"bin_rel[{i}]" for i in range(3)]
            + (["visible"] if self.visibility else [])
        )
        return names + [f"object{k}.{p}" for k in range(self.num_objects) for p in per]

    def status(self, pos: np.ndarray, tcp: np.ndarray) -> np.ndarray:
        """One-hot status ``(..., N, 4)`` (belt, held, bin, elsewhere) of objects at ``pos`` ``(..., N, 3)``."""
        g = self.geometry
        x, z = pos[..., 0], pos[..., 2]
        on_belt = (np.abs(x - g.belt_center_x) < g.belt_half_width) & (z > g.belt_top) & (z < g.belt_top + g.belt_band)
        lo = g.bin_center - g.bin_half_size
        hi = g.bin_center + g.bin_half_size
        p = pos[..., None, :]  # (..., N, 1, 3) against (3 bins, 3)
        in_bin = np.any(np.all((p >= lo) & (p <= hi), axis=-1), axis=-1) & ~on_belt
        near = np.linalg.norm(pos - tcp[..., None, :], axis=-1) < g.hold_distance
        held = near & ~on_belt & ~in_bin
        elsewhere = ~(on_belt | in_bin | held)
        return np.stack([on_belt, held, in_bin, elsewhere], axis=-1).astype(np.float32)

    def order(self, pos: np.ndarray, status: np.ndarray) -> np.ndarray:
        """Slot order ``(B, N)`` from one frame: held, reachable on the belt (most downstream first), the rest."""
        on_belt, held = status[..., 0] > 0, status[..., 1] > 0
        reachable = on_belt & (pos[..., 1] > self.geometry.reach_limit_y)
        rank = np.where(held, 0, np.where(reachable, 1, np.where(on_belt, 2, np.where(status[..., 2] > 0, 3, 4))))
        # y spans a few metres: rank * 100 keeps the classes apart, y orders within a class.
        return np.argsort(rank * 100.0 + np.clip(pos[..., 1], -49.0, 49.0), axis=-1, kind="stable")

    def __call__(self, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        """Features ``(B, F, dim)`` float32 of stacked observations ``{key: (B, F, ...)}``."""
        n = self.num_objects
        tcp = np.asarray(obs["eef_pos"], dtype=np.float64)
        b, f = tcp.shape[:2]
        rot = quat_to_matrix(np.asarray(obs["eef_quat"], dtype=np.float64))  # (B, F, 3, 3)
        rot6 = np.concatenate([rot[..., :, 0], rot[..., :, 1]], axis=-1)
        hand_yaw = np.arctan2(rot[..., 1, 0], rot[..., 0, 0])
        proprio = [np.asarray(obs[k], dtype=np.float64).reshape(b, f, -1) for k in _PROPRIO]

        pos = np.asarray(obs["object_pos"], dtype=np.float64).reshape(b, f, n, 3)
        vel = np.asarray(obs["object_vel"], dtype=np.float64).reshape(b, f, n, 6)[..., :3]
        cat = np.asarray(obs["object_category"], dtype=np.float64).reshape(b, f, n, _CATEGORIES)
        obj_rot = quat_to_matrix(np.asarray(obs["object_quat"], dtype=np.float64).reshape(b, f, n, 4))
        obj_yaw = np.arctan2(obj_rot[..., 1, 0], obj_rot[..., 0, 0])
        status = self.status(pos, tcp)
        columns = [pos, vel, cat, status]
        if self.visibility:
            columns.append(np.asarray(obs[VISIBILITY_KEY], dtype=np.float64).reshape(b, f, n, 1))

        order = self.order(pos[:, -1], status[:, -1])  # the newest frame decides, for every frame
        take = order[:, None, :, None]
        pos, vel, cat, status, *seen = (np.take_along_axis(a, take, axis=2) for a in columns)
        obj_yaw = np.take_along_axis(obj_yaw, order[:, None, :], axis=2)

        rel = pos - tcp[:, :, None, :]
        dyaw = obj_yaw - hand_yaw[..., None]
        yaw = np.stack([np.sin(2 * dyaw), np.cos(2 * dyaw), np.sin(4 * dyaw), np.cos(4 * dyaw)], axis=-1)
        bins = self.geometry.bin_center[np.argmax(cat, axis=-1)]  # (B, F, N, 3)
        bin_rel = bins - tcp[:, :, None, :]
        objects = np.concatenate([rel, pos, vel, cat, status, yaw, bin_rel, *seen], axis=-1).reshape(b, f, -1)
        return np.concatenate([tcp, rot6, *proprio, objects], axis=-1).astype(np.float32)


def quat_to_matrix(q: np.ndarray) -> np.ndarray:
    """Rotation matrices ``(..., 3, 3)`` of unit quaternions ``(..., 4)`` (w, x, y, z); ``q`` and ``-q`` agree."""
    q = q / np.maximum(np.linalg.norm(q, axis=-1, keepdims=True), 1e-12)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return np.stack(
        [
            np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], axis=-1),
            np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], axis=-1),
            np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], axis=-1),
        ],
        axis=-2,
    )


def task_keys(available: Sequence[str]) -> list[str]:
    """The keys the ``"task"`` stage reads from observations with keys ``available``: :data:`TASK_KEYS`, and
    :data:`VISIBILITY_KEY` where available."""
    return [*TASK_KEYS, VISIBILITY_KEY] if VISIBILITY_KEY in available else list(TASK_KEYS)


def proprio_keys(available: Sequence[str]) -> list[str]:
    """The keys the ``"proprio"`` stage reads by default from observations with keys ``available``:
    :data:`PROPRIO_KEYS`, and :data:`ROBOT_SENSOR_KEYS` where available."""
    return [*PROPRIO_KEYS, *(k for k in ROBOT_SENSOR_KEYS if k in available)]


def make_features(name: str, keys: Sequence[str], shapes: Mapping[str, Sequence[int]]) -> RawFeatures | TaskFeatures:
    """The feature stage ``name`` (one of :data:`FEATURE_SETS`) for observations with these keys and shapes.

    Raises:
        FeatureError: an unknown name (the message lists :data:`FEATURE_SETS`), or observations the stage cannot
            use.
    """
    if name == "raw":
        return RawFeatures(keys, shapes)
    if name == "task":
        return TaskFeatures.for_shapes({k: shapes[k] for k in keys if k in shapes})
    if name == "proprio":
        return ProprioFeatures(keys, shapes)
    raise FeatureError(f"unknown feature set {name!r}; choose one of {list(FEATURE_SETS)}")
