"""Every registered PickSort id: API conformance, determinism, serialization, bad input, divergence, images; the
registry, one time limit, the joint control mode, the scene view and validated arguments."""

from __future__ import annotations

import json
import pickle
import re
import warnings

import gymnasium as gym
import numpy as np
import pytest
from conftest import ENV_IDS, STATE_KEYS, assert_obs_equal, random_actions
from gymnasium.envs.registration import EnvSpec
from gymnasium.utils.env_checker import check_env

import r2s2r_envs

SIM = "PickSort-Ungrounded-v0"
REAL = "PickSort-Real-v0"

# Warnings check_env may give that are not defects.  Same list as Gymnasium's own tests/envs/test_envs.py:
# joint velocities and object positions/velocities have no physical bound, so their Boxes are (-inf, inf),
# exactly like Gymnasium's own MuJoCo envs.  Any other warning fails the test.
ALLOWED_CHECK_ENV_WARNINGS = (
    "A Box observation space minimum value is -infinity. This is probably too low.",
    "A Box observation space maximum value is infinity. This is probably too high.",
)


def _strip_ansi(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def _rollout(env: gym.Env, seed: int, actions: list[np.ndarray]):
    obs, _ = env.reset(seed=seed)
    observations, rewards = [obs], []
    for a in actions:
        obs, reward, terminated, truncated, _ = env.step(a)
        observations.append(obs)
        rewards.append(reward)
        if terminated or truncated:
            break
    return observations, rewards


# ---------------------------------------------------------------------- API conformance
@pytest.mark.parametrize("render_mode", [None, "rgb_array"])
def test_gymnasium_check_env(env_id, make_env, render_mode):
    env = make_env(env_id, render_mode=render_mode)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)  # the raw env, as check_env asks; make() wrappers are Gymnasium's own
    unexpected = [_strip_ansi(str(w.message)) for w in caught]
    unexpected = [m for m in unexpected if not any(a in m for a in ALLOWED_CHECK_ENV_WARNINGS)]
    assert not unexpected, f"unexpected check_env warnings: {unexpected}"


@pytest.mark.parametrize("obs_mode", ["rgb", "state+rgb"])
def test_gymnasium_check_env_image_modes(make_env, obs_mode):
    env = make_env(ENV_IDS[0], obs_mode=obs_mode, image_size=32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    unexpected = [_strip_ansi(str(w.message)) for w in caught]
    unexpected = [m for m in unexpected if not any(a in m for a in ALLOWED_CHECK_ENV_WARNINGS)]
    assert not unexpected, f"unexpected check_env warnings: {unexpected}"


def test_stable_baselines3_check_env(env_id, make_env):
    from stable_baselines3.common import env_checker as sb3_checker  # the test extra: never skipped

    env = make_env(env_id)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # SB3 reports what it would not support as warnings
        sb3_checker.check_env(env.unwrapped, warn=True, skip_render_check=True)


def test_spaces_and_obs_keys(env_id, make_env):
    env = make_env(env_id)
    assert env.action_space == gym.spaces.Box(-1.0, 1.0, shape=(22,), dtype=np.float32)
    obs, info = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    assert set(obs) == STATE_KEYS
    for key in ("is_success", "object_outcomes", "failure_cause", "time_to_sort", "sort_accuracy", "unstable"):
        assert key in info, f"info lacks {key!r}"


# ---------------------------------------------------------------------- determinism, serialization
def test_seeded_determinism(env_id, make_env):
    env_a, env_b = make_env(env_id), make_env(env_id)
    actions = random_actions(env_a, 40, seed=1)
    obs_a, rew_a = _rollout(env_a, 123, actions)
    obs_b, rew_b = _rollout(env_b, 123, actions)
    assert len(obs_a) == len(obs_b)
    for a, b in zip(obs_a, obs_b):
        assert_obs_equal(a, b)
    assert rew_a == rew_b  # bit-identical floats, not approximately equal

    obs_c, _ = _rollout(env_b, 124, actions)
    assert not np.array_equal(obs_a[0]["object_pos"], obs_c[0]["object_pos"]), "a different seed gave the same layout"
    assert any(not np.array_equal(a["object_pos"], c["object_pos"]) for a, c in zip(obs_a, obs_c))


def test_pickle_round_trip(env_id, make_env):
    env = make_env(env_id)
    env.reset(seed=5)
    actions = random_actions(env, 15, seed=2)
    for a in actions[:10]:
        env.step(a)
    clone = pickle.loads(pickle.dumps(env))
    try:
        for a in actions[10:]:
            out_a, out_b = env.step(a), clone.step(a)
            assert_obs_equal(out_a[0], out_b[0])
            assert out_a[1:4] == out_b[1:4]
            assert out_a[4] == out_b[4]
    finally:
        clone.close()


def test_reset_restores_state(env_id, make_env):
    fresh = make_env(env_id)
    obs_fresh, info_fresh = fresh.reset(seed=9)

    used = make_env(env_id)
    used.reset(seed=3)
    for a in random_actions(used, 25, seed=4):
        used.step(a)
    obs_again, info_again = used.reset(seed=9)
    assert_obs_equal(obs_fresh, obs_again)
    assert info_fresh == info_again
    # And the episode goes on identically from there.
    a = random_actions(used, 1, seed=8)[0]
    assert_obs_equal(fresh.step(a)[0], used.step(a)[0])


def test_reward_is_sum_of_named_terms(env_id, make_env):
    from r2s2r_envs.behavior import make_demonstrator

    env = make_env(env_id)
    demo = make_demonstrator(env)
    obs, _ = env.reset(seed=0)
    demo.reset(0)
    nonzero_terms = set()
    for t in range(120):
        # Mix the planner (reaches and grasps: non-zero shaping terms) with random actions.
        action = demo.act(obs) if t % 4 else env.action_space.sample()
        obs, reward, terminated, truncated, info = env.step(action)
        terms = {k: v for k, v in info.items() if k.startswith("reward_")}
        assert set(terms) == {"reward_reach", "reward_grasp", "reward_transport", "reward_sort", "reward_failure"}
        assert reward == pytest.approx(sum(terms.values()), rel=1e-12, abs=1e-12)
        nonzero_terms |= {k for k, v in terms.items() if v != 0.0}
        if terminated or truncated:
            break
    assert "reward_reach" in nonzero_terms  # the check above was not vacuous


def test_sparse_reward_mode(make_env):
    env = make_env(ENV_IDS[0], reward_mode="sparse")
    env.reset(seed=0)
    _, reward, *_, info = env.step(np.zeros(22, dtype=np.float32))
    assert info["reward_reach"] == 0.0 and reward == 0.0


def test_async_vector_env(env_id):
    envs = gym.make_vec(env_id, num_envs=2, vectorization_mode="async")
    try:
        obs, info = envs.reset(seed=[0, 1])
        assert obs["arm_qpos"].shape == (2, 7)
        assert not np.array_equal(obs["object_pos"][0], obs["object_pos"][1])
        for _ in range(5):
            obs, reward, terminated, truncated, info = envs.step(envs.action_space.sample())
        assert reward.shape == (2,) and np.all(np.isfinite(reward))
        assert obs["object_pos"].shape == (2, 9)
    finally:
        envs.close()


def test_env_spec_json_round_trip(env_id):
    spec = gym.spec(env_id)
    assert isinstance(spec.entry_point, str), "entry points must be strings (data, never code: docs/architecture.md)"
    json.dumps(spec.kwargs)  # JSON-serializable kwargs only
    restored = EnvSpec.from_json(spec.to_json())
    assert restored == spec
    # One time limit: the env's own episode_steps, recorded in the kwargs; no Gymnasium TimeLimit on top.
    assert restored.max_episode_steps is None and restored.kwargs["episode_steps"] == 500


def test_spec_round_trip_recreates_env(env_id, make_env):
    spec = EnvSpec.from_json(make_env(env_id).spec.to_json())
    env = gym.make(spec)
    try:
        assert env.spec.id == env_id
        env.reset(seed=0)
    finally:
        env.close()


# ---------------------------------------------------------------------- bad input
@pytest.mark.parametrize("shape", [(21,), (23,), (1, 22), ()])
def test_action_wrong_shape(env_id, make_env, shape):
    env = make_env(env_id)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"\(22,\).*\[-1, 1\]"):
        env.unwrapped.step(np.zeros(shape, dtype=np.float32))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_action_not_finite(env_id, make_env, bad):
    env = make_env(env_id)
    env.reset(seed=0)
    action = np.zeros(22, dtype=np.float32)
    action[7] = bad
    with pytest.raises(ValueError, match=r"(?s)(\(22,\).*\[-1, 1\]|\[-1, 1\].*\(22,\))"):
        env.unwrapped.step(action)


@pytest.mark.parametrize(
    "bad, what",
    [
        ("left", "got a str"),
        ({"arm": np.zeros(6)}, "got a dict"),
        (np.array([object()] * 22, dtype=object), "dtype object"),
        ([[0.0] * 3, [0.0]], "ragged or mixed sequence"),
        (np.zeros(22, dtype=complex), "dtype complex128"),
        (np.zeros(22, dtype=bool), "dtype bool"),
    ],
)
def test_action_of_another_kind(env_id, make_env, bad, what):
    env = make_env(env_id)
    env.reset(seed=0)
    with pytest.raises(TypeError, match=r"action must be an array of shape \(22,\) of real numbers") as err:
        env.unwrapped.step(bad)
    assert what in str(err.value)


def test_set_state_refuses_non_finite_and_non_numeric_states(make_env):
    env = make_env(ENV_IDS[0])
    env.reset(seed=0)
    state = env.unwrapped.get_state()
    for bad in (np.nan, np.inf):
        broken = state.copy()
        broken[3] = bad
        with pytest.raises(ValueError, match=r"state must be finite.*indices \[3\]"):
            env.unwrapped.set_state(broken)
    with pytest.raises(TypeError, match="state must be an array of real numbers"):
        env.unwrapped.set_state(state.astype(complex))
    obs, *_ = env.unwrapped.step(np.zeros(22, dtype=np.float32))  # the refused states left the env as it was
    assert all(np.isfinite(v).all() for v in obs.values())


def test_action_out_of_range_is_clipped(make_env):
    env_a, env_b = make_env(ENV_IDS[0]), make_env(ENV_IDS[0])
    env_a.reset(seed=0)
    env_b.reset(seed=0)
    big = np.full(22, 5.0, dtype=np.float32)
    assert_obs_equal(env_a.unwrapped.step(big)[0], env_b.unwrapped.step(np.ones(22, dtype=np.float32))[0])


def test_unknown_kwarg_lists_valid(env_id):
    with pytest.raises(TypeError, match="bogus_option") as err:
        gym.make(env_id, bogus_option=1)
    for valid in ("obs_mode", "num_objects", "render_mode"):
        assert valid in str(err.value)


def test_unknown_obs_mode_lists_valid(env_id):
    with pytest.raises(ValueError, match="pixels") as err:
        gym.make(env_id, obs_mode="pixels")
    for valid in ("state", "rgb", "state+rgb"):
        assert repr(valid) in str(err.value)


def test_unknown_lab_key_lists_valid():
    with pytest.raises(KeyError) as err:
        gym.make("PickSort-Real-v0", lab={"physics": {}})
    assert "physics" in str(err.value) and "effects" in str(err.value) and "world" in str(err.value)


# ---------------------------------------------------------------------- divergence
def test_diverging_simulation_truncates(env_id, make_env):
    env = make_env(env_id)
    env.reset(seed=0)
    env.step(np.zeros(22, dtype=np.float32))
    env.unwrapped._data.qvel[:] = 1e9  # private on purpose: the lab refuses `data` to everyone else
    obs, reward, terminated, truncated, info = env.step(np.zeros(22, dtype=np.float32))
    assert truncated and not terminated
    assert info["unstable"] is True
    assert info["failure_cause"] == "unstable"
    assert not info["is_success"]
    assert np.isfinite(reward)
    for k, v in obs.items():
        assert np.all(np.isfinite(v)), f"non-finite observation {k!r} after divergence"
    # The env is usable again after a reset.
    obs, info = env.reset(seed=1)
    assert info["unstable"] is False
    env.step(np.zeros(22, dtype=np.float32))


def test_time_limit_times_out_pending_objects(env_id, make_env):
    env = make_env(env_id, episode_steps=5)
    env.reset(seed=0)
    for step in range(1, 6):
        obs, reward, terminated, truncated, info = env.step(np.zeros(22, dtype=np.float32))
        if step < 5:
            assert not truncated and info["failure_cause"] is None
    assert truncated and not terminated
    assert info["object_outcomes"] == ["timeout"] * 3
    assert info["failure_cause"] == "timeout"


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_bad_episode_steps(env_id, bad):
    with pytest.raises(ValueError, match="episode_steps"):
        gym.make(env_id, episode_steps=bad)


# ---------------------------------------------------------------------- images and rendering
def test_rgb_observations(env_id, make_env):
    env = make_env(env_id, obs_mode="rgb")
    obs, _ = env.reset(seed=0)
    obs, *_ = env.step(np.zeros(22, dtype=np.float32))
    assert "object_pos" not in obs  # objects must be perceived in image mode
    for key in ("scene_image", "wrist_image"):
        img = obs[key]
        assert img.dtype == np.uint8 and img.shape == (128, 128, 3), (key, img.dtype, img.shape)
        assert img.std() > 5.0, f"{key} looks blank"
    assert np.mean(np.abs(obs["scene_image"].astype(int) - obs["wrist_image"].astype(int))) > 5.0
    assert env.observation_space.contains(obs)


def test_render_returns_image(env_id, make_env):
    env = make_env(env_id, render_mode="rgb_array", render_size=(120, 160))
    env.reset(seed=0)
    frame = env.render()
    assert isinstance(frame, np.ndarray) and frame.dtype == np.uint8 and frame.shape == (120, 160, 3)
    assert frame.std() > 5.0


def test_human_render_mode_is_gymnasiums_wrapper_over_rgb_array():
    """``render_mode="human"`` is what Gymnasium gives any rgb_array env: its HumanRendering wrapper (a pygame
    window, opened at the first render); the env class itself takes only "rgb_array" (docs/task.md)."""
    from gymnasium.wrappers import HumanRendering

    from r2s2r_envs.envs.pick_sort import PickSortEnv

    with pytest.warns(UserWarning, match="HumanRendering wrapper is being applied"):
        env = gym.make(ENV_IDS[0], render_mode="human")
    try:
        assert isinstance(env, HumanRendering) and env.render_mode == "human"
        assert env.unwrapped.render_mode == "rgb_array"
    finally:
        env.close()
    with pytest.raises(ValueError, match=r"unknown render_mode 'human'; valid: \[None, 'rgb_array'\]"):
        PickSortEnv(render_mode="human")


def test_pickle_after_render(make_env):
    env = make_env(ENV_IDS[0], obs_mode="rgb", image_size=32)
    env.reset(seed=0)
    clone = pickle.loads(pickle.dumps(env))  # GL contexts are dropped and recreated on demand
    try:
        a = np.zeros(22, dtype=np.float32)
        assert_obs_equal(env.step(a)[0], clone.step(a)[0])
    finally:
        clone.close()


def test_check_env_id_and_make_env_are_the_one_gate():
    from r2s2r_envs.envs import EnvArgumentError, UnknownEnvError, check_env_id, make_env

    assert check_env_id(ENV_IDS[0]) == ENV_IDS[0]
    assert check_env_id("CartPole-v1", picksort_only=False) == "CartPole-v1"  # a user's own env, for datasets
    for bad in ("CartPole-v1", "PickSort-Nope-v0", 3, None):
        with pytest.raises(UnknownEnvError, match="registered PickSort ids") as err:
            check_env_id(bad)
        assert ENV_IDS[0] in str(err.value)
    with pytest.raises(UnknownEnvError, match="not a registered id"):
        check_env_id("NoSuchEnv-v0", picksort_only=False)
    with pytest.raises(EnvArgumentError, match="num_objects"):
        make_env(ENV_IDS[0], {"num_objects": 99})
    env = make_env(ENV_IDS[0], {"num_objects": 1})
    try:
        assert env.spec.id == ENV_IDS[0]
    finally:
        env.close()


# ---------------------------------------------------------------------- registry
def test_env_ids_come_from_the_registry():
    gym.register(id="PickSort-TestVariant-v0", entry_point="r2s2r_envs.envs.pick_sort:PickSortEnv")
    try:
        assert "PickSort-TestVariant-v0" in r2s2r_envs.registered_ids()
    finally:
        del gym.registry["PickSort-TestVariant-v0"]
    assert set(ENV_IDS) >= {SIM, REAL}
    assert "PickSort-TestVariant-v0" not in r2s2r_envs.registered_ids()


# ---------------------------------------------------------------------- one time limit
def test_registered_ids_carry_no_outer_time_limit(env_id, make_env):
    env = make_env(env_id)
    wrapper = env
    while isinstance(wrapper, gym.Wrapper):
        assert not isinstance(wrapper, gym.wrappers.TimeLimit), f"{env_id} is wrapped in a TimeLimit"
        wrapper = wrapper.env


@pytest.mark.parametrize("limit", [1, 37, 600])
def test_any_limit_ends_with_every_object_given_an_outcome(limit, make_env):
    # 8 objects at the widest spacing: the last one is still upstream after 30 s, so 600 steps end by the limit.
    env = make_env(SIM, episode_steps=limit, num_objects=8, randomization={"object_gap": (0.4, 0.4)})
    env.reset(seed=0)
    steps, done = 0, False
    while not done:
        _, _, terminated, truncated, info = env.step(np.zeros(22, dtype=np.float32))
        steps += 1
        done = terminated or truncated
    assert steps == limit and truncated and not terminated
    assert "pending" not in info["object_outcomes"]
    assert "timeout" in info["object_outcomes"] and info["failure_cause"] is not None


def test_step_before_reset_raises(env_id):
    env = gym.make(env_id)
    with pytest.raises(RuntimeError, match="reset"):
        env.unwrapped.step(np.zeros(22, dtype=np.float32))
    env.close()


# ---------------------------------------------------------------------- joint control mode
def test_joint_control_mode_reaches_joint_targets(make_env):
    env = make_env(SIM, control_mode="joint", num_objects=1)
    assert env.action_space.shape == (23,)
    base = env.unwrapped
    env.reset(seed=0)
    lo, hi = base.scene.arm_range[:, 0], base.scene.arm_range[:, 1]
    target = np.array([0.3, -0.2, 0.1, -2.0, 0.2, 1.8, 0.5])
    action = np.zeros(23, dtype=np.float32)
    action[:7] = 2.0 * (target - lo) / (hi - lo) - 1.0
    for _ in range(40):
        env.step(action)
    np.testing.assert_allclose(base.scene.arm_qpos(base.data), target, atol=0.02)
    with pytest.raises(ValueError, match=r"\(23,\)"):
        env.unwrapped.step(np.zeros(22, dtype=np.float32))


def test_unknown_control_mode_lists_valid():
    with pytest.raises(ValueError, match="'task'.*'joint'"):
        gym.make(SIM, control_mode="torque")


# ---------------------------------------------------------------------- the scene view
def test_scene_view_names(make_env):
    env = make_env(SIM, num_objects=2)
    base = env.unwrapped
    obs, _ = env.reset(seed=0)
    scene = base.scene
    np.testing.assert_array_equal(scene.arm_qpos(base.data).astype(np.float32), obs["arm_qpos"])
    np.testing.assert_array_equal(scene.object_pos(base.data).ravel().astype(np.float32), obs["object_pos"])
    assert scene.joint_qpos(base.data, "arm/joint4") == pytest.approx(float(obs["arm_qpos"][3]), abs=1e-6)
    with pytest.raises(KeyError, match="arm/joint1"):
        scene.joint_qpos(base.data, "elbow")
    scene.set_object_pose(base.data, 1, (0.25, 0.0, 0.05))
    np.testing.assert_array_equal(scene.object_pos(base.data)[1], (0.25, 0.0, 0.05))


# ---------------------------------------------------------------------- validated arguments
def test_eight_objects_all_start_on_the_belt(make_env):
    env = make_env(SIM, num_objects=8)
    env.reset(seed=0)
    for _ in range(20):
        _, _, _, _, info = env.step(np.zeros(22, dtype=np.float32))
    assert info["object_outcomes"] == ["pending"] * 8


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"num_objects": 9}, "num_objects"),
        ({"num_objects": 0}, "num_objects"),
        ({"num_objects": 6, "randomization": {"object_gap": (0.6, 0.6)}}, "belt"),
        ({"render_size": (0, 0)}, "render_size"),
        ({"render_size": (1000, 1000)}, "render_size"),
        ({"image_size": 1024}, "image_size"),
        ({"image_size": True}, "image_size"),
        ({"randomization": {"object_gap": (0.4, 0.2)}}, "object_gap"),
        ({"randomization": {"category_weights": (0.0, 0.0, 0.0)}}, "category_weights"),
        ({"randomization": {"category_weights": (float("nan"), 1.0, 1.0)}}, "category_weights"),
        ({"randomization": {"lateral_offset": (-0.5, 0.5)}}, "lateral_offset"),
        ({"world": {"belt_speed": -0.1}}, "belt_speed"),
    ],
)
def test_bad_arguments_name_the_field(kwargs, match):
    with pytest.raises((ValueError, TypeError)) as err:
        gym.make(SIM, **kwargs)
    assert match in str(err.value)


def test_wrong_types_name_the_field():
    with pytest.raises(TypeError, match="randomization.yaw"):
        gym.make(SIM, randomization={"yaw": "wide"})
    with pytest.raises(TypeError, match="WorldParams.belt_speed"):
        gym.make(SIM, world={"belt_speed": "fast"})
