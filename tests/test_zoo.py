"""The model zoo: ``zoo:NAME`` loads a shipped checkpoint wherever a checkpoint path is accepted."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from r2s2r_envs.datasets.toy import ToyPickSortEnv, write_synthetic_dataset
from r2s2r_envs.evaluation.cli import PolicySpecError, resolve_policy_spec
from r2s2r_envs.policies import CheckpointError, load_policy, read_checkpoint, zoo
from r2s2r_envs.policies.config import TrainConfig
from r2s2r_envs.policies.train import train

#: The zoo's size limit (all shipped checkpoints together).
ZOO_LIMIT_BYTES = 20 * 2**20


@pytest.fixture
def tiny_zoo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    data = tmp_path / "sim.hdf5"
    write_synthetic_dataset(data, [12, 9, 15, 10], domain="sim", seed=2)
    config = TrainConfig(
        method="bc",
        sim=(str(data),),
        real_fraction=0.0,
        out=str(tmp_path / "ck"),
        steps=3,
        batch_size=8,
        hidden_dim=16,
        layers=1,
        feature_dim=8,
        progress=False,
    )
    train(config)
    root = tmp_path / "zoo"
    shutil.copytree(tmp_path / "ck", root / "tiny-bc")
    index = {"checkpoints": [{"name": "tiny-bc", "description": "a test checkpoint", "record": "none"}]}
    (root / "index.json").write_text(json.dumps(index))
    monkeypatch.setattr(zoo, "zoo_root", lambda: root)
    return root


def test_zoo_name_loads_like_a_directory(tiny_zoo: Path) -> None:
    by_name = load_policy("zoo:tiny-bc")
    by_path = load_policy(tiny_zoo / "tiny-bc")
    obs, _ = ToyPickSortEnv().reset(seed=0)
    by_name.reset(0)
    by_path.reset(0)
    np.testing.assert_array_equal(by_name.act(obs), by_path.act(obs))
    assert read_checkpoint("zoo:tiny-bc")["metadata"]["method"] == "bc"
    factory = resolve_policy_spec("zoo:tiny-bc")
    assert factory(None).metadata["method"] == "bc"


def test_unknown_zoo_name_lists_the_names(tiny_zoo: Path) -> None:
    with pytest.raises(CheckpointError, match=r"no zoo checkpoint 'nope'; the zoo has \['tiny-bc'\]"):
        load_policy("zoo:nope")
    with pytest.raises(PolicySpecError, match="no zoo checkpoint 'nope'"):
        resolve_policy_spec("zoo:nope")


def test_shipped_checkpoints_load_and_name_their_data() -> None:
    """Every shipped entry is a checkpoint that loads, records its training config and datasets' hashes, and the
    zoo stays under its size limit."""
    index = zoo.zoo_index()
    root = zoo.zoo_root()
    total = sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) if root.is_dir() else 0
    assert total <= ZOO_LIMIT_BYTES
    for name, entry in index.items():
        data = read_checkpoint(f"zoo:{name}")
        assert data["config"]["recipe"] == entry["recipe"]
        hashes = [d["sha256"] for d in data["metadata"]["datasets"]]
        assert hashes == entry["datasets"] and all(len(h) == 64 for h in hashes)
        policy = load_policy(f"zoo:{name}")
        assert policy.metadata["method"] == entry["method"]
