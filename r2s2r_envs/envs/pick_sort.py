"""The PickSort environment: sort objects riding a conveyor into bins with a 7-DoF arm and a 16-joint hand.

This module is the Gymnasium glue: spaces, reset, step, observations, rewards and ``info``.  The controllers
live in ``envs.controller``, the outcome rules in ``envs.outcomes``, the named view of the scene in
``envs.scene`` and the seeding convention in ``envs.seeding``.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, cast

import gymnasium as gym
import mujoco
import numpy as np
from gymnasium import spaces

from r2s2r_envs.envs import outcomes as rules_mod
from r2s2r_envs.envs.conditions import IDENTITY_SHAPE, Condition, get_condition
from r2s2r_envs.envs.config import (
    REWARD_MODES,
    ControlConfig,
    EpisodeRandomization,
    ObjectPlacement,
    RewardWeights,
    replace_checked,
    sample_layout,
)
from r2s2r_envs.envs.controller import CONTROL_MODES, N_FINGER, finger_scale, finger_targets, make_controller
from r2s2r_envs.envs.file_arguments import WORLD_FILE, FileArgument
from r2s2r_envs.envs.outcomes import FAILURE_CAUSES, OUTCOMES, OutcomeRules, TaskGeometry
from r2s2r_envs.envs.perception import ObjectEstimator, PerceptionCamera
from r2s2r_envs.envs.scene import SceneView
from r2s2r_envs.world import constants as C
from r2s2r_envs.world.builder import build_model, category_inertia, object_half_sizes, update_model
from r2s2r_envs.world.params import Bound, WorldParams, check_number
from r2s2r_envs.world.presets import load_world

OBS_MODES = ("state", "rgb", "state+rgb")
DEFAULT_EPISODE_STEPS = 500
MAX_OBJECTS = 8

_PROPRIO_KEYS = ("arm_qpos", "arm_qvel", "hand_qpos", "hand_qvel", "eef_pos", "eef_quat")
IMAGE_KEYS = ("scene_image", "wrist_image")
ENV_ARGUMENTS = (
    "world",
    "obs_mode",
    "num_objects",
    "image_size",
    "render_mode",
    "render_size",
    "reward_mode",
    "randomization",
    "demonstrator",
    "episode_steps",
    "control_mode",
    "sensors",
    "condition",
)
RESET_OPTIONS = ("world", "setup")
#: Opt-in extra sensors (``sensors=``): what a real cell's drivers report beyond joint encoders.
SENSORS = ("arm_torque", "finger_current", "object_visible")
# Child of an episode's root seed sequence that seeds the object estimator (children 0-3: layout, physics,
# sensors, extra sensors), so the estimator's draws never shift another stream.
_PERCEPTION_STREAM = 4
SETUP_KEYS = ("objects", "belt", "arm_qpos")
SETUP_OBJECT_KEYS = ("category", "position", "yaw")
# Where parked object slots rest (world frame, m): on the floor behind the robot, out of its reach.
_PARK_X, _PARK_Y0, _PARK_DY = -1.4, -1.6, 0.35

# Index of the warning whose count tells that MuJoCo found a bad acceleration (see ``_diverged``).
_BADQACC = int(mujoco.mjtWarning.mjWARN_BADQACC)
# MjData arrays the step reads and writes, bound once per MjData (``_bind_data``); they never pickle.
_DATA_VIEWS = ("_qpos", "_qvel", "_ctrl", "_tcp_xpos", "_tcp_xmat", "_warning_counts")

# Pid of the process that created the first GL context, for the fork check in ``_render_camera``.
_GL_OWNER_PID: int | None = None

__all__ = ["ENV_ARGUMENTS", "FAILURE_CAUSES", "OBS_MODES", "OUTCOMES", "PickSortEnv"]


class PickSortEnv(gym.Env[dict[str, np.ndarray], np.ndarray]):
    """## Description

    A dynamic, dexterous pick-and-sort task.  Objects of three categories (red cube, green ball, blue bar)
    ride a conveyor belt through the workspace of a 7-DoF arm (Franka Panda kinematics) carrying a 4-finger,
    16-joint hand (LEAP-hand-like).  The robot must pick each object while it moves and drop it into the bin of
    its category.  Timing matters: a late reach misses the object, a weak grasp drops it.

    ## Action Space

    ``Box(-1, 1, (22,), float32)`` with ``control_mode="task"`` (default), executed at 20 Hz by a
    damped-least-squares task-space controller feeding joint position servos (``envs.controller``):

    | index | meaning                                   | unit at +1                       |
    |-------|-------------------------------------------|----------------------------------|
    | 0-2   | TCP displacement x, y, z (world frame)     | ``max_linear_step`` = 0.02 m     |
    | 3-5   | TCP rotation, axis-angle (world frame)     | ``max_angular_step`` = 0.15 rad  |
    | 6-21  | finger joint targets, -1 lower / +1 upper joint limit (order ``constants.HAND_JOINTS``) | rad |

    ``Box(-1, 1, (23,), float32)`` with ``control_mode="joint"``: indices 0-6 are arm joint position targets
    (-1 lower, +1 upper joint limit), 7-22 the finger targets as above.

    Actions outside [-1, 1] are clipped; a wrong shape or a NaN/inf raises ``ValueError``.

    ## Observation Space

    A ``Dict`` of named arrays (float32 unless stated), as the robot's sensors give them: with the world's
    sensor noise and perception offset (``WorldParams.joint_pos_noise`` ... ``object_pos_offset``; zero in the
    nominal world).  ``obs_mode`` selects the keys:

    | key               | shape        | meaning                                                   | modes |
    |-------------------|--------------|-----------------------------------------------------------|-------|
    | ``arm_qpos``      | (7,)         | arm joint angles, rad                                     | all   |
    | ``arm_qvel``      | (7,)         | arm joint velocities, rad/s                               | all   |
    | ``hand_qpos``     | (16,)        | finger joint angles, rad                                  | all   |
    | ``hand_qvel``     | (16,)        | finger joint velocities, rad/s                            | all   |
    | ``eef_pos``       | (3,)         | TCP position, m, world frame                              | all   |
    | ``eef_quat``      | (4,)         | TCP orientation, quaternion (w, x, y, z)                  | all   |
    | ``object_pos``    | (3N,)        | perceived object centres, m                               | state |
    | ``object_quat``   | (4N,)        | object orientations (w, x, y, z)                          | state |
    | ``object_vel``    | (6N,)        | perceived object linear (m/s) and angular (rad/s) velocity | state |
    | ``object_category`` | (3N,)      | one-hot category per object (cube, ball, bar)             | state |
    | ``scene_image``   | (H, W, 3) uint8 | fixed scene camera                                     | rgb   |
    | ``wrist_image``   | (H, W, 3) uint8 | wrist camera                                           | rgb   |

    ``obs_mode="state"`` has every low-dimensional key, ``"rgb"`` the proprioception and both images (objects
    must be perceived), ``"state+rgb"`` everything.  N is ``num_objects``; ``H = W = image_size``.

    ## Rewards

    Named terms, weighted by ``reward_mode`` ("dense": shaped, for RL; "sparse": +1 per sorted object) and
    reported as ``info["reward_<term>"]`` (already weighted; the reward is their sum): ``reach``, ``grasp``,
    ``transport``, ``sort``, ``failure`` (see ``envs.config.RewardWeights``).

    ## Starting State

    The arm at its home posture (plus +-0.02 rad noise), hand open, ``num_objects`` objects queued on the belt
    with random category, spacing (0.25-0.4 m), lateral offset (+-4 cm) and yaw (+-0.6 rad); the first object
    enters the workspace within about a second (``envs.config.EpisodeRandomization``).

    Operator set-up (what a person in the room can do, the same in a simulator and in the lab):
    ``reset(options={"setup": {...}})`` with ``"objects"`` (a list of at most ``num_objects`` entries
    ``{"category": "cube"|"ball"|"bar", "position": [x, y] or [x, y, z], "yaw": rad (optional)}``, world frame,
    m; without z the object rests on the belt; placed objects start at rest on a stopped belt and riding a running
    one; slots not listed are parked on the floor out of reach, never interacting, and keep the outcome
    ``pending``), ``"belt"`` (true: running, the default; false: stopped) and ``"arm_qpos"`` (7 joint angles,
    rad, instead of the noisy home posture).  Positions are where the operator put the objects, so a perception
    offset shows as perceived minus placed.  Without ``"setup"`` nothing changes.

    Randomness: ``reset(seed=s)`` seeds ``self.np_random``, which seeds three independent streams for the
    episode: the layout (objects, arm noise), the physics (belt fluctuation and, in the lab, per-object
    variation) and the sensors (measurement noise).  Rendering images instead of perceiving objects therefore
    never changes the physics: the same seed and actions give the same true trajectories in every ``obs_mode``.

    ## Episode End

    Terminated when every object has an outcome (``sorted`` or a failure).  Truncated at the time limit
    ``episode_steps`` (500 control steps = 25 s by default; objects still pending then get the outcome
    ``timeout``) or when the simulation diverges (``info["unstable"]``; pending objects get ``unstable``).
    ``episode_steps`` is the one time limit: the registered ids carry no Gymnasium ``TimeLimit``, so every
    episode ends with every object given an outcome.  (Wrapping the env in your own ``TimeLimit`` cuts episodes
    short with objects still ``pending``: set ``episode_steps`` instead.)

    ``info`` always carries ``is_success``, ``object_outcomes`` (one of ``OUTCOMES`` per object; ``pending``
    until decided), ``failure_cause`` (the first failure: missed, dropped, wrong_bin, fell_off_belt, timeout,
    unstable; else None), ``time_to_sort`` (seconds until the last object was sorted, on success),
    ``sort_accuracy`` (share of objects sorted), ``unstable`` and ``elapsed_time`` (s).

    ## Arguments

    ``world`` (a preset name, a JSON file, a mapping of ``WorldParams`` fields over the nominal world, or a
    ``WorldParams``; see ``world.load_world``), ``obs_mode``, ``num_objects`` (1-8, default 3; more objects need
    a longer ``episode_steps``), ``image_size`` (16-480, default 128), ``render_mode`` (``"rgb_array"``;
    ``gymnasium.make(..., render_mode="human")`` wraps it in Gymnasium's ``HumanRendering``, a pygame window that
    needs a display), ``render_size`` ((height, width), up to (480, 640), the default), ``reward_mode``
    (``"dense"``/``"sparse"``),
    ``randomization`` (mapping of ``EpisodeRandomization`` fields), ``demonstrator`` (name of the demonstrator
    that comes with the env; ``demonstrator_settings`` holds its settings for this env, none here, the planner as
    tuned in the grounded world in ``PickSort-WorldGrounded-v0``), ``episode_steps`` (the time limit in control
    steps, default 500), ``control_mode`` (``"task"`` or ``"joint"``), ``sensors`` (opt-in extra observation
    keys: ``"arm_torque"``, (7,) measured arm joint torques, N*m, as a Panda reports them; ``"finger_current"``,
    (16,) finger servo effort as joint torque, N*m; each with white noise ``WorldParams.arm_torque_noise`` /
    ``finger_current_noise`` drawn from a fourth stream, so enabling them never changes the other observations;
    ``"object_visible"``, (N,), 1 where the object estimator sees the object this step, 0 where it holds its last
    estimate, all 1 without an estimator; state modes only), ``condition`` (an evaluation condition of
    ``envs.conditions.CONDITIONS``, default ``"nominal"``: the world as given; ``"fast-belt"``,
    ``"novel-objects"``: a documented shift applied to the world, the lab's included, docs/protocol.md#conditions;
    a shifted env's ``provenance()`` names it).

    Physics can change without rebuilding the env: ``env.unwrapped.set_world(world)`` or
    ``env.reset(options={"world": world})`` (same forms as ``world``), for system identification and domain
    randomization at reset.  ``env.unwrapped.scene`` is a named view of the model (``envs.scene.SceneView``).

    ## Version History

    * v0, re-baselined in r2s2r_envs 0.2 (before any published result, so the id was kept): sensing (noise,
      perception offset) and belt fluctuation are world parameters, separate random streams, ``episode_steps``
      is the one time limit, ``control_mode``, a longer belt (8 objects fit).  Results made with 0.1 are not
      comparable.  The version rule: docs/architecture.md#grounded-variants.
    * v0 (r2s2r_envs 0.1): initial release.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}
    domain = "sim"
    _extra_arguments: tuple[str, ...] = ()  # subclasses' own constructor arguments, named in error messages
    #: Arguments that may name a file the env reads, with what each takes instead (``envs.file_arguments``).
    file_arguments: ClassVar[Mapping[str, FileArgument]] = {"world": WORLD_FILE}

    def __init__(
        self,
        *,
        world: WorldParams | Mapping[str, Any] | str | Path | None = None,
        obs_mode: str = "state",
        num_objects: int = 3,
        image_size: int = 128,
        render_mode: str | None = None,
        render_size: tuple[int, int] = (480, 640),
        reward_mode: str = "dense",
        randomization: Mapping[str, Any] | None = None,
        demonstrator: str = "scripted",
        episode_steps: int = DEFAULT_EPISODE_STEPS,
        control_mode: str = "task",
        sensors: tuple[str, ...] | list[str] = (),
        condition: str = "nominal",
        **unknown: Any,
    ) -> None:
        if unknown:
            valid = sorted(ENV_ARGUMENTS + self._extra_arguments)
            raise TypeError(f"unknown argument(s) {sorted(unknown)} for {type(self).__name__}; valid: {valid}")
        if obs_mode not in OBS_MODES:
            raise ValueError(f"unknown obs_mode {obs_mode!r}; valid: {list(OBS_MODES)}")
        if reward_mode not in REWARD_MODES:
            raise ValueError(f"unknown reward_mode {reward_mode!r}; valid: {list(REWARD_MODES)}")
        if control_mode not in CONTROL_MODES:
            raise ValueError(f"unknown control_mode {control_mode!r}; valid: {list(CONTROL_MODES)}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"unknown render_mode {render_mode!r}; valid: {self.metadata['render_modes']} or None")
        if not _is_int(num_objects) or not 1 <= num_objects <= MAX_OBJECTS:
            raise ValueError(f"num_objects must be an integer in [1, {MAX_OBJECTS}], got {num_objects!r}")
        if not _is_int(episode_steps) or episode_steps < 1:
            raise ValueError(f"episode_steps must be a positive integer, got {episode_steps!r}")
        if isinstance(sensors, str) or not all(isinstance(k, str) and k in SENSORS for k in sensors):
            raise ValueError(f"sensors must be a sequence of sensor names from {list(SENSORS)}, got {sensors!r}")
        self.sensors: tuple[str, ...] = tuple(k for k in SENSORS if k in sensors)
        if "object_visible" in self.sensors and obs_mode == "rgb":
            raise ValueError(
                "sensor 'object_visible' reports the object estimator's visibility, which obs_mode='rgb' does not "
                "use: choose obs_mode 'state' or 'state+rgb', or drop the sensor"
            )
        if not isinstance(demonstrator, str):
            raise TypeError(f"demonstrator must be the name of a registered demonstrator, got {demonstrator!r}")
        self.episode_steps = int(episode_steps)
        self.obs_mode = obs_mode
        self.num_objects = int(num_objects)
        self.render_mode = render_mode
        self.reward_mode = reward_mode
        self.control_mode = control_mode
        self.reward_weights: RewardWeights = REWARD_MODES[reward_mode]()
        self.randomization: EpisodeRandomization = replace_checked(
            EpisodeRandomization(), randomization or {}, "randomization"
        )
        self.demonstrator = demonstrator
        self.control = ControlConfig()
        self.rules = OutcomeRules()
        self._renderers: dict[tuple[int, int], mujoco.Renderer] = {}
        self.condition: Condition = get_condition(condition)  # a ValueError listing the conditions
        shape = self.condition.object_shape
        self._object_shape = None if shape == IDENTITY_SHAPE else shape  # None: the builder's cache as before
        self._build(self.condition.apply_world(load_world(world)))
        self.image_size = self._check_image_size(image_size)
        self.render_size = self._check_render_size(render_size)
        self._check_layout_fits()

        n_arm = self._controller.arm_dim
        self.action_space = spaces.Box(-1.0, 1.0, shape=(n_arm + N_FINGER,), dtype=np.float32)
        self.observation_space = self._make_observation_space()
        self._action_shape = self.action_space.shape
        self._reward_keys = tuple(f"reward_{t}" for t in RewardWeights.term_names())
        self._failure_cause: str | None = None

        n = self.num_objects
        self._categories = [0] * n  # category index per object slot, this episode
        self._half_heights = [0.0] * n  # centre-to-bottom height per object, m
        self._one_hot = np.zeros(3 * n, dtype=np.float32)
        self._outcomes = ["pending"] * n
        self._outcome_steps = [-1] * n
        self._lifted = [False] * n
        self._steps = 0
        self._sort_step: int | None = None
        self._unstable = False
        self._needs_reset = True
        self._belt_factor = 1.0
        self._belt_running = True
        self._parked: frozenset[int] = frozenset()
        self._layout_rng = self._physics_rng = self._sensor_rng = self._extra_sensor_rng = np.random.default_rng(0)

    # ------------------------------------------------------------------ world
    def _build(self, world: WorldParams) -> None:
        """Compile (or reuse from the builder's cache) the model of ``world`` and resolve everything on it."""
        self.close()
        self._world = world
        self._model = build_model(world, self.num_objects, self._object_shape)
        self._data = mujoco.MjData(self._model)
        self._resolve()

    def _resolve(self) -> None:
        m = self._model
        self.scene = SceneView(m, self.num_objects)
        self._controller = make_controller(self.control_mode, self.scene, self.control)
        self._n_substeps = int(round(1.0 / (self.control.control_hz * m.opt.timestep)))
        self.dt = self._n_substeps * m.opt.timestep
        self._object_sizes = object_half_sizes(self._world, self._object_shape)
        self._obj_rgba = m.geom_rgba[self.scene.object_geoms].copy()
        self._state_spec = mujoco.mjtState.mjSTATE_INTEGRATION
        self._saved_state = np.empty(mujoco.mj_stateSize(m, self._state_spec))
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
        if self._perception is not None:
            # The estimator perceives the objects (its noise, offset and delay): the sensor stream still draws
            # the same amount, with zero scale on the objects.
            self._noise_scale[-6 * n :] = 0.0
            self._noisy = bool(np.any(self._noise_scale > 0))
            self._offset = False
        self._finger_scale = finger_scale(self.scene)
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
        self._bind_data()

    def _bind_data(self) -> None:
        """Bind views of the ``MjData`` arrays a step uses: each attribute access of the bindings builds a new array
        object.  They stay valid as long as ``_data`` (MuJoCo never moves its buffers); pickling drops them."""
        d, tcp = self._data, self.scene.tcp_site
        self._qpos, self._qvel, self._ctrl = d.qpos, d.qvel, d.ctrl
        self._tcp_xpos, self._tcp_xmat = d.site_xpos[tcp], d.site_xmat[tcp]
        self._warning_counts = d.warning.number  # every warning's count

    def _geometry(self) -> TaskGeometry:
        d, m, s = self._data, self._model, self.scene
        return TaskGeometry(
            belt_top=s.belt_top,
            bin_center=d.site_xpos[s.bin_sites].copy(),
            bin_half_size=m.site_size[s.bin_sites].copy(),
        )

    @property
    def object_categories(self) -> tuple[str, ...]:
        """Category of each object this episode, in slot order (what ``object_category`` one-hot encodes)."""
        return tuple(C.CATEGORIES[c] for c in self._categories)

    @property
    def n_substeps(self) -> int:
        """Physics steps per control step (``dt / model.opt.timestep``)."""
        return self._n_substeps

    @property
    def world_params(self) -> WorldParams:
        """The world this env simulates (physics, sensing and timing)."""
        return self._world

    @property
    def model(self) -> mujoco.MjModel:
        """The compiled ``MjModel`` (per-episode fields change at reset)."""
        return self._model

    @property
    def data(self) -> mujoco.MjData:
        """The simulation state."""
        return self._data

    def set_world(self, world: WorldParams | Mapping[str, Any] | str | Path) -> None:
        """Change the world (same forms as the ``world`` argument); takes effect at the next ``reset``.

        Parameters the compiled model holds are written into it in place where possible (``update_model``);
        another object size or a latency that needs another delay-buffer length compiles a new model (cached
        per world).  Either way the result is identical to an env made with ``world=...`` (and the env's
        ``condition``, which applies to the new world too).

        Raises:
            KeyError / TypeError / ValueError: an unknown field or an invalid value (the env is unchanged).
        """
        new = self.condition.apply_world(load_world(world))  # validates before anything changes
        if new != self._world:
            if update_model(self._model, new, self.num_objects, self._object_shape):
                self._world = new
                self._resolve()
            else:
                self._build(new)
        self._needs_reset = True

    def _check_layout_fits(self) -> None:
        # Every object must start on the belt: the furthest possible start, plus the longest object, upstream.
        r = self.randomization
        furthest = r.first_object_y[1] + (self.num_objects - 1) * r.object_gap[1] + 0.06
        if furthest > self.scene.belt_upstream_y:
            raise ValueError(
                f"num_objects={self.num_objects} with randomization first_object_y={r.first_object_y} and "
                f"object_gap={r.object_gap} can queue objects up to y={furthest:.2f} m, beyond the belt's upstream "
                f"end at y={self.scene.belt_upstream_y:.2f} m: use fewer objects or smaller gaps"
            )

    def _check_image_size(self, image_size: Any) -> int:
        limit = min(self._model.vis.global_.offwidth, self._model.vis.global_.offheight)
        if not _is_int(image_size) or not 16 <= image_size <= limit:
            raise ValueError(f"image_size must be an integer in [16, {limit}] (pixels), got {image_size!r}")
        return int(image_size)

    def _check_render_size(self, render_size: Any) -> tuple[int, int]:
        g = self._model.vis.global_
        ok = isinstance(render_size, (tuple, list)) and len(render_size) == 2 and all(_is_int(v) for v in render_size)
        if not ok or not (16 <= render_size[0] <= g.offheight and 16 <= render_size[1] <= g.offwidth):
            raise ValueError(
                f"render_size must be (height, width) integers within [16, {g.offheight}] x [16, {g.offwidth}] "
                f"pixels, got {render_size!r}"
            )
        return int(render_size[0]), int(render_size[1])

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

    # ------------------------------------------------------------------ episode
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        options = dict(options or {})
        unknown = sorted(set(options) - set(RESET_OPTIONS))
        if unknown:
            raise ValueError(f"unknown reset option(s) {unknown}; valid: {list(RESET_OPTIONS)}")
        setup = self._check_setup(options["setup"]) if "setup" in options else None
        if "world" in options:
            self.set_world(options["world"])
        # One draw from np_random seeds the episode's three streams (see "Starting State").
        entropy = int(self.np_random.integers(0, 2**63))
        self._episode_entropy = entropy  # subclasses seed streams of their own from it (the lab's effects)
        root = np.random.SeedSequence(entropy)
        layout_seq, physics_seq, sensor_seq = root.spawn(3)
        self._layout_rng = np.random.default_rng(layout_seq)
        self._physics_rng = np.random.default_rng(physics_seq)
        self._sensor_rng = np.random.default_rng(sensor_seq)
        if self.sensors:  # a fourth stream, so the extra sensors never shift the other three
            self._extra_sensor_rng = np.random.default_rng(root.spawn(1)[0])
        if self._perception is not None:
            self._perception_rng = np.random.default_rng(
                np.random.SeedSequence(entropy, spawn_key=(_PERCEPTION_STREAM,))
            )

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
        if self._perception is not None:
            self._perception.reset(
                d.qpos[s.object_pos_idx], d.qpos[s.object_quat_idx], d.qvel[s.object_vel_idx], d.site_xpos[s.tcp_site]
            )

        self._geom = self._geometry()
        self._judge = rules_mod.Judge(self._geom, self.rules)
        self._controller.reset(d)
        self._outcomes = ["pending"] * self.num_objects
        self._outcome_steps = [-1] * self.num_objects
        self._failure_cause = None
        self._lifted = [False] * self.num_objects
        self._steps = 0
        self._sort_step = None
        self._unstable = False
        self._needs_reset = False
        return self._get_obs(), self._info(dict.fromkeys(self._reward_keys, 0.0))

    def step(self, action: np.ndarray) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        # Three phases, so that the vector env (envs.vector) runs the same code with the physics of many envs in
        # parallel threads (mj_step releases the GIL).
        self._begin_step(action)
        mujoco.mj_step(self._model, self._data, nstep=self._n_substeps)
        return self._finish_step()

    def _begin_step(self, action: Any, checked: bool = False) -> None:
        """Check and apply ``action``: everything of a control step before its physics (``checked``: ``action`` is
        already what ``_validate_action`` returns, as the vector env checks all rows at once)."""
        if self._needs_reset:
            raise RuntimeError(
                "step() called before reset(): call reset() first (and after set_world(), which takes effect "
                "at the next reset)"
            )
        if self._unstable:
            raise RuntimeError("step() called after the episode ended as unstable; call reset()")
        if not checked:
            action = self._validate_action(action)
        mujoco.mj_getState(self._model, self._data, self._saved_state, self._state_spec)
        self._advance_belt()
        self._apply_action(action)

    def _finish_step(self) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """Everything of a control step after its physics: divergence, outcomes, reward, observation."""
        self._steps += 1

        if self._diverged():
            # Restore the last good state so observations stay finite; the episode ends here.
            mujoco.mj_setState(self._model, self._data, self._saved_state, self._state_spec)
            mujoco.mj_forward(self._model, self._data)
            self._unstable = True
            for i, o in enumerate(self._outcomes):
                if o == "pending":
                    self._set_outcome(i, "unstable")
            return self._get_obs(), 0.0, False, True, self._info(dict.fromkeys(self._reward_keys, 0.0))

        terms = self._update_outcomes_and_rewards()
        reward = sum(terms.values())
        if self._parked:  # parked slots (operator set-up) keep "pending": they never take part
            terminated = all(o != "pending" or i in self._parked for i, o in enumerate(self._outcomes))
        else:
            terminated = "pending" not in self._outcomes
        truncated = False
        if not terminated and self._steps >= self.episode_steps:
            truncated = True
            for i, o in enumerate(self._outcomes):
                if o == "pending" and i not in self._parked:
                    self._set_outcome(i, "timeout")
        return self._get_obs(), reward, terminated, truncated, self._info(terms)

    # ------------------------------------------------------------------ operator set-up
    def _check_setup(self, setup: Any) -> dict[str, Any]:
        """Validate the ``setup`` reset option (what a person in the room can do); see ``reset``."""
        if not isinstance(setup, Mapping):
            raise TypeError(f"reset option 'setup' must be a mapping with keys from {list(SETUP_KEYS)}, got {setup!r}")
        unknown = sorted(set(setup) - set(SETUP_KEYS))
        if unknown:
            raise ValueError(f"unknown setup key(s) {unknown}; valid: {list(SETUP_KEYS)}")
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
                extra = sorted(set(obj) - set(SETUP_OBJECT_KEYS))
                missing = [key for key in ("category", "position") if key not in obj]
                if extra or missing:
                    raise ValueError(
                        f"{where}: unknown key(s) {extra}, missing key(s) {missing}; keys: 'category' (one of "
                        f"{list(C.CATEGORIES)}), 'position' ([x, y] or [x, y, z], m), optional 'yaw' (rad)"
                    )
                if obj["category"] not in C.CATEGORIES:
                    raise ValueError(f"{where}: unknown category {obj['category']!r}; valid: {list(C.CATEGORIES)}")
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

    # ------------------------------------------------------------------ hooks (overridden by the lab)
    def _object_physics(self, i: int, category: int) -> tuple[float, float]:
        """(mass scale, friction scale) of object ``i`` this episode: 1 in a simulator, which has one value per
        category (the lab varies objects around it, from the physics stream)."""
        return 1.0, 1.0

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
            position = self._model.camera(C.SCENE_CAMERA).pos
            cameras = (PerceptionCamera(position=(float(position[0]), float(position[1]), float(position[2]))),)
        return ObjectEstimator(self._world, cameras, self.dt, self.num_objects, self._perception_jitter())

    def _command_gain(self) -> np.ndarray | float:
        """Scale of the executed arm joint displacement relative to the one commanded (1 in the sim)."""
        return 1.0

    # ------------------------------------------------------------------ action
    def _validate_action(self, action: Any) -> np.ndarray:
        shape = self._action_shape
        if type(action) is np.ndarray:  # the usual case, which the checks below would pass unchanged
            raw = action
        else:
            if isinstance(action, (str, bytes, Mapping)):
                raise TypeError(f"action must be {_accepted_action(shape)}, got a {type(action).__name__}")
            try:
                raw = np.asarray(action)
            except (TypeError, ValueError):  # a ragged sequence
                raise TypeError(
                    f"action must be {_accepted_action(shape)}, got a ragged or mixed sequence {action!r}"
                ) from None
        # bool, complex, object and string arrays would convert silently or raise numpy's own message.
        if raw.dtype.kind not in "iuf":
            raise TypeError(f"action must be {_accepted_action(shape)}, got an array of dtype {raw.dtype}")
        a = raw.astype(np.float64, copy=False)
        if a.shape != shape:
            raise ValueError(f"action must have shape {shape} with values in [-1, 1], got shape {a.shape}")
        if not math.isfinite(a.sum()):  # math's test of the one float: numpy's costs a ufunc call
            raise ValueError(
                f"action must be finite with values in [-1, 1] and shape {shape}; got NaN/inf at "
                f"indices {np.flatnonzero(~np.isfinite(a)).tolist()}"
            )
        return np.minimum(np.maximum(a, -1.0), 1.0)

    def _apply_action(self, a: np.ndarray) -> None:
        ctrl, s, controller = self._ctrl, self.scene, self._controller
        n_arm = controller.arm_dim
        ctrl[s.arm_u] = controller.arm_targets(self._model, self._data, a[:n_arm], self._command_gain())
        ctrl[s.hand_u] = finger_targets(s, a[n_arm:], self._finger_scale)

    def _advance_belt(self) -> None:
        w = self._world
        if w.belt_speed_fluctuation > 0.0 and self._belt_running:
            # Ornstein-Uhlenbeck relative speed fluctuation, exact discretisation over one control period.
            a = np.exp(-self.dt / w.belt_fluctuation_time)
            noise = self._physics_rng.normal() * w.belt_speed_fluctuation * np.sqrt(1.0 - a * a)
            self._belt_factor = 1.0 + a * (self._belt_factor - 1.0) + noise
            self._model.geom_surfacevel[self.scene.belt_geom, 1] = -w.belt_speed * self._belt_factor

    # ------------------------------------------------------------------ objects and outcomes
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

    def _diverged(self) -> bool:
        # NaN fails every comparison, so "not <=" also catches a NaN velocity; a NaN/inf anywhere in qpos makes
        # its sum non-finite.  Two reductions instead of element-wise checks.
        if not np.abs(self._qvel).max() <= 1e3 or not math.isfinite(self._qpos.sum()):
            return True
        return int(self._warning_counts[_BADQACC]) > 0

    def _update_outcomes_and_rewards(self) -> dict[str, float]:
        """Apply the outcome rules to every object; the step's weighted reward terms by their ``info`` key."""
        s, judge = self.scene, self._judge  # made at reset, on the episode's geometry
        if judge.rules is not self.rules:  # ``rules`` replaced since: they apply from this step on
            judge = self._judge = rules_mod.Judge(self._geom, self.rules)
        # Plain floats and one pass over the objects: a handful of objects per step, where numpy's per-call overhead
        # (and building per-object lists for each rule) would dominate.
        pos = self._qpos[s.object_pos_idx].reshape(-1, 3).tolist()
        vel = self._qvel[s.object_linvel_idx].reshape(-1, 3).tolist()
        tcp = self._tcp_xpos.tolist()
        outcomes, lifted, parked = self._outcomes, self._lifted, self._parked
        newly_sorted = newly_failed = 0
        # Shaping candidates among the objects still pending (parked slots never take part): the first one held,
        # and the one furthest downstream (least y, the first of equals).
        held = downstream = -1
        for i, ((x, y, z), (vx, vy, vz), half_height, category) in enumerate(
            zip(pos, vel, self._half_heights, self._categories)
        ):
            bottom = z - half_height
            speed = math.sqrt(vx * vx + vy * vy + vz * vz)
            outcome, lifted[i] = judge.outcome(x, y, z, speed, bottom, lifted[i], category)
            if outcomes[i] != "pending" or i in parked:
                continue
            if outcome is not None:
                self._set_outcome(i, outcome)
                if outcome == "sorted":
                    newly_sorted += 1
                else:
                    newly_failed += 1
                continue
            if held < 0 and judge.is_held(x, y, z, bottom, tcp):
                held = i
            if downstream < 0 or y < pos[downstream][1]:
                downstream = i
        if self._sort_step is None and outcomes.count("sorted") == self.num_objects:
            self._sort_step = self._steps

        # Shaping: progress on the object being worked on, the held one, else the next one downstream.
        raw_reach = raw_grasp = raw_transport = 0.0
        if held >= 0:
            raw_reach = raw_grasp = 1.0
            bx, by = self._geom.bin_center[self._categories[held], :2].tolist()
            raw_transport = 1.0 - math.tanh(5.0 * math.hypot(pos[held][0] - bx, pos[held][1] - by))
        elif downstream >= 0:
            raw_reach = 1.0 - math.tanh(10.0 * math.dist(pos[downstream], tcp))
        w = self.reward_weights
        return {
            "reward_reach": w.reach * raw_reach,
            "reward_grasp": w.grasp * raw_grasp,
            "reward_transport": w.transport * raw_transport,
            "reward_sort": w.sort * newly_sorted,
            "reward_failure": w.failure * newly_failed,
        }

    def _set_outcome(self, i: int, outcome: str) -> None:
        self._outcomes[i] = outcome
        self._outcome_steps[i] = self._steps
        self._failure_cause = rules_mod.first_failure(self._outcomes, self._outcome_steps)

    # ------------------------------------------------------------------ observation, info
    def _get_obs(self) -> dict[str, np.ndarray]:
        f32 = np.float32
        # Two reads for the joint and object keys (``_resolve``): arm, hand, then objects; each key is a slice.
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

    def _info(self, terms: dict[str, float]) -> dict[str, Any]:
        """The step's ``info``; ``terms``: the weighted reward terms by their ``info`` key (``reward_<term>``)."""
        n_sorted = self._outcomes.count("sorted")
        info: dict[str, Any] = {
            "is_success": n_sorted == self.num_objects,
            "object_outcomes": list(self._outcomes),
            "failure_cause": self._failure_cause,
            "time_to_sort": None if self._sort_step is None else self._sort_step * self.dt,
            "sort_accuracy": n_sorted / self.num_objects,
            "unstable": self._unstable,
            "elapsed_time": self._steps * self.dt,
        }
        info.update(terms)
        return info

    # ------------------------------------------------------------------ state, rendering
    def get_state(self) -> np.ndarray:
        """Full MuJoCo state (``mjSTATE_INTEGRATION``: time, qpos, qvel, act, ctrl, history, ...) as float64."""
        state = np.empty(mujoco.mj_stateSize(self._model, self._state_spec))
        mujoco.mj_getState(self._model, self._data, state, self._state_spec)
        return state

    def set_state(self, state: np.ndarray) -> None:
        """Restore a state from ``get_state`` (physics only; episode bookkeeping is not rewound)."""
        raw = np.asarray(state)
        if raw.dtype.kind not in "iuf":
            raise TypeError(f"state must be an array of real numbers from get_state(), got dtype {raw.dtype}")
        state = raw.astype(np.float64, copy=False)
        expected = mujoco.mj_stateSize(self._model, self._state_spec)
        if state.shape != (expected,):
            raise ValueError(f"state must have shape ({expected},) for this model, got {state.shape}")
        if not np.isfinite(state).all():
            raise ValueError(
                f"state must be finite (a state from get_state()); got NaN/inf at indices "
                f"{np.flatnonzero(~np.isfinite(state))[:10].tolist()}"
            )
        mujoco.mj_setState(self._model, self._data, state, self._state_spec)
        mujoco.mj_forward(self._model, self._data)

    def open_hand_qpos(self) -> np.ndarray:
        """Finger joint angles of the open hand, rad (order ``constants.HAND_JOINTS``)."""
        return np.clip(np.zeros(len(C.HAND_JOINTS)), self.scene.hand_range[:, 0], self.scene.hand_range[:, 1])

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
        return renderer.render().copy()

    def render(self) -> np.ndarray | None:
        if self.render_mode is None:
            gym.logger.warn("render() called with render_mode=None; make the env with render_mode='rgb_array'")
            return None
        return self._render_camera(C.SCENE_CAMERA, *self.render_size)

    def close(self) -> None:
        for r in self._renderers.values():
            r.close()
        self._renderers.clear()

    @property
    def demonstrator_settings(self) -> dict[str, Any]:
        """Settings of the demonstrator that comes with this env (``demonstrator``), given to it by
        ``behavior.make_demonstrator(env)``; none here (its defaults)."""
        return {}

    def provenance(self) -> dict[str, Any]:
        """JSON-serializable description of this env's world and settings, for dataset and result files."""
        return {
            "domain": self.domain,
            "world_params": self._world.to_dict(),
            "world_sha256": self._world.sha256(),
            **self._settings(),
        }

    def _settings(self) -> dict[str, Any]:
        return {
            "num_objects": self.num_objects,
            "obs_mode": self.obs_mode,
            "control_mode": self.control_mode,
            "episode_steps": self.episode_steps,
            "control": dataclasses.asdict(self.control),
            "randomization": dataclasses.asdict(self.randomization),
            "mujoco_version": mujoco.__version__,
            # Only when shifted: a nominal env's provenance (in datasets and results) stays what it was.
            **({"condition": self.condition.name} if self.condition.name != "nominal" else {}),
        }

    def __getstate__(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if k not in _DATA_VIEWS}  # rebound on unpickling
        state["_renderers"] = {}  # GL contexts do not pickle; they are recreated on demand
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._bind_data()


def _accepted_action(shape: tuple[int, ...]) -> str:
    """What an action must be, for the error messages of ``_validate_action``."""
    return f"an array of shape {shape} of real numbers (float or int) in [-1, 1]"


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


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
