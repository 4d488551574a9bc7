"""Trained policies at run time (``r2s2r_envs.policies.runtime``): temporal ensembling, CFG guided toward the
env's domain, checkpoints of version 1 still loading, damaged or non-finite checkpoints refused at load, and the
execution settings of ``r2s2r evaluate`` reaching the checkpoint.

Tiny data: synthetic files with PickSort's keys (``conftest.policy_toy_data``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import policy_toy_data, tiny_train_config
from test_policies_config import _V1_FIELDS

from r2s2r_envs.datasets.toy import ToyPickSortEnv
from r2s2r_envs.evaluation.protocol import resolve_policy
from r2s2r_envs.policies import load_policy
from r2s2r_envs.policies.checkpoint import CONFIG_FILE, WEIGHTS_FILE
from r2s2r_envs.policies.config import RECIPES
from r2s2r_envs.policies.models import REAL, SIM, PolicyModel
from r2s2r_envs.policies.train import train
from r2s2r_envs.safe_json import with_content_hash


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return policy_toy_data(tmp_path_factory.mktemp("policy-data"))


# -- execution --------------------------------------------------------------------------------------------


def test_temporal_ensemble_averages_every_running_chunk(data: dict[str, Path], tmp_path: Path) -> None:
    out = train(tiny_train_config(data, tmp_path / "te", action_chunk=4)).out
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
    policy = load_policy(train(tiny_train_config(data, tmp_path / "cfg", "flow-cfg", steps=30)).out)
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

    out = train(tiny_train_config(data, tmp_path / "v1", "bc", recipe="v1", steps=4, batch_size=16)).out
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

    out = train(tiny_train_config(data, tmp_path / "good", "bc")).out

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
    from r2s2r_envs.policies.policy_spec import PolicySpecError, resolve_policy_spec

    out = train(tiny_train_config(data, tmp_path / "cli", "flow")).out
    policy = resolve_policy_spec(str(out), execute_steps=1, temporal_ensemble=0.3)(None)
    assert (policy.execute_steps, policy.temporal_ensemble) == (1, 0.3)
    with pytest.raises(PolicySpecError, match="apply to a checkpoint"):
        resolve_policy_spec("r2s2r_envs.behavior:make_demonstrator", execute_steps=2)
    with pytest.raises(PolicySpecError, match="temporal_ensemble must be >= 0"):
        resolve_policy_spec(str(out), temporal_ensemble=-1.0)(None)
