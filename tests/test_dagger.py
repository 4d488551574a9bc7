"""DAgger: the reactive planner labels any visited state from the observation, and `r2s2r dagger` rolls a policy out,
records the policy's actions with the expert's labels, retrains on the aggregate and resumes."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import h5py
import numpy as np
import pytest

from r2s2r_envs.behavior import ReactivePlanner, ScriptedPlanner, make_demonstrator
from r2s2r_envs.cli import main as r2s2r_main
from r2s2r_envs.datasets.generate import generate
from r2s2r_envs.policies.config import ConfigError, TrainConfig
from r2s2r_envs.policies.dagger import DaggerActor, DaggerConfig, dagger
from r2s2r_envs.policies.train import train

ONE = {"num_objects": 1, "episode_steps": 60}
TINY = dict(steps=6, batch_size=16, hidden_dim=32, layers=2, feature_dim=16, action_chunk=4, execute_steps=2)


def _planner_episode(env: gym.Env, seed: int) -> list[tuple[dict, np.ndarray]]:
    """(observation, the scripted planner's action) along one of its episodes."""
    planner = ScriptedPlanner(env)
    obs, _ = env.reset(seed=seed)
    planner.reset(seed)
    steps, done = [], False
    while not done:
        action = planner.act(obs)
        steps.append(({k: v.copy() for k, v in obs.items()}, action))
        obs, _, terminated, truncated, _ = env.step(action)
        done = terminated or truncated
    return steps


def test_a_fresh_reactive_planner_labels_the_planners_states_like_the_planner() -> None:
    # No memory to lean on: a new instance per state, dropped into the middle of the planner's episode, reads the
    # phase from the scene (holding, carrying, closing, approaching) and issues the planner's command.
    env = gym.make("PickSort-Ungrounded-v0", num_objects=1)
    try:
        steps = _planner_episode(env, seed=3)
        agree = [np.abs(ReactivePlanner(env).act(obs) - action).max() < 0.05 for obs, action in steps]
    finally:
        env.close()
    assert len(steps) > 100
    assert np.mean(agree) > 0.7, f"agrees with the planner on {np.mean(agree):.0%} of its states"


def test_the_reactive_planner_squeezes_until_the_digits_settle_before_lifting() -> None:
    # The scripted planner closes for close_time before it lifts; a reactive planner that lifted as soon as the
    # digits were partly flexed taught DAgger a second, earlier grasp for the same states (and dropped objects).
    env = gym.make("PickSort-Ungrounded-v0", num_objects=1)
    try:
        planner = ScriptedPlanner(env)
        obs, _ = env.reset(seed=3)
        planner.reset(3)
        phases, done = [], False
        while not done:
            action = planner.act(obs)
            if planner._phase == "close":
                expert = ReactivePlanner(env)
                expert.act(obs)
                phases.append((planner._timer, expert._phase))
            obs, _, terminated, truncated, _ = env.step(action)
            done = terminated or truncated
    finally:
        env.close()
    steps = int(round(planner.config.close_time * planner.control.control_hz))
    early = [phase for timer, phase in phases if timer <= steps - 3]  # the digits still moving onto the object
    assert len(early) >= 4
    assert early == ["close"] * len(early), phases
    assert phases[-1][1] == "lift", phases  # and it does lift once they have settled


def test_the_reactive_planner_solves_episodes_as_a_demonstrator() -> None:
    env = gym.make("PickSort-Ungrounded-v0", num_objects=1)
    try:
        expert = make_demonstrator(env, "scripted-reactive")
        assert isinstance(expert, ReactivePlanner)
        solved = 0
        for seed in range(4):
            obs, _ = env.reset(seed=seed)
            expert.reset(seed)
            done = False
            while not done:
                obs, _, terminated, truncated, info = env.step(expert.act(obs))
                done = terminated or truncated
            solved += bool(info["is_success"])
    finally:
        env.close()
    assert solved >= 3, f"solved {solved} of 4 one-object episodes"


@pytest.fixture(scope="module")
def base_policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("dagger")
    generate("PickSort-Ungrounded-v0", 3, root / "sim.hdf5", seed=3, env_kwargs=ONE, progress=False)
    config = TrainConfig(
        method="flow", sim=(str(root / "sim.hdf5"),), real_fraction=0.0, out=str(root / "p0"), demos="all",
        progress=False, **TINY,
    )  # fmt: skip
    return train(config).out


def test_dagger_records_the_policys_actions_with_the_experts_labels_and_resumes(
    base_policy: Path, tmp_path: Path
) -> None:
    out = tmp_path / "dag"
    config = DaggerConfig(
        policy=str(base_policy), env_id="PickSort-Ungrounded-v0", env_kwargs=ONE, out=str(out), rounds=2,
        episodes=2, eval_episodes=1, progress=False,
    )  # fmt: skip
    log = dagger(config)
    assert [r["round"] for r in log["rounds"]] == [1, 2]
    for r in (1, 2):
        assert (out / f"round-{r}" / "policy" / "config.json").is_file()
        assert (out / f"round-{r}" / "eval.json").is_file()
    # Round 2 trained on the base data and both rounds' rollouts, every demo (failed rollouts are labelled too).
    trained = json.loads((out / "round-2" / "policy" / "config.json").read_text())["config"]
    assert trained["sim"][1:] == [str(out / "round-1" / "rollouts.hdf5"), str(out / "round-2" / "rollouts.hdf5")]
    assert trained["demos"] == "all"

    # The rollouts: the policy drove (its actions are recorded), the reactive planner labelled every state, which a
    # fresh reactive planner fed the recorded observations reproduces exactly.
    env = gym.make("PickSort-Ungrounded-v0", **ONE)
    try:
        with h5py.File(out / "round-1" / "rollouts.hdf5") as f:
            provenance = json.loads(f.attrs["provenance"])
            demo = f["data/demo_0"]
            obs = {k: demo["obs"][k][:] for k in demo["obs"]}
            actions, labels = demo["actions"][:], demo["action_labels"][:]
        assert provenance["demonstrator"]["name"] == "dagger"
        assert provenance["demonstrator"]["settings"]["checkpoint"] == str(base_policy)
        assert np.abs(actions - labels).max() > 0.1  # an untrained policy does not act like the expert
        expert = ReactivePlanner(env)
        expert.reset()
        relabelled = np.stack([expert.act({k: v[t] for k, v in obs.items()}) for t in range(len(labels))])
        np.testing.assert_allclose(relabelled, labels, atol=1e-6)
    finally:
        env.close()

    # A second run finds every round done: nothing is rolled out or trained again.
    stamp = (out / "round-1" / "policy" / "policy.pt").stat().st_mtime_ns
    again = dagger(config)
    assert (out / "round-1" / "policy" / "policy.pt").stat().st_mtime_ns == stamp
    assert [r["eval"] for r in again["rounds"]] == [r["eval"] for r in log["rounds"]]


def test_an_expert_driven_rollout_executes_the_labels(base_policy: Path) -> None:
    env = gym.make("PickSort-Ungrounded-v0", **ONE)
    try:
        actor = DaggerActor(env, checkpoint=str(base_policy), beta=1.0)
        obs, _ = env.reset(seed=0)
        actor.reset(0)
        label = actor.act(obs)
        np.testing.assert_array_equal(actor.executed_action(), label)
    finally:
        env.close()


def test_dagger_refuses_the_lab_a_real_only_policy_and_bad_settings(
    base_policy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ConfigError, match="the lab"):
        dagger(DaggerConfig(policy=str(base_policy), env_id="PickSort-Real-v0", out=str(tmp_path / "a")))
    with pytest.raises(ConfigError, match="real data only"):
        dagger(DaggerConfig(policy="zoo:flow-real-only", env_id="PickSort-Ungrounded-v0", out=str(tmp_path / "b")))
    with pytest.raises(ConfigError, match="beta must be a number in"):
        DaggerConfig(policy=str(base_policy), env_id="PickSort-Ungrounded-v0", out="x", beta=1.5).check()
    code = r2s2r_main(["dagger", "--policy", str(base_policy), "--env", "PickSort-Ungrounded-v0", "--out", "x"] + [
        "--episodes", "0"
    ])  # fmt: skip
    assert code == 2 and "episodes must be an integer >= 1" in capsys.readouterr().err
    # The policy observes one object: an env with another count is refused before any rollout, named.
    with pytest.raises(ConfigError, match=r"observes 'object_pos' of shape \(3,\).*gives \(6,\)"):
        dagger(DaggerConfig(policy=str(base_policy), env_id="PickSort-Ungrounded-v0", out=str(tmp_path / "c"),
                            env_kwargs={"num_objects": 2}))  # fmt: skip
    args = ["dagger", "--policy", str(base_policy), "--env", "PickSort-Ungrounded-v0", "--out", str(tmp_path / "d")]
    assert r2s2r_main(args + ["--env-kwargs", '{"num_objects": 2}']) == 2
    assert "observes 'object_pos'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        r2s2r_main(args + ["--env-kwargs", "[1]"])
    assert "expected a JSON object" in capsys.readouterr().err
    for name in "abcd":
        assert not (tmp_path / name).exists()
