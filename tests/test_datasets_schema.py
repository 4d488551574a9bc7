"""Dataset schema, writer and reader: round trip, content hash, ordering, masks, statistics, bad files."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import h5py
import numpy as np
import pytest

from r2s2r_envs.datasets import (
    SUPPORTED_SCHEMA_VERSIONS,
    CorruptDatasetError,
    DatasetWriter,
    EmptyDatasetError,
    HashMismatchError,
    NotADatasetError,
    UnsupportedSchemaError,
    open_dataset,
)
from r2s2r_envs.datasets import schema
from r2s2r_envs.datasets.toy import synthetic_episode, write_synthetic_dataset

LENGTHS = [5, 3, 8, 6, 4, 7, 5, 9, 3, 6, 4, 5]


@pytest.fixture
def small_file(tmp_path: Path) -> Path:
    path = tmp_path / "small.hdf5"
    write_synthetic_dataset(path, LENGTHS, image_size=4)
    return path


def test_round_trip_keeps_every_array(tmp_path: Path) -> None:
    path = tmp_path / "rt.hdf5"
    episodes = [synthetic_episode(n, tag=k, image_size=4) for k, n in enumerate([4, 2, 6])]
    with DatasetWriter.create(path, provenance={"domain": "real", "env_id": "X-v0"},
                              env_args={"env_name": "X-v0", "type": 2, "env_kwargs": {}}) as w:
        for ep in episodes:
            w.append(ep)
    with open_dataset(path) as f:
        assert f.demo_ids == [0, 1, 2]
        assert f.domain == "real"
        assert f.num_samples == 12
        for k, ep in enumerate(episodes):
            demo = f.demo(k)
            for key, seq in ep.observations.items():
                np.testing.assert_array_equal(demo.obs[key], seq[:-1])
                np.testing.assert_array_equal(demo.next_obs[key], seq[1:])
            np.testing.assert_array_equal(demo.actions, ep.actions)
            np.testing.assert_array_equal(demo.states, ep.states)
            assert demo.dones.tolist() == [0] * (ep.num_samples - 1) + [1]
            assert demo.attrs["seed"] == k
            assert demo.attrs["time_to_sort"] == pytest.approx(ep.time_to_sort)
            assert demo.attrs["failure_cause"] is None
            assert demo.attrs["object_outcomes"] == ep.object_outcomes


def test_robomimic_layout_and_provenance_attributes(small_file: Path) -> None:
    with h5py.File(small_file, "r") as f:
        assert int(f.attrs["r2s2r_schema_version"]) == schema.SCHEMA_VERSION
        env_args = json.loads(f["data"].attrs["env_args"])
        assert set(env_args) == {"env_name", "type", "env_kwargs"}
        assert int(f["data"].attrs["total"]) == sum(LENGTHS)
        for k, n in enumerate(LENGTHS):
            grp = f[f"data/demo_{k}"]
            assert int(grp.attrs["num_samples"]) == n
            assert int(grp.attrs["demo_id"]) == k
            assert grp["obs/scene_image"].shape == (n, 4, 4, 3)
            assert grp["obs/scene_image"].compression == "gzip"
        masks = {key: sorted(v.decode() for v in f[f"mask/{key}"][()]) for key in f["mask"]}
    # The split is decided from the id: demo 9 is the first of every ten in "valid".
    assert masks["valid"] == ["demo_9"]
    assert len(masks["train"]) == len(LENGTHS) - 1
    assert "demo_3" not in masks["success"] and "demo_0" in masks["success"]


def test_order_comes_from_demo_id_attribute_not_group_names(small_file: Path) -> None:
    # Lexicographic group order is demo_0, demo_1, demo_10, demo_11, demo_2, ...; ids must still be numeric order.
    with h5py.File(small_file, "r") as f:
        assert list(f["data"].keys())[:3] == ["demo_0", "demo_1", "demo_10"]
    with open_dataset(small_file) as f:
        assert f.demo_ids == list(range(len(LENGTHS)))
        assert [f.demo_length(i) for i in f.demo_ids] == LENGTHS


def test_stored_statistics_match_numpy(small_file: Path) -> None:
    with open_dataset(small_file) as f:
        stats = f.stats()
        actions = np.concatenate([f.read(i, "actions") for i in f.demo_ids]).astype(np.float64)
        arm = np.concatenate([f.read(i, "obs/arm_qpos") for i in f.demo_ids])
    np.testing.assert_allclose(stats["actions"].mean, actions.mean(0), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(stats["actions"].std, actions.std(0), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(stats["obs/arm_qpos"].max, arm.max(0))
    assert stats["actions"].count == sum(LENGTHS)
    assert "obs/scene_image" not in stats  # images are not normalized


def test_content_hash_ignores_compression_but_sees_values(tmp_path: Path) -> None:
    a = write_synthetic_dataset(tmp_path / "a.hdf5", [3, 4], seed=1)
    b = write_synthetic_dataset(tmp_path / "b.hdf5", [3, 4], seed=1)
    c = write_synthetic_dataset(tmp_path / "c.hdf5", [3, 4], seed=2)
    assert a == b
    assert a != c
    with open_dataset(tmp_path / "a.hdf5") as f:
        assert f.content_hash == a


def test_hash_is_byte_order_independent() -> None:
    x = np.arange(6, dtype="<f8").reshape(2, 3)
    assert schema.array_items_hash([("x", x)]) == schema.array_items_hash([("x", x.astype(">f8"))])
    assert schema.array_items_hash([("x", x)]) != schema.array_items_hash([("x", x.reshape(3, 2))])


def test_modified_array_fails_full_verification(small_file: Path) -> None:
    with h5py.File(small_file, "r+") as f:
        f["data/demo_2/actions"][0, 0] += 1.0
    with open_dataset(small_file, verify="quick") as f:  # structure and hash list are still consistent
        assert f.num_demos == len(LENGTHS)
    with pytest.raises(HashMismatchError, match="demo 2"):
        open_dataset(small_file)


def test_edited_hash_list_fails_quick_verification(small_file: Path) -> None:
    with h5py.File(small_file, "r+") as f:
        f["data/demo_1"].attrs["sha256"] = "0" * 64
    with pytest.raises(HashMismatchError, match="modified"):
        open_dataset(small_file, verify="quick")


# -- bad files ---------------------------------------------------------------------------------------


def test_truncated_file_gives_clear_error(small_file: Path, tmp_path: Path) -> None:
    data = small_file.read_bytes()
    bad = tmp_path / "truncated.hdf5"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptDatasetError, match="truncated or damaged") as info:
        open_dataset(bad)
    assert "h5py" not in type(info.value).__module__


def test_overwritten_bytes_give_clear_error(small_file: Path, tmp_path: Path) -> None:
    data = bytearray(small_file.read_bytes())
    # Wipe everything after the superblock: object headers and B-trees become garbage.
    data[200:] = b"\xff" * (len(data) - 200)
    bad = tmp_path / "corrupt.hdf5"
    bad.write_bytes(bytes(data))
    with pytest.raises(CorruptDatasetError):
        open_dataset(bad)


def test_foreign_robomimic_file_is_named_as_such(tmp_path: Path) -> None:
    path = tmp_path / "lift.hdf5"
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        data.attrs["env_args"] = json.dumps({"env_name": "Lift", "type": 1, "env_kwargs": {}})
        data.attrs["total"] = 2
        demo = data.create_group("demo_0")
        demo.attrs["num_samples"] = 2
        demo.create_dataset("actions", data=np.zeros((2, 7)))
    with pytest.raises(NotADatasetError, match=r"robomimic dataset from 'Lift'") as info:
        open_dataset(path)
    assert "schema version(s) 1" in str(info.value)


def test_newer_schema_version_names_supported_versions(small_file: Path) -> None:
    with h5py.File(small_file, "r+") as f:
        f.attrs["r2s2r_schema_version"] = max(SUPPORTED_SCHEMA_VERSIONS) + 1
    with pytest.raises(UnsupportedSchemaError, match=r"schema version 2, which is newer") as info:
        open_dataset(small_file)
    assert "reads schema version(s) 1" in str(info.value)
    assert "upgrade" in str(info.value)


def test_empty_dataset_gives_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.hdf5"
    DatasetWriter.create(path, provenance={}, env_args={"env_name": "X", "type": 2, "env_kwargs": {}}).close()
    with pytest.raises(EmptyDatasetError, match="no demonstrations"):
        open_dataset(path)
    with open_dataset(path, allow_empty=True) as f:
        assert f.num_demos == 0


def test_zero_byte_and_non_hdf5_files(tmp_path: Path) -> None:
    empty = tmp_path / "zero.hdf5"
    empty.write_bytes(b"")
    with pytest.raises(NotADatasetError, match="0 bytes"):
        open_dataset(empty)
    text = tmp_path / "notes.hdf5"
    text.write_text("hello")
    with pytest.raises(NotADatasetError, match="not an HDF5 file"):
        open_dataset(text)
    with pytest.raises(FileNotFoundError):
        open_dataset(tmp_path / "missing.hdf5")


def test_missing_required_key_is_named(small_file: Path) -> None:
    with h5py.File(small_file, "r+") as f:
        del f["data/demo_4/states"]
    with pytest.raises(CorruptDatasetError, match=r"data/demo_4 lacks the array 'states'"):
        open_dataset(small_file)


def test_renamed_demo_group_is_rejected(small_file: Path) -> None:
    with h5py.File(small_file, "r+") as f:
        f.move("data/demo_4", "data/demo_40")
    with pytest.raises(CorruptDatasetError, match="demo_id 4"):
        open_dataset(small_file)


# -- writer behaviour --------------------------------------------------------------------------------


def test_writer_refuses_inconsistent_episode(tmp_path: Path) -> None:
    path = tmp_path / "w.hdf5"
    with DatasetWriter.create(path, provenance={}, env_args={}) as w:
        w.append(synthetic_episode(3, num_objects=2))
        with pytest.raises(ValueError, match="observation keys"):
            w.append(synthetic_episode(3, num_objects=2, image_size=4))
        with pytest.raises(ValueError, match="states"):
            w.append(synthetic_episode(3, num_objects=3))
    with open_dataset(path) as f:
        assert f.num_demos == 1


def test_failed_append_leaves_no_partial_demo(tmp_path: Path) -> None:
    path = tmp_path / "w.hdf5"
    good = synthetic_episode(3)
    with DatasetWriter.create(path, provenance={}, env_args={}) as w:
        w.append(good)
        bad = synthetic_episode(3)
        bad.observations["arm_qpos"] = np.zeros((4, 7), dtype=object)  # HDF5 cannot store object arrays
        with pytest.raises(Exception):
            w.append(bad)
        w.append(synthetic_episode(2, tag=1))
    with open_dataset(path) as f:
        assert f.demo_ids == [0, 1]
        assert f.masks()["train"] == [0, 1]


def test_resume_appends_and_keeps_hash_consistent(tmp_path: Path) -> None:
    path = tmp_path / "r.hdf5"
    with DatasetWriter.create(path, provenance={"domain": "sim"}, env_args={}) as w:
        w.append(synthetic_episode(3, tag=0))
    with DatasetWriter.resume(path) as w:
        assert w.num_demos == 1
        w.append(synthetic_episode(4, tag=1))
    ref = tmp_path / "ref.hdf5"
    with DatasetWriter.create(ref, provenance={"domain": "sim"}, env_args={}) as w:
        w.append(synthetic_episode(3, tag=0))
        w.append(synthetic_episode(4, tag=1))
    with open_dataset(path) as a, open_dataset(ref) as b:
        assert a.content_hash == b.content_hash
        np.testing.assert_array_equal(a.stats()["actions"].m2, b.stats()["actions"].m2)


def test_create_refuses_existing_file(small_file: Path) -> None:
    with pytest.raises(FileExistsError):
        DatasetWriter.create(small_file, provenance={}, env_args={})


def test_datasets_code_never_imports_the_lab() -> None:
    root = Path(__file__).resolve().parents[1] / "r2s2r_envs" / "datasets"
    offenders = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            offenders += [f"{path.name}: {n}" for n in names if n.startswith("r2s2r_envs.lab")]
    assert not offenders



def test_file_being_written_by_another_process_is_reported_as_locked(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "busy.hdf5"
    with DatasetWriter.create(path, provenance={}, env_args={}) as w:
        w.append(synthetic_episode(3))
        code = f"from r2s2r_envs.datasets import open_dataset\nopen_dataset({str(path)!r})"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert "is locked: another process has it open for writing" in out.stderr
