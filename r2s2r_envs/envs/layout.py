"""How a PickSort episode starts: the objects' layout, their categories and physics, the arm, the belt.

:class:`LayoutMixin` is the reset half of :class:`~r2s2r_envs.envs.pick_sort.PickSortEnv`: the layout sampled from
the episode's layout stream (``envs.config.sample_layout``) or an operator's set-up (the ``setup`` reset option,
documented on the env), each object slot given its category (contacts, colour, mass, inertia, friction; per-object
variation is a hook a lab overrides), parked slots, the arm's posture, the open hand, the belt and the actuators'
state at the start.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import mujoco
import numpy as np

from r2s2r_envs.envs.config import ControlConfig, EpisodeRandomization, ObjectPlacement, sample_layout
from r2s2r_envs.envs.scene import SceneView
from r2s2r_envs.mappings import check_choice, check_keys
from r2s2r_envs.world import constants as C
from r2s2r_envs.world.builder import category_inertia
from r2s2r_envs.world.params import Bound, WorldParams, check_number

SETUP_KEYS = ("objects", "belt", "arm_qpos")
SETUP_OBJECT_KEYS = ("category", "position", "yaw")
# Where parked object slots rest (world frame, m): on the floor behind the robot, out of its reach.
_PARK_X, _PARK_Y0, _PARK_DY = -1.4, -1.6, 0.35


class LayoutMixin:
    """The start of an episode of a :class:`~r2s2r_envs.envs.pick_sort.PickSortEnv` (its only user)."""

    # What the env provides: its settings (``__init__``), the model and its view (``_build``, ``_resolve``), the
    # per-slot episode state it allocates (``__init__``) and the episode's layout stream (``reset``).
    num_objects: int
    randomization: EpisodeRandomization
    control: ControlConfig
    scene: SceneView
    _world: WorldParams
    _model: Any  # mujoco.MjModel
    _data: Any  # mujoco.MjData
    _obj_rgba: np.ndarray
    _object_sizes: dict[str, Any]
    _categories: list[int]
    _half_heights: list[float]
    _one_hot: np.ndarray
    _parked: frozenset[int]
    _belt_running: bool
    _belt_factor: float
    _layout_rng: np.random.Generator

    def _lay_out(self, setup: dict[str, Any] | None) -> None:
        """Set the episode's start in the simulation (part of ``reset``); ``setup``: the checked operator set-up."""
        m, d, s = self._model, self._data, self.scene
        mujoco.mj_resetData(m, d)
        layout = sample_layout(self._layout_rng, self.num_objects, s.belt_center_x, self.randomization)
        arm_noise = self._layout_rng.uniform(-1.0, 1.0, size=7) * self.randomization.arm_qpos_noise
        heights: list[float | None] = [None] * self.num_objects  # z given by the operator, m
        self._parked = frozenset()
        if setup is not None:
            layout, heights = self._setup_layout(setup, layout)
        for i, place in enumerate(layout):
            self._set_category(i, place.category)
        for i in self._parked:
            self._disable_contacts(i)
        mujoco.mj_setConst(m, d)  # masses changed; this also rewrites qpos, so the state is set after it
        mujoco.mj_resetData(m, d)

        if setup is not None and "arm_qpos" in setup:
            arm_q = np.asarray(setup["arm_qpos"], dtype=float)
        else:
            arm_q = np.clip(np.asarray(self.control.home_arm_qpos) + arm_noise, s.arm_range[:, 0], s.arm_range[:, 1])
        d.qpos[s.arm_qpos_adr] = arm_q
        d.ctrl[s.arm_actuators] = arm_q
        hand_q = self.open_hand_qpos()
        d.qpos[s.hand_qpos_adr] = hand_q
        d.ctrl[s.hand_actuators] = hand_q
        self._belt_running = setup is None or setup.get("belt", True)
        belt_speed = self._world.belt_speed if self._belt_running else 0.0
        for i, place in enumerate(layout):
            quat = (np.cos(place.yaw / 2), 0.0, 0.0, np.sin(place.yaw / 2))
            if i in self._parked:  # resting on the floor, out of reach
                s.set_object_pose(d, i, (place.x, place.y, self._half_heights[i] + 0.001), quat)
            elif (height := heights[i]) is not None:  # placed (or held) at a given height: starts at rest
                s.set_object_pose(d, i, (place.x, place.y, height), quat)
            else:
                s.set_object_pose(d, i, (place.x, place.y, s.belt_top + self._half_heights[i] + 0.001), quat)
                d.qvel[s.object_dof_adr[i] + 1] = -belt_speed
        self._belt_factor = 1.0
        m.geom_surfacevel[s.belt_geom, 1] = -belt_speed
        # Actuators with a command filter start settled at the reset command.
        filtered = np.flatnonzero(m.actuator_actadr >= 0)
        d.act[m.actuator_actadr[filtered]] = d.ctrl[filtered]
        # Fill the actuator delay buffers with the reset command, so a delayed line starts at rest.
        for act in np.flatnonzero(m.actuator_history[:, 0] > 0):
            values = np.full((int(m.actuator_history[act, 0]), 1), d.ctrl[act])
            mujoco.mj_initCtrlHistory(m, d, int(act), None, values)
        mujoco.mj_forward(m, d)

    def open_hand_qpos(self) -> np.ndarray:
        """Finger joint angles of the open hand, rad (order ``constants.HAND_JOINTS``)."""
        return np.clip(np.zeros(len(C.HAND_JOINTS)), self.scene.hand_range[:, 0], self.scene.hand_range[:, 1])

    # ------------------------------------------------------------------ objects
    def _set_category(self, i: int, category: int) -> None:
        m, s = self._model, self.scene
        for k, g in enumerate(s.object_geoms[i]):
            on = k == category
            m.geom_contype[g] = C.CONTACT_OBJECT if on else 0
            m.geom_conaffinity[g] = (C.CONTACT_STATIC | C.CONTACT_OBJECT | C.CONTACT_HAND) if on else 0
            m.geom_rgba[g] = self._obj_rgba[i, k] if on else (0.0, 0.0, 0.0, 0.0)
        body = s.object_body[i]
        m.body_contype[body] = C.CONTACT_OBJECT
        m.body_conaffinity[body] = C.CONTACT_STATIC | C.CONTACT_OBJECT | C.CONTACT_HAND
        name = C.CATEGORIES[category]
        mass_scale, friction_scale = self._object_physics(i, category)
        mass = self._world.object_mass[category] * mass_scale
        m.body_mass[body] = mass
        m.body_inertia[body] = category_inertia(name, mass, self._object_sizes[name])
        m.geom_friction[s.object_geoms[i, category], 0] = self._world.object_friction * friction_scale
        size = self._object_sizes[name]
        self._half_heights[i] = float(size[0] if name == "ball" else size[2])
        self._categories[i] = category
        self._one_hot[3 * i : 3 * i + 3] = 0.0
        self._one_hot[3 * i + category] = 1.0

    def _object_physics(self, i: int, category: int) -> tuple[float, float]:
        """(mass scale, friction scale) of object ``i`` this episode: 1 in a simulator, which has one value per
        category (the lab varies objects around it, from the physics stream)."""
        return 1.0, 1.0

    # ------------------------------------------------------------------ operator set-up
    def _check_setup(self, setup: Any) -> dict[str, Any]:
        """Validate the ``setup`` reset option (what a person in the room can do); see ``reset``."""
        if not isinstance(setup, Mapping):
            raise TypeError(f"reset option 'setup' must be a mapping with keys from {list(SETUP_KEYS)}, got {setup!r}")
        check_keys(setup, SETUP_KEYS, what="setup key", error=ValueError)
        out: dict[str, Any] = {}
        if "belt" in setup:
            if not isinstance(setup["belt"], (bool, np.bool_)):
                raise TypeError(f"setup 'belt' must be true (running) or false (stopped), got {setup['belt']!r}")
            out["belt"] = bool(setup["belt"])
        if "arm_qpos" in setup:
            arm_q = check_number("setup", "arm_qpos", setup["arm_qpos"], Bound(length=7, minimum=None))
            q = cast(tuple[float, ...], arm_q)  # a bound with a length gives a tuple
            lo, hi = self.scene.arm_range[:, 0], self.scene.arm_range[:, 1]
            bad = [k for k in range(7) if not lo[k] <= q[k] <= hi[k]]
            if bad:
                limits = [[round(float(a), 4), round(float(b), 4)] for a, b in zip(lo, hi)]
                raise ValueError(f"setup 'arm_qpos' joint(s) {bad} outside the joint limits {limits} (rad): {q!r}")
            out["arm_qpos"] = q
        if "objects" in setup:
            objects = setup["objects"]
            if isinstance(objects, (str, bytes, Mapping)) or not hasattr(objects, "__len__"):
                raise TypeError(f"setup 'objects' must be a list of mappings (category, position), got {objects!r}")
            if len(objects) > self.num_objects:
                raise ValueError(
                    f"setup 'objects' lists {len(objects)} objects but the env has num_objects={self.num_objects}"
                )
            checked = []
            for k, obj in enumerate(objects):
                where = f"setup objects[{k}]"
                if not isinstance(obj, Mapping):
                    raise TypeError(f"{where} must be a mapping with keys {list(SETUP_OBJECT_KEYS)}, got {obj!r}")
                # 'category' (one of C.CATEGORIES), 'position' ([x, y] or [x, y, z], m), optional 'yaw' (rad).
                check_keys(
                    obj, SETUP_OBJECT_KEYS, what="key", where=where, required=("category", "position"), error=ValueError
                )
                check_choice(obj["category"], C.CATEGORIES, what="category", where=where)
                pos = obj["position"]
                n = len(pos) if hasattr(pos, "__len__") and not isinstance(pos, (str, bytes)) else 0
                if n not in (2, 3):
                    raise ValueError(f"{where}: position must be [x, y] or [x, y, z] in m (world frame), got {pos!r}")
                pos = check_number(where, "position", pos, Bound(length=n, minimum=None))
                yaw = check_number(where, "yaw", obj.get("yaw", 0.0), Bound(minimum=None))
                checked.append({"category": obj["category"], "position": pos, "yaw": yaw})
            out["objects"] = checked
        return out

    def _setup_layout(
        self, setup: dict[str, Any], layout: list[ObjectPlacement]
    ) -> tuple[list[ObjectPlacement], list[float | None]]:
        """The episode's objects under an operator set-up: listed objects where placed, the others parked."""
        if "objects" not in setup:
            return layout, [None] * self.num_objects
        placed, heights = [], []
        for i in range(self.num_objects):
            if i < len(setup["objects"]):
                obj = setup["objects"][i]
                pos = obj["position"]
                placed.append(ObjectPlacement(C.CATEGORIES.index(obj["category"]), pos[0], pos[1], obj["yaw"]))
                heights.append(pos[2] if len(pos) == 3 else None)
            else:
                placed.append(ObjectPlacement(layout[i].category, _PARK_X, _PARK_Y0 + _PARK_DY * i, 0.0))
                heights.append(None)
        self._parked = frozenset(range(len(setup["objects"]), self.num_objects))
        return placed, heights

    def _disable_contacts(self, i: int) -> None:
        # A parked object touches only static geometry (the floor it rests on): never the robot or other objects.
        m, s = self._model, self.scene
        g = s.object_geoms[i, self._categories[i]]
        m.geom_contype[g] = 0
        m.geom_conaffinity[g] = C.CONTACT_STATIC
        m.body_contype[s.object_body[i]] = 0
        m.body_conaffinity[s.object_body[i]] = C.CONTACT_STATIC
