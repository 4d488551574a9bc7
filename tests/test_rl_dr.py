"""``baselines/rl_dr.py``: PPO with domain randomization, evaluated zero-shot in the lab with the protocol.

The script is run end to end for a few hundred steps (what it writes must be a valid result the leaderboard
reads); the randomization is checked at the env: every reset draws a new world inside the ranges.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from r2s2r_envs.evaluation.leaderboard import build_leaderboard
from r2s2r_envs.evaluation.protocol import EvaluationResult

SCRIPT = Path(__file__).resolve().parents[1] / "baselines" / "rl_dr.py"


@pytest.fixture(scope="module")
def rl_dr():
    spec = importlib.util.spec_from_file_location("rl_dr", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["rl_dr"] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("rl_dr", None)


def test_every_reset_draws_a_world_inside_the_ranges(rl_dr, tmp_path):
    config = rl_dr.Config(out=str(tmp_path), num_objects=1, episode_steps=20)
    randomization = rl_dr.make_randomization(config)
    ranges = json.loads(Path(config.randomization).read_text())["ranges"]
    assert dict(randomization.to_dict()["ranges"]) == ranges  # the file is the ranges, nothing added
    env = rl_dr.make_training_env(config, randomization)
    worlds = []
    for seed in (0, 1, None):
        obs, info = env.reset(seed=seed)
        assert obs.shape == env.observation_space.shape and obs.dtype == np.float32
        worlds.append(info["world"])
    assert worlds[0] != worlds[1] != worlds[2]
    for world in worlds:
        for name, r in ranges.items():
            values = np.atleast_1d(world[name])
            bounds = np.array(r if isinstance(r[0], list) else [r])
            assert np.all((bounds[:, 0] <= values) & (values <= bounds[:, 1])), name
    env.close()


def test_flat_observation_is_the_policy_input(rl_dr):
    import gymnasium as gym

    env = gym.make("PickSort-Real-v0", num_objects=1, episode_steps=20)
    obs, _ = env.reset(seed=3)
    keys = rl_dr.obs_keys(env.observation_space)
    assert keys == sorted(keys) and "object_pos" in keys and "eef_pos" in keys
    flat = rl_dr.flatten(obs, keys)
    assert flat.shape == (sum(env.observation_space[k].shape[0] for k in keys),)
    env.close()


@pytest.mark.slow
@pytest.mark.parametrize("num_envs", [1, 2])
def test_script_trains_briefly_and_writes_results_the_leaderboard_reads(tmp_path, num_envs):
    out = tmp_path / "rl_dr"
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(out), "--total-steps", "256", "--n-steps", str(128 // num_envs)]
        + ["--batch-size", "64", "--episode-steps", "40", "--eval-episodes", "2", "--num-envs", str(num_envs)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    config = json.loads((out / "config.json").read_text())
    log = json.loads((out / "train_log.json").read_text())
    assert log["env_steps"] == 256 and config["env_steps"] == 256 and config["episode_steps"] == 40
    assert config["num_envs"] == num_envs
    assert {"mean", "var", "keys"} <= set(np.load(out / "obs_normalization.npz").files)
    for name, env_id, domain in (("lab", "PickSort-Real-v0", "real"), ("sim", "PickSort-Ungrounded-v0", "sim")):
        result = EvaluationResult.from_json((out / "results" / f"rl_dr_{name}.json").read_text())
        assert result.env_id == env_id and result.provenance["domain"] == domain and result.episodes == 2
        assert result.env_kwargs["num_objects"] == 1 and result.env_kwargs["episode_steps"] == 40
        m = result.method
        assert m["method"] == "rl-dr-ppo" and m["real_fraction"] == 0.0 and m["n_real_demos"] == 0
        assert m["training_seed"] == 0 and m["env_steps"] == 256 and m["datasets"] == []
    board = build_leaderboard(out / "results", tmp_path / "board")
    assert [r.method for r in board.rows] == ["rl-dr-ppo"] and len(board.envs) == 2
    assert "rl-dr-ppo" in (tmp_path / "board" / "leaderboard.md").read_text()


def test_grounding_intervals_become_the_ranges(rl_dr, tmp_path):
    import dataclasses

    from r2s2r_envs.grounding.result import Grounding, write_grounding
    from r2s2r_envs.world.params import nominal

    world = dataclasses.replace(nominal(), belt_speed=0.095, control_latency=0.04)
    grounding = Grounding(
        world=world,
        intervals={"belt_speed": [0.094, 0.096], "control_latency": [0.035, 0.045]},
        identified=["belt_speed", "control_latency"],
        validation={"nrmse": {}, "planner": None, "unmodeled": None},
        provenance={
            "lab": {"name": "test-lab", "config_sha256": "ab" * 32},
            "logs": {"arm_steps.hdf5": "cd" * 32},
            "versions": {"r2s2r_envs": "0.2.0", "mujoco": "4.0.0"},
            "seed": 0,
            "wall_time_s": {"logging": 1.0},
        },
    )
    path = tmp_path / "grounding.json"
    write_grounding(grounding, path)
    config = rl_dr.Config(out=str(tmp_path), grounding=str(path))
    randomization = rl_dr.make_randomization(config)
    assert randomization.center == world  # centred on the identified world, not the nominal one
    assert dict(randomization.ranges) == {"belt_speed": (0.094, 0.096), "control_latency": (0.035, 0.045)}
    drawn = randomization.sample(np.random.default_rng(0))
    assert 0.094 <= drawn.belt_speed <= 0.096 and drawn.object_mass == world.object_mass
    meta = rl_dr.metadata(config, {"env_steps": 10, "training_time_s": 1.0})
    assert meta["variant"] == "WorldGrounded" and meta["randomization"] == str(path)


def test_native_training_envs_run_what_a_dummy_vec_env_of_single_envs_runs(rl_dr, tmp_path):
    """Worlds, observations, rewards, ends, final observations and successes, across autoresets."""
    from stable_baselines3.common.vec_env import DummyVecEnv

    config = rl_dr.Config(out=str(tmp_path), num_objects=1, episode_steps=7, num_envs=3)
    randomization = rl_dr.make_randomization(config)
    native = rl_dr.make_training_venv(config, randomization)
    single = rl_dr.Config(out=str(tmp_path), num_objects=1, episode_steps=7)
    dummy = DummyVecEnv([lambda: rl_dr.make_training_env(single, randomization) for _ in range(3)])
    worlds = native.venv.vec  # VecMonitor -> NativeVecEnv -> RandomizedWorlds
    for venv in (native, dummy):
        venv.seed(5)
    a, b = native.reset(), dummy.reset()
    assert np.array_equal(a, b)
    assert [w.to_dict() for w in worlds.worlds] == [i["world"] for i in dummy.reset_infos]
    rng = np.random.default_rng(0)
    ends = 0
    for _ in range(16):  # episodes of 7 steps: two autoresets per env
        actions = rng.uniform(-1.0, 1.0, size=(3, *native.action_space.shape)).astype(np.float32)
        a_obs, a_rew, a_done, a_info = native.step(actions)
        b_obs, b_rew, b_done, b_info = dummy.step(actions)
        assert np.array_equal(a_obs, b_obs) and np.array_equal(a_rew, b_rew) and np.array_equal(a_done, b_done)
        for i in np.flatnonzero(b_done):
            ends += 1
            assert np.array_equal(a_info[i]["terminal_observation"], b_info[i]["terminal_observation"])
            assert a_info[i]["is_success"] == b_info[i]["is_success"]
            assert a_info[i]["episode"]["r"] == pytest.approx(b_info[i]["episode"]["r"], abs=1e-6)  # Monitor rounds
            assert a_info[i]["TimeLimit.truncated"] == b_info[i]["TimeLimit.truncated"]
            assert worlds.worlds[i].to_dict() == dummy.reset_infos[i]["world"]  # a new draw, the same one
    assert ends == 6
    native.close()
    dummy.close()


def test_bad_num_envs_is_refused(rl_dr):
    with pytest.raises(SystemExit):
        rl_dr.parse_args(["--out", "x", "--num-envs", "0"])
