"""The PickSort environment: sort objects riding a conveyor into bins with a 7-DoF arm and a 16-joint hand.

This module is the Gymnasium glue: arguments, spaces, the world, reset, step, actions and state.  Its other jobs
have modules of their own, mixed into :class:`PickSortEnv`: the observations, sensors, perception and cameras in
``envs.observations``, the start of an episode (layout, operator set-up) in ``envs.layout``, the outcomes, rewards
and ``info`` in ``envs.scoring``.  The controllers live in ``envs.controller``, the outcome rules in
``envs.outcomes``, the named view of the scene in ``envs.scene`` and the seeding convention in ``envs.seeding``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import mujoco
import numpy as np
from gymnasium import spaces

from r2s2r_envs.envs import outcomes as rules_mod
from r2s2r_envs.envs.conditions import IDENTITY_SHAPE, Condition, check_images, get_condition
from r2s2r_envs.envs.config import REWARD_MODES, ControlConfig, EpisodeRandomization, RewardWeights, replace_checked
from r2s2r_envs.envs.controller import CONTROL_MODES, N_FINGER, finger_scale, finger_targets, make_controller
from r2s2r_envs.envs.file_arguments import WORLD_FILE, FileArgument
from r2s2r_envs.envs.layout import SETUP_KEYS as SETUP_KEYS
from r2s2r_envs.envs.layout import SETUP_OBJECT_KEYS as SETUP_OBJECT_KEYS
from r2s2r_envs.envs.layout import LayoutMixin
from r2s2r_envs.envs.observations import IMAGE_KEYS as IMAGE_KEYS
from r2s2r_envs.envs.observations import OBS_MODES, SENSORS, ObservationMixin
from r2s2r_envs.envs.outcomes import FAILURE_CAUSES, OUTCOMES, OutcomeRules, TaskGeometry
from r2s2r_envs.envs.scene import SceneView
from r2s2r_envs.envs.scoring import ScoringMixin
from r2s2r_envs.mappings import check_choice, check_keys
from r2s2r_envs.world import constants as C
from r2s2r_envs.world.builder import build_model, object_half_sizes, update_model
from r2s2r_envs.world.params import WorldParams
from r2s2r_envs.world.presets import load_world

DEFAULT_EPISODE_STEPS = 500
MAX_OBJECTS = 8

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

# Index of the warning whose count tells that MuJoCo found a bad acceleration (see ``_diverged``).
_BADQACC = int(mujoco.mjtWarning.mjWARN_BADQACC)
# MjData arrays the step reads and writes, bound once per MjData (``_bind_data``); they never pickle.
_DATA_VIEWS = ("_qpos", "_qvel", "_ctrl", "_tcp_xpos", "_tcp_xmat", "_warning_counts")

__all__ = ["ENV_ARGUMENTS", "FAILURE_CAUSES", "OBS_MODES", "OUTCOMES", "PickSortEnv"]


class PickSortEnv(ObservationMixin, LayoutMixin, ScoringMixin, gym.Env[dict[str, np.ndarray], np.ndarray]):
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
    ``"lighting"``: red light, a change of the appearance the cameras see, refused without images; a shifted env's
    ``provenance()`` names it).

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
        valid = sorted(ENV_ARGUMENTS + self._extra_arguments)
        check_keys(unknown, valid, what="argument", where=type(self).__name__, error=TypeError)
        check_choice(obs_mode, OBS_MODES, what="obs_mode")
        check_choice(reward_mode, REWARD_MODES, what="reward_mode")
        check_choice(control_mode, CONTROL_MODES, what="control_mode")
        check_choice(render_mode, (None, *self.metadata["render_modes"]), what="render_mode")
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
        check_images(self.condition, obs_mode)
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
        self._model = build_model(world, self.num_objects, self._object_shape, self._scene_appearance())
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
        self._resolve_observations()
        self._finger_scale = finger_scale(self.scene)
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

    def simulator_objects(self) -> dict[str, np.ndarray] | None:
        """The objects' observation keys as the simulator knows them (true ``object_pos``, ``object_quat``,
        ``object_vel`` and ``object_category``, float32 and flat like the observation's) where this world models the
        camera-based estimator (``WorldParams.perceives``), else ``None``: the observation is then all there is.

        For simulated demonstrators, as a simulator's scripted expert reads the true state
        (``behavior.simulator_view``); the lab never gives them (``PickSort-Real-v0`` returns ``None``).
        """
        if not self._world.perceives:
            return None
        scene, data, f32 = self.scene, self._data, np.float32
        one_hot = np.zeros((scene.num_objects, len(C.CATEGORIES)), dtype=f32)
        one_hot[np.arange(scene.num_objects), self._categories] = 1.0
        return {
            "object_pos": scene.object_pos(data).astype(f32).ravel(),
            "object_quat": scene.object_quat(data).astype(f32).ravel(),
            "object_vel": scene.object_vel(data).astype(f32).ravel(),
            "object_category": one_hot.ravel(),
        }

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

    # ------------------------------------------------------------------ episode
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        options = dict(options or {})
        check_keys(options, RESET_OPTIONS, what="reset option", error=ValueError)
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
        self._seed_perception(entropy)  # the object estimator's own stream, where there is one

        self._lay_out(setup)  # objects, arm, hand, belt and actuators at the start (envs.layout)
        self._reset_perception()

        self._geom = self._geometry()
        self._judge = rules_mod.Judge(self._geom, self.rules)
        self._controller.reset(self._data)
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

    # ------------------------------------------------------------------ hooks (overridden by the lab)
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

    # ------------------------------------------------------------------ stability
    def _diverged(self) -> bool:
        # NaN fails every comparison, so "not <=" also catches a NaN velocity; a NaN/inf anywhere in qpos makes
        # its sum non-finite.  Two reductions instead of element-wise checks.
        if not np.abs(self._qvel).max() <= 1e3 or not math.isfinite(self._qpos.sum()):
            return True
        return int(self._warning_counts[_BADQACC]) > 0

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
