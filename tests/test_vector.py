"""The native vector env (``envs.vector``): ``gym.make_vec`` gives N envs bit-identical to N single envs; async
vector envs with images."""

from __future__ import annotations

import multiprocessing as mp
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from conftest import REPO_ROOT
from gymnasium.vector import AutoresetMode

import r2s2r_envs
from r2s2r_envs.envs.vector import PickSortVectorEnv, make_vector_env
from r2s2r_envs.lab.lab_env import LabBoundaryError

IDS = r2s2r_envs.envs.registered_ids()
EPISODE_STEPS = 6  # short episodes, so the rollouts below cross autoresets


def _rng_states(env) -> list:
    e = env.unwrapped
    streams = (e.np_random, e._layout_rng, e._physics_rng, e._sensor_rng, e._extra_sensor_rng)
    return [r.bit_generator.state for r in streams]


def _compare_rollout(env_id: str, num_envs: int, steps: int, **kwargs) -> None:
    """Vector env vs ``num_envs`` single envs on seeds s, s+1, ... with the same actions, across autoresets."""
    vec = gym.make_vec(env_id, num_envs=num_envs, episode_steps=EPISODE_STEPS, **kwargs)
    singles = [gym.make(env_id, episode_steps=EPISODE_STEPS, **kwargs) for _ in range(num_envs)]
    try:
        assert isinstance(vec.unwrapped, PickSortVectorEnv)
        obs, info = vec.reset(seed=11)
        expected = [env.reset(seed=11 + i) for i, env in enumerate(singles)]
        ended = [False] * num_envs
        rng = np.random.default_rng(3)
        for t in range(steps + 1):
            for i, (o, inf) in enumerate(expected):
                for key, value in o.items():
                    assert np.array_equal(obs[key][i], value), f"{env_id} step {t} env {i} {key}"
                assert list(info["object_outcomes"][i]) == inf["object_outcomes"]
                assert _rng_states(singles[i]) == _rng_states(vec.unwrapped.envs[i])
            if t == steps:
                break
            actions = rng.uniform(-1.2, 1.2, size=vec.action_space.shape).astype(np.float32)  # some clipped
            obs, rewards, terms, truncs, info = vec.step(actions)
            for i, env in enumerate(singles):
                if ended[i]:  # Gymnasium's next-step autoreset: this step resets the env, reward 0
                    expected[i] = env.reset()
                    assert rewards[i] == 0.0 and not terms[i] and not truncs[i]
                    ended[i] = False
                else:
                    o, r, te, tr, inf = env.step(actions[i])
                    expected[i] = (o, inf)
                    assert (rewards[i], terms[i], truncs[i]) == (r, te, tr), f"{env_id} step {t} env {i}"
                    for key in ("is_success", "sort_accuracy", "reward_reach", "elapsed_time"):
                        assert info[key][i] == inf[key]
                    ended[i] = te or tr
    finally:
        vec.close()
        for env in singles:
            env.close()


@pytest.mark.parametrize("env_id", IDS)
def test_make_vec_is_bit_identical_to_single_envs_in_state_mode(env_id):
    _compare_rollout(env_id, num_envs=3, steps=2 * EPISODE_STEPS + 3)


def test_make_vec_is_bit_identical_in_rgb_mode():
    _compare_rollout("PickSort-Ungrounded-v0", num_envs=2, steps=EPISODE_STEPS + 2, obs_mode="rgb", image_size=16)


def test_make_vec_is_bit_identical_with_the_extra_sensors():
    _compare_rollout("PickSort-Real-v0", num_envs=2, steps=EPISODE_STEPS + 2, sensors=["arm_torque", "finger_current"])


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_the_number_of_threads_does_not_change_results(threads):
    vec = gym.make_vec("PickSort-Real-v0", num_envs=3, num_threads=threads)
    obs, _ = vec.reset(seed=2)
    actions = np.random.default_rng(0).uniform(-1, 1, size=vec.action_space.shape)
    for _ in range(3):
        obs, *_ = vec.step(actions)
    ref = gym.make("PickSort-Real-v0")
    ref.reset(seed=4)
    for _ in range(3):
        o, *_ = ref.step(actions[2])
    assert all(np.array_equal(obs[k][2], o[k]) for k in o)


def test_images_are_rendered_in_the_calling_thread(monkeypatch):
    # A GL context belongs to the thread that made it: with images, threads run only the physics.
    import threading

    from r2s2r_envs.envs.pick_sort import PickSortEnv

    rendering_threads: set[int] = set()
    render = PickSortEnv._render_camera

    def spy(self, *args, **kwargs):
        rendering_threads.add(threading.get_ident())
        return render(self, *args, **kwargs)

    monkeypatch.setattr(PickSortEnv, "_render_camera", spy)
    vec = gym.make_vec("PickSort-Ungrounded-v0", num_envs=3, num_threads=3, obs_mode="rgb", image_size=16)
    try:
        vec.reset(seed=0)
        vec.step(np.zeros(vec.action_space.shape))
    finally:
        vec.close()
    assert rendering_threads == {threading.get_ident()}


def test_spaces_and_metadata_follow_gymnasium():
    vec = gym.make_vec("PickSort-Ungrounded-v0", num_envs=2)
    single = gym.make("PickSort-Ungrounded-v0")
    assert vec.single_observation_space == single.observation_space
    assert vec.action_space.shape == (2, *single.action_space.shape)
    assert vec.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    obs, info = vec.reset(seed=0)
    assert vec.observation_space.contains(obs)
    assert info["_is_success"].all()
    assert vec.spec.id == "PickSort-Ungrounded-v0"
    vec.close()


def test_same_step_autoreset_reports_the_final_observation():
    vec = gym.make_vec("PickSort-Ungrounded-v0", num_envs=2, episode_steps=2, autoreset_mode="SameStep")
    single = gym.make("PickSort-Ungrounded-v0", episode_steps=2)
    vec.reset(seed=0)
    single.reset(seed=0)
    a = np.zeros(vec.action_space.shape)
    vec.step(a)
    single.step(a[0])
    obs, _, _, truncs, info = vec.step(a)
    final, *_ = single.step(a[0])
    reset_obs, _ = single.reset()
    assert truncs.all() and info["_final_obs"].all()
    assert np.array_equal(info["final_obs"][0]["arm_qpos"], final["arm_qpos"])
    assert np.array_equal(obs["arm_qpos"][0], reset_obs["arm_qpos"])
    assert info["final_info"]["object_outcomes"][0] == ["timeout"] * 3


def test_disabled_autoreset_leaves_ended_envs_alone_until_reset_mask():
    vec = gym.make_vec("PickSort-Ungrounded-v0", num_envs=2, episode_steps=2, autoreset_mode="Disabled")
    vec.reset(seed=[5, None])
    a = np.zeros(vec.action_space.shape)
    vec.step(a)
    obs, _, _, truncs, _ = vec.step(a)
    assert truncs.all()
    again, rewards, _, truncs2, info = vec.step(a)  # both ended: nothing moves
    assert np.array_equal(again["arm_qpos"], obs["arm_qpos"]) and (rewards == 0).all() and truncs2.all()
    assert "_is_success" not in info or not info["_is_success"].any()
    single = gym.make("PickSort-Ungrounded-v0", episode_steps=2)
    expected, _ = single.reset(seed=9)
    obs, info = vec.reset(seed=[9, None], options={"reset_mask": np.array([True, False])})
    assert np.array_equal(obs["object_pos"][0], expected["object_pos"])
    assert info["_is_success"].tolist() == [True, False]
    _, _, _, truncs, _ = vec.step(a)
    assert truncs.tolist() == [False, True]


def test_per_env_worlds_match_single_envs_with_those_worlds():
    worlds = [{"belt_speed": 0.10}, {"belt_speed": 0.16}]
    vec = gym.make_vec("PickSort-Ungrounded-v0", num_envs=2, world=worlds)
    vec.reset(seed=1)
    a = np.zeros(vec.action_space.shape)
    obs, *_ = vec.step(a)
    for i, w in enumerate(worlds):
        single = gym.make("PickSort-Ungrounded-v0", world=w)
        single.reset(seed=1 + i)
        o, *_ = single.step(a[i])
        assert np.array_equal(obs["object_pos"][i], o["object_pos"])
    # at reset, per env: the same as the single env's reset option
    obs, _ = vec.reset(seed=3, options={"world": [{"belt_speed": 0.2}, "nominal"]})
    single = gym.make("PickSort-Ungrounded-v0")
    single.reset(seed=3, options={"world": {"belt_speed": 0.2}})
    o, *_ = single.step(a[0])
    v, *_ = vec.step(a)
    assert np.array_equal(v["object_pos"][0], o["object_pos"])
    assert [e.world_params.belt_speed for e in vec.unwrapped.envs] == [
        0.2,
        gym.make("PickSort-Ungrounded-v0").unwrapped.world_params.belt_speed,
    ]


def test_a_world_list_of_the_wrong_length_is_refused():
    with pytest.raises(ValueError, match=r"list of 3 worlds but the vector env has num_envs=2.*exactly 2"):
        gym.make_vec("PickSort-Ungrounded-v0", num_envs=2, world=["nominal"] * 3)
    vec = gym.make_vec("PickSort-Ungrounded-v0", num_envs=2)
    vec.reset(seed=0)
    with pytest.raises(ValueError, match="num_envs=2"):
        vec.reset(options={"world": ["nominal"]})
    with pytest.raises(ValueError, match="num_envs=2"):
        vec.unwrapped.set_world(["nominal"] * 3)
    with pytest.raises(TypeError, match="one world"):
        vec.unwrapped.set_world(42)


def test_the_lab_stays_a_black_box():
    vec = gym.make_vec("PickSort-Real-v0", num_envs=2)
    with pytest.raises(LabBoundaryError):
        vec.unwrapped.set_world("nominal")
    with pytest.raises(LabBoundaryError):
        vec.unwrapped.get_attr("world_params")
    with pytest.raises(TypeError, match="no 'world' argument"):
        gym.make_vec("PickSort-Real-v0", num_envs=2, world="nominal")


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_num_envs_below_one_is_refused(bad):
    with pytest.raises(ValueError, match=r"num_envs must be an integer >= 1"):
        gym.make_vec("PickSort-Ungrounded-v0", num_envs=bad)
    with pytest.raises(ValueError, match=r"num_envs must be an integer >= 1"):
        make_vector_env("PickSort-Ungrounded-v0", bad)


def test_more_envs_than_memory_holds_are_refused_before_allocating(monkeypatch):
    """gym.make_vec(id, num_envs=10**6) allocated until memory ran out (issue 50)."""
    from r2s2r_envs.envs import vector

    monkeypatch.setattr(vector, "_physical_memory", lambda: 8 * 2**30)
    with pytest.raises(
        ValueError,
        match=r"num_envs=1000000 needs at least 977 GiB \(1 MiB per env\); this machine has "
        r"8 GiB: give at most 8192 envs",
    ):
        gym.make_vec("PickSort-Ungrounded-v0", num_envs=10**6)
    assert gym.make_vec("PickSort-Ungrounded-v0", num_envs=2).num_envs == 2


@pytest.mark.parametrize("bad, named", [("x", "got str"), ({"a": 1}, "got dict"), (np.full(3, 1j), "complex128")])
def test_actions_that_are_not_numbers_are_named_as_such(bad, named):
    vec = gym.make_vec("PickSort-Ungrounded-v0", num_envs=2)
    vec.reset(seed=0)
    with pytest.raises(TypeError, match=rf"actions must be a numeric array of shape \(2, 22\) .*{named}"):
        vec.step(bad)


def _assert_same_infos(got: dict, expected: dict) -> None:
    assert list(got) == list(expected)  # keys and "_key" masks in Gymnasium's order
    for key, value in expected.items():
        assert got[key].dtype == value.dtype and got[key].shape == value.shape, key
        for a, b in zip(got[key], value):
            assert (a is b is None) or a == b or (a != a and b != b), (key, a, b)  # NaN: equal


def test_infos_are_what_gymnasiums_add_info_makes_one_env_at_a_time():
    vec = gym.make_vec("PickSort-Ungrounded-v0", num_envs=3, episode_steps=3, autoreset_mode="Disabled")
    base = vec.unwrapped

    def reference(rows) -> dict:
        infos: dict = {}
        for i in rows:
            infos = base._add_info(infos, base.env_infos[i], i)
        return infos

    _, info = vec.reset(seed=[1, 2, None])
    _assert_same_infos(info, reference([0, 1, 2]))
    a = np.zeros(vec.action_space.shape)
    for _ in range(3):
        _, _, _, _, info = vec.step(a)
        _assert_same_infos(info, reference([0, 1, 2]))
    _, _, _, truncs, info = vec.step(a)  # every env ended: none stepped, no info
    assert truncs.all() and info == {}
    _, info = vec.reset(seed=[4, None, None], options={"reset_mask": np.array([True, False, True])})
    _assert_same_infos(info, reference([0, 2]))
    assert info["_time_to_sort"].tolist() == [True, False, True]


def _python(value):
    """A batched info's element as the env gave it (numpy scalars back to Python's)."""
    return value.item() if isinstance(value, np.generic) else value


def test_same_step_infos_keep_gymnasiums_order_of_final_and_reset_infos():
    vec = gym.make_vec("PickSort-Ungrounded-v0", num_envs=2, episode_steps=1, autoreset_mode="SameStep")
    base = vec.unwrapped
    vec.reset(seed=[3, 4])
    _, _, _, truncs, info = vec.step(np.zeros(vec.action_space.shape))  # both end and reset in this step
    assert truncs.all()
    final_keys = [k for k in info["final_info"] if not k.startswith("_")]
    expected: dict = {}
    for i in range(2):  # Gymnasium's order: env 0's final info, env 0's reset info, then env 1's
        final = {k: _python(info["final_info"][k][i]) for k in final_keys}
        expected = base._add_info(expected, {"final_obs": info["final_obs"][i], "final_info": final}, i)
        expected = base._add_info(expected, base.env_infos[i], i)
    assert list(info) == list(expected)
    _assert_same_infos(info["final_info"], expected["final_info"])
    _assert_same_infos({k: v for k, v in info.items() if not k.startswith(("final", "_final"))},
                       {k: v for k, v in expected.items() if not k.startswith(("final", "_final"))})  # fmt: skip


def test_bad_actions_name_the_shape_and_the_env():
    vec = gym.make_vec("PickSort-Ungrounded-v0", num_envs=2)
    with pytest.raises(RuntimeError, match="before reset"):
        vec.step(np.zeros((2, 22)))
    vec.reset(seed=0)
    with pytest.raises(ValueError, match=r"shape \(2, 22\) \(one row per env\), got shape \(22,\)"):
        vec.step(np.zeros(22))
    a = np.zeros((2, 22))
    a[1, 3] = np.nan
    with pytest.raises(ValueError, match="env 1: action must be finite"):
        vec.step(a)
    with pytest.raises(TypeError, match="env 0: action must be .* got an array of dtype <U1"):
        vec.step(np.full((2, 22), "a"))
    with pytest.raises(ValueError, match="unknown autoreset_mode"):
        gym.make_vec("PickSort-Ungrounded-v0", num_envs=2, autoreset_mode="sometimes")


def test_make_vector_env_serves_ids_registered_without_a_vector_entry_point():
    gym.register(
        "PickSort-TestNoVector-v0", entry_point="r2s2r_envs.envs.pick_sort:PickSortEnv", kwargs={"num_objects": 2}
    )
    try:
        vec = make_vector_env("PickSort-TestNoVector-v0", 2)
        assert isinstance(vec, PickSortVectorEnv) and vec.unwrapped.envs[0].num_objects == 2
    finally:
        del gym.registry["PickSort-TestNoVector-v0"]


# ---------------------------------------------------------------------- vector envs with images
VECTOR_SCRIPT = """
import gymnasium as gym, numpy as np, r2s2r_envs
if __name__ == "__main__":
    env = gym.make("PickSort-Ungrounded-v0", obs_mode="rgb", image_size=16)
    env.reset(seed=0)  # the parent renders first
    env.close()
    kwargs = {} if "{context}" == "fork" else {"context": "{context}"}
    envs = gym.make_vec("PickSort-Ungrounded-v0", num_envs=2, vectorization_mode="async", vector_kwargs=kwargs,
                        obs_mode="rgb", image_size=16)
    try:
        obs, _ = envs.reset(seed=[0, 1])
        print("shape", obs["scene_image"].shape)
    except Exception as e:
        print("error", e)
    envs.close()
"""


@pytest.mark.slow
@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_async_rgb_after_parent_rendered(tmp_path, context):
    if context == "fork" and "fork" not in mp.get_all_start_methods():
        pytest.fail("this platform has no fork start method; the fork check cannot be exercised")
    script = tmp_path / "vec.py"
    script.write_text(VECTOR_SCRIPT.replace("{context}", context))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    if context == "spawn":
        assert "shape (2, 16, 16, 3)" in out.stdout, out.stdout + out.stderr
    else:  # forked children cannot create a GL context: a clear error naming the fix, not a hang
        assert "error" in out.stdout and "spawn" in out.stdout, out.stdout + out.stderr
