"""Policies v2: recipes, EMA weights, validation-loss checkpoints, mixture-weighted normalization, temporal
ensembling, CFG guided toward the env's domain, and checkpoints of version 1 still loading."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from r2s2r_envs.datasets.stats import RunningStats
from r2s2r_envs.datasets.toy import ToyPickSortEnv, write_synthetic_dataset
from r2s2r_envs.evaluation.protocol import resolve_policy
from r2s2r_envs.policies import load_policy
from r2s2r_envs.policies.checkpoint import CONFIG_FILE, WEIGHTS_FILE
from r2s2r_envs.policies.config import RECIPES, ConfigError, TrainConfig, check_config
from r2s2r_envs.policies.models import REAL, SIM, PolicyModel
from r2s2r_envs.policies.pipeline import weighted_merge
from r2s2r_envs.policies.train import EMA, build_pipeline, load_datasets, lr_factor, prepare, split_demos, train
from r2s2r_envs.safe_json import with_content_hash

TINY = dict(steps=6, batch_size=16, hidden_dim=32, layers=2, feature_dim=16, action_chunk=4, execute_steps=2)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("policy-v2-data")
    paths = {"real": root / "real.hdf5", "sim": root / "sim.hdf5"}
    write_synthetic_dataset(paths["real"], [12, 9, 15, 10], domain="real", seed=1)
    write_synthetic_dataset(paths["sim"], [14, 8, 11, 13, 10, 9, 12, 10, 11, 9], domain="sim", seed=2)
    return paths


def _config(data: dict[str, Path], out: Path, method: str = "flow", **kw: object) -> TrainConfig:
    settings = {"real": (str(data["real"]),), "sim": (str(data["sim"]),), **TINY, "progress": False, **kw}
    return TrainConfig(
        method=method,
        real_fraction=settings.pop("real_fraction", 0.5),
        out=str(out),
        **settings,
    )


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
    with pytest.raises(ConfigError, match=r"unknown recipe 'tpu'; choose one of \['cpu', 'gpu', 'v1'\]"):
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
        ({"features": "pixels"}, r"features must be one of \['raw', 'task'\]"),
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


def test_warmup_then_cosine() -> None:
    config = TrainConfig(method="bc", sim=("x",), real_fraction=0.0, out="o", steps=100, warmup_steps=10)
    factors = [lr_factor(config, s) for s in range(100)]
    assert factors[0] == pytest.approx(0.1) and factors[9] == pytest.approx(1.0)
    assert all(a < b for a, b in zip(factors[:10], factors[1:10]))
    assert all(a >= b for a, b in zip(factors[10:], factors[11:])) and factors[-1] == pytest.approx(0.1, abs=0.01)


# -- batches kept on the device ---------------------------------------------------------------------


@pytest.mark.parametrize("features", ["task", "raw"])
def test_resident_batches_are_the_batches_encoded_step_by_step(data: dict[str, Path], features: str) -> None:
    from r2s2r_envs.datasets.mixture import CoTrainingMixture
    from r2s2r_envs.policies.train import ResidentBatches, batch_tensors

    config = _config(data, Path("unused"), features=features, real_fraction=0.3)
    refs, _ = prepare(config)
    datasets = load_datasets(config, refs)
    pipeline = build_pipeline(config, datasets)
    encoded = CoTrainingMixture(datasets, 0.3, seed=5)
    resident = ResidentBatches(CoTrainingMixture(datasets, 0.3, seed=5), pipeline, torch.device("cpu"), chunk=7)
    for _ in range(25):
        batch = encoded.sample(16)
        inputs, target, weight = batch_tensors(pipeline, batch)
        r_inputs, r_target, r_weight, r_domain = resident.sample(16)
        assert torch.equal(r_inputs["state"], inputs["state"]) and torch.equal(r_target, target)
        assert torch.equal(r_weight, weight) and torch.equal(r_domain, torch.from_numpy(batch["domain"]))
    assert ResidentBatches.nbytes(datasets, pipeline) == len(resident.state) * (
        4 * (pipeline.state_dim + pipeline.chunk_dim) + pipeline.action_chunk + 8
    )


# -- EMA and checkpoint choice ----------------------------------------------------------------------


def test_ema_follows_the_weights_slowly() -> None:
    model = torch.nn.Linear(2, 1)
    ema = EMA(model, 0.9)
    start = model.weight.detach().clone()
    for _ in range(50):
        with torch.no_grad():
            model.weight.add_(1.0)
        ema.update(model)
    averaged = ema.state["weight"]
    assert torch.all(averaged > start + 10) and torch.all(averaged < model.weight - 5)


def test_validation_demos_are_held_out_of_training_and_the_best_checkpoint_is_saved(
    data: dict[str, Path], tmp_path: Path
) -> None:
    config = _config(data, tmp_path / "val", steps=20, val_fraction=0.2, ema_decay=0.9)
    refs, _ = prepare(config)
    splits = split_demos(config, refs)
    (real_train, real_val), (sim_train, sim_val) = splits
    assert real_val == [] and len(sim_val) == 2  # the scarce real demos are all trained on
    assert not set(sim_val) & set(sim_train)
    result = train(config)
    log = json.loads((result.out / "train_log.json").read_text())
    assert [v["step"] for v in log["validation"]] == [2, 4, 6, 8, 10, 12, 14, 16, 18, 20]
    best = min(log["validation"], key=lambda v: v["loss"])
    assert log["checkpoint_step"] == best["step"]
    assert log["validation_demos"] == {str(data["sim"]): sim_val}
    meta = result.metadata
    assert meta["n_sim_demos"] == len(sim_train) + len(sim_val)
    real_only = _config(data, tmp_path / "ro", real_fraction=1.0, sim=(), val_fraction=0.25)
    ((train_ids, val_ids),) = split_demos(real_only, prepare(real_only)[0])
    assert len(val_ids) == 1 and len(train_ids) == 2  # real-only: the real demos give the validation loss


def test_val_points_set_the_checkpoint_candidates(data: dict[str, Path], tmp_path: Path) -> None:
    config = _config(data, tmp_path / "points", steps=20, val_fraction=0.2, val_points=4)
    log = json.loads((train(config).out / "train_log.json").read_text())
    assert [v["step"] for v in log["validation"]] == [5, 10, 15, 20]


def test_obs_noise_perturbs_training_inputs_only(data: dict[str, Path], tmp_path: Path) -> None:
    """The same seed with and without input noise trains different weights; at inference the noise is never
    applied (the same checkpoint acts the same on the same observation, twice)."""
    clean = train(_config(data, tmp_path / "clean", method="bc"))
    noisy = train(_config(data, tmp_path / "noisy", method="bc", obs_noise=0.5))
    weights = [torch.load(r.out / WEIGHTS_FILE, weights_only=True) for r in (clean, noisy)]
    assert any(not torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    env = ToyPickSortEnv()
    obs, _ = env.reset(seed=3)
    actions = []
    for _ in range(2):
        policy = load_policy(noisy.out)
        policy.reset()
        actions.append(policy.act(obs))
    np.testing.assert_array_equal(actions[0], actions[1])


def test_training_never_makes_the_lab(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Training on lab data (checkpoint choice included) reads the action bounds from the task's definition and
    never makes a lab env."""
    from r2s2r_envs.datasets.generate import generate

    real = tmp_path / "lab.hdf5"
    generate("PickSort-Real-v0", 3, real, seed=5, progress=False, env_kwargs={"num_objects": 1, "episode_steps": 30})
    made = []
    original = gym.make
    monkeypatch.setattr(gym, "make", lambda env_id, *a, **k: made.append(env_id) or original(env_id, *a, **k))
    config = TrainConfig(
        method="bc",
        real=(str(real),),
        real_fraction=1.0,
        out=str(tmp_path / "p"),
        demos="all",
        val_fraction=0.3,
        progress=False,
        **TINY,
    )
    result = train(config)
    assert made == []
    log = json.loads((result.out / "train_log.json").read_text())
    assert len(log["validation"]) == TINY["steps"] and log["validation_demos"]  # chosen on held-out lab *demos*
    policy = load_policy(result.out)
    np.testing.assert_array_equal(policy.pipeline.action_low, -np.ones(22, np.float32))


# -- normalization --------------------------------------------------------------------------------------


def test_weighted_merge_is_the_mixtures_statistics() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.normal(0.0, 1.0, (1000, 2)), rng.normal(5.0, 2.0, (50, 2))
    merged = weighted_merge([RunningStats.from_array(a), RunningStats.from_array(b)], [0.5, 0.5])
    draws = np.concatenate([a[rng.integers(0, 1000, 200_000)], b[rng.integers(0, 50, 200_000)]])
    np.testing.assert_allclose(merged.mean, draws.mean(axis=0), atol=0.05)
    np.testing.assert_allclose(merged.std, draws.std(axis=0), atol=0.05)
    with pytest.raises(ValueError, match="non-negative weight"):
        weighted_merge([RunningStats.from_array(a)], [-1.0])


def test_real_data_is_normalized_by_its_share_of_the_batches(data: dict[str, Path], tmp_path: Path) -> None:
    by_mixture = _config(data, tmp_path / "m", real_fraction=0.5, val_fraction=0.0)
    by_samples = dataclasses.replace(by_mixture, normalization_weights="samples")
    refs, _ = prepare(by_mixture)
    datasets = load_datasets(by_mixture, refs)
    real, sim = (d.stats["actions"].mean for d in datasets)
    mixture_mean = build_pipeline(by_mixture, datasets).stats["actions"].mean
    sample_mean = build_pipeline(by_samples, datasets).stats["actions"].mean
    np.testing.assert_allclose(mixture_mean, 0.5 * real + 0.5 * sim, atol=1e-9)
    n_real, n_sim = (d.stats["actions"].count for d in datasets)  # the files' statistics count every demo
    np.testing.assert_allclose(sample_mean, (n_real * real + n_sim * sim) / (n_real + n_sim), atol=1e-9)


# -- execution --------------------------------------------------------------------------------------------


def test_temporal_ensemble_averages_every_running_chunk(data: dict[str, Path], tmp_path: Path) -> None:
    out = train(_config(data, tmp_path / "te", action_chunk=4)).out
    k = 0.5
    policy = load_policy(out, temporal_ensemble=k)
    assert policy.temporal_ensemble == k and policy.settings["temporal_ensemble"] == k
    made = []

    def fake_chunk(stacked: dict) -> np.ndarray:  # chunk predicted at step s: entry i is 100 * s + i
        s = len(made)
        made.append(s)
        return (100.0 * s + np.arange(4, dtype=np.float32))[None, :, None] * np.ones((1, 4, 22), np.float32)

    policy.predict_chunk = fake_chunk
    obs, _ = ToyPickSortEnv().reset(seed=0)
    policy.reset(0)
    actions = [float(policy.act(obs)[0]) for _ in range(6)]
    assert len(made) == 6  # a prediction every step
    for t, action in enumerate(actions):
        starts = [s for s in range(t + 1) if t - s < 4]
        w = np.exp(-k * np.array([t - s for s in starts]))
        expected = (w * np.array([100.0 * s + (t - s) for s in starts])).sum() / w.sum()
        assert action == pytest.approx(expected, rel=1e-5)
    receding = load_policy(out, execute_steps=1)
    assert receding.execute_steps == 1 and receding.temporal_ensemble == 0.0
    with pytest.raises(ValueError, match=r"execute_steps must be in \[1, 4\]"):
        load_policy(out, execute_steps=5)


def test_cfg_is_guided_toward_the_env_domain(data: dict[str, Path], tmp_path: Path) -> None:
    policy = load_policy(train(_config(data, tmp_path / "cfg", "flow-cfg", steps=30)).out)
    assert policy.domain == "real"
    env = gym.make("PickSort-Ungrounded-v0")
    assert resolve_policy(policy, env) is policy and policy.domain == "sim"
    env.close()
    assert policy.settings["guided_toward"] == "sim"
    policy.set_domain("real")
    with pytest.raises(ValueError, match="domain must be 'real' or 'sim'"):
        policy.set_domain("lab")
    # The guidance target reaches the flow: a model guided toward sim and toward real integrates differently.
    model = PolicyModel(
        state_dim=6,
        chunk_dim=4,
        generative=True,
        cfg=True,
        adda=False,
        image_keys=[],
        frame_stack=1,
        hidden_dim=16,
        layers=2,
        feature_dim=8,
        architecture="resmlp",
    )
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.3)
    inputs = {"state": torch.ones(1, 6)}
    to_real = model.predict(inputs, torch.Generator().manual_seed(0), flow_steps=4, cfg_scale=2.0, toward=REAL)
    to_sim = model.predict(inputs, torch.Generator().manual_seed(0), flow_steps=4, cfg_scale=2.0, toward=SIM)
    assert not torch.allclose(to_real, to_sim)


def test_a_version_1_checkpoint_still_loads_and_acts_the_same(
    data: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from r2s2r_envs.policies import CheckpointError, read_checkpoint

    out = train(_config(data, tmp_path / "v1", "bc", recipe="v1", steps=4, batch_size=16)).out
    policy = load_policy(out)
    assert policy.pipeline.features == "raw" and policy.model.architecture == "mlp"
    obs, _ = ToyPickSortEnv().reset(seed=0)
    policy.reset(0)
    expected = policy.act(obs)
    # Rewrite config.json as version 1 wrote it: no recipe, no new fields, no feature stage or architecture.
    doc = json.loads((out / CONFIG_FILE).read_text())
    doc["checkpoint_version"] = 1
    doc.pop("content_sha256")  # version 1 wrote none
    doc.pop("weights_sha256")
    doc["config"] = {k: v for k, v in doc["config"].items() if k in _V1_FIELDS or k not in RECIPES["v1"]}
    doc["config"].pop("recipe")
    doc["pipeline"].pop("features")
    doc["model"].pop("architecture")
    old = tmp_path / "old"
    old.mkdir()
    (old / CONFIG_FILE).write_text(json.dumps(doc))
    (old / WEIGHTS_FILE).write_bytes((out / WEIGHTS_FILE).read_bytes())
    # Hash-free: refused unless the user says to trust it (a flipped weight would change actions unnoticed).
    monkeypatch.delenv("R2S2R_TRUST_UNHASHED", raising=False)
    with pytest.raises(
        CheckpointError, match=r"config\.json \(checkpoint version 1\) has no content_sha256 or weights_sha256"
    ):
        load_policy(old)
    monkeypatch.setenv("R2S2R_TRUST_UNHASHED", "1")
    legacy = load_policy(old)
    legacy.reset(0)
    np.testing.assert_array_equal(legacy.act(obs), expected)
    assert read_checkpoint(old, trust_unhashed=True)["checkpoint_version"] == 1
    # A version-2 config stripped of its content hash, with shifted normalization statistics: refused, untrusted.
    monkeypatch.delenv("R2S2R_TRUST_UNHASHED")
    shifted = tmp_path / "shifted"
    shutil.copytree(out, shifted)
    doc = json.loads((shifted / CONFIG_FILE).read_text())
    doc.pop("content_sha256")
    stats = doc["pipeline"]["stats"]["actions"]
    stats["mean"] = [m + 10.0 for m in stats["mean"]]
    (shifted / CONFIG_FILE).write_text(json.dumps(doc))
    with pytest.raises(CheckpointError, match=r"\(checkpoint version 2\) has no content_sha256, so neither it"):
        load_policy(shifted)


def test_damaged_or_non_finite_checkpoints_are_refused_at_load(data: dict[str, Path], tmp_path: Path) -> None:
    from r2s2r_envs.policies import CheckpointError
    from r2s2r_envs.policies.checkpoint import weights_digest

    out = train(_config(data, tmp_path / "good", "bc")).out

    def copy(name: str) -> Path:
        target = tmp_path / name
        shutil.copytree(out, target)
        return target

    flipped = copy("flipped")
    raw = bytearray((flipped / WEIGHTS_FILE).read_bytes())
    raw[len(raw) // 2] ^= 0x01
    (flipped / WEIGHTS_FILE).write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match="does not match the weights its config.json records"):
        load_policy(flipped)

    nan = copy("nan")
    state = torch.load(nan / WEIGHTS_FILE, weights_only=True)
    next(v for v in state.values() if v.is_floating_point()).view(-1)[0] = float("nan")
    torch.save(state, nan / WEIGHTS_FILE)
    doc = json.loads((nan / CONFIG_FILE).read_text())
    doc["weights_sha256"] = weights_digest(nan / WEIGHTS_FILE)  # consistent, but not finite
    (nan / CONFIG_FILE).write_text(json.dumps(with_content_hash(doc)))
    with pytest.raises(CheckpointError, match="not finite"):
        load_policy(nan)

    zero = copy("zero")
    doc = json.loads((zero / CONFIG_FILE).read_text())
    doc["config"]["execute_steps"] = 0
    (zero / CONFIG_FILE).write_text(json.dumps(with_content_hash(doc)))
    with pytest.raises(CheckpointError, match=r"execute_steps 0 in config.json is not in \[1, 4\]"):
        load_policy(zero)


def test_evaluate_cli_execution_settings_reach_the_checkpoint(data: dict[str, Path], tmp_path: Path) -> None:
    from r2s2r_envs.evaluation.cli import PolicySpecError, resolve_policy_spec

    out = train(_config(data, tmp_path / "cli", "flow")).out
    policy = resolve_policy_spec(str(out), execute_steps=1, temporal_ensemble=0.3)(None)
    assert (policy.execute_steps, policy.temporal_ensemble) == (1, 0.3)
    with pytest.raises(PolicySpecError, match="apply to a checkpoint"):
        resolve_policy_spec("r2s2r_envs.behavior:make_demonstrator", execute_steps=2)
    with pytest.raises(PolicySpecError, match="temporal_ensemble must be >= 0"):
        resolve_policy_spec(str(out), temporal_ensemble=-1.0)(None)
