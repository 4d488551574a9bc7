"""The model zoo: ``zoo:NAME`` loads a reference checkpoint wherever a checkpoint path is accepted; the checkpoints
are the data package ``r2s2r_envs_zoo`` (``zoo/``), verified against the hashes the core's index pins."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from r2s2r_envs.datasets.toy import ToyPickSortEnv, write_synthetic_dataset
from r2s2r_envs.policies import CheckpointError, load_policy, read_checkpoint, zoo
from r2s2r_envs.policies.checkpoint import weights_digest
from r2s2r_envs.policies.config import TrainConfig
from r2s2r_envs.policies.policy_spec import PolicySpecError, resolve_policy_spec
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
    hashes = {f: weights_digest(root / "tiny-bc" / f) for f in ("config.json", "policy.pt")}
    entry = {"name": "tiny-bc", "description": "a test checkpoint", "record": "none", "files_sha256": hashes}
    index = tmp_path / "index.json"
    index.write_text(json.dumps({"package": "r2s2r_envs_zoo", "checkpoints": [entry]}))
    monkeypatch.setattr(zoo, "zoo_root", lambda: root)
    monkeypatch.setattr(zoo, "zoo_index_path", lambda: index)
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


def test_a_changed_file_is_refused_naming_the_pinned_hash(tiny_zoo: Path) -> None:
    config = tiny_zoo / "tiny-bc" / "config.json"
    config.write_text(config.read_text().replace('"bc"', '"bc" ', 1))
    with pytest.raises(zoo.ZooError, match=r"config\.json has sha256 .*the zoo index pins .*pip install \./zoo"):
        load_policy("zoo:tiny-bc")
    with pytest.raises(PolicySpecError, match="the zoo index pins"):
        resolve_policy_spec("zoo:tiny-bc")


def test_an_entry_without_pinned_hashes_is_refused(tiny_zoo: Path) -> None:
    index = zoo.zoo_index_path()
    document = json.loads(index.read_text())
    del document["checkpoints"][0]["files_sha256"]
    index.write_text(json.dumps(document))
    with pytest.raises(zoo.ZooError, match="pins no file hashes"):
        read_checkpoint("zoo:tiny-bc")


def test_without_the_data_package_the_error_names_it_and_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zoo, "ZOO_PACKAGE", "r2s2r_envs_zoo_not_installed")
    name = sorted(zoo.zoo_index())[0]  # the index ships with the core package
    with pytest.raises(zoo.ZooError, match=r"data package r2s2r_envs_zoo_not_installed, which is not installed: pip "):
        load_policy(f"zoo:{name}")
    with pytest.raises(PolicySpecError, match=r"pip install \./zoo"):
        resolve_policy_spec(f"zoo:{name}")
    with pytest.raises(CheckpointError, match="no zoo checkpoint 'nope'"):  # names still checked without the data
        read_checkpoint("zoo:nope")


def test_shipped_checkpoints_load_and_name_their_data() -> None:
    """Every shipped entry is a checkpoint that loads, records its training config and datasets' hashes, and the
    zoo stays under its size limit."""
    index = zoo.zoo_index()
    root = zoo.zoo_root()
    assert len(index) == 3 and json.loads(zoo.zoo_index_path().read_text())["package"] == zoo.ZOO_PACKAGE
    total = sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) if root.is_dir() else 0
    assert total <= ZOO_LIMIT_BYTES
    for name, entry in index.items():
        assert sorted(entry["files_sha256"]) == ["config.json", "policy.pt"]
        for file, pinned in entry["files_sha256"].items():
            assert weights_digest(root / name / file) == pinned
        data = read_checkpoint(f"zoo:{name}")
        assert data["config"]["recipe"] == entry["recipe"]
        hashes = [d["sha256"] for d in data["metadata"]["datasets"]]
        assert hashes == entry["datasets"] and all(len(h) == 64 for h in hashes)
        policy = load_policy(f"zoo:{name}")
        assert policy.metadata["method"] == entry["method"]
