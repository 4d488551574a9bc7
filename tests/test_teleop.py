"""The lab's teleoperator (r2s2r_envs.lab.teleop) and its operator settings (docs/lab.md#operator).

Trait tests measure behaviour in what the teleoperator sends and what the env observes; they run with
``calibration=Calibration()`` (no practice) or ``practice_episodes: 0`` unless practice is what they test, and
with the labs they write themselves, so they depend on no value of the default lab.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import r2s2r_envs  # noqa: F401  (registers the envs and demonstrators)
from r2s2r_envs.behavior import demonstrator_names, make_demonstrator
from r2s2r_envs.envs.seeding import episode_seeds
from r2s2r_envs.lab import Calibration, OperatorStyle, Teleoperator, load_lab
from r2s2r_envs.lab.config import OPERATOR_CHOICES
from r2s2r_envs.world import constants as C

# The teleoperator and the modules its class is made of (state, perception, motion).
TELEOP_SOURCES = tuple(
    Path(r2s2r_envs.__file__).parent / "lab" / f"{name}.py"
    for name in ("teleop", "teleop_state", "teleop_perception", "teleop_motion")
)
FINGER = {name.removeprefix(C.HAND_PREFIX): 6 + k for k, name in enumerate(C.HAND_JOINTS)}  # action index


def lab(operator: dict | None = None, **world: float) -> dict:
    """A small lab of this test file's own, over the default lab (its values are not relied on)."""
    return {"name": "teleop-test", "world": dict(world), "operator": {"practice_episodes": 0, **(operator or {})}}


def rollout(env: gym.Env, operator: Teleoperator, env_seed: int, operator_seed: int, steps: int | None = None):
    """Observations (T+1) and actions (T) of one episode."""
    obs, _ = env.reset(seed=env_seed)
    operator.reset(seed=operator_seed)
    observations, actions = [obs], []
    for _ in range(steps or env.unwrapped.episode_steps):
        action = operator.act(obs)
        actions.append(action)
        obs, _, terminated, truncated, info = env.step(action)
        observations.append(obs)
        if terminated or truncated:
            break
    return observations, np.array(actions), info


# ---------------------------------------------------------------------- operator settings
def test_default_lab_has_an_operator_with_every_setting():
    operator = load_lab().operator
    assert isinstance(operator, OperatorStyle)
    assert set(dataclasses.asdict(operator)) >= {
        "reaction_time",
        "speed",
        "approach",
        "grasp",
        "release",
        "variability",
    }


def test_unknown_operator_key_names_the_valid_ones():
    with pytest.raises(KeyError, match=r"unknown lab operator key\(s\) \['patience'\].*reaction_time"):
        load_lab({"operator": {"patience": 3}})


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("reaction_time", 5.0, r"operator\.reaction_time must be a number, finite and >= 0\.1 and <= 1"),
        ("speed", 0.0, r"operator\.speed must be .*>= 0\.4 and <= 1\.6"),
        ("variability", -0.1, r"operator\.variability must be .*<= 1"),
        ("variability", float("nan"), r"operator\.variability"),
        ("practice_episodes", 2.5, r"practice_episodes must be an integer in \[0, 10\]"),
        ("reaction_time", "fast", r"operator\.reaction_time must be a number"),
    ],
)
def test_out_of_range_operator_values_are_refused(key, value, message):
    with pytest.raises((ValueError, TypeError), match=message):
        load_lab({"operator": {key: value}})


@pytest.mark.parametrize("key", sorted(OPERATOR_CHOICES))
def test_unknown_operator_choice_names_the_valid_ones(key):
    valid = OPERATOR_CHOICES[key]
    with pytest.raises(ValueError, match=rf"operator\.{key} must be one of \[{', '.join(repr(v) for v in valid)}\]"):
        load_lab({"operator": {key: "sideways"}})


def test_lab_file_without_operator_gets_the_default_operator(tmp_path):
    path = tmp_path / "old-lab.json"
    path.write_text(json.dumps({"name": "old", "world": {"belt_speed": 0.1}, "effects": {}}))
    assert load_lab(path).operator == OperatorStyle()


def test_lab_file_operator_fields_default_individually(tmp_path):
    path = tmp_path / "lab.json"
    path.write_text(json.dumps({"name": "x", "world": {}, "effects": {}, "operator": {"grasp": "pinch"}}))
    assert load_lab(path).operator == OperatorStyle(grasp="pinch")


def test_partial_operator_override_keeps_the_rest_and_changes_the_hash():
    default = load_lab()
    changed = load_lab({"name": default.name, "operator": {"speed": 0.8}})
    assert changed.operator == dataclasses.replace(default.operator, speed=0.8)
    assert changed.world == default.world
    assert changed.sha256() != default.sha256()


def test_teleoperator_settings_are_validated_in_a_simulator():
    env = gym.make("PickSort-Ungrounded-v0", num_objects=1, episode_steps=20)
    with pytest.raises(ValueError, match=r"speed"):
        make_demonstrator(env, "teleoperator", speed=9.0, practice_episodes=0)
    with pytest.raises(KeyError, match=r"unknown teleoperator setting key\(s\) \['bogus'\]; valid: \[.*'speed'"):
        make_demonstrator(env, "teleoperator", bogus=1)
    teleop = make_demonstrator(env, "teleoperator", grasp="pinch", practice_episodes=0)
    assert teleop.style.grasp == "pinch"


def test_lab_operator_comes_from_the_lab_config_only():
    env = gym.make("PickSort-Real-v0", lab=lab({"grasp": "pinch"}), num_objects=1)
    assert make_demonstrator(env).style.grasp == "pinch"
    with pytest.raises(ValueError, match=r"under the lab's 'operator'"):
        make_demonstrator(env, "teleoperator", speed=0.8)


def test_joint_control_is_refused():
    env = gym.make("PickSort-Real-v0", lab=lab(), control_mode="joint")
    with pytest.raises(ValueError, match="control_mode='task'"):
        make_demonstrator(env, "teleoperator")


# ---------------------------------------------------------------------- registration
def test_teleoperator_is_the_labs_demonstrator():
    assert "teleoperator" in demonstrator_names()
    assert gym.spec("PickSort-Real-v0").kwargs["demonstrator"] == "teleoperator"
    env = gym.make("PickSort-Real-v0", lab=lab())
    assert isinstance(make_demonstrator(env), Teleoperator)


# ---------------------------------------------------------------------- actions
@pytest.mark.parametrize("operator", [{"variability": 1.0}, {"approach": "follow", "grasp": "pinch", "speed": 1.6}])
def test_actions_are_finite_and_in_range_over_many_seeds(operator):
    env = gym.make("PickSort-Real-v0", lab=lab(operator), num_objects=2, episode_steps=150)
    teleop = make_demonstrator(env)
    for seed in range(8):
        _, actions, _ = rollout(env, teleop, *episode_seeds(99, seed))
        assert actions.shape[1] == env.action_space.shape[0]
        assert np.all(np.isfinite(actions))
        assert np.all(np.abs(actions) <= 1.0)


# ---------------------------------------------------------------------- traits, measured in the data
def _motion_onset(actions: np.ndarray, threshold: float = 0.1) -> int:
    """First step at which the commanded hand displacement exceeds ``threshold`` of the rig's step."""
    return int(np.argmax(np.linalg.norm(actions[:, :3], axis=1) > threshold))


def test_reaction_delay_before_motion_onset_grows_with_reaction_time():
    onsets = {}
    for reaction in (0.15, 0.8):
        env = gym.make("PickSort-Real-v0", lab=lab({"reaction_time": reaction, "variability": 0.0}), num_objects=1)
        teleop = make_demonstrator(env)
        _, actions, _ = rollout(env, teleop, 7, 7, steps=60)
        onsets[reaction] = _motion_onset(actions)
    # 0.65 s more reaction time is 13 control steps at 20 Hz.
    assert onsets[0.8] - onsets[0.15] >= 10, onsets


def _closing_start(actions: np.ndarray) -> int:
    """First step at which the index finger's flexion command rises above its preshape (the grasp begins)."""
    flex = actions[:, FINGER["if_mcp"]]
    preshape = flex[np.argmax(np.linalg.norm(actions[:, :3], axis=1) > 0.1)]
    return int(np.argmax(flex > preshape + 0.02))


def test_follow_approaches_along_the_belt_and_above_from_above():
    directions = {}
    for approach in ("above", "follow"):
        env = gym.make("PickSort-Real-v0", lab=lab({"approach": approach, "variability": 0.0}), num_objects=1)
        observations, actions, _ = rollout(env, make_demonstrator(env), 11, 11, steps=200)
        k = _closing_start(actions)
        rel = [observations[t]["eef_pos"] - observations[t]["object_pos"][:3] for t in (k - 15, k)]
        move = rel[0] - rel[1]  # where the hand came from, relative to the object
        directions[approach] = move / np.linalg.norm(move)
    # "above": the hand comes down onto the object; "follow": it comes from upstream (+y), along the belt.
    assert directions["above"][2] > 0.7, directions
    assert directions["follow"][1] > 0.4, directions
    assert directions["follow"][1] > directions["above"][1] + 0.3, directions


def _squeeze_completion(actions: np.ndarray) -> dict[str, int]:
    """Step at which each digit's flexion command of the first grasp reaches its final value."""
    k = _closing_start(actions)
    done = {}
    for digit, joint in (("if", "if_mcp"), ("mf", "mf_mcp"), ("rf", "rf_mcp"), ("th", "th_mcp")):
        flex = actions[k : k + 30, FINGER[joint]]
        done[digit] = k + int(np.argmax(flex >= flex.max() - 1e-4))
    return done


def test_wrap_closes_digits_in_turn_and_pinch_together():
    completion = {}
    for grasp in ("wrap", "pinch"):
        env = gym.make("PickSort-Real-v0", lab=lab({"grasp": grasp, "variability": 0.0}), num_objects=1)
        _, actions, _ = rollout(env, make_demonstrator(env), 5, 5, steps=200)
        completion[grasp] = _squeeze_completion(actions)
    wrap, pinch = completion["wrap"], completion["pinch"]
    assert len(set(pinch.values())) == 1, pinch
    assert wrap["if"] < wrap["mf"] < wrap["rf"], wrap  # index, middle, ring in turn
    assert max(wrap.values()) - min(wrap.values()) >= 2, wrap


def test_wrap_curls_the_distal_joints_pinch_keeps_them_straight():
    curl = {}
    for grasp in ("wrap", "pinch"):
        env = gym.make("PickSort-Real-v0", lab=lab({"grasp": grasp, "variability": 0.0}), num_objects=1)
        _, actions, _ = rollout(env, make_demonstrator(env), 5, 5, steps=200)
        curl[grasp] = float(actions[:, FINGER["if_pip"]].max() - actions[:, FINGER["if_pip"]].min())
    assert curl["pinch"] < 1e-6 < curl["wrap"], curl


def test_speed_profile_of_a_reach_is_bell_shaped():
    env = gym.make("PickSort-Real-v0", lab=lab({"variability": 0.0}), num_objects=1)
    _, actions, _ = rollout(env, make_demonstrator(env), 3, 3, steps=80)
    speed = np.linalg.norm(actions[:, :3], axis=1)
    onset = _motion_onset(actions)
    first = speed[onset : onset + 40]
    peak = int(np.argmax(first))
    # Rises smoothly to one peak in the middle part of the movement, then falls.
    assert 3 <= peak <= 30
    rise = np.diff(first[: peak + 1])
    assert np.mean(rise > -0.02) > 0.9


def test_variability_zero_repeats_itself_and_variability_varies():
    env = gym.make("PickSort-Real-v0", lab=lab({"variability": 0.0}), num_objects=2, episode_steps=200)
    teleop = make_demonstrator(env)
    _, a, _ = rollout(env, teleop, 21, 1)
    _, b, _ = rollout(env, teleop, 21, 2)  # same episode, another operator seed
    np.testing.assert_array_equal(a, b)
    env = gym.make("PickSort-Real-v0", lab=lab({"variability": 0.8}), num_objects=2, episode_steps=200)
    teleop = make_demonstrator(env)
    _, a, _ = rollout(env, teleop, 21, 1)
    _, b, _ = rollout(env, teleop, 21, 2)
    _, c, _ = rollout(env, teleop, 21, 1)
    np.testing.assert_array_equal(a, c)  # reproducible for a seed
    assert a.shape != b.shape or not np.array_equal(a, b)


# ---------------------------------------------------------------------- the lab boundary
# Set-up code that reads the operator's own settings from its lab and makes a private copy of the cell to practise
# in (a new env from the same config, never the recording env's state).
SETUP_FUNCTIONS = {"__init__", "_practise", "_operator_of", "_practice_key", "_practice_env"}


def test_teleoperator_reads_no_simulator_state():
    import ast

    from test_layering import forbidden_attributes  # tests/ is on sys.path (pytest imports test files by their dir)

    checked = 0
    for path in TELEOP_SOURCES:
        source = path.read_text()
        functions = [
            n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef) and n.name not in SETUP_FUNCTIONS
        ]
        checked += len(functions)
        for node in functions:
            segment = ast.get_source_segment(source, node)
            assert forbidden_attributes(segment) == [], (path.name, node.name)
            names = {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
            assert not names & {"qpos", "qvel", "xpos", "site_xpos", "get_state", "model", "data", "_lab"}, node.name
    assert checked > 20


def test_teleoperator_keeps_no_env_and_acts_on_observations_only():
    env = gym.make("PickSort-Real-v0", lab=lab(), num_objects=1, episode_steps=80)
    teleop = make_demonstrator(env)
    assert not any(isinstance(v, gym.Env) for v in vars(teleop).values())
    with pytest.raises(RuntimeError, match="black box"):
        _ = env.unwrapped.data  # the boundary it works behind
    _, actions, _ = rollout(env, teleop, 1, 1)
    assert len(actions) == 80


# ---------------------------------------------------------------------- practice
@pytest.mark.slow
def test_practice_learns_a_slower_cell_and_a_camera_offset():
    # A cell of this test's own: 80 ms of latency and a camera 15 mm off along the belt.
    cell = {
        "name": "practice-test",
        "world": {"control_latency": 0.08, "object_pos_offset": [0.0, 0.015, 0.0]},
        "operator": {"practice_episodes": 3, "variability": 0.0},
    }
    teleop = make_demonstrator(gym.make("PickSort-Real-v0", lab=cell))
    learned = teleop.calibration
    assert learned.practice_episodes == 3
    assert learned.lag_steps > Calibration().lag_steps
    assert 0.007 < learned.perception_offset[1] < 0.025, learned


# ---------------------------------------------------------------------- success and datasets
@pytest.mark.slow
def test_succeeds_in_the_default_lab():
    from r2s2r_envs.evaluation.protocol import evaluate

    result = evaluate("PickSort-Real-v0", make_demonstrator, episodes=8, base_seed=4242, progress=False)
    assert result.summary["success_rate"] >= 0.6, result.summary


def test_lab_dataset_records_the_teleoperator_and_withholds_its_settings(tmp_path):
    from r2s2r_envs.datasets.generate import generate
    from r2s2r_envs.datasets.reader import open_dataset

    path = tmp_path / "lab.json"
    path.write_text(json.dumps({"name": "tiny", "world": {}, "effects": {}, "operator": {"practice_episodes": 0}}))
    out = tmp_path / "demos.hdf5"
    generate(
        "PickSort-Real-v0",
        2,
        out,
        env_kwargs={"lab": str(path), "num_objects": 1},
        episode_steps=120,
        progress=False,
        handle_signals=False,
    )
    with open_dataset(out) as data:
        assert data.provenance["demonstrator"]["name"] == "teleoperator"
        assert data.provenance["demonstrator"]["settings"] is None
        assert data.provenance["world"]["lab"]["name"] == "tiny"
        assert "operator" not in json.dumps(data.provenance["world"])
        assert data.num_demos == 2
        for demo_id in data.demo_ids:
            assert isinstance(data.demo(demo_id).attrs["success"], bool)


def test_practice_in_very_short_episodes_keeps_the_habits():
    env = gym.make("PickSort-Real-v0", lab=lab({"practice_episodes": 2}), num_objects=1, episode_steps=5)
    teleop = make_demonstrator(env)
    assert teleop.calibration.practice_episodes == 2
    assert teleop.calibration.lag_steps == Calibration().lag_steps  # too short to measure a lag


# ---------------------------------------------------------------------- a hand that hides what it holds (lab v3)
def test_operator_tells_a_held_estimate_without_the_visibility_key():
    env = gym.make("PickSort-Real-v0", lab="v3")
    try:
        operator = Teleoperator(env, calibration=Calibration(lag_steps=3))  # no practice needed here
        obs, _ = env.reset(seed=1)
        meas = obs["object_pos"].reshape(-1, 3).astype(float)
        assert operator._visibility(obs, meas).all()
        again = operator._visibility(obs, meas.copy())  # the same estimate again: the estimator holds it
        assert not again.any()
        with_key = {**obs, "object_visible": np.array([1.0, 0.0, 1.0], dtype=np.float32)}
        assert operator._visibility(with_key, meas).tolist() == [True, False, True]
    finally:
        env.close()


@pytest.mark.slow
def test_operator_sorts_in_v3():
    # Practice and a few episodes in the lab whose hand hides what it holds: the operator keeps sorting.
    env = gym.make("PickSort-Real-v0", lab="v3")
    try:
        operator = Teleoperator(env)
        sorted_objects = 0
        for seed in range(3):
            obs, _ = env.reset(seed=seed)
            operator.reset(seed=seed)
            done = False
            while not done:
                obs, _, terminated, truncated, info = env.step(operator.act(obs))
                done = terminated or truncated
            sorted_objects += info["object_outcomes"].count("sorted")
        assert sorted_objects >= 5  # of 9
        assert isinstance(operator.calibration.lag_steps, int)
    finally:
        env.close()
