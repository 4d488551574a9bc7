"""The lab (``PickSort-Real-v0``): config loading, overrides, errors, hidden parameters, and the gap to nominal;
the shipped ``v3`` lab: its cameras, late commands, finger backlash and contact, and the config sections that
hold them."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from conftest import random_actions

import r2s2r_envs.lab.config
from r2s2r_envs.lab import LabConfig, UnmodeledEffects, available_labs, load_lab
from r2s2r_envs.lab.config import InterfaceFaults, LabCamera, LabContact, LabPerception, OperatorStyle
from r2s2r_envs.world.params import FIELD_BOUNDS, FIELD_UNITS, PERCEPTION_FIELDS, WorldParams, nominal

REAL = "PickSort-Real-v0"
GROUNDING = "r2s2r_envs/grounding/groundings/default.json"


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


def test_docs_world_bounds_are_the_declared_ones():
    """docs/lab.md#world-bounds lists each field's range and unit as ``WorldParams`` declares them."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "lab.md").read_text()
    table = text[text.index('<a id="world-bounds">') :]
    table = table[: table.index("\n\n", table.index("| group |"))]
    for name, bound in FIELD_BOUNDS.items():
        m = re.search(rf"`{name}`(?:(?:,| and) `\w+`)* ([\[(])(-?[\d.]+), (-?[\d.]+)\]([^;|]*)", table)
        assert m, f"docs/lab.md#world-bounds does not give the range of {name}"
        assert (m[1], float(m[2]), float(m[3])) == ("(" if bound.strict else "[", bound.minimum, bound.maximum), name
        unit = FIELD_UNITS[name]
        assert unit in ("dimensionless", "probability") or m[4].startswith(f" {unit}"), f"{name}: {unit} in {m[0]!r}"


@pytest.mark.parametrize(
    "cls", [UnmodeledEffects, OperatorStyle, LabCamera, LabPerception, LabContact, InterfaceFaults]
)
def test_every_lab_setting_declares_what_it_accepts(cls):
    """Each setting carries its bound and unit (or its choices) on its field: one declaration, checked on
    construction."""
    for f in dataclasses.fields(cls):
        if f.name in ("name", "cameras", "arm_joint_order"):  # checked by the class itself
            continue
        assert f.metadata.get("bound") or f.metadata.get("choices"), f"{cls.__name__}.{f.name} declares no bound"
        assert f.metadata.get("choices") or f.metadata.get("unit"), f"{cls.__name__}.{f.name} declares no unit"


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


# ---------------------------------------------------------------------- the v3 lab and its sections
class _Fixed:
    """A stand-in random stream: ``random()`` returns the given values in turn."""

    def __init__(self, *values: float) -> None:
        self.values = list(values)

    def random(self) -> float:
        return self.values.pop(0)


def test_v3_is_shipped_with_every_structural_section():
    lab = load_lab("v3")
    assert lab.name == "v3"
    assert len(lab.perception.cameras) == 2 and lab.perception.delay_jitter > 0
    assert lab.contact != LabContact()
    assert lab.effects.late_command_probability > 0 and lab.effects.finger_backlash > 0
    assert all(getattr(lab.world, f) != 0 for f in PERCEPTION_FIELDS if f != "object_pos_rotation")
    assert load_lab(lab.to_dict()) == lab  # the canonical form round-trips


def test_default_lab_keeps_the_hash_its_grounding_names():
    # The sections and effects added for v3 are written only when on: the v2 lab is the lab it was.
    lab = load_lab("default")
    assert lab.perception == LabPerception() and lab.contact == LabContact()
    assert not {"perception", "contact"} & set(lab.to_dict())
    with open(GROUNDING) as f:
        assert json.load(f)["provenance"]["lab"]["config_sha256"] == lab.sha256()


@pytest.mark.parametrize(
    "patch,match",
    [
        ({"perception": {"cameras": [{"name": "c", "position": [0, 0, 1], "tilt": 1}]}}, "unknown key.*tilt"),
        ({"perception": {"cameras": [{"position": [0, 0, 1]}]}}, "missing key.*name"),
        (
            {"perception": {"cameras": [{"name": "c", "position": [0, 0, 1], "rotation_error": [0, 0, 0.2]}]}},
            "rotation_error",
        ),
        ({"perception": {"delay_jitter": 0.5}}, "delay_jitter"),
        ({"perception": {"exposure": 1}}, "unknown lab perception key"),
        ({"contact": {"object_timeconst": 0.001}}, "object_timeconst"),
        ({"contact": {"cone": "pyramidal"}}, "unknown lab contact key"),
        ({"effects": {"late_command_probability": 0.9}}, "late_command_probability"),
        ({"world": {"perception_delay": 2.0}}, "perception_delay"),
    ],
)
def test_bad_new_sections_are_refused_naming_the_field(patch, match):
    with pytest.raises((KeyError, TypeError, ValueError), match=match):
        load_lab(patch)


def test_contact_and_cameras_reach_the_lab_env():
    env = gym.make(REAL, lab="v3")
    try:
        base = env.unwrapped
        geoms = base.scene.object_geoms.reshape(-1)
        assert np.all(base._model.geom_condim[geoms] == 6)
        assert np.allclose(base._model.geom_solref[geoms, 0], load_lab("v3").contact.object_timeconst)
        assert base._perception is not None and base._perception.num_cameras == 2
    finally:
        env.close()


def test_a_late_command_holds_the_last_one_then_comes_with_the_next():
    env = gym.make(REAL, lab={"effects": {"late_command_probability": 0.2}})
    try:
        base = env.unwrapped
        env.reset(seed=0)
        first, second, third = (np.full(base.action_space.shape, v, dtype=np.float64) for v in (0.1, 0.3, 0.5))
        base._effects_rng = _Fixed(0.9, 0.0, 0.9)  # on time, late, on time
        assert np.array_equal(base._late_command(first), first)
        held = base._late_command(second)
        assert np.all(held[:6] == 0.0) and np.array_equal(held[6:], first[6:])  # no new step, last fingers
        joined = base._late_command(third)
        assert np.allclose(joined[:6], 0.8) and np.array_equal(joined[6:], third[6:])  # the late step comes too
    finally:
        env.close()


def test_finger_backlash_ignores_a_reversal_within_the_band():
    env = gym.make(REAL, lab={"effects": {"finger_backlash": 0.05}})
    try:
        base = env.unwrapped
        env.reset(seed=0)
        close = np.zeros(base.action_space.shape)
        close[6:] = 0.5
        env.step(close)
        executed = base._ctrl[base.scene.hand_u].copy()
        close[6:] = 0.48  # a small reversal: inside the dead band for every joint
        env.step(close)
        assert np.array_equal(base._ctrl[base.scene.hand_u], executed)
    finally:
        env.close()


def test_a_policy_trained_with_visibility_asks_for_it_and_is_evaluated_with_it(tmp_path):
    """Lab demos recorded with ``object_visible`` train a ``task`` policy that reads it; the protocol then makes
    the lab with that sensor (and records it). Data without the key beside it: the run warns and goes without."""
    pytest.importorskip("torch")
    from r2s2r_envs.datasets.generate import generate
    from r2s2r_envs.evaluation.protocol import evaluate
    from r2s2r_envs.policies import load_policy
    from r2s2r_envs.policies.config import TrainConfig
    from r2s2r_envs.policies.train import train

    small = {"num_objects": 1, "episode_steps": 30, "lab": "v3"}
    real, sim = tmp_path / "lab.hdf5", tmp_path / "sim.hdf5"
    generate(REAL, 3, real, seed=5, progress=False, env_kwargs={**small, "sensors": ["object_visible"]})
    generate(
        "PickSort-Ungrounded-v0", 3, sim, seed=5, progress=False, env_kwargs={"num_objects": 1, "episode_steps": 30}
    )
    tiny = dict(steps=4, batch_size=8, hidden_dim=16, layers=2, feature_dim=8, action_chunk=4, execute_steps=2)
    base = dict(method="bc", features="task", demos="all", val_fraction=0.0, progress=False, **tiny)
    result = train(TrainConfig(real=(str(real),), real_fraction=1.0, out=str(tmp_path / "p"), **base))
    policy = load_policy(result.out)
    assert policy.sensors == ("object_visible",) and "object_visible" in policy.pipeline.obs_keys
    assert policy.pipeline.stage.visibility

    evaluated = evaluate(REAL, policy, episodes=2, conditions="nominal", split="dev", env_kwargs=small, progress=False)
    assert evaluated.env_kwargs["sensors"] == ["object_visible"]
    assert len(evaluated.records) == 2

    with pytest.warns(UserWarning, match=r"object_visible only when every dataset has it.*sim\.hdf5"):
        mixed = train(
            TrainConfig(real=(str(real),), sim=(str(sim),), real_fraction=0.5, out=str(tmp_path / "q"), **base)
        )
    assert load_policy(mixed.out).sensors == ()
