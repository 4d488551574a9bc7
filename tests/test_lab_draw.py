"""Labs drawn from documented ranges (r2s2r_envs.lab.draw, docs/lab.md#drawn-labs): the same seed gives the same
lab, every field is drawn within its range, every drawn lab is a valid lab config, and "draw:SEED" names one
wherever a lab is accepted."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import r2s2r_envs  # noqa: F401  (registers the ids)
from r2s2r_envs.lab import draw_lab, load_lab
from r2s2r_envs.lab.config import OPERATOR_CHOICES
from r2s2r_envs.lab.draw import EFFECT_DRAW, OPERATOR_DRAW, WORLD_DRAW
from r2s2r_envs.world.params import WorldParams, nominal


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
