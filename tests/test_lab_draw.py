"""Labs drawn from documented ranges (r2s2r_envs.lab.draw, docs/lab.md#drawn-labs): the same seed gives the same
lab, every field is drawn within its range, every drawn lab is a valid lab config, and "draw:SEED" names one
wherever a lab is accepted.

Version 2: version 1 stays byte-identical (recorded results, the standard panel and the drawn ablations name its
labs), version 2 draws every perception, contact and effect field of lab v3's structure within its range and
loads, ``"draw2:SEED"`` names it wherever a lab is accepted, and an unknown version is refused naming the valid
ones."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import gymnasium as gym
import numpy as np
import pytest

import r2s2r_envs  # noqa: F401  (registers the ids)
from r2s2r_envs.lab import draw_lab, load_lab
from r2s2r_envs.lab.config import OPERATOR_CHOICES, LabContact, LabPerception, UnmodeledEffects
from r2s2r_envs.lab.draw import (
    CONTACT_DRAW_V2,
    DRAW_VERSION,
    DRAW_VERSIONS,
    EFFECT_DRAW,
    EFFECT_DRAW_V2,
    OPERATOR_DRAW,
    OPERATOR_DRAW_V2,
    PERCEPTION_DRAW_V2,
    WORLD_DRAW,
    WORLD_DRAW_V2,
)
from r2s2r_envs.world.params import PERCEPTION_FIELDS, WorldParams, nominal


def test_the_same_seed_draws_the_same_lab_and_another_seed_another():
    assert draw_lab(3) == draw_lab(3)
    assert draw_lab(3)["world"] != draw_lab(4)["world"]
    assert draw_lab(3)["name"] == "drawn-3" and draw_lab(3, name="cell")["name"] == "cell"
    assert "operator" not in draw_lab(3, operator=False)
    # Without the operator the world and effects are the same draws.
    assert draw_lab(3, operator=False)["world"] == draw_lab(3)["world"]


@pytest.mark.parametrize("seed", range(0, 40, 3))
def test_every_field_is_drawn_within_its_range_and_the_lab_loads(seed):
    config = draw_lab(seed)
    drawn = {field for field, (kind, *_) in WORLD_DRAW.items() if kind != "nominal"}
    assert set(config["world"]) == drawn and drawn <= set(WorldParams.field_names())
    base = nominal()
    for field, (kind, *args) in WORLD_DRAW.items():
        if kind == "nominal":
            assert field not in config["world"]
            continue
        value = np.asarray(config["world"][field], dtype=float)
        if kind == "uniform":
            assert args[0] <= value <= args[1], field
        elif kind == "scale":
            ratio = value / np.asarray(getattr(base, field), dtype=float)
            assert np.all((args[0] <= ratio) & (ratio <= args[1])), field
        else:
            assert np.all(np.abs(value) <= np.asarray(args[0])), field
    low, high = EFFECT_DRAW["arm_command_gain"]
    assert len(config["effects"]["arm_command_gain"]) == 7
    assert all(low <= g <= high for g in config["effects"]["arm_command_gain"])
    for field, (low, high) in OPERATOR_DRAW.items():
        value = config["operator"][field]
        assert value in OPERATOR_CHOICES[field] if field in OPERATOR_CHOICES else low <= value <= high
    lab = load_lab(config)  # a valid lab config: every value within what a lab accepts
    assert lab.name == f"drawn-{seed}"
    assert load_lab(f"draw:{seed}") == lab


def test_draw_seed_names_a_lab_wherever_a_lab_is_accepted():
    env = gym.make("PickSort-Real-v0", lab="draw:5")
    try:
        assert env.unwrapped.provenance()["lab"]["name"] == "drawn-5"
        env.reset(seed=0)
        obs, *_ = env.step(np.zeros(env.action_space.shape))
        assert np.all(np.isfinite(obs["arm_qpos"]))
    finally:
        env.close()


@pytest.mark.parametrize("bad", ["draw:", "draw:x", "draw:-1", "draw:1.5"])
def test_a_bad_draw_seed_is_refused_naming_the_form(bad):
    with pytest.raises(ValueError, match=r"'draw:SEED' with SEED an integer >= 0"):
        load_lab(bad)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"])
def test_draw_lab_refuses_a_seed_that_is_not_an_integer(bad):
    with pytest.raises(ValueError, match="seed must be an integer >= 0"):
        draw_lab(bad)


# ---------------------------------------------------------------------- version 2
# draw:11 ran the whole quick ablation (experiments/ablation-quick-drawn: lab drawn-11, config 7ff1d7e196d5...);
# the SHA-256 of draw_lab(SEED)'s canonical JSON for draw:0-3 (the standard lab panel) and draw:11, as before version 2.
DRAW11_CONFIG_SHA256 = "7ff1d7e196d5f544bda7379a438ccc0fdf8bb9b825accc89cbbbbd8cb29c7892"
DRAW_DICT_SHA256 = {
    0: "be1ac50258ccbd9154e57fecdf8045d31f6315dcfb5bf16fd32760aae41d0341",
    1: "45580eb50fb084d6f7a2f02c9277b1fdfc04803116ca44b96bffcc43074d60a5",
    2: "77d4c3b35a6acfd807498ba3624495df269d96d246c2ac90a60c31a6f9a6f74f",
    3: "e4f944855c77ddbbdbaf3aa90b68628ae22789715bc22c94c80e1e639ec2fb67",
    11: "95c554deda1e0828dc86c1862b378917cd83d13535c72d8c57a8e239bdae662a",
}


def _dict_sha256(config: dict) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()


def test_version_1_is_unchanged():
    assert DRAW_VERSION == 1
    for seed, expected in DRAW_DICT_SHA256.items():
        assert _dict_sha256(draw_lab(seed)) == expected, f"draw_lab({seed}) changed"
    assert draw_lab(11) == draw_lab(11, version=1)
    assert load_lab("draw:11").sha256() == DRAW11_CONFIG_SHA256, (
        "draw:11 no longer loads as the lab the recorded drawn ablation ran on (experiments/ablation-quick-drawn)"
    )
    # Version 1 keeps lab v3's structure nominal.
    config = draw_lab(3)
    assert not set(PERCEPTION_FIELDS) & set(config["world"])
    assert {"perception", "contact"}.isdisjoint(config) and set(config["effects"]) == {
        "arm_command_gain",
        "object_mass_variation",
        "object_friction_variation",
    }


def test_the_same_seed_draws_the_same_version_2_lab_and_another_seed_another():
    assert draw_lab(3, version=2) == draw_lab(3, version=2)
    assert draw_lab(3, version=2)["world"] != draw_lab(4, version=2)["world"]
    assert draw_lab(3, version=2)["world"] != draw_lab(3)["world"]  # its own stream
    assert draw_lab(3, version=2)["name"] == "drawn2-3" and draw_lab(3, name="c", version=2)["name"] == "c"
    without = draw_lab(3, version=2, operator=False)
    assert "operator" not in without
    assert {k: v for k, v in draw_lab(3, version=2).items() if k != "operator"} == without


def _within(value, kind, args, base) -> bool:
    value = np.asarray(value, dtype=float)
    if kind == "uniform":
        return bool(args[0] <= value <= args[1])
    if kind == "scale":
        ratio = value / np.asarray(base, dtype=float)
        return bool(np.all((args[0] <= ratio) & (ratio <= args[1])))
    return bool(np.all(np.abs(value) <= np.asarray(args[0])))


@pytest.mark.parametrize("seed", range(0, 60, 4))
def test_version_2_draws_every_field_within_its_range_and_loads(seed):
    config = draw_lab(seed, version=2)
    world, effects = config["world"], config["effects"]
    assert set(world) == set(WorldParams.field_names()) == set(WORLD_DRAW_V2)  # every field drawn
    base = nominal()
    for field, (kind, *args) in WORLD_DRAW_V2.items():
        assert _within(world[field], kind, args, getattr(base, field)), (field, world[field])
    assert set(effects) == {f.name for f in dataclasses.fields(UnmodeledEffects)} == set(EFFECT_DRAW_V2)
    for field, (low, high) in EFFECT_DRAW_V2.items():
        assert np.all((low <= np.asarray(effects[field])) & (np.asarray(effects[field]) <= high)), field
    assert len(effects["arm_command_gain"]) == 7
    cameras = config["perception"]["cameras"]
    assert [(c["name"], tuple(c["position"])) for c in cameras] == list(PERCEPTION_DRAW_V2["cameras"])
    for camera in cameras:
        assert max(map(abs, camera["rotation_error"])) <= PERCEPTION_DRAW_V2["rotation_error"]
        assert max(map(abs, camera["translation_error"])) <= PERCEPTION_DRAW_V2["translation_error"]
    low, high = PERCEPTION_DRAW_V2["delay_jitter"]
    assert low <= config["perception"]["delay_jitter"] <= high
    for field, (low, high) in CONTACT_DRAW_V2.items():
        assert low <= config["contact"][field] <= high, field
    for field, values in OPERATOR_DRAW_V2.items():
        value = config["operator"][field]
        assert value in values if isinstance(values[0], str) else values[0] <= value <= values[1], field
    assert config["operator"]["approach"] == "above"
    lab = load_lab(config)  # every value within what a lab accepts
    assert lab.name == f"drawn2-{seed}" and load_lab(f"draw2:{seed}") == lab
    assert lab.world.perceives  # objects are seen through the estimator
    assert lab.perception != LabPerception() and lab.contact != LabContact()
    assert lab.effects.late_command_probability > 0 and lab.effects.finger_backlash > 0


def test_version_2_ranges_span_lab_v3_and_stay_inside_the_config_bounds():
    v3 = load_lab("v3")
    for field in PERCEPTION_FIELDS + ("belt_speed", "control_latency", "object_pos_noise"):
        kind, *args = WORLD_DRAW_V2[field]
        assert _within(getattr(v3.world, field), kind, args, None), field
    for field in ("late_command_probability", "finger_backlash"):
        low, high = EFFECT_DRAW_V2[field]
        assert low <= getattr(v3.effects, field) <= high, field
    for field, (low, high) in CONTACT_DRAW_V2.items():
        assert low <= getattr(v3.contact, field) <= high, field
    low, high = PERCEPTION_DRAW_V2["delay_jitter"]
    assert low <= v3.perception.delay_jitter <= high
    for camera in v3.perception.cameras:
        assert max(map(abs, camera.rotation_error)) <= PERCEPTION_DRAW_V2["rotation_error"]
        assert max(map(abs, camera.translation_error)) <= PERCEPTION_DRAW_V2["translation_error"]
    # Each range's ends load: a lab at every low end, and one at every high end, is a valid lab.
    for end in (0, 1):
        world = {}
        for field, (kind, *args) in WORLD_DRAW_V2.items():
            if kind == "uniform":
                world[field] = args[end]
            elif kind == "offset":
                world[field] = [h if end else -h for h in args[0]]
        effects = {k: r[end] for k, r in EFFECT_DRAW_V2.items() if k != "arm_command_gain"}
        rot, tr = PERCEPTION_DRAW_V2["rotation_error"], PERCEPTION_DRAW_V2["translation_error"]
        sign = 1 if end else -1
        cameras = [
            {"name": n, "position": list(at), "rotation_error": [sign * rot] * 3, "translation_error": [sign * tr] * 3}
            for n, at in PERCEPTION_DRAW_V2["cameras"]
        ]
        perception = {"cameras": cameras, "delay_jitter": PERCEPTION_DRAW_V2["delay_jitter"][end]}
        contact = {k: r[end] for k, r in CONTACT_DRAW_V2.items()}
        load_lab({"world": world, "effects": effects, "perception": perception, "contact": contact})


def test_version_2_keeps_version_1s_other_ranges_except_the_belt_and_latency_it_narrows():
    changed = {k for k in WORLD_DRAW if WORLD_DRAW[k] != WORLD_DRAW_V2[k]}
    narrowed = {"belt_speed", "control_latency", "object_pos_noise", "object_pos_offset"}
    assert changed == set(PERCEPTION_FIELDS) | narrowed
    assert list(WORLD_DRAW_V2) == list(WORLD_DRAW)  # the same drawing order
    _, low, high = WORLD_DRAW_V2["belt_speed"]
    assert high <= 0.08  # the operator falls behind above (experiments/drawn-labs-v2; lab-v3: half at 0.092 m/s)


def test_draw2_seed_names_a_lab_wherever_a_lab_is_accepted():
    env = gym.make("PickSort-Real-v0", lab="draw2:5")
    try:
        assert env.unwrapped.provenance()["lab"]["name"] == "drawn2-5"
        assert env.unwrapped.provenance()["lab"]["config_sha256"] == load_lab(draw_lab(5, version=2)).sha256()
        env.reset(seed=0)
        obs, *_ = env.step(np.zeros(env.action_space.shape))
        assert np.all(np.isfinite(obs["arm_qpos"]))
    finally:
        env.close()


@pytest.mark.parametrize("bad", ["draw4:1", "draw0:1", "draw1:1", "draw22:4"])
def test_an_unknown_version_in_the_string_is_refused_naming_the_valid_forms(bad):
    with pytest.raises(ValueError, match=r"valid forms: 'draw:SEED' \(version 1\), 'draw2:SEED' \(version 2\)"):
        load_lab(bad)


@pytest.mark.parametrize("bad", ["draw2:", "draw2:x", "draw2:-1", "draw2:1.5"])
def test_a_bad_version_2_seed_is_refused_naming_the_form(bad):
    with pytest.raises(ValueError, match=r"'draw2:SEED' with SEED an integer >= 0"):
        load_lab(bad)


@pytest.mark.parametrize("bad", [0, 4, "2", True, 2.0])
def test_draw_lab_refuses_an_unknown_version_naming_the_valid_ones(bad):
    with pytest.raises(ValueError, match=r"valid versions: 1 \('draw:SEED'\), 2 \('draw2:SEED'\)"):
        draw_lab(1, version=bad)
    assert sorted(DRAW_VERSIONS) == [1, 2, 3]
