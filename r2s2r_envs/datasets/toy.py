"""A physics-free stand-in for PickSort, for testing and benchmarking dataset code fast.

``ToyPickSortEnv`` has PickSort's observation keys, action shape, ``info`` keys and the
``get_state``/``set_state``/``provenance``/``domain``/``demonstrator`` interface the dataset code relies on, with
trivial kinematics instead of MuJoCo: the end effector follows the arm joints, objects ride a belt, an episode
succeeds when the end effector reaches the first object before it leaves the workspace. Like PickSort it owns its
time limit (``episode_steps``; pending objects then time out), and with ``domain="real"`` it behaves like the lab
(``get_state`` refuses, ``provenance`` names a lab only). It is not registered by default: call
:func:`register_toy_env` to register :data:`TOY_ENV_ID`. Importing this module registers its demonstrator,
``"toy-reacher"`` (:class:`ToyDemonstrator`), the env's own. Episodes are fully determined by their seed, lengths
vary and some fail, like real demos.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.envs.registration import EnvSpec

from r2s2r_envs.envs.demonstrators import register_demonstrator

if TYPE_CHECKING:
    from r2s2r_envs.datasets.writer import Episode

#: The id :func:`register_toy_env` registers.
TOY_ENV_ID = "ToyPickSort-v0"
#: The toy env's registration: no Gymnasium TimeLimit, the env's own ``episode_steps`` is the one time limit.
TOY_SPEC = EnvSpec(id=TOY_ENV_ID, entry_point="r2s2r_envs.datasets.toy:ToyPickSortEnv", max_episode_steps=None)
#: The toy env's own demonstrator (registered when this module is imported).
TOY_DEMONSTRATOR = "toy-reacher"
#: Default time limit of the toy env, steps.
TOY_EPISODE_STEPS = 60

_ARM, _HAND = 7, 16
_TWIST = 6  # PickSort actions: end-effector twist (6) + hand joints (16)
_DT = 0.05  # s per step
_REACH_TOLERANCE = 0.08  # m
_BELT_END = 1.0  # m, objects past this x are missed


class ToyPickSortEnv(gym.Env):
    """Trivial kinematic env with PickSort's interface (see module docstring).

    Args:
        obs_mode: ``"state"``, ``"rgb"`` or ``"state+rgb"``.
        num_objects: objects on the belt.
        image_size: side of the square images, pixels.
        domain: ``"sim"`` or ``"real"`` (what ``env.unwrapped.domain`` reports; ``"real"`` acts as a lab).
        belt_speed: m/s.
        step_delay: seconds to sleep per step (simulates a slower env in tests of interruption).
        episode_steps: the time limit, steps; the episode is truncated then and pending objects time out.
        render_mode: ``None`` or ``"rgb_array"``.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": int(1 / _DT)}
    demonstrator = TOY_DEMONSTRATOR

    def __init__(
        self,
        obs_mode: str = "state",
        num_objects: int = 3,
        image_size: int = 16,
        domain: str = "sim",
        belt_speed: float = 0.5,
        step_delay: float = 0.0,
        episode_steps: int = TOY_EPISODE_STEPS,
        render_mode: str | None = None,
    ) -> None:
        if obs_mode not in ("state", "rgb", "state+rgb"):
            raise ValueError(f"unknown obs_mode {obs_mode!r}; choose 'state', 'rgb' or 'state+rgb'")
        if domain not in ("sim", "real"):
            raise ValueError(f"unknown domain {domain!r}; choose 'sim' or 'real'")
        if isinstance(episode_steps, bool) or not isinstance(episode_steps, int) or episode_steps < 1:
            raise ValueError(f"episode_steps must be a positive integer, got {episode_steps!r}")
        self.episode_steps = episode_steps
        self.obs_mode = obs_mode
        self.num_objects = int(num_objects)
        self.image_size = int(image_size)
        self.domain = domain
        self.belt_speed = float(belt_speed)
        self.step_delay = float(step_delay)
        self.render_mode = render_mode
        n = self.num_objects
        state_space = {
            "arm_qpos": (_ARM,),
            "arm_qvel": (_ARM,),
            "hand_qpos": (_HAND,),
            "hand_qvel": (_HAND,),
            "eef_pos": (3,),
            "eef_quat": (4,),
            "object_pos": (3 * n,),
            "object_quat": (4 * n,),
            "object_vel": (6 * n,),
            "object_category": (3 * n,),
        }
        obs_spaces: dict[str, spaces.Space] = {}
        if "state" in obs_mode:
            for key, shape in state_space.items():
                obs_spaces[key] = spaces.Box(-np.inf, np.inf, shape, np.float32)
        if "rgb" in obs_mode:
            for key in ("scene_image", "wrist_image"):
                obs_spaces[key] = spaces.Box(0, 255, (image_size, image_size, 3), np.uint8)
        self.observation_space = spaces.Dict(obs_spaces)
        self.action_space = spaces.Box(-1.0, 1.0, (_TWIST + _HAND,), np.float32)
        self._arm = np.zeros(_ARM)
        self._arm_vel = np.zeros(_ARM)
        self._hand = np.zeros(_HAND)
        self._hand_vel = np.zeros(_HAND)
        self._obj = np.zeros((n, 3))
        self._category = np.zeros(n, dtype=np.int64)
        self._t = 0.0
        self._steps = 0

    # -- interface used by the dataset code --------------------------------------------------------

    def get_state(self) -> np.ndarray:
        """Full state, float64 1-D.

        Raises:
            RuntimeError: with ``domain="real"``: like the lab, the toy lab is a black box.
        """
        if self.domain == "real":
            raise RuntimeError("the toy lab (domain 'real') is a black box: its state cannot be read")
        return np.concatenate(
            [
                self._arm,
                self._arm_vel,
                self._hand,
                self._hand_vel,
                self._obj.ravel(),
                self._category.astype(np.float64),
                [self._t],
            ]
        )

    def set_state(self, state: np.ndarray) -> None:
        """Restores a state from :meth:`get_state`."""
        state = np.asarray(state, dtype=np.float64)
        n = self.num_objects
        parts = np.split(state, np.cumsum([_ARM, _ARM, _HAND, _HAND, 3 * n, n]))
        self._arm, self._arm_vel, self._hand, self._hand_vel = (p.copy() for p in parts[:4])
        self._obj = parts[4].reshape(n, 3).copy()
        self._category = parts[5].astype(np.int64)
        self._t = float(parts[6][0])

    def provenance(self) -> dict[str, Any]:
        """JSON-able description of this world; with ``domain="real"``, like the lab, only the lab's name and hash."""
        if self.domain == "real":
            config = json.dumps({"belt_speed": self.belt_speed}, sort_keys=True)
            return {
                "domain": "real",
                "lab": {"name": "toy-lab", "config_sha256": hashlib.sha256(config.encode()).hexdigest()},
            }
        return {"domain": "sim", "world": "toy", "belt_speed_m_per_s": self.belt_speed, "num_objects": self.num_objects}

    # -- gymnasium API -----------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        rng = self.np_random
        n = self.num_objects
        self._arm = rng.uniform(-0.2, 0.2, _ARM)
        self._arm_vel = np.zeros(_ARM)
        self._hand = np.zeros(_HAND)
        self._hand_vel = np.zeros(_HAND)
        self._obj = np.column_stack([rng.uniform(-0.6, -0.2, n), rng.uniform(-0.4, 0.4, n), np.full(n, 0.05)])
        self._category = rng.integers(0, 3, n)
        self._t = 0.0
        self._steps = 0
        return self._obs(), self._info(False, None)

    def step(self, action: np.ndarray):
        action = np.asarray(action, dtype=np.float64)
        if action.shape != self.action_space.shape:
            raise ValueError(f"action must have shape {self.action_space.shape}, got {action.shape}")
        if self.step_delay:
            time.sleep(self.step_delay)
        action = np.clip(action, -1.0, 1.0)
        new_arm = self._arm + self.np_random.normal(0.0, 0.002, _ARM)
        new_arm[:_TWIST] += 0.1 * action[:_TWIST]
        self._arm_vel = (new_arm - self._arm) / _DT
        self._arm = new_arm
        new_hand = self._hand + 0.1 * action[_TWIST:]
        self._hand_vel = (new_hand - self._hand) / _DT
        self._hand = new_hand
        self._obj[:, 0] += self.belt_speed * _DT
        self._t += _DT
        self._steps += 1
        dist = float(np.linalg.norm(self._eef()[:2] - self._obj[0, :2]))
        success = dist < _REACH_TOLERANCE
        missed = bool(self._obj[0, 0] > _BELT_END)
        terminated = success or missed
        truncated = not terminated and self._steps >= self.episode_steps
        reward_reach = -dist
        failure = "missed" if missed and not success else ("timeout" if truncated else None)
        info = self._info(success, failure)
        info["reward_reach"] = reward_reach
        return self._obs(), reward_reach, terminated, truncated, info

    def render(self) -> np.ndarray:
        """A top-down picture: belt objects coloured by category, end effector white."""
        return self._draw(self.image_size)

    # -- internals ---------------------------------------------------------------------------------

    def _eef(self) -> np.ndarray:
        return np.array([np.tanh(self._arm[0]), np.tanh(self._arm[1]), 0.3 + 0.1 * np.tanh(self._arm[2])])

    def _obs(self) -> dict[str, np.ndarray]:
        obs: dict[str, np.ndarray] = {}
        n = self.num_objects
        if "state" in self.obs_mode:
            quat = np.tile([1.0, 0.0, 0.0, 0.0], n)
            vel = np.zeros((n, 6))
            vel[:, 0] = self.belt_speed
            values = {
                "arm_qpos": self._arm,
                "arm_qvel": self._arm_vel,
                "hand_qpos": self._hand,
                "hand_qvel": self._hand_vel,
                "eef_pos": self._eef(),
                "eef_quat": np.array([1.0, 0, 0, 0]),
                "object_pos": self._obj.ravel(),
                "object_quat": quat,
                "object_vel": vel.ravel(),
                "object_category": np.eye(3)[self._category].ravel(),
            }
            obs.update({k: np.asarray(v, dtype=np.float32) for k, v in values.items()})
        if "rgb" in self.obs_mode:
            obs["scene_image"] = self._draw(self.image_size)
            obs["wrist_image"] = self._draw(self.image_size)[::-1].copy()
        return obs

    def _info(self, success: bool, failure: str | None) -> dict[str, Any]:
        # Only the first object is decided; at the time limit every pending one times out, as in PickSort.
        rest = "timeout" if failure == "timeout" else "pending"
        return {
            "is_success": bool(success),
            "failure_cause": failure,
            "object_outcomes": ["sorted" if success else (failure or "pending")] + [rest] * (self.num_objects - 1),
            "time_to_sort": self._t if success else None,
            "unstable": False,
        }

    def _draw(self, size: int) -> np.ndarray:
        img = np.zeros((size, size, 3), dtype=np.uint8)
        img[..., 2] = 40

        def pixel(xy: np.ndarray) -> tuple[int, int]:
            col = int(np.clip((xy[0] + 1.0) / 2.0 * (size - 1), 0, size - 1))
            row = int(np.clip((xy[1] + 1.0) / 2.0 * (size - 1), 0, size - 1))
            return row, col

        colors = np.array([[255, 0, 0], [0, 255, 0], [255, 255, 0]], dtype=np.uint8)
        for pos, cat in zip(self._obj, self._category):
            img[pixel(pos)] = colors[cat]
        img[pixel(self._eef())] = 255
        return img


class ToyDemonstrator:
    """Scripted reacher for :class:`ToyPickSortEnv`: moves the end effector toward where the first object
    will be, with a per-episode gain; low gains arrive late, so some episodes fail."""

    name = "toy-reacher"

    def __init__(self, env: gym.Env) -> None:
        self._env = env.unwrapped
        self.settings: dict[str, Any] = {"gain_range": [0.05, 1.0], "action_noise": 0.05, "lead_s": 0.4}
        self._rng = np.random.default_rng()
        self._gain = 1.0

    def reset(self, seed: int | None = None) -> None:
        """Starts an episode: draws the gain and noise stream from ``seed``."""
        self._rng = np.random.default_rng(seed)
        self._gain = float(self._rng.uniform(*self.settings["gain_range"]))

    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """An action in ``[-1, 1]^22`` from the state observation keys."""
        target = obs["object_pos"][:2].astype(np.float64) + np.array([self.settings["lead_s"] * 0.3, 0.0])
        desired = np.arctanh(np.clip(target, -0.95, 0.95))
        action = np.zeros(_TWIST + _HAND)
        action[:2] = self._gain * (desired - obs["arm_qpos"][:2])
        action[_TWIST:] = 0.2 * np.sin(np.arange(_HAND))
        action += self._rng.normal(0.0, self.settings["action_noise"], action.shape)
        return np.clip(action, -1.0, 1.0).astype(np.float32)


def make_toy_demonstrator(env: gym.Env) -> ToyDemonstrator:
    """Demonstrator factory for :class:`ToyPickSortEnv`, the form ``generate(demonstrator=...)`` takes."""
    return ToyDemonstrator(env)


register_demonstrator(TOY_DEMONSTRATOR, make_toy_demonstrator)


def register_toy_env() -> str:
    """Registers :data:`TOY_SPEC` with Gymnasium (idempotent) and returns its id, :data:`TOY_ENV_ID`."""
    if TOY_ENV_ID not in gym.registry:
        gym.registry[TOY_ENV_ID] = TOY_SPEC
    return TOY_ENV_ID


def synthetic_episode(
    length: int,
    *,
    tag: int = 0,
    num_objects: int = 3,
    image_size: int | None = None,
    rng: np.random.Generator | None = None,
    success: bool = True,
    states: bool = True,
) -> Episode:
    """An episode of random arrays with PickSort's keys, for tests and loader benchmarks (no env needed).

    Recognizable values: for observation step ``t`` (0..length), ``arm_qpos[t, 0] == t`` and
    ``arm_qpos[t, 1] == tag``; for action step ``t``, ``actions[t, 0] == t`` and ``actions[t, 1] == tag``.
    Everything else is random. No noise is injected: the episode's ``action_labels`` (``None``) are its actions.

    Args:
        length: number of transitions ``T``.
        tag: value written into the second dimension (e.g. a demo index).
        num_objects: objects (sets the object key sizes).
        image_size: add ``scene_image`` and ``wrist_image`` of this size (``None``: state keys only).
        rng: random generator (default: seeded by ``tag``).
        success: the episode's recorded outcome.
        states: record simulator states (a simulated episode); ``False`` for a lab episode, which has none.
    """
    from r2s2r_envs.datasets.writer import Episode

    rng = np.random.default_rng(tag) if rng is None else rng
    n = num_objects
    sizes = {
        "arm_qpos": _ARM,
        "arm_qvel": _ARM,
        "hand_qpos": _HAND,
        "hand_qvel": _HAND,
        "eef_pos": 3,
        "eef_quat": 4,
        "object_pos": 3 * n,
        "object_quat": 4 * n,
        "object_vel": 6 * n,
        "object_category": 3 * n,
    }
    obs: dict[str, np.ndarray] = {k: rng.normal(size=(length + 1, d)).astype(np.float32) for k, d in sizes.items()}
    obs["arm_qpos"][:, 0] = np.arange(length + 1)
    obs["arm_qpos"][:, 1] = tag
    if image_size is not None:
        for key in ("scene_image", "wrist_image"):
            obs[key] = rng.integers(0, 256, size=(length + 1, image_size, image_size, 3), dtype=np.uint8)
    actions = rng.uniform(-1, 1, size=(length, _TWIST + _HAND)).astype(np.float32)
    actions[:, 0] = np.arange(length)
    actions[:, 1] = tag
    rewards = rng.normal(size=length).astype(np.float32)
    # Drawn either way, so a lab file's other arrays equal a sim file's of the same seed.
    state_rows = rng.normal(size=(length, 2 * (_ARM + _HAND) + 13 * n))
    return Episode(
        observations=obs,
        actions=actions,
        rewards=rewards,
        states=state_rows if states else None,
        terminated=True,
        seed=int(tag),
        demonstrator_seed=int(tag) + 1,
        attempt=int(tag),
        success=success,
        success_any_step=success,
        failure_cause=None if success else "missed",
        time_to_sort=float(length) * _DT if success else None,
        object_outcomes=["sorted" if success else "missed"] * n,
    )


def write_synthetic_dataset(
    path: str | os.PathLike[str],
    lengths: Sequence[int],
    *,
    domain: str = "sim",
    num_objects: int = 3,
    image_size: int | None = None,
    seed: int = 0,
    valid_fraction: float = 0.1,
) -> str:
    """Writes a dataset of :func:`synthetic_episode` demos (demo ``k`` has ``tag=k``); returns its content hash.

    Args:
        path: the output file (overwritten).
        lengths: transitions of each demo.
        domain: ``"sim"`` or ``"real"``, recorded in the provenance (a ``"real"`` file stores no states).
        num_objects: objects per episode.
        image_size: also store images of this size.
        seed: seeds the random arrays.
        valid_fraction: share of demos under ``mask/valid``.
    """
    from r2s2r_envs.datasets.writer import DatasetWriter

    provenance = {
        "env_id": TOY_ENV_ID,
        "domain": domain,
        "world": {"world": "synthetic"},
        "demonstrator": {"name": "synthetic", "settings": {}},
        "seed": seed,
    }
    env_args = {"env_name": TOY_ENV_ID, "type": 2, "env_kwargs": {}}
    rng = np.random.default_rng(seed)
    with DatasetWriter.create(
        path,
        provenance=provenance,
        env_args=env_args,
        episodes_requested=len(lengths),
        valid_fraction=valid_fraction,
        overwrite=True,
    ) as writer:
        for k, length in enumerate(lengths):
            writer.append(
                synthetic_episode(
                    length,
                    tag=k,
                    num_objects=num_objects,
                    image_size=image_size,
                    rng=rng,
                    success=k % 4 != 3,
                    states=domain == "sim",
                )
            )
        return writer.content_hash
