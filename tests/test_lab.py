"""The lab (``PickSort-Real-v0``): config loading, overrides, errors, hidden parameters, and the gap to nominal."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from conftest import random_actions

import r2s2r_envs.lab.config
from r2s2r_envs.lab import LabConfig, UnmodeledEffects, available_labs, load_lab
from r2s2r_envs.world.params import WorldParams, nominal

REAL = "PickSort-Real-v0"


def _walk_keys(obj):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield k
            yield from _walk_keys(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _walk_keys(v)


def test_default_lab_is_shipped_and_loads():
    assert "default" in available_labs()
    lab = load_lab()
    assert isinstance(lab, LabConfig) and lab.name == "default"
    assert load_lab("default") == lab


def test_lab_differs_from_nominal():
    lab = load_lab()
    differing = [f for f in WorldParams.field_names() if getattr(lab.world, f) != getattr(nominal(), f)]
    assert len(differing) >= 4, f"the lab differs from the nominal model in only {differing}"
    assert lab.world.control_latency > 0.0  # an effect the spec sheet leaves out
    assert lab.effects != UnmodeledEffects(), "the lab has no unmodeled effects"


def test_lab_dynamics_differ_from_nominal(make_env):
    sim, real = make_env("PickSort-Ungrounded-v0"), make_env(REAL)
    actions = random_actions(sim, 20, seed=0)
    sim.reset(seed=0)
    real.reset(seed=0)
    for a in actions:
        obs_sim, *_ = sim.step(a)
        obs_real, *_ = real.step(a)
    assert np.abs(obs_sim["eef_pos"] - obs_real["eef_pos"]).max() > 1e-3


def test_dict_overrides_apply_over_default():
    base = load_lab()
    lab = load_lab({"world": {"belt_speed": 0.05, "joint_pos_noise": 0.01}, "effects": {"object_mass_variation": 0.2}})
    assert lab.world.belt_speed == 0.05 and lab.world.joint_pos_noise == 0.01
    assert lab.effects.object_mass_variation == 0.2
    # Everything else comes from the default lab, not from the nominal model.
    assert lab.world == dataclasses.replace(base.world, belt_speed=0.05, joint_pos_noise=0.01)
    assert lab.effects == dataclasses.replace(base.effects, object_mass_variation=0.2)
    assert lab.name != base.name


def test_make_with_lab_dict(make_env):
    env = make_env(REAL, lab={"name": "slow_belt", "world": {"belt_speed": 0.04}})
    assert env.unwrapped.lab_name == "slow_belt"
    assert env.unwrapped._lab.world.belt_speed == 0.04  # lab/ tests may look inside; nothing else may
    env.reset(seed=0)
    env.step(np.zeros(22, dtype=np.float32))


def test_lab_from_file(tmp_path, make_env):
    raw = load_lab().to_dict()
    raw["name"] = "course_lab"
    raw["world"]["control_latency"] = 0.1
    raw["world"]["belt_speed_fluctuation"] = 0.0
    path = tmp_path / "course_lab.json"
    path.write_text(json.dumps(raw))
    lab = load_lab(path)
    assert lab.name == "course_lab" and lab.world.control_latency == 0.1
    assert load_lab(str(path)) == lab
    env = make_env(REAL, lab=str(path))  # a string path: JSON-serializable, so it can go in an EnvSpec
    assert env.unwrapped.lab_name == "course_lab"
    assert env.unwrapped.lab_identity() == {"name": "course_lab", "config_sha256": lab.sha256()}


def test_config_round_trip():
    lab = load_lab()
    assert load_lab(json.loads(json.dumps(lab.to_dict()))) == lab


def test_config_hash_tells_labs_apart_without_revealing_them():
    a, b = load_lab(), load_lab({"world": {"control_latency": 0.05}})
    assert a.sha256() == load_lab("default").sha256()  # stable
    assert a.sha256() != b.sha256()
    assert a.sha256() != load_lab({"name": "default", "effects": {"object_mass_variation": 0.11}}).sha256()
    assert len(a.sha256()) == 64 and int(a.sha256(), 16) >= 0


@pytest.mark.parametrize(
    "bad, unknown, valid",
    [
        ({"physics": {}}, "physics", ["name", "world", "effects"]),
        ({"effects": {"latency": 0.1}}, "latency", [f.name for f in dataclasses.fields(UnmodeledEffects)]),
        ({"world": {"gravity": 9.81}}, "gravity", list(WorldParams.field_names())),
    ],
)
def test_unknown_lab_keys_list_valid_ones(bad, unknown, valid):
    with pytest.raises(KeyError) as err:
        load_lab(bad)
    message = str(err.value)
    assert unknown in message
    for name in valid:
        assert name in message, f"{name!r} missing from {message}"


def test_sensing_keys_in_effects_say_where_they_moved():
    with pytest.raises(KeyError, match=r"object_pos_bias -> world.object_pos_offset"):
        load_lab({"effects": {"object_pos_bias": [0.0, 0.0, 0.0]}})


def test_file_missing_keys_and_bad_json(tmp_path):
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps({"name": "x", "world": {}}))
    with pytest.raises(KeyError, match="effects"):
        load_lab(partial)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_lab(broken)


def test_unknown_lab_name_lists_shipped_labs():
    with pytest.raises(FileNotFoundError, match="default"):
        load_lab("no_such_lab")


@pytest.mark.parametrize(
    "effects, error, field",
    [
        ({"arm_command_gain": [1.0, 1.0]}, ValueError, "arm_command_gain"),
        ({"arm_command_gain": [0.0] * 7}, ValueError, "arm_command_gain"),
        ({"arm_command_gain": [-0.9] * 7}, ValueError, "arm_command_gain"),
        ({"arm_command_gain": [float("nan")] * 7}, ValueError, "arm_command_gain"),
        ({"object_mass_variation": float("nan")}, ValueError, "object_mass_variation"),
        ({"object_mass_variation": float("inf")}, ValueError, "object_mass_variation"),
        ({"object_friction_variation": -0.1}, ValueError, "object_friction_variation"),
        ({"object_friction_variation": "fast"}, TypeError, "object_friction_variation"),
    ],
)
def test_effect_validation_names_the_field(effects, error, field):
    with pytest.raises(error, match=field):
        load_lab({"effects": effects})


@pytest.mark.parametrize(
    "world, error",
    [
        ({"joint_pos_noise": float("nan")}, ValueError),
        ({"object_pos_noise": float("inf")}, ValueError),
        ({"belt_speed": "fast"}, TypeError),
        ({"object_pos_offset": [0.0, 0.0]}, ValueError),
    ],
)
def test_lab_world_validation_names_the_field(world, error):
    with pytest.raises(error, match=next(iter(world))):
        load_lab({"world": world})


@pytest.mark.parametrize(
    "change, message",
    [
        ({"world": {"belt_speed": 50.0}}, "WorldParams.belt_speed must be a number, finite and >= 0 and <= 0.5"),
        (
            {"world": {"object_mass": [1e6, 0.1, 0.1]}},
            "object_mass must be a sequence of 3 numbers, each finite and > 0",
        ),
        ({"world": {"arm_kv": [0.0] * 7}}, "arm_kv must be a sequence of 7 numbers, each finite and > 0"),
        ({"world": {"control_latency": 100.0}}, "control_latency must be a number, finite and >= 0 and <= 0.5"),
        ({"effects": {"object_mass_variation": 5.0}}, "object_mass_variation must be a number, finite and >= 0"),
    ],
)
def test_lab_files_with_implausible_values_name_file_field_and_range(tmp_path, change, message):
    raw = json.loads((Path(r2s2r_envs.lab.config.__file__).parent / "configs" / "default.json").read_text())
    for key, values in change.items():
        raw[key] = {**raw[key], **values}
    path = tmp_path / "odd-lab.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(ValueError) as err:
        load_lab(path)
    assert str(path) in str(err.value) and message in str(err.value)


@pytest.mark.parametrize(
    "text, message",
    [
        ("[" * 100_000 + "]" * 100_000, "nested 100000 levels deep; at most 64"),
        ('{"name": "a", "name": "b"}', "key 'name' appears twice"),
        ('{"name": "x", "world": {"belt_speed": NaN}}', "NaN is not a JSON value"),
    ],
)
def test_lab_files_that_are_not_strict_json(tmp_path, text, message):
    path = tmp_path / "odd-lab.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=message) as err:
        load_lab(path)
    assert str(path) in str(err.value)


def test_sealed_lab_that_inflates_without_bound_is_refused(tmp_path):
    import base64
    import zlib

    from r2s2r_envs.lab.config import SEALED_KEY

    bomb = base64.b64encode(zlib.compress(b" " * (70 * 1024 * 1024), 9)).decode()
    path = tmp_path / "sealed.json"
    path.write_text(json.dumps({SEALED_KEY: bomb}))
    with pytest.raises(ValueError, match="inflates to more than"):
        load_lab(path)


def test_real_env_rejects_world_argument():
    with pytest.raises(TypeError, match="lab"):
        gym.make(REAL, world={"belt_speed": 0.1})


@pytest.mark.parametrize("attribute", ["world_params", "model", "data"])
def test_lab_refuses_simulator_access(make_env, attribute):
    from r2s2r_envs.lab.lab_env import LabBoundaryError

    env = make_env(REAL)
    env.reset(seed=0)
    with pytest.raises(LabBoundaryError, match="black box"):
        getattr(env.unwrapped, attribute)


def test_lab_refuses_states_and_world_changes(make_env):
    from r2s2r_envs.lab.lab_env import LabBoundaryError

    env = make_env(REAL)
    env.reset(seed=0)
    with pytest.raises(LabBoundaryError, match="black box"):
        env.unwrapped.get_state()
    with pytest.raises(LabBoundaryError, match="black box"):
        env.unwrapped.set_state(np.zeros(10))
    with pytest.raises(LabBoundaryError, match="config"):
        env.unwrapped.set_world({"belt_speed": 0.1})
    with pytest.raises(LabBoundaryError):
        env.reset(seed=0, options={"world": {"belt_speed": 0.1}})


def test_provenance_hides_lab_parameters(make_env):
    env = make_env(REAL)
    prov = env.unwrapped.provenance()
    json.dumps(prov)
    assert prov["domain"] == "real"
    assert prov["lab"] == {"name": "default", "config_sha256": load_lab().sha256()}
    assert "world_params" not in prov
    keys = set(_walk_keys(prov))
    hidden = set(WorldParams.field_names()) | {f.name for f in dataclasses.fields(UnmodeledEffects)}
    assert not keys & hidden, f"provenance leaks lab parameters: {sorted(keys & hidden)}"
    # The sim's provenance does carry its world (that is what a dataset records).
    sim_prov = make_env("PickSort-Ungrounded-v0").unwrapped.provenance()
    assert sim_prov["world_params"] == nominal().to_dict()


def test_observation_noise_is_seeded(make_env):
    a, b = make_env(REAL), make_env(REAL)
    obs_a, _ = a.reset(seed=3)
    obs_b, _ = b.reset(seed=3)
    np.testing.assert_array_equal(obs_a["arm_qpos"], obs_b["arm_qpos"])
    # Noise is present: the measured joint angles are not the true ones.
    base = a.unwrapped
    true_q = base.scene.arm_qpos(base._data)
    assert not np.allclose(obs_a["arm_qpos"], true_q, atol=1e-6)


def test_noise_free_lab_measures_truth(make_env):
    quiet = {f: 0.0 for f in WorldParams.field_names() if f.endswith("_noise")}
    env = make_env(REAL, lab={"world": {**quiet, "object_pos_offset": [0.0, 0.0, 0.0]}})
    obs, _ = env.reset(seed=0)
    base = env.unwrapped
    np.testing.assert_allclose(obs["arm_qpos"], base.scene.arm_qpos(base._data), atol=1e-6)
    np.testing.assert_allclose(obs["object_pos"].reshape(-1, 3), base.scene.object_pos(base._data), atol=1e-6)


def test_objects_vary_from_piece_to_piece(make_env):
    # The lab's objects differ around their category's mass and friction; a simulator has one value per category.
    env = make_env(REAL, num_objects=8, episode_steps=1)
    masses, frictions = {}, {}
    for seed in range(4):
        obs, _ = env.reset(seed=seed)
        base = env.unwrapped
        cats = obs["object_category"].reshape(8, 3).argmax(axis=1)
        for i, c in enumerate(cats):
            masses.setdefault(int(c), set()).add(float(base._model.body_mass[base.scene.object_body[i]]))
            g = base.scene.object_geoms[i, c]
            frictions.setdefault(int(c), set()).add(float(base._model.geom_friction[g, 0]))
    assert all(len(v) > 3 for v in masses.values()), masses
    assert all(len(v) > 3 for v in frictions.values()), frictions
    nominal_lab = make_env(REAL, num_objects=8, lab={"effects": {"object_mass_variation": 0.0}})
    obs, _ = nominal_lab.reset(seed=0)
    base = nominal_lab.unwrapped
    cats = obs["object_category"].reshape(8, 3).argmax(axis=1)
    for i, c in enumerate(cats):
        assert base._model.body_mass[base.scene.object_body[i]] == pytest.approx(load_lab().world.object_mass[c])
