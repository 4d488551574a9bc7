"""One reset seed, separate random streams (``envs.seeding``, ``PickSortEnv.reset``): the true trajectory of an
episode does not depend on what is observed (the observation mode) or on how noisy the sensors are."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from conftest import random_actions, true_trajectory

SIM = "PickSort-Ungrounded-v0"
REAL = "PickSort-Real-v0"


# ---------------------------------------------------------------------- random streams
@pytest.mark.parametrize("env_id", [SIM, REAL])
def test_true_trajectories_do_not_depend_on_obs_mode(env_id):
    # The lab has belt fluctuation, sensor noise and per-object variation: every stream is exercised.
    kwargs = {} if env_id == REAL else {"world": {"belt_speed_fluctuation": 0.1, "object_pos_noise": 0.005}}
    actions = random_actions(gym.make(env_id), 40, seed=3)
    trajectories, proprio = {}, {}
    for mode in ("state", "rgb", "state+rgb"):
        env = gym.make(env_id, obs_mode=mode, image_size=16, **kwargs)
        trajectories[mode] = true_trajectory(env, 11, actions)
        obs, *_ = env.step(actions[0])
        proprio[mode] = obs["arm_qpos"]
        env.close()
    np.testing.assert_array_equal(trajectories["state"], trajectories["rgb"])
    np.testing.assert_array_equal(trajectories["state"], trajectories["state+rgb"])
    # Measurement noise on proprioception is drawn identically too.
    np.testing.assert_array_equal(proprio["state"], proprio["rgb"])


def test_sensor_noise_does_not_change_the_physics():
    actions = random_actions(gym.make(SIM), 30, seed=5)
    quiet = true_trajectory(gym.make(SIM), 2, actions)
    noisy = true_trajectory(gym.make(SIM, world={"joint_pos_noise": 0.01, "object_pos_noise": 0.01}), 2, actions)
    np.testing.assert_array_equal(quiet, noisy)
