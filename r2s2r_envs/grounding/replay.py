"""Replay logged commands in the simulator: what a candidate world predicts a run's sensors would have measured.

``simulate_run`` makes a simulated ``PickSortEnv`` with the candidate world (noise-free: no sensor or estimator
noise, a steady belt; the perception offset, rotation, delay and occlusion are deterministic and kept), resets it
with the run's seed and operator set-up, and sends the logged commands open loop.  The prediction has the same
keys and shapes as ``run.obs``.

``JointRollout`` does the same for many candidate worlds at once when the run is in joint mode: there the
servo targets are the commands themselves, so the whole run is a fixed control sequence and every candidate is
one trajectory of a single multi-threaded ``mujoco.rollout`` call (the workhorse of identification).
"""

from __future__ import annotations

import copy
import dataclasses
import os
from collections.abc import Sequence
from typing import Any

import mujoco
import numpy as np
from mujoco import rollout as mj_rollout

from r2s2r_envs.envs.controller import finger_targets
from r2s2r_envs.envs.pick_sort import PickSortEnv
from r2s2r_envs.grounding.logs import LogRun
from r2s2r_envs.world import constants as C
from r2s2r_envs.world.builder import category_inertia, object_half_sizes, update_model
from r2s2r_envs.world.params import SENSOR_NOISE_FIELDS, WorldParams

#: Fields a prediction leaves out: random processes (sensor noise, belt fluctuation) predict as their mean.
NOISE_FIELDS: tuple[str, ...] = (*SENSOR_NOISE_FIELDS, "belt_speed_fluctuation")

#: The object estimator's random fields (``envs.perception``): a prediction keeps its delay, calibration and
#: occlusion, which are deterministic.
PERCEPTION_NOISE_FIELDS = (
    "object_pos_noise_speed",
    "object_pos_noise_occlusion",
    "object_quat_noise",
    "object_dropout",
    "category_confusion",
)

_FULL = mujoco.mjtState.mjSTATE_FULLPHYSICS


def prediction_world(world: WorldParams) -> WorldParams:
    """``world`` without its random processes (noise-free sensors and estimator, a steady belt)."""
    quiet: dict[str, Any] = dict.fromkeys(NOISE_FIELDS + PERCEPTION_NOISE_FIELDS, 0.0)
    return dataclasses.replace(world, **quiet)


def make_sim_env(run: LogRun, world: WorldParams) -> PickSortEnv:
    """A simulated env with the run's env arguments and the noise-free ``world``."""
    kwargs = dict(run.env_kwargs)
    kwargs["episode_steps"] = max(int(kwargs.get("episode_steps", 0)), run.steps + 1)
    if "sensors" in kwargs:
        kwargs["sensors"] = tuple(kwargs["sensors"])
    return PickSortEnv(world=prediction_world(world), **kwargs)


def _reset(env: PickSortEnv, run: LogRun) -> dict[str, np.ndarray]:
    options: dict[str, Any] = {"setup": run.setup} if run.setup else {}
    obs, _ = env.reset(seed=run.seed, options=options)
    return obs


def simulate_run(run: LogRun, world: WorldParams, env: PickSortEnv | None = None) -> dict[str, np.ndarray]:
    """Noise-free predicted observations of ``run`` under ``world`` (same keys and shapes as ``run.obs``).

    Args:
        run: A logged run.
        world: The candidate world.
        env: A simulated env to reuse (made with ``make_sim_env``); its world is set to ``world``.

    Returns:
        Observation key -> (T+1, ...) predicted array, float32 like the logs.
    """
    if env is None:
        env = make_sim_env(run, world)
    else:
        env.set_world(prediction_world(world))
    obs = _reset(env, run)
    keys = list(run.obs)
    out = {k: np.empty_like(run.obs[k]) for k in keys}
    for k in keys:
        out[k][0] = obs[k]
    for t in range(run.steps):
        obs, _, _, _, info = env.step(run.actions[t])
        for k in keys:
            out[k][t + 1] = obs[k]
        if info["unstable"]:
            for k in keys:
                out[k][t + 2 :] = out[k][t + 1]
            break
    return out


class JointRollout:
    """Batch predictions of one joint-mode run for many candidate worlds through ``mujoco.rollout``.

    Candidate worlds in one call must share the latency's delay-buffer length and the object sizes (the model
    structure); ``predict`` groups them accordingly.  Predicts ``arm_qpos``, ``hand_qpos``, ``arm_qvel``,
    ``hand_qvel`` and the actuator forces (``arm_torque``, ``finger_current``) at the observation times.

    With ``max_latency`` set, every candidate shares one delay buffer of that length and reads it with linear
    interpolation, so the latency is a continuous parameter that a gradient-based fit can move (with the
    zero-order hold the simulator uses, the prediction changes only in whole physics steps, and a fit's cost is
    flat in between).  The two differ by less than one physics step (2 ms).

    Args:
        run: A logged joint-mode run.
        nthread: Rollout threads (default: the CPU count).
        max_latency: Longest latency a candidate may have, s (None: each latency gets its own exact buffer).
    """

    def __init__(self, run: LogRun, nthread: int | None = None, max_latency: float | None = None) -> None:
        if run.control_mode != "joint":
            raise ValueError(f"JointRollout needs a joint-mode run, {run.name!r} is in {run.control_mode} mode")
        self.run = run
        self.nthread = max(1, nthread or os.cpu_count() or 1)
        self.max_latency = max_latency
        self._envs: dict[Any, PickSortEnv] = {}
        self._bases: dict[Any, tuple[PickSortEnv, np.ndarray, np.ndarray]] = {}
        self._datas: dict[Any, list[mujoco.MjData]] = {}

    def _key(self, world: WorldParams) -> tuple[float, float]:
        latency = self.max_latency if self.max_latency is not None else round(world.control_latency, 6)
        return latency, world.object_size_scale

    def _base(self, world: WorldParams) -> tuple[PickSortEnv, np.ndarray, np.ndarray]:
        # The initial state and the control sequence depend only on the model structure (objects are placed
        # by the set-up, the arm posture is given): one reset per structure.
        key = self._key(world)
        if key not in self._bases:
            self._bases[key] = self._make_base(key, world)
        return self._bases[key]

    def _make_base(self, key: tuple[float, float], world: WorldParams) -> tuple[PickSortEnv, np.ndarray, np.ndarray]:
        world = dataclasses.replace(world, control_latency=key[0])
        env = self._envs.get(key)
        if env is None:
            env = make_sim_env(self.run, world)
            self._envs[key] = env
        else:
            env.set_world(prediction_world(world))
        _reset(env, self.run)
        m, d, s = env.model, env.data, env.scene
        state = np.empty(mujoco.mj_stateSize(m, _FULL))
        mujoco.mj_getState(m, d, state, _FULL)
        # Joint mode in a simulator: the servo targets are the commands (command gain 1).
        a = np.asarray(self.run.actions, dtype=np.float64)
        lo, hi = s.arm_range[:, 0], s.arm_range[:, 1]
        ctrl = np.empty((self.run.steps, m.nu))
        ctrl[:, s.arm_actuators] = lo + (np.clip(a[:, :7], -1, 1) + 1.0) * 0.5 * (hi - lo)
        ctrl[:, s.hand_actuators] = finger_targets(s, np.clip(a[:, 7:], -1, 1))
        return env, state, ctrl

    def predict(self, worlds: Sequence[WorldParams]) -> list[dict[str, np.ndarray]]:
        """Predicted signals per world, each key (T+1, n) float64."""
        groups: dict[Any, list[int]] = {}
        for i, w in enumerate(worlds):
            if self.max_latency is not None and not 0.0 <= w.control_latency <= self.max_latency:
                raise ValueError(f"control_latency {w.control_latency} s outside [0, {self.max_latency}] s")
            groups.setdefault(self._key(w), []).append(i)
        out: list[dict[str, np.ndarray]] = [{} for _ in worlds]
        for indices in groups.values():
            for i, pred in zip(indices, self._predict_group([worlds[i] for i in indices])):
                out[i] = pred
        return out

    def _predict_group(self, worlds: list[WorldParams]) -> list[dict[str, np.ndarray]]:
        env, state0, ctrl = self._base(worlds[0])
        base, s = env.model, env.scene
        sub = env.n_substeps
        belt = float(base.geom_surfacevel[s.belt_geom, 1])
        models = []
        scratch = mujoco.MjData(base)
        categories = [C.CATEGORIES.index(c) for c in env.object_categories]
        acts = np.concatenate([s.arm_actuators, s.hand_actuators])
        for w in worlds:
            m = copy.copy(base)
            shared = dataclasses.replace(w, control_latency=self._key(w)[0])
            if not update_model(m, prediction_world(shared), env.num_objects):
                raise RuntimeError("candidate worlds of one rollout group must share the model structure")
            if self.max_latency is not None:
                m.actuator_delay[acts] = w.control_latency
                m.actuator_history[acts, 1] = 1  # linear interpolation: continuous in the latency
            m.geom_surfacevel[s.belt_geom, 1] = belt  # the run's belt state (stopped or running), not the world's
            sizes = object_half_sizes(w)
            for i, c in enumerate(categories):  # per-episode object masses, as the env's reset writes them
                name = C.CATEGORIES[c]
                m.body_mass[s.object_body[i]] = w.object_mass[c]
                m.body_inertia[s.object_body[i]] = category_inertia(name, w.object_mass[c], sizes[name])
            mujoco.mj_setConst(m, scratch)
            models.append(m)
        control = np.repeat(ctrl, sub, axis=0)[None]
        nbatch = len(models)
        pool = self._datas.setdefault(self._key(worlds[0]), [])
        while len(pool) < min(self.nthread, nbatch):
            pool.append(mujoco.MjData(base))
        datas = pool[: min(self.nthread, nbatch)]
        states, _ = mj_rollout.rollout(models, datas, np.tile(state0, (nbatch, 1)), np.tile(control, (nbatch, 1, 1)))
        # Observation k (k >= 1) is taken after k control steps; the actuator force it reports was computed in the
        # forward pass of the last physics step, from the state before that step.
        obs_idx = np.arange(1, self.run.steps + 1) * sub - 1
        nq, nv = base.nq, base.nv
        results = []
        for b, m in enumerate(models):
            traj = np.concatenate([state0[None], states[b, obs_idx]])
            qpos, qvel = traj[:, 1 : 1 + nq], traj[:, 1 + nq : 1 + nq + nv]
            force = np.zeros((self.run.steps + 1, m.nu))
            d = datas[0]
            for k in range(1, self.run.steps + 1):
                prev = states[b, obs_idx[k - 1] - 1] if obs_idx[k - 1] >= 1 else state0
                mujoco.mj_setState(m, d, prev, _FULL)
                d.ctrl[:] = ctrl[k - 1]
                mujoco.mj_forward(m, d)
                force[k] = d.actuator_force
            results.append(
                {
                    "arm_qpos": qpos[:, s.arm_qpos_adr],
                    "hand_qpos": qpos[:, s.hand_qpos_adr],
                    "arm_qvel": qvel[:, s.arm_dof_adr],
                    "hand_qvel": qvel[:, s.hand_dof_adr],
                    "arm_torque": force[:, s.arm_actuators],
                    "finger_current": force[:, s.hand_actuators],
                }
            )
        return results
