"""Training settings (``r2s2r_envs.policies.config``): recipes fill the settings left unset, a config written
before recipes reads as version 1, and bad settings are refused naming the field."""

from __future__ import annotations

import pytest

from r2s2r_envs.policies.config import RECIPES, ConfigError, TrainConfig, check_config

# -- recipes --------------------------------------------------------------------------------------------


def test_a_recipe_fills_unset_fields_and_explicit_values_win() -> None:
    gpu = TrainConfig(method="flow", sim=("x",), real_fraction=0.0, out="o", recipe="gpu", steps=7)
    assert gpu.steps == 7 and gpu.hidden_dim == RECIPES["gpu"]["hidden_dim"] and gpu.recipe == "gpu"
    default = TrainConfig(method="flow", sim=("x",), real_fraction=0.0, out="o")
    assert default.recipe == "cpu" and default.features == "task" and default.ema_decay > 0
    v1 = TrainConfig(method="flow", sim=("x",), real_fraction=0.0, out="o", recipe="v1")
    assert (v1.features, v1.architecture, v1.ema_decay, v1.steps, v1.lr) == ("raw", "mlp", 0.0, 5000, 2e-3)
    for recipe in RECIPES:
        check_config(TrainConfig(method="flow", sim=("x",), real_fraction=0.0, out="o", recipe=recipe))
    recipes = r"\['cpu', 'cpu-image', 'cpu-image-cached', 'gpu', 'gpu-image', 'v1'\]"
    with pytest.raises(ConfigError, match=r"unknown recipe 'tpu'; choose one of " + recipes):
        TrainConfig(method="flow", sim=("x",), real_fraction=0.0, out="o", recipe="tpu")


def test_a_config_without_recipe_reads_as_v1() -> None:
    v1 = TrainConfig(method="bc", sim=("x",), real_fraction=0.0, out="o", recipe="v1").to_dict()
    old = {k: v for k, v in v1.items() if k not in RECIPES["cpu"] or k in _V1_FIELDS}
    old.pop("recipe")
    assert TrainConfig.from_dict(old) == TrainConfig.from_dict(v1)


# The fields a version-1 checkpoint's config.json had.
_V1_FIELDS = {
    "steps",
    "batch_size",
    "lr",
    "weight_decay",
    "grad_clip",
    "demos",
    "action_normalization",
    "frame_stack",
    "action_chunk",
    "execute_steps",
    "hidden_dim",
    "layers",
    "feature_dim",
    "flow_steps",
    "cfg_dropout",
    "cfg_scale",
    "adda_weight",
    "adda_warmup",
    "composition",
    "device",
}


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"warmup_steps": -1}, "warmup_steps must be an integer >= 0"),
        ({"ema_decay": 1.0}, r"ema_decay must be a number in \[0.0, 0.99999\]"),
        ({"val_fraction": 0.9}, r"val_fraction must be a number in \[0.0, 0.5\]"),
        ({"temporal_ensemble": -0.5}, "temporal_ensemble must be a finite number >= 0"),
        ({"features": "pixels"}, r"features must be one of \['raw', 'task', 'proprio'\]"),
        ({"architecture": "transformer"}, r"architecture must be one of \['mlp', 'resmlp'\]"),
        ({"labels": "noisy"}, r"labels must be one of \['executed', 'clean'\]"),
        ({"features": "task", "encoder": "cnn"}, "features='task' reads state observations"),
        ({"obs_noise": -0.1}, r"obs_noise must be a number in \[0, 1\]"),
        ({"obs_noise": float("nan")}, r"obs_noise must be a number in \[0, 1\]"),
        ({"val_points": 0}, "val_points must be an integer >= 1"),
    ],
)
def test_bad_new_settings_are_named(change: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        check_config(TrainConfig(method="flow", sim=("x",), real_fraction=0.0, out="o", **change))
