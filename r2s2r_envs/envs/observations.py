"""What a PickSort env observes: the observation space and each step's observation.

:class:`ObservationMixin` is the sensing half of :class:`~r2s2r_envs.envs.pick_sort.PickSortEnv`: the joint and
object keys read from the simulation, the world's sensor noise and perception offset, the object estimator that
perceives the objects instead where the world (or a lab) has one (``envs.perception``; its cameras and delay
variation are hooks a lab overrides), the opt-in extra sensors (``SENSORS``) and the camera images, rendered with the
env's appearance (``world.appearance``: the spec sheet in a simulator, a hook a lab overrides, changed by the
condition) and passed through its cameras' sensor.  The keys and their units are documented on the env.
"""

from __future__ import annotations

import os
from typing import Any

import mujoco
import numpy as np
from gymnasium import spaces

from r2s2r_envs.envs.conditions import Condition
from r2s2r_envs.envs.perception import ObjectEstimator, PerceptionCamera
from r2s2r_envs.envs.scene import SceneView
from r2s2r_envs.world import constants as C
from r2s2r_envs.world.appearance import SPEC_SHEET, Appearance, CameraAppearance, sensor_image
from r2s2r_envs.world.builder import spec_camera_position
from r2s2r_envs.world.params import WorldParams

OBS_MODES = ("state", "rgb", "state+rgb")
_PROPRIO_KEYS = ("arm_qpos", "arm_qvel", "hand_qpos", "hand_qvel", "eef_pos", "eef_quat")
IMAGE_KEYS = ("scene_image", "wrist_image")
#: Opt-in extra sensors (``sensors=``): what a real cell's drivers report beyond joint encoders.
SENSORS = ("arm_torque", "finger_current", "object_visible")
# Child of an episode's root seed sequence that seeds the object estimator (children 0-3: layout, physics,
# sensors, extra sensors), so the estimator's draws never shift another stream.
_PERCEPTION_STREAM = 4
# Child of the episode's seed sequence that seeds the cameras' sensor noise, one draw per (step, camera): an image's
# noise depends on neither the other camera nor how often it was rendered (5 is the lab's effects).
_IMAGE_STREAM = 6

# Pid of the process that created the first GL context, for the fork check in ``_render_camera``.
_GL_OWNER_PID: int | None = None


class ObservationMixin:
    """The observation of a :class:`~r2s2r_envs.envs.pick_sort.PickSortEnv` (its only user)."""

    # What the env provides: its settings (``__init__``), the model's view and timing (``_resolve``), the views of
    # the simulation state (``_bind_data``) and the episode's random streams and categories (``reset``).
    obs_mode: str
    num_objects: int
    sensors: tuple[str, ...]
    image_size: int
    dt: float
    scene: SceneView
    condition: Condition
    _steps: int
    _world: WorldParams
    _model: Any  # mujoco.MjModel
    _data: Any  # mujoco.MjData
    _qpos: np.ndarray
    _qvel: np.ndarray
    _tcp_xpos: np.ndarray
    _tcp_xmat: np.ndarray
    _one_hot: np.ndarray
    _sensor_rng: np.random.Generator
    _extra_sensor_rng: np.random.Generator
    _perception_rng: np.random.Generator
    _renderers: dict[tuple[int, int], mujoco.Renderer]

    def _resolve_observations(self) -> None:
        """Everything a step's observation needs of the model and the world (part of ``_resolve``)."""
        # Sensors: noise scale per measured quantity, so a step draws one vector whatever the obs_mode.
        w, n = self._world, self.num_objects
        self._noise_scale = np.concatenate(
            [
                np.full(7 + 16, w.joint_pos_noise),
                np.full(7 + 16, w.joint_vel_noise),
                np.full(3, w.eef_pos_noise),
                np.full(3 * n, w.object_pos_noise),
                np.full(3 * n, w.object_vel_noise),
            ]
        )
        self._noisy = bool(np.any(self._noise_scale > 0))
        self._extra_noise = {"arm_torque": w.arm_torque_noise, "finger_current": w.finger_current_noise}
        self._pos_offset = np.tile(np.asarray(w.object_pos_offset, dtype=np.float32), n)
        self._offset = bool(np.any(self._pos_offset != 0))
        self._perception = self._make_perception()
        look = self._scene_appearance()
        self._camera_sensors: dict[str, CameraAppearance] = {
            camera: look.camera(camera)
            for camera in C.CAMERAS
            if look is not None and look.camera(camera).sensor_effects
        }
        if self._perception is not None:
            # The estimator perceives the objects (its noise, offset and delay): the sensor stream still draws
            # the same amount, with zero scale on the objects.
            self._noise_scale[-6 * n :] = 0.0
            self._noisy = bool(np.any(self._noise_scale > 0))
            self._offset = False
        # Observation reads: the joint and object keys from qpos in one fancy-indexing read, those from qvel in
        # another (``_get_obs`` hands out slices of the two).
        s, objects = self.scene, self.obs_mode != "rgb"
        self._obs_qpos_idx = np.concatenate(
            [s.arm_qpos_adr, s.hand_qpos_adr] + ([s.object_pos_idx, s.object_quat_idx] if objects else [])
        )
        self._obs_qvel_idx = np.concatenate([s.arm_dof_adr, s.hand_dof_adr] + ([s.object_vel_idx] if objects else []))
        # Where the arm's and the hand's keys end in both reads (hinge joints: one qpos and one dof each).
        self._obs_arm_end = len(s.arm_qpos_adr)
        self._obs_hand_end = self._obs_arm_end + len(s.hand_qpos_adr)

    def _make_observation_space(self) -> spaces.Dict:
        n = self.num_objects
        inf = np.inf
        box = lambda size, lo=-inf, hi=inf: spaces.Box(lo, hi, shape=(size,), dtype=np.float32)  # noqa: E731
        keys: dict[str, spaces.Space] = {
            "arm_qpos": box(7),
            "arm_qvel": box(7),
            "hand_qpos": box(len(C.HAND_JOINTS)),
            "hand_qvel": box(len(C.HAND_JOINTS)),
            "eef_pos": box(3),
            "eef_quat": box(4, -1.0, 1.0),
        }
        if self.obs_mode in ("state", "state+rgb"):
            keys |= {
                "object_pos": box(3 * n),
                "object_quat": box(4 * n, -1.0, 1.0),
                "object_vel": box(6 * n),
                "object_category": box(3 * n, 0.0, 1.0),
            }
        if "arm_torque" in self.sensors:
            keys["arm_torque"] = box(7)
        if "finger_current" in self.sensors:
            keys["finger_current"] = box(len(C.HAND_JOINTS))
        if "object_visible" in self.sensors:
            keys["object_visible"] = box(n, 0.0, 1.0)
        if self.obs_mode in ("rgb", "state+rgb"):
            s = self.image_size
            for k in IMAGE_KEYS:
                keys[k] = spaces.Box(0, 255, shape=(s, s, 3), dtype=np.uint8)
        return spaces.Dict(keys)

    # ------------------------------------------------------------------ observation
    def _get_obs(self) -> dict[str, np.ndarray]:
        f32 = np.float32
        # Two reads for the joint and object keys (``_resolve_observations``): arm, hand, objects; each key a slice.
        q = self._qpos[self._obs_qpos_idx].astype(f32)
        v = self._qvel[self._obs_qvel_idx].astype(f32)
        arm, hand = self._obs_arm_end, self._obs_hand_end
        tcp_quat = np.empty(4)  # scene.tcp_quat, from the bound view
        mujoco.mju_mat2Quat(tcp_quat, self._tcp_xmat)
        obs = {
            "arm_qpos": q[:arm],
            "arm_qvel": v[:arm],
            "hand_qpos": q[arm:hand],
            "hand_qvel": v[arm:hand],
            "eef_pos": self._tcp_xpos.astype(f32),
            "eef_quat": tcp_quat.astype(f32),
        }
        state = self.obs_mode != "rgb"
        if state:
            quat = hand + 3 * self.num_objects
            obs["object_pos"] = q[hand:quat]
            obs["object_quat"] = q[quat:]
            obs["object_vel"] = v[hand:]
            obs["object_category"] = self._one_hot.copy()
        if self._noisy:
            self._add_sensor_noise(obs, state)
        if self._offset and state:
            obs["object_pos"] += self._pos_offset
        if self._perception is not None and state:
            seen = self._perception.observe(
                obs["object_pos"],
                obs["object_quat"],
                obs["object_vel"],
                self._tcp_xpos,
                self._one_hot,
                self._perception_rng,
            )
            visible = seen.pop("object_visible")
            obs.update(seen)
            if "object_visible" in self.sensors:
                obs["object_visible"] = visible
        elif "object_visible" in self.sensors and state:
            obs["object_visible"] = np.ones(self.num_objects, dtype=np.float32)  # exact perception sees everything
        if self.sensors:
            self._add_extra_sensors(obs)
        if self.obs_mode != "state":
            size = self.image_size
            obs["scene_image"] = self._render_camera(C.SCENE_CAMERA, size, size)
            obs["wrist_image"] = self._render_camera(C.WRIST_CAMERA, size, size)
        return obs

    def _add_sensor_noise(self, obs: dict[str, np.ndarray], state: bool) -> None:
        # One draw of the same size in every obs_mode, so the sensor stream (and the proprioception noise) does
        # not depend on whether objects are perceived.
        z = (self._sensor_rng.standard_normal(len(self._noise_scale)) * self._noise_scale).astype(np.float32)
        n = self.num_objects
        obs["arm_qpos"] += z[0:7]
        obs["hand_qpos"] += z[7:23]
        obs["arm_qvel"] += z[23:30]
        obs["hand_qvel"] += z[30:46]
        obs["eef_pos"] += z[46:49]
        if state:
            obs["object_pos"] += z[49 : 49 + 3 * n]
            vel = obs["object_vel"].reshape(n, 6)
            vel[:, :3] += z[49 + 3 * n :].reshape(n, 3)

    def _add_extra_sensors(self, obs: dict[str, np.ndarray]) -> None:
        # Measured actuator effort (a Panda's joint torque sensors, the finger servos' current as torque), with
        # white noise drawn from its own stream.
        d, s = self._data, self.scene
        for key, idx in (("arm_torque", s.arm_u), ("finger_current", s.hand_u)):
            if key in self.sensors:
                value = d.actuator_force[idx].astype(np.float32)
                if self._extra_noise[key] > 0.0:
                    value += (self._extra_sensor_rng.standard_normal(len(value)) * self._extra_noise[key]).astype(
                        np.float32
                    )
                obs[key] = value

    # ------------------------------------------------------------------ perception (hooks overridden by the lab)
    def _perception_cameras(self) -> tuple[PerceptionCamera, ...] | None:
        """The cameras the object estimator sees through, or None: in a simulator, the scene camera, and only
        when the world has a non-nominal estimator (``WorldParams.perceives``).  A lab may have its own."""
        return None

    def _perception_jitter(self) -> float:
        """Standard deviation of the estimator's per-frame delay variation, s (0 in a simulator)."""
        return 0.0

    def _make_perception(self) -> ObjectEstimator | None:
        cameras = self._perception_cameras()
        if cameras is None:
            if not self._world.perceives:
                return None
            position = spec_camera_position(C.SCENE_CAMERA)  # the spec sheet's, wherever the appearance moves it
            cameras = (PerceptionCamera(position=(float(position[0]), float(position[1]), float(position[2]))),)
        return ObjectEstimator(self._world, cameras, self.dt, self.num_objects, self._perception_jitter())

    def _seed_perception(self, entropy: int) -> None:
        """Seed the object estimator's own stream from the episode's entropy (at reset; with an estimator)."""
        if self._perception is not None:
            self._perception_rng = np.random.default_rng(
                np.random.SeedSequence(entropy, spawn_key=(_PERCEPTION_STREAM,))
            )

    def _reset_perception(self) -> None:
        """Start the object estimator from the episode's initial state (at reset, after the layout is set)."""
        d, s = self._data, self.scene
        if self._perception is not None:
            self._perception.reset(
                d.qpos[s.object_pos_idx], d.qpos[s.object_quat_idx], d.qvel[s.object_vel_idx], d.site_xpos[s.tcp_site]
            )

    # ------------------------------------------------------------------ appearance (a hook overridden by the lab)
    def _appearance(self) -> Appearance:
        """How the cell looks before the condition changes it (``world.appearance``): the spec sheet in a simulator;
        a lab has its own."""
        return SPEC_SHEET

    def _scene_appearance(self) -> Appearance | None:
        """The appearance the env's model is built with and its cameras see: ``_appearance()`` under the condition
        (``None``: the spec sheet, the builder's plain model, as before appearances existed)."""
        look = self.condition.apply_appearance(self._appearance())
        return None if look == SPEC_SHEET else look

    # ------------------------------------------------------------------ cameras
    def _render_camera(self, camera: str, height: int, width: int) -> np.ndarray:
        global _GL_OWNER_PID
        key = (height, width)
        renderer = self._renderers.get(key)
        if renderer is None:
            _check_not_forked_after_gl()
            renderer = mujoco.Renderer(self._model, height=height, width=width)
            self._renderers[key] = renderer
            if _GL_OWNER_PID is None:
                _GL_OWNER_PID = os.getpid()
        renderer.update_scene(self._data, camera=camera)
        image = renderer.render().copy()
        sensor = self._camera_sensors.get(camera)
        if sensor is None:
            return image
        entropy = getattr(self, "_episode_entropy", 0)  # 0 before the first reset
        stream = np.random.SeedSequence(entropy, spawn_key=(_IMAGE_STREAM, self._steps, C.CAMERAS.index(camera)))
        return sensor_image(image, sensor, np.random.default_rng(stream))


def _check_not_forked_after_gl() -> None:
    # A process forked after its parent created an EGL/OSMesa context inherits that GL state, and creating a
    # context in the child then hangs.  Fail at once with the fix instead.
    if _GL_OWNER_PID is not None and _GL_OWNER_PID != os.getpid():
        raise RuntimeError(
            "this process was forked from one that had already rendered with MuJoCo; a GL context cannot be "
            "created after such a fork (it would hang). Start worker processes with the 'spawn' or 'forkserver' "
            "method, e.g. gymnasium.vector.AsyncVectorEnv(env_fns, context='spawn') or "
            "gymnasium.make_vec(id, vectorization_mode='async', vector_kwargs={'context': 'spawn'})"
        )
