"""The PickSort environment: sort objects riding a conveyor into bins with a 7-DoF arm and a 16-joint hand."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import mujoco
import numpy as np
from gymnasium import spaces

from r2s2r_envs.envs.config import (
    REWARD_MODES,
    ControlConfig,
    EpisodeRandomization,
    RewardWeights,
    replace_checked,
    sample_layout,
)
from r2s2r_envs.world import constants as C
from r2s2r_envs.world.builder import build_model, category_inertia, object_half_sizes
from r2s2r_envs.world.params import WorldParams

OBS_MODES = ("state", "rgb", "state+rgb")
OUTCOMES = ("pending", "sorted", "missed", "dropped", "wrong_bin", "fell_off_belt", "timeout", "unstable")
FAILURE_CAUSES = OUTCOMES[2:]
DEFAULT_MAX_EPISODE_STEPS = 500

# Geometry thresholds of the outcome rules, m (relative to the belt surface / bins).
LIFT_HEIGHT = 0.04  # object bottom this far above the belt counts as lifted
REACH_LIMIT_Y = -0.45  # past this y the object is out of the arm's reach: missed (or dropped, if it was lifted)
SETTLED_SPEED = 0.05  # m/s: an object slower than this in a bin has landed
HOLD_DISTANCE = 0.06  # object centre within this of the TCP while lifted counts as held

_PROPRIO_KEYS = ("arm_qpos", "arm_qvel", "hand_qpos", "hand_qvel", "eef_pos", "eef_quat")
_OBJECT_KEYS = ("object_pos", "object_quat", "object_vel", "object_category")
IMAGE_KEYS = ("scene_image", "wrist_image")
ENV_ARGUMENTS = [
    "world", "obs_mode", "num_objects", "image_size", "render_mode", "render_size", "reward_mode",
    "randomization", "demonstrator", "episode_steps",
]


class PickSortEnv(gym.Env[dict[str, np.ndarray], np.ndarray]):
    """## Description

    A dynamic, dexterous pick-and-sort task.  Objects of three categories (red cube, green ball, blue bar)
    ride a conveyor belt through the workspace of a 7-DoF arm (Franka Panda kinematics) carrying a 4-finger,
    16-joint hand (LEAP-hand-like).  The robot must pick each object while it moves and drop it into the bin of
    its category.  Timing matters: a late reach misses the object, a weak grasp drops it.

    ## Action Space

    ``Box(-1, 1, (22,), float32)``, executed at ``control_hz`` (20 Hz) by a damped-least-squares task-space
    controller feeding joint position servos:

    | index | meaning                                   | unit at +1                       |
    |-------|-------------------------------------------|----------------------------------|
    | 0-2   | TCP displacement x, y, z (world frame)     | ``max_linear_step`` = 0.02 m     |
    | 3-5   | TCP rotation, axis-angle (world frame)     | ``max_angular_step`` = 0.15 rad  |
    | 6-21  | finger joint targets, -1 lower / +1 upper joint limit (order ``constants.HAND_JOINTS``) | rad |

    Actions outside [-1, 1] are clipped; a wrong shape or a NaN/inf raises ``ValueError``.

    ## Observation Space

    A ``Dict`` of named arrays (float32 unless stated).  ``obs_mode`` selects the keys:

    | key               | shape        | meaning                                                   | modes |
    |-------------------|--------------|-----------------------------------------------------------|-------|
    | ``arm_qpos``      | (7,)         | arm joint angles, rad                                     | all   |
    | ``arm_qvel``      | (7,)         | arm joint velocities, rad/s                               | all   |
    | ``hand_qpos``     | (16,)        | finger joint angles, rad                                  | all   |
    | ``hand_qvel``     | (16,)        | finger joint velocities, rad/s                            | all   |
    | ``eef_pos``       | (3,)         | TCP position, m, world frame                              | all   |
    | ``eef_quat``      | (4,)         | TCP orientation, quaternion (w, x, y, z)                  | all   |
    | ``object_pos``    | (3N,)        | object centres, m                                         | state |
    | ``object_quat``   | (4N,)        | object orientations (w, x, y, z)                          | state |
    | ``object_vel``    | (6N,)        | object linear (m/s) and angular (rad/s) velocity          | state |
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
    enters the workspace within about a second.  All draws come from ``self.np_random``
    (``envs.config.EpisodeRandomization``).

    ## Episode End

    Terminated when every object has an outcome (``sorted`` or a failure).  Truncated at the time limit
    (``episode_steps``, 500 steps = 25 s by default; objects still pending then get the outcome ``timeout``) or
    when the simulation diverges (``info["unstable"]``).  The registered ids also carry
    ``max_episode_steps=500``; ``gym.make(..., max_episode_steps=N)`` only adds Gymnasium's outer ``TimeLimit``,
    which cuts the episode without outcomes: change the task's limit with ``episode_steps=N`` instead.
    ``info`` always carries ``is_success``, ``object_outcomes`` (one of ``OUTCOMES`` per object),
    ``failure_cause`` (the first failure: missed, dropped, wrong_bin, fell_off_belt, timeout, unstable; else
    None), ``time_to_sort`` (seconds until the last object was sorted, on success), ``sort_accuracy`` (share of
    objects sorted) and ``unstable``.

    ## Arguments

    ``world`` (mapping of ``WorldParams`` fields, default nominal), ``obs_mode``, ``num_objects`` (default 3),
    ``image_size`` (default 128), ``render_mode`` (``"rgb_array"``), ``render_size`` ((height, width), default
    (480, 640)), ``reward_mode`` (``"dense"``/``"sparse"``), ``randomization`` (mapping of
    ``EpisodeRandomization`` fields), ``demonstrator`` (name of the demonstrator that comes with the env),
    ``episode_steps`` (the task's time limit in control steps, default 500).

    ## Version History

    * v0: initial release.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}
    domain = "sim"
    _extra_arguments: list[str] = []  # subclasses' own constructor arguments, named in error messages

    def __init__(
        self,
        *,
        world: WorldParams | Mapping[str, Any] | None = None,
        obs_mode: str = "state",
        num_objects: int = 3,
        image_size: int = 128,
        render_mode: str | None = None,
        render_size: tuple[int, int] = (480, 640),
        reward_mode: str = "dense",
        randomization: Mapping[str, Any] | None = None,
        demonstrator: str = "scripted",
        episode_steps: int = DEFAULT_MAX_EPISODE_STEPS,
        **unknown: Any,
    ) -> None:
        if unknown:
            valid = sorted(ENV_ARGUMENTS + self._extra_arguments)
            raise TypeError(f"unknown argument(s) {sorted(unknown)} for {type(self).__name__}; valid: {valid}")
        if obs_mode not in OBS_MODES:
            raise ValueError(f"unknown obs_mode {obs_mode!r}; valid: {list(OBS_MODES)}")
        if reward_mode not in REWARD_MODES:
            raise ValueError(f"unknown reward_mode {reward_mode!r}; valid: {list(REWARD_MODES)}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"unknown render_mode {render_mode!r}; valid: {self.metadata['render_modes']} or None")
        if not isinstance(num_objects, int) or isinstance(num_objects, bool) or not 1 <= num_objects <= 8:
            raise ValueError(f"num_objects must be an integer in [1, 8], got {num_objects!r}")
        if not isinstance(episode_steps, int) or isinstance(episode_steps, bool) or episode_steps < 1:
            raise ValueError(f"episode_steps must be a positive integer, got {episode_steps!r}")
        self.episode_steps = episode_steps
        if not isinstance(image_size, int) or not 16 <= image_size <= 1024:
            raise ValueError(f"image_size must be an integer in [16, 1024], got {image_size!r}")
        if isinstance(world, WorldParams):
            self.world_params = world
        else:
            self.world_params = WorldParams.from_dict(world or {})
        self.obs_mode = obs_mode
        self.num_objects = num_objects
        self.image_size = image_size
        self.render_mode = render_mode
        self.render_size = (int(render_size[0]), int(render_size[1]))
        self.reward_mode = reward_mode
        self.reward_weights: RewardWeights = REWARD_MODES[reward_mode]()
        self.randomization: EpisodeRandomization = replace_checked(
            EpisodeRandomization(), randomization or {}, "randomization"
        )
        self.demonstrator = demonstrator
        self.control = ControlConfig()
        self._home_q = np.asarray(self.control.home_arm_qpos, dtype=float)
        self._ik_reg = self.control.ik_damping**2 * np.eye(6)

        self.model = build_model(self.world_params, num_objects)
        self.data = mujoco.MjData(self.model)
        self._n_substeps = int(round(1.0 / (self.control.control_hz * self.model.opt.timestep)))
        self.dt = self._n_substeps * self.model.opt.timestep
        self._resolve_ids()
        self._object_sizes = object_half_sizes(self.world_params)
        self._renderers: dict[tuple[int, int], mujoco.Renderer] = {}

        self.action_space = spaces.Box(-1.0, 1.0, shape=(6 + len(C.HAND_JOINTS),), dtype=np.float32)
        self.observation_space = self._make_observation_space()

        self._categories = np.zeros(num_objects, dtype=np.int64)
        self._outcomes = ["pending"] * num_objects
        self._outcome_steps = [-1] * num_objects
        self._lifted = np.zeros(num_objects, dtype=bool)
        self._steps = 0
        self._sort_step: int | None = None
        self._unstable = False
        self._target_pos = np.zeros(3)
        self._target_quat = np.array([1.0, 0.0, 0.0, 0.0])

    # ------------------------------------------------------------------ set-up
    def _resolve_ids(self) -> None:
        m = self.model
        self._arm_qadr = np.array([m.joint(n).qposadr[0] for n in C.ARM_JOINTS])
        self._arm_dadr = np.array([m.joint(n).dofadr[0] for n in C.ARM_JOINTS])
        self._hand_qadr = np.array([m.joint(n).qposadr[0] for n in C.HAND_JOINTS])
        self._hand_dadr = np.array([m.joint(n).dofadr[0] for n in C.HAND_JOINTS])
        self._arm_act = np.array([m.actuator(n).id for n in C.ARM_ACTUATORS])
        self._hand_act = np.array([m.actuator(n).id for n in C.HAND_ACTUATORS])
        self._arm_range = m.jnt_range[[m.joint(n).id for n in C.ARM_JOINTS]].copy()
        self._hand_range = m.jnt_range[[m.joint(n).id for n in C.HAND_JOINTS]].copy()
        self._tcp = m.site(C.TCP_SITE).id
        self._belt_geom = m.geom(C.BELT_GEOM).id
        belt_site = m.site(C.BELT_SITE)
        self._belt_top = float(belt_site.pos[2])
        self._belt_center_x = float(belt_site.pos[0])
        self._obj_body = np.array([m.body(f"{C.object_prefix(i)}{C.OBJECT_JOINT}").id for i in range(self.num_objects)])
        self._obj_qadr = np.array(
            [m.joint(f"{C.object_prefix(i)}{C.OBJECT_JOINT}").qposadr[0] for i in range(self.num_objects)]
        )
        self._obj_dadr = np.array(
            [m.joint(f"{C.object_prefix(i)}{C.OBJECT_JOINT}").dofadr[0] for i in range(self.num_objects)]
        )
        self._obj_geoms = np.array(
            [[m.geom(f"{C.object_prefix(i)}{c}").id for c in C.CATEGORIES] for i in range(self.num_objects)]
        )
        self._obj_rgba = m.geom_rgba[self._obj_geoms].copy()
        self._bin_sites = np.array([m.site(C.BIN_SITES[c]).id for c in C.CATEGORIES])
        self._state_spec = mujoco.mjtState.mjSTATE_INTEGRATION
        # Index arrays and scratch buffers resolved once, so a step does no per-object Python slicing.
        self._obj_pos_idx = (self._obj_qadr[:, None] + np.arange(3)).ravel()
        self._obj_quat_idx = (self._obj_qadr[:, None] + np.arange(3, 7)).ravel()
        self._obj_vel_idx = (self._obj_dadr[:, None] + np.arange(6)).ravel()
        self._jacp = np.zeros((3, m.nv))
        self._jacr = np.zeros((3, m.nv))
        self._err = np.zeros(6)
        self._saved_state = np.empty(mujoco.mj_stateSize(m, self._state_spec))
        self._jac = np.zeros((6, len(C.ARM_JOINTS)))
        self._ws_low = np.asarray(self.control.workspace_low, dtype=float)
        self._ws_high = np.asarray(self.control.workspace_high, dtype=float)

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
        if options:
            raise ValueError(f"PickSortEnv.reset takes no options, got {sorted(options)}")
        m, d = self.model, self.data
        mujoco.mj_resetData(m, d)
        rng = self.np_random

        layout = sample_layout(rng, self.num_objects, self._belt_center_x, self.randomization)
        for i, place in enumerate(layout):
            self._set_category(i, place.category)
        mujoco.mj_setConst(m, d)  # masses changed; this also rewrites qpos, so the state is set after it
        mujoco.mj_resetData(m, d)

        noise = rng.uniform(-1.0, 1.0, size=7) * self.randomization.arm_qpos_noise
        arm_q = np.clip(np.asarray(self.control.home_arm_qpos) + noise, self._arm_range[:, 0], self._arm_range[:, 1])
        d.qpos[self._arm_qadr] = arm_q
        d.ctrl[self._arm_act] = arm_q
        hand_q = self.open_hand_qpos()
        d.qpos[self._hand_qadr] = hand_q
        d.ctrl[self._hand_act] = hand_q
        for i, place in enumerate(layout):
            half_height = self._object_half_height(place.category)
            adr = self._obj_qadr[i]
            d.qpos[adr : adr + 3] = [place.x, place.y, self._belt_top + half_height + 0.001]
            d.qpos[adr + 3 : adr + 7] = [np.cos(place.yaw / 2), 0.0, 0.0, np.sin(place.yaw / 2)]
            d.qvel[self._obj_dadr[i] : self._obj_dadr[i] + 3] = [0.0, -self.world_params.belt_speed, 0.0]
        self._on_reset()
        # Actuators with a command filter start settled at the reset command.
        filtered = np.flatnonzero(m.actuator_actadr >= 0)
        d.act[m.actuator_actadr[filtered]] = d.ctrl[filtered]
        # Fill the actuator delay buffers with the reset command, so a delayed line starts at rest.
        for act in np.flatnonzero(m.actuator_history[:, 0] > 0):
            values = np.full((int(m.actuator_history[act, 0]), 1), d.ctrl[act])
            mujoco.mj_initCtrlHistory(m, d, int(act), None, values)
        mujoco.mj_forward(m, d)

        self._target_pos = d.site_xpos[self._tcp].copy()
        self._target_quat = self._site_quat(self._tcp)
        self._outcomes = ["pending"] * self.num_objects
        self._outcome_steps = [-1] * self.num_objects
        self._lifted[:] = False
        self._steps = 0
        self._sort_step = None
        self._unstable = False
        obs = self._get_obs()
        return obs, self._info({t: 0.0 for t in RewardWeights.term_names()})

    def step(self, action: np.ndarray) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        action = self._validate_action(action)
        m, d = self.model, self.data
        if self._unstable:
            raise RuntimeError("step() called after the episode ended as unstable; call reset()")
        saved = self._saved_state
        mujoco.mj_getState(m, d, saved, self._state_spec)

        self._on_control_step()
        self._apply_action(action)
        mujoco.mj_step(m, d, nstep=self._n_substeps)
        self._steps += 1

        if self._diverged():
            # Restore the last good state so observations stay finite; the episode ends here.
            mujoco.mj_setState(m, d, saved, self._state_spec)
            mujoco.mj_forward(m, d)
            self._unstable = True
            for i, o in enumerate(self._outcomes):
                if o == "pending":
                    self._set_outcome(i, "unstable")
            terms = {t: 0.0 for t in RewardWeights.term_names()}
            return self._get_obs(), 0.0, False, True, self._info(terms)

        newly_sorted, newly_failed = self._update_outcomes()
        terms = self._reward_terms(newly_sorted, newly_failed)
        reward = float(sum(terms.values()))
        terminated = all(o != "pending" for o in self._outcomes)
        truncated = False
        if not terminated and self._steps >= self.episode_steps:
            truncated = True
            for i, o in enumerate(self._outcomes):
                if o == "pending":
                    self._set_outcome(i, "timeout")
        return self._get_obs(), reward, terminated, truncated, self._info(terms)

    # ------------------------------------------------------------------ hooks (overridden by the lab)
    def _on_reset(self) -> None:
        """Called after the episode's objects are placed: sets the belt's surface speed (the lab also resets its
        jitter here)."""
        self.model.geom_surfacevel[self._belt_geom, 1] = -self.world_params.belt_speed

    def _on_control_step(self) -> None:
        """Called before each control step's physics; the sim has nothing to add."""

    def _observe(self, obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Turn the true low-dimensional observation into what the robot measures (identity in the sim)."""
        return obs

    def _command_gain(self) -> np.ndarray | float:
        """Scale of the executed arm joint command relative to the one computed (1 in the sim)."""
        return 1.0

    # ------------------------------------------------------------------ action
    def _validate_action(self, action: Any) -> np.ndarray:
        a = np.asarray(action, dtype=np.float64)
        if a.shape != self.action_space.shape:
            raise ValueError(
                f"action must have shape {self.action_space.shape} with values in [-1, 1], got shape {a.shape}"
            )
        if not np.all(np.isfinite(a)):
            raise ValueError(
                f"action must be finite with values in [-1, 1] and shape {self.action_space.shape}; got NaN/inf at "
                f"indices {np.flatnonzero(~np.isfinite(a)).tolist()}"
            )
        return np.clip(a, -1.0, 1.0)

    def _apply_action(self, a: np.ndarray) -> None:
        # Hot path (once per control step): small fixed-size math through MuJoCo's C helpers and ufuncs,
        # not numpy's wrapper functions, whose overhead would dominate at these sizes.
        m, d, cfg = self.model, self.data, self.control
        tcp = d.site_xpos[self._tcp]
        target = np.minimum(np.maximum(self._target_pos + a[:3] * cfg.max_linear_step, self._ws_low), self._ws_high)
        lead = target - tcp
        dist = math.sqrt(lead @ lead)
        if dist > cfg.max_target_lead:
            target = tcp + lead * (cfg.max_target_lead / dist)
        self._target_pos = target

        rot = a[3:6] * cfg.max_angular_step
        angle = math.sqrt(rot @ rot)
        if angle > 0.0:
            dq = np.empty(4)
            mujoco.mju_axisAngle2Quat(dq, rot / angle, angle)
            new_quat = np.empty(4)
            mujoco.mju_mulQuat(new_quat, dq, self._target_quat)
            mujoco.mju_normalize4(new_quat)
            self._target_quat = new_quat

        # Damped least squares on the 6-D TCP error, plus a null-space pull towards the home posture:
        # dq = J+ e + (I - J+ J) p  ==  J+ (e - J p) + p,  one 6x6 Cholesky solve per control step.
        err = self._err
        err[:3] = target - tcp
        local = np.empty(3)
        mujoco.mju_subQuat(local, self._target_quat, self._site_quat(self._tcp))
        err[3:] = d.site_xmat[self._tcp].reshape(3, 3) @ local
        mujoco.mj_jacSite(m, d, self._jacp, self._jacr, self._tcp)
        jac = self._jac
        jac[:3] = self._jacp[:, self._arm_dadr]
        jac[3:] = self._jacr[:, self._arm_dadr]
        q = d.qpos[self._arm_qadr]
        pull = cfg.nullspace_gain * (self._home_q - q)
        jjt = jac @ jac.T + self._ik_reg
        mujoco.mju_cholFactor(jjt, 0.0)
        rhs = err - jac @ pull
        sol = np.empty(6)
        mujoco.mju_cholSolve(sol, jjt, rhs)
        q_des = q + self._command_gain() * (jac.T @ sol + pull)
        d.ctrl[self._arm_act] = np.minimum(np.maximum(q_des, self._arm_range[:, 0]), self._arm_range[:, 1])

        lo, hi = self._hand_range[:, 0], self._hand_range[:, 1]
        d.ctrl[self._hand_act] = lo + (a[6:] + 1.0) * 0.5 * (hi - lo)

    # ------------------------------------------------------------------ objects and outcomes
    def _object_half_height(self, category: int) -> float:
        size = self._object_sizes[C.CATEGORIES[category]]
        return float(size[0] if C.CATEGORIES[category] == "ball" else size[2])

    def _set_category(self, i: int, category: int) -> None:
        m = self.model
        for k, g in enumerate(self._obj_geoms[i]):
            on = k == category
            m.geom_contype[g] = C.CONTACT_OBJECT if on else 0
            m.geom_conaffinity[g] = (C.CONTACT_STATIC | C.CONTACT_OBJECT | C.CONTACT_HAND) if on else 0
            m.geom_rgba[g] = self._obj_rgba[i, k] if on else (0.0, 0.0, 0.0, 0.0)
        body = self._obj_body[i]
        m.body_contype[body] = C.CONTACT_OBJECT
        m.body_conaffinity[body] = C.CONTACT_STATIC | C.CONTACT_OBJECT | C.CONTACT_HAND
        name = C.CATEGORIES[category]
        mass = self.world_params.object_mass[category]
        m.body_mass[body] = mass
        m.body_inertia[body] = category_inertia(name, mass, self._object_sizes[name])
        self._categories[i] = category

    def _diverged(self) -> bool:
        d = self.data
        # A NaN/inf anywhere makes the sum non-finite: one reduction instead of two element-wise checks.
        if not np.isfinite(d.qpos.sum() + d.qvel.sum()):
            return True
        if np.abs(d.qvel).max() > 1e3:
            return True
        return bool(d.warning[mujoco.mjtWarning.mjWARN_BADQACC].number > 0)

    def _object_in_bin(self, pos: np.ndarray) -> int | None:
        d, m = self.data, self.model
        for k, s in enumerate(self._bin_sites):
            center, half = d.site_xpos[s], m.site_size[s]
            if np.all(np.abs(pos[:2] - center[:2]) <= half[:2]) and pos[2] <= center[2] + half[2]:
                return k
        return None

    def _update_outcomes(self) -> tuple[int, int]:
        d = self.data
        newly_sorted = newly_failed = 0
        for i in range(self.num_objects):
            if self._outcomes[i] != "pending":
                continue
            adr = self._obj_qadr[i]
            pos = d.qpos[adr : adr + 3]
            speed = np.linalg.norm(d.qvel[self._obj_dadr[i] : self._obj_dadr[i] + 3])
            bottom = pos[2] - self._object_half_height(self._categories[i])
            if bottom > self._belt_top + LIFT_HEIGHT:
                self._lifted[i] = True
            in_bin = self._object_in_bin(pos)
            outcome = None
            if in_bin is not None:
                if speed < SETTLED_SPEED:  # landed (it may still bounce out while moving)
                    outcome = "sorted" if in_bin == self._categories[i] else "wrong_bin"
            elif pos[2] < self._belt_top - 0.02:
                # Below the belt and outside every bin: on its way to the floor (a ball may roll there forever).
                outcome = "dropped" if self._lifted[i] else "fell_off_belt"
            elif pos[1] < REACH_LIMIT_Y and pos[2] < self._belt_top + 0.1:
                outcome = "dropped" if self._lifted[i] else "missed"
            if outcome is not None:
                self._set_outcome(i, outcome)
                if outcome == "sorted":
                    newly_sorted += 1
                else:
                    newly_failed += 1
        if self._sort_step is None and all(o == "sorted" for o in self._outcomes):
            self._sort_step = self._steps
        return newly_sorted, newly_failed

    def _set_outcome(self, i: int, outcome: str) -> None:
        self._outcomes[i] = outcome
        self._outcome_steps[i] = self._steps

    def _work_object(self) -> int | None:
        """The pending object that is held, else the pending one furthest downstream (the next to pick)."""
        pending = [i for i in range(self.num_objects) if self._outcomes[i] == "pending"]
        if not pending:
            return None
        held = [i for i in pending if self._is_held(i)]
        if held:
            return held[0]
        ys = [self.data.qpos[self._obj_qadr[i] + 1] for i in pending]
        return pending[int(np.argmin(ys))]

    def _is_held(self, i: int) -> bool:
        adr = self._obj_qadr[i]
        pos = self.data.qpos[adr : adr + 3]
        bottom = pos[2] - self._object_half_height(self._categories[i])
        near = np.linalg.norm(pos - self.data.site_xpos[self._tcp]) < HOLD_DISTANCE
        return bool(bottom > self._belt_top + 0.5 * LIFT_HEIGHT and near)

    def _reward_terms(self, newly_sorted: int, newly_failed: int) -> dict[str, float]:
        w = self.reward_weights
        raw = {"reach": 0.0, "grasp": 0.0, "transport": 0.0, "sort": float(newly_sorted), "failure": float(newly_failed)}
        i = self._work_object()
        if i is not None:
            pos = self.data.qpos[self._obj_qadr[i] : self._obj_qadr[i] + 3]
            if self._is_held(i):
                raw["reach"] = 1.0
                raw["grasp"] = 1.0
                bin_xy = self.data.site_xpos[self._bin_sites[self._categories[i]], :2]
                raw["transport"] = 1.0 - np.tanh(5.0 * np.linalg.norm(pos[:2] - bin_xy))
            else:
                raw["reach"] = 1.0 - np.tanh(10.0 * np.linalg.norm(pos - self.data.site_xpos[self._tcp]))
        return {k: float(getattr(w, k) * v) for k, v in raw.items()}

    # ------------------------------------------------------------------ observation, info
    def _site_quat(self, site: int) -> np.ndarray:
        q = np.empty(4)
        mujoco.mju_mat2Quat(q, self.data.site_xmat[site])
        return q

    def _true_state_obs(self) -> dict[str, np.ndarray]:
        d = self.data
        f32 = np.float32
        obs = {
            "arm_qpos": d.qpos[self._arm_qadr].astype(f32),
            "arm_qvel": d.qvel[self._arm_dadr].astype(f32),
            "hand_qpos": d.qpos[self._hand_qadr].astype(f32),
            "hand_qvel": d.qvel[self._hand_dadr].astype(f32),
            "eef_pos": d.site_xpos[self._tcp].astype(f32),
            "eef_quat": self._site_quat(self._tcp).astype(f32),
        }
        if self.obs_mode != "rgb":
            obs["object_pos"] = d.qpos[self._obj_pos_idx].astype(f32)
            obs["object_quat"] = d.qpos[self._obj_quat_idx].astype(f32)
            obs["object_vel"] = d.qvel[self._obj_vel_idx].astype(f32)
            obs["object_category"] = np.eye(len(C.CATEGORIES), dtype=f32)[self._categories].reshape(-1)
        return obs

    def _get_obs(self) -> dict[str, np.ndarray]:
        obs = self._observe(self._true_state_obs())
        if self.obs_mode != "state":
            s = self.image_size
            obs["scene_image"] = self._render_camera(C.SCENE_CAMERA, s, s)
            obs["wrist_image"] = self._render_camera(C.WRIST_CAMERA, s, s)
        return obs

    def _info(self, terms: dict[str, float]) -> dict[str, Any]:
        n_sorted = sum(o == "sorted" for o in self._outcomes)
        failures = [(self._outcome_steps[i], o) for i, o in enumerate(self._outcomes) if o not in ("pending", "sorted")]
        info: dict[str, Any] = {
            "is_success": n_sorted == self.num_objects,
            "object_outcomes": list(self._outcomes),
            "failure_cause": min(failures)[1] if failures else None,
            "time_to_sort": None if self._sort_step is None else self._sort_step * self.dt,
            "sort_accuracy": n_sorted / self.num_objects,
            "unstable": self._unstable,
            "elapsed_time": self._steps * self.dt,
        }
        for k, v in terms.items():
            info[f"reward_{k}"] = v
        return info

    # ------------------------------------------------------------------ state, rendering
    def get_state(self) -> np.ndarray:
        """Full MuJoCo state (``mjSTATE_INTEGRATION``: time, qpos, qvel, act, ctrl, history, ...) as float64."""
        state = np.empty(mujoco.mj_stateSize(self.model, self._state_spec))
        mujoco.mj_getState(self.model, self.data, state, self._state_spec)
        return state

    def set_state(self, state: np.ndarray) -> None:
        """Restore a state from ``get_state`` (physics only; episode bookkeeping is not rewound)."""
        state = np.asarray(state, dtype=np.float64)
        expected = mujoco.mj_stateSize(self.model, self._state_spec)
        if state.shape != (expected,):
            raise ValueError(f"state must have shape ({expected},) for this model, got {state.shape}")
        mujoco.mj_setState(self.model, self.data, state, self._state_spec)
        mujoco.mj_forward(self.model, self.data)

    def open_hand_qpos(self) -> np.ndarray:
        """Finger joint angles of the open hand, rad (order ``constants.HAND_JOINTS``)."""
        return np.clip(np.zeros(len(C.HAND_JOINTS)), self._hand_range[:, 0], self._hand_range[:, 1])

    def _render_camera(self, camera: str, height: int, width: int) -> np.ndarray:
        key = (height, width)
        renderer = self._renderers.get(key)
        if renderer is None:
            renderer = mujoco.Renderer(self.model, height=height, width=width)
            self._renderers[key] = renderer
        renderer.update_scene(self.data, camera=camera)
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

    def provenance(self) -> dict[str, Any]:
        """JSON-serializable description of this world, for dataset and result files."""
        return {
            "domain": self.domain,
            "world_params": self.world_params.to_dict(),
            "num_objects": self.num_objects,
            "obs_mode": self.obs_mode,
            "control": dataclasses.asdict(self.control),
            "randomization": dataclasses.asdict(self.randomization),
            "mujoco_version": mujoco.__version__,
        }

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_renderers"] = {}  # GL contexts do not pickle; they are recreated on demand
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
