"""Training (``r2s2r_envs.policies.train``): the learning-rate schedule, batches kept on the device, EMA weights,
validation-loss checkpoint choice, input noise, lab data without a lab env, and mixture-weighted normalization.

Tiny data: synthetic files with PickSort's keys (``conftest.policy_toy_data``)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import TINY_TRAIN, policy_toy_data, tiny_train_config

from r2s2r_envs.datasets.stats import RunningStats
from r2s2r_envs.datasets.toy import ToyPickSortEnv
from r2s2r_envs.policies import load_policy
from r2s2r_envs.policies.checkpoint import WEIGHTS_FILE
from r2s2r_envs.policies.config import TrainConfig
from r2s2r_envs.policies.pipeline import weighted_merge
from r2s2r_envs.policies.train import EMA, build_pipeline, load_datasets, lr_factor, prepare, split_demos, train


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return policy_toy_data(tmp_path_factory.mktemp("policy-data"))


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

    config = tiny_train_config(data, Path("unused"), features=features, real_fraction=0.3)
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
    config = tiny_train_config(data, tmp_path / "val", steps=20, val_fraction=0.2, ema_decay=0.9)
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
    real_only = tiny_train_config(data, tmp_path / "ro", real_fraction=1.0, sim=(), val_fraction=0.25)
    ((train_ids, val_ids),) = split_demos(real_only, prepare(real_only)[0])
    assert len(val_ids) == 1 and len(train_ids) == 2  # real-only: the real demos give the validation loss


def test_val_points_set_the_checkpoint_candidates(data: dict[str, Path], tmp_path: Path) -> None:
    config = tiny_train_config(data, tmp_path / "points", steps=20, val_fraction=0.2, val_points=4)
    log = json.loads((train(config).out / "train_log.json").read_text())
    assert [v["step"] for v in log["validation"]] == [5, 10, 15, 20]


def test_obs_noise_perturbs_training_inputs_only(data: dict[str, Path], tmp_path: Path) -> None:
    """The same seed with and without input noise trains different weights; at inference the noise is never
    applied (the same checkpoint acts the same on the same observation, twice)."""
    clean = train(tiny_train_config(data, tmp_path / "clean", method="bc"))
    noisy = train(tiny_train_config(data, tmp_path / "noisy", method="bc", obs_noise=0.5))
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
        **TINY_TRAIN,
    )
    result = train(config)
    assert made == []
    log = json.loads((result.out / "train_log.json").read_text())
    assert len(log["validation"]) == TINY_TRAIN["steps"] and log["validation_demos"]  # chosen on held-out lab *demos*
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
    by_mixture = tiny_train_config(data, tmp_path / "m", real_fraction=0.5, val_fraction=0.0)
    by_samples = dataclasses.replace(by_mixture, normalization_weights="samples")
    refs, _ = prepare(by_mixture)
    datasets = load_datasets(by_mixture, refs)
    real, sim = (d.stats["actions"].mean for d in datasets)
    mixture_mean = build_pipeline(by_mixture, datasets).stats["actions"].mean
    sample_mean = build_pipeline(by_samples, datasets).stats["actions"].mean
    np.testing.assert_allclose(mixture_mean, 0.5 * real + 0.5 * sim, atol=1e-9)
    n_real, n_sim = (d.stats["actions"].count for d in datasets)  # the files' statistics count every demo
    np.testing.assert_allclose(sample_mean, (n_real * real + n_sim * sim) / (n_real + n_sim), atol=1e-9)
