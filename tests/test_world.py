"""WorldParams validation, the MjSpec builder writing every parameter into the compiled model, sensing as part of
the world, and ``load_world`` / ``set_world``."""

from __future__ import annotations

import dataclasses
import json
import math
import re

import gymnasium as gym
import mujoco
import numpy as np
import pytest
from conftest import random_actions, true_trajectory

from r2s2r_envs.world import available_worlds, load_world
from r2s2r_envs.world import constants as C
from r2s2r_envs.world.builder import asset_path, build_model
from r2s2r_envs.world.params import FIELD_UNITS, WorldParams, nominal

SIM = "PickSort-Ungrounded-v0"

SEQUENCE_FIELDS = {
    "object_mass": len(C.CATEGORIES),
    "arm_damping": 7,
    "arm_armature": 7,
    "arm_frictionloss": 7,
    "arm_kp": 7,
    "arm_kv": 7,
    "arm_force_limit": 7,
}


# ---------------------------------------------------------------------- WorldParams
def test_nominal_is_valid_and_frozen():
    params = nominal()
    assert params == WorldParams()
    with pytest.raises(dataclasses.FrozenInstanceError):
        params.belt_speed = 1.0  # type: ignore[misc]
    hash(params)  # hashable: the builder caches compiled models by params


def test_keyword_only():
    with pytest.raises(TypeError):
        WorldParams(0.1)  # type: ignore[misc]


def _field_docs() -> dict[str, str]:
    """Each field's description in the WorldParams docstring (its line and the indented lines under it)."""
    lines = (WorldParams.__doc__ or "").splitlines()
    docs, current = {}, None
    for line in lines:
        m = re.match(r"^        (\w+): (.*)$", line)
        if m and m.group(1) in WorldParams.field_names():
            current = m.group(1)
            docs[current] = m.group(2)
        elif current and line.startswith("            "):
            docs[current] += " " + line.strip()
        else:
            current = None
    return docs


@pytest.mark.parametrize("name", WorldParams.field_names())
def test_every_field_has_its_unit(name):
    assert name in FIELD_UNITS, f"add the unit of WorldParams.{name} to world.params.FIELD_UNITS"
    doc = _field_docs().get(name)
    assert doc is not None, f"WorldParams.{name} is not documented"
    # The unit is stated as a unit (", kg." / ", m/s,"), not merely mentioned in a word.
    unit = re.escape(FIELD_UNITS[name])
    assert re.search(rf"(, |\()({unit})([ .,;:)]|$)", doc), (
        f"WorldParams.{name}: unit {FIELD_UNITS[name]!r} not in {doc!r}"
    )


def test_units_table_checks_something():
    # The checker rejects a wrong unit (it is not vacuous).
    doc = _field_docs()["belt_speed"]
    assert not re.search(r"(, |\()(kg)([ .,;)]|$)", doc)


@pytest.mark.parametrize("field,length", sorted(SEQUENCE_FIELDS.items()))
def test_wrong_length_names_the_field(field, length):
    with pytest.raises(ValueError, match=rf"{field}.*{length}"):
        WorldParams(**{field: (1.0,) * (length + 1)})


@pytest.mark.parametrize(
    "field", [f for f in WorldParams.field_names() if f not in ("object_pos_offset", "object_pos_rotation")]
)
def test_negative_values_rejected(field):
    default = getattr(WorldParams(), field)
    bad = tuple(-abs(v) - 1.0 for v in default) if isinstance(default, tuple) else -1.0
    with pytest.raises(ValueError, match=field):
        WorldParams(**{field: bad})


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_non_finite_rejected(value):
    with pytest.raises(ValueError, match="belt_speed"):
        WorldParams(belt_speed=value)


def test_zero_allowed_only_where_physical():
    WorldParams(control_latency=0.0, belt_speed=0.0)  # no latency, belt stopped: fine
    with pytest.raises(ValueError, match="finger_kp"):
        WorldParams(finger_kp=0.0)  # a servo without stiffness is not a servo


def test_from_dict_unknown_keys_lists_valid_fields():
    with pytest.raises(KeyError) as err:
        WorldParams.from_dict({"belt_sped": 0.1})
    message = str(err.value)
    assert "belt_sped" in message
    for name in WorldParams.field_names():
        assert name in message


def test_dict_round_trip_through_json():
    params = WorldParams(belt_speed=0.1, object_mass=(0.2, 0.3, 0.4), control_latency=0.04)
    data = json.loads(json.dumps(params.to_dict()))
    assert WorldParams.from_dict(data) == params
    assert WorldParams.from_dict({"belt_speed": 0.11}).arm_kp == nominal().arm_kp  # partial: on top of nominal


def test_lists_become_tuples():
    params = WorldParams(arm_kp=[100.0] * 7)  # type: ignore[arg-type]
    assert params.arm_kp == (100.0,) * 7
    hash(params)


# ---------------------------------------------------------------------- builder
def _actuator_ids(model: mujoco.MjModel, names: tuple[str, ...]) -> np.ndarray:
    return np.array([model.actuator(n).id for n in names])


def test_assets_are_found():
    for name in ("pick_sort_scene.xml", "panda_arm.xml", "leap_hand.xml", "objects.xml"):
        assert asset_path(name).endswith(name)
    with pytest.raises(FileNotFoundError, match="available"):
        asset_path("nope.xml")


def test_model_has_named_parts():
    model = build_model(nominal(), num_objects=2)
    assert model.nu == len(C.ARM_ACTUATORS) + len(C.HAND_ACTUATORS) == 23
    for name in C.ARM_JOINTS + C.HAND_JOINTS:
        model.joint(name)
    for cam in C.CAMERAS:
        model.camera(cam)
    model.body(f"{C.object_prefix(1)}{C.OBJECT_JOINT}")
    with pytest.raises(KeyError):
        model.body(f"{C.object_prefix(2)}{C.OBJECT_JOINT}")


def test_builder_applies_belt_speed():
    model = build_model(WorldParams(belt_speed=0.123), num_objects=1)
    np.testing.assert_allclose(model.geom_surfacevel[model.geom(C.BELT_GEOM).id, :3], [0.0, -0.123, 0.0])


def test_builder_applies_actuator_gains():
    params = WorldParams(
        finger_kp=3.3,
        finger_kv=0.07,
        finger_force_limit=0.5,
        arm_kp=tuple(1000.0 + k for k in range(7)),
        arm_force_limit=(50.0,) * 4 + (9.0,) * 3,
    )
    model = build_model(params, num_objects=1)
    hand = _actuator_ids(model, C.HAND_ACTUATORS)
    np.testing.assert_allclose(model.actuator_gainprm[hand, 0], 3.3)
    np.testing.assert_allclose(model.actuator_biasprm[hand, 1], -3.3)
    np.testing.assert_allclose(model.actuator_biasprm[hand, 2], -0.07)
    np.testing.assert_allclose(model.actuator_forcerange[hand], [[-0.5, 0.5]] * len(hand))
    arm = _actuator_ids(model, C.ARM_ACTUATORS)
    np.testing.assert_allclose(model.actuator_gainprm[arm, 0], params.arm_kp)
    np.testing.assert_allclose(model.actuator_forcerange[arm, 1], params.arm_force_limit)


def test_builder_applies_joint_dynamics():
    params = WorldParams(arm_damping=(3.0,) * 7, arm_armature=(0.2,) * 7, arm_frictionloss=(0.4,) * 7)
    model = build_model(params, num_objects=1)
    dofs = [model.joint(n).dofadr[0] for n in C.ARM_JOINTS]
    np.testing.assert_allclose(model.dof_damping[dofs], 3.0)
    np.testing.assert_allclose(model.dof_armature[dofs], 0.2)
    np.testing.assert_allclose(model.dof_frictionloss[dofs], 0.4)


def test_builder_applies_latency():
    assert np.all(build_model(nominal(), 1).actuator_delay == 0.0)
    model = build_model(WorldParams(control_latency=0.04), num_objects=1)
    acts = _actuator_ids(model, C.ARM_ACTUATORS + C.HAND_ACTUATORS)
    np.testing.assert_allclose(model.actuator_delay[acts], 0.04)
    assert np.all(model.actuator_history[acts, 0] >= round(0.04 / model.opt.timestep))


def test_latency_delays_the_response():
    # The same command reaches the joints later in a world with latency.
    def arm_motion(latency: float) -> float:
        env = gym.make("PickSort-Ungrounded-v0", world={"control_latency": latency})
        env.reset(seed=0)
        base = env.unwrapped
        q0 = base.scene.arm_qpos(base.data)
        action = np.zeros(22, dtype=np.float32)
        action[2] = 1.0
        env.step(action)
        moved = float(np.abs(base.scene.arm_qpos(base.data) - q0).max())
        env.close()
        return moved

    assert arm_motion(0.045) < 0.5 * arm_motion(0.0)


def test_builder_applies_object_params():
    params = WorldParams(object_friction=0.5, object_size_scale=1.2)
    model = build_model(params, num_objects=2)
    nominal_model = build_model(nominal(), num_objects=2)
    for i in range(2):
        for c in C.CATEGORIES:
            gid = model.geom(f"{C.object_prefix(i)}{c}").id
            assert model.geom_friction[gid, 0] == pytest.approx(0.5)
            np.testing.assert_allclose(model.geom_size[gid], 1.2 * nominal_model.geom_size[gid])


def test_env_writes_object_mass_per_category():
    masses = (0.11, 0.22, 0.33)
    env = gym.make("PickSort-Ungrounded-v0", world={"object_mass": masses}, num_objects=4)
    try:
        obs, _ = env.reset(seed=0)
        base = env.unwrapped
        categories = obs["object_category"].reshape(4, len(C.CATEGORIES)).argmax(axis=1)
        for i, cat in enumerate(categories):
            body = base.model.body(f"{C.object_prefix(i)}{C.OBJECT_JOINT}").id
            assert base.model.body_mass[body] == pytest.approx(masses[cat])
    finally:
        env.close()


def test_compiled_models_are_private_copies():
    a = build_model(nominal(), num_objects=1)
    b = build_model(nominal(), num_objects=1)
    belt = a.geom(C.BELT_GEOM).id
    a.geom_surfacevel[belt, 1] = -5.0
    assert b.geom_surfacevel[belt, 1] == pytest.approx(-nominal().belt_speed)


# ---------------------------------------------------------------------- sensing is part of the world
def test_sim_simulates_sensor_noise_and_offset(make_env):
    offset = (0.01, -0.02, 0.005)
    env = make_env(SIM, world={"object_pos_noise": 0.004, "joint_pos_noise": 0.002, "object_pos_offset": offset})
    base = env.unwrapped
    obs, _ = env.reset(seed=0)
    errors, joint_errors = [], []
    for _ in range(60):
        obs, *_ = env.step(np.zeros(22, dtype=np.float32))
        errors.append(obs["object_pos"].reshape(-1, 3) - base.scene.object_pos(base.data))
        joint_errors.append(obs["arm_qpos"] - base.scene.arm_qpos(base.data))
    errors = np.concatenate(errors)
    np.testing.assert_allclose(errors.mean(axis=0), offset, atol=0.0015)
    np.testing.assert_allclose(errors.std(axis=0), 0.004, rtol=0.2)
    assert np.std(joint_errors) == pytest.approx(0.002, rel=0.2)


def test_nominal_world_measures_truth(make_env):
    env = make_env(SIM)
    base = env.unwrapped
    obs, _ = env.reset(seed=0)
    obs, *_ = env.step(np.zeros(22, dtype=np.float32))
    np.testing.assert_allclose(obs["object_pos"].reshape(-1, 3), base.scene.object_pos(base.data), atol=1e-6)


def test_belt_fluctuation_is_a_world_parameter(make_env):
    def belt_speeds(world):
        env = make_env(SIM, world=world, num_objects=1)
        env.reset(seed=4)
        speeds = []
        for _ in range(60):
            env.step(np.zeros(22, dtype=np.float32))
            speeds.append(-env.unwrapped.model.geom_surfacevel[env.unwrapped.scene.belt_geom, 1])
        return np.array(speeds)

    steady = belt_speeds({})
    assert np.all(steady == nominal().belt_speed)
    wobbly = belt_speeds({"belt_speed_fluctuation": 0.1, "belt_fluctuation_time": 0.5})
    assert wobbly.std() > 0.002 and abs(wobbly.mean() - nominal().belt_speed) < 0.02


# ---------------------------------------------------------------------- load_world and set_world
def test_load_world_forms(tmp_path):
    assert "nominal" in available_worlds()
    assert load_world("nominal") == load_world() == load_world({}) == nominal()
    path = tmp_path / "w.json"
    path.write_text(json.dumps({"name": "mine", "description": "a test world", "world": {"belt_speed": 0.05}}))
    assert load_world(path).belt_speed == 0.05
    assert load_world(str(path)) == load_world({"belt_speed": 0.05})
    assert load_world(WorldParams(belt_speed=0.07)).belt_speed == 0.07
    with pytest.raises(FileNotFoundError, match="nominal"):
        load_world("no_such_world")
    with pytest.raises(KeyError, match="belt_speed"):
        load_world({"belt_sped": 0.1})
    with pytest.raises(TypeError, match="preset name"):
        load_world(3.5)


def test_env_world_argument_accepts_every_form(tmp_path, make_env):
    path = tmp_path / "w.json"
    path.write_text(json.dumps({"world": {"belt_speed": 0.05}}))
    for world in ("nominal", str(path), {"belt_speed": 0.05}, WorldParams(belt_speed=0.05)):
        env = make_env(SIM, world=world)
        assert env.unwrapped.world_params == load_world(world)


WORLD_CHANGES = [
    {"belt_speed": 0.1, "object_friction": 0.5, "arm_damping": [3.0] * 7, "finger_kp": 2.5},  # in place
    {"arm_armature": [0.2] * 7, "arm_kp": [3000.0] * 7, "arm_force_limit": [50.0] * 7, "object_mass": [0.3] * 3},
    {"control_latency": 0.03},  # 0 -> 30 ms: a delay buffer appears (rebuild)
    {"object_size_scale": 1.1},  # geometry (rebuild)
    {"joint_pos_noise": 0.01, "belt_speed_fluctuation": 0.05},  # sensing and belt only: the model is untouched
]


@pytest.mark.parametrize("change", WORLD_CHANGES)
def test_set_world_equals_a_fresh_env(change):
    world = WorldParams.from_dict(change)
    actions = random_actions(gym.make(SIM), 40, seed=9)
    fresh = gym.make(SIM, world=world)
    changed = gym.make(SIM)
    true_trajectory(changed, 0, actions[:5])  # used before the change
    changed.unwrapped.set_world(change)
    assert changed.unwrapped.world_params == world
    np.testing.assert_array_equal(true_trajectory(changed, 7, actions), true_trajectory(fresh, 7, actions))
    obs_a, _ = fresh.reset(seed=3)
    obs_b, _ = changed.reset(seed=3)
    for k in obs_a:
        np.testing.assert_array_equal(obs_a[k], obs_b[k])


def test_set_world_latency_in_place_matches_a_fresh_env():
    # 30 -> 29 ms keeps the delay buffer's length (15 physics steps): the in-place path writes the delay.
    actions = random_actions(gym.make(SIM), 30, seed=1)
    changed = gym.make(SIM, world={"control_latency": 0.03})
    model_before = changed.unwrapped.model
    changed.unwrapped.set_world({"control_latency": 0.029})
    assert changed.unwrapped.model is model_before
    fresh = gym.make(SIM, world={"control_latency": 0.029})
    np.testing.assert_array_equal(true_trajectory(changed, 1, actions), true_trajectory(fresh, 1, actions))


def test_reset_option_world(make_env):
    env = make_env(SIM)
    env.reset(seed=0, options={"world": {"belt_speed": 0.12}})
    assert env.unwrapped.world_params.belt_speed == 0.12
    with pytest.raises(ValueError, match="world"):
        env.reset(seed=0, options={"wrld": {}})


@pytest.mark.parametrize(
    "bad, error",
    [
        ({"belt_sped": 0.1}, KeyError),
        ({"belt_speed": float("nan")}, ValueError),
        ({"object_size_scale": 5.0}, ValueError),
        ({"arm_kp": [1.0] * 6}, ValueError),
        ({"finger_kp": "x"}, TypeError),
    ],
)
def test_bad_set_world_leaves_the_env_unchanged(bad, error):
    actions = random_actions(gym.make(SIM), 20, seed=2)
    env = gym.make(SIM, world={"belt_speed": 0.09})
    before = true_trajectory(env, 5, actions)
    with pytest.raises(error, match=next(iter(bad)).rstrip("d") if error is KeyError else next(iter(bad))):
        env.unwrapped.set_world(bad)
    assert env.unwrapped.world_params == WorldParams(belt_speed=0.09)
    np.testing.assert_array_equal(true_trajectory(env, 5, actions), before)


# ---------------------------------------------------------------------- sensing and the compiled model
def test_world_params_dataclass_is_frozen_and_hashable():
    w = load_world({"object_pos_offset": [0.01, 0.0, -0.01]})
    assert isinstance(w.object_pos_offset, tuple)
    hash(w)
    with pytest.raises(dataclasses.FrozenInstanceError):
        w.belt_speed = 0.1  # type: ignore[misc]
    assert w.sha256() == load_world(w.to_dict()).sha256() != nominal().sha256()


def test_sensing_changes_share_one_compiled_model():
    a = build_model(nominal(), 1)
    b = build_model(WorldParams(joint_pos_noise=0.01, belt_speed_fluctuation=0.1), 1)
    assert np.array_equal(a.dof_damping, b.dof_damping) and a.nq == b.nq
