"""Packed weights (r2s2r_envs.policies.weights): what each storage keeps, and that a packed checkpoint loads and acts
as its float32 source does, within the storage's error."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from conftest import policy_toy_data, tiny_train_config  # noqa: E402

from r2s2r_envs.datasets.toy import ToyPickSortEnv  # noqa: E402
from r2s2r_envs.policies.checkpoint import read_checkpoint  # noqa: E402
from r2s2r_envs.policies.checkpoint_layout import CheckpointError  # noqa: E402
from r2s2r_envs.policies.weights import (  # noqa: E402
    SCALE_SUFFIX,
    STORAGE_FIELD,
    load_state_dict_file,
    pack_checkpoint,
    pack_state_dict,
    storage_error,
    unpack_state_dict,
)


def _state(seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "fc.weight": torch.randn(64, 48, generator=g) * torch.linspace(0.01, 3.0, 64)[:, None],  # rows of any scale
        "fc.bias": torch.randn(64, generator=g),
        "conv.weight": torch.randn(16, 3, 5, 5, generator=g),
        "zero.weight": torch.zeros(32, 40),
        "small.weight": torch.randn(4, 4, generator=g),
        "steps": torch.tensor(7, dtype=torch.int64),
    }


def test_int8_stores_weight_matrices_as_bytes_and_the_rest_in_half_precision():
    packed = pack_state_dict(_state(), "int8")
    assert packed["fc.weight"].dtype == torch.int8 and packed["fc.weight" + SCALE_SUFFIX].shape == (64,)
    assert packed["conv.weight"].dtype == torch.int8 and packed["conv.weight"].shape == (16, 3, 5, 5)
    assert packed["fc.bias"].dtype == torch.float16  # one dimension: no scale per row
    assert packed["small.weight"].dtype == torch.float16  # below INT8_MIN_NUMEL
    assert packed["steps"].dtype == torch.int64 and int(packed["steps"]) == 7  # not floating: kept


@pytest.mark.parametrize("storage", ["float32", "float16", "int8"])
def test_unpacking_restores_float32_within_each_rows_step(storage):
    state = _state()
    restored = unpack_state_dict(pack_state_dict(state, storage))
    assert set(restored) == set(state)
    for name, tensor in state.items():
        if not tensor.is_floating_point():
            assert torch.equal(restored[name], tensor)
            continue
        assert restored[name].dtype == torch.float32
        rows = tensor.reshape(tensor.shape[0], -1) if tensor.ndim else tensor.reshape(1, 1)
        step = {"float32": 0.0, "float16": 1e-3, "int8": 1 / 254}[storage] * rows.abs().amax(dim=1)
        change = (restored[name] - tensor).reshape(rows.shape).abs().amax(dim=1)
        assert bool((change <= step + 1e-7).all()), (name, float((change - step).max()))
    assert torch.equal(restored["zero.weight"], state["zero.weight"])  # an all-zero row stays exactly zero


def test_storage_error_measures_the_change():
    assert storage_error(_state(), "float32") == {"max_abs_change": 0.0, "relative_rms_change": 0.0}
    int8, half = storage_error(_state(), "int8"), storage_error(_state(), "float16")
    assert 0 < half["relative_rms_change"] < int8["relative_rms_change"] < 0.01


def test_bad_storage_and_bad_packed_files_are_refused():
    with pytest.raises(ValueError, match=r"unknown weights storage 'int4'.*float16.*int8"):
        pack_state_dict(_state(), "int4")
    with pytest.raises(ValueError, match="may not end in"):
        pack_state_dict({"w" + SCALE_SUFFIX: torch.zeros(2, 2)}, "float16")
    packed = pack_state_dict(_state(), "int8")
    with pytest.raises(CheckpointError, match="one scale per row"):
        unpack_state_dict({**packed, "fc.weight" + SCALE_SUFFIX: torch.ones(3)})
    with pytest.raises(CheckpointError, match="has no tensor"):
        unpack_state_dict({"gone" + SCALE_SUFFIX: torch.ones(3)})


def test_a_packed_checkpoint_verifies_loads_and_acts_like_its_source(tmp_path):
    from r2s2r_envs.policies import load_policy
    from r2s2r_envs.policies.train import train

    source = tmp_path / "run"
    train(tiny_train_config(policy_toy_data(tmp_path / "data"), source, hidden_dim=64))
    out = tmp_path / "packed"
    document = pack_checkpoint(source, out, storage="int8")

    assert document[STORAGE_FIELD] == "int8" and read_checkpoint(out)[STORAGE_FIELD] == "int8"  # hashes verify
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "policy.pt"]
    assert (out / "policy.pt").stat().st_size < 0.5 * (source / "policy.pt").stat().st_size
    with pytest.raises(FileExistsError, match="overwrites nothing"):
        pack_checkpoint(source, out, storage="int8")

    a, b = load_policy(source), load_policy(out)
    restored = load_state_dict_file(out / "policy.pt")
    assert all(v.dtype == torch.float32 for v in restored.values() if v.is_floating_point())
    obs, _ = ToyPickSortEnv().reset(seed=0)
    a.reset(seed=3)
    b.reset(seed=3)
    first, second = a.act(obs), b.act(obs)
    assert first.shape == second.shape
    assert 0 < np.abs(first - second).max() < 0.05  # not the same weights, nearly the same actions

    (out / "policy.pt").write_bytes((out / "policy.pt").read_bytes()[:-10])  # damaged: the pinned hash refuses it
    with pytest.raises(CheckpointError, match="does not match the weights"):
        load_policy(out)
