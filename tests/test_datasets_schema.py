"""Dataset schema, writer and reader: round trip, content hash, ordering, masks, statistics, integrity, bad files,
schema version 1."""

from __future__ import annotations

import ast
import json
import math
import re
from pathlib import Path

import h5py
import numpy as np
import pytest
from conftest import downgrade_to_v1, downgrade_to_v2

from r2s2r_envs.datasets import (
    SUPPORTED_SCHEMA_VERSIONS,
    CorruptDatasetError,
    DatasetWriter,
    EmptyDatasetError,
    HashMismatchError,
    NotADatasetError,
    TrajectoryDataset,
    UnsupportedSchemaError,
    open_dataset,
    schema,
)
from r2s2r_envs.datasets.toy import synthetic_episode, write_synthetic_dataset
from r2s2r_envs.datasets.writer import _store_content_hash

LENGTHS = [5, 3, 8, 6, 4, 7, 5, 9, 3, 6, 4, 5]


@pytest.fixture
def small_file(tmp_path: Path) -> Path:
    path = tmp_path / "small.hdf5"
    write_synthetic_dataset(path, LENGTHS, image_size=4)
    return path


@pytest.mark.parametrize("domain", ["sim", "real"])
def test_round_trip_keeps_every_array(tmp_path: Path, domain: str) -> None:
    path = tmp_path / "rt.hdf5"
    episodes = [synthetic_episode(n, tag=k, image_size=4, states=domain == "sim") for k, n in enumerate([4, 2, 6])]
    with DatasetWriter.create(
        path,
        provenance={"domain": domain, "env_id": "X-v0"},
        env_args={"env_name": "X-v0", "type": 2, "env_kwargs": {}},
    ) as w:
        for ep in episodes:
            w.append(ep)
    with open_dataset(path) as f:
        assert f.demo_ids == [0, 1, 2]
        assert f.domain == domain and f.has_states == (domain == "sim")
        assert f.num_samples == 12
        for k, ep in enumerate(episodes):
            demo = f.demo(k)
            for key, seq in ep.observations.items():
                np.testing.assert_array_equal(demo.obs[key], seq[:-1])
                np.testing.assert_array_equal(demo.next_obs[key], seq[1:])
            np.testing.assert_array_equal(demo.actions, ep.actions)
            if domain == "sim":
                np.testing.assert_array_equal(demo.states, ep.states)
            else:
                assert demo.states is None
            assert f.demo(k, states=False).states is None
            assert demo.dones.tolist() == [0] * (ep.num_samples - 1) + [1]
            assert demo.attrs["seed"] == k
            assert demo.attrs["time_to_sort"] == pytest.approx(ep.time_to_sort)
            assert demo.attrs["failure_cause"] is None
            assert demo.attrs["object_outcomes"] == ep.object_outcomes


def test_lab_datasets_store_no_states_and_sim_datasets_need_them(tmp_path: Path) -> None:
    real = tmp_path / "real.hdf5"
    write_synthetic_dataset(real, [3, 4], domain="real")
    with h5py.File(real, "r") as f:
        names: list[str] = []
        f.visit(names.append)
    assert names and not [n for n in names if n.endswith("states")]
    with DatasetWriter.create(tmp_path / "r2.hdf5", provenance={"domain": "real"}, env_args={}) as w:
        with pytest.raises(ValueError, match="stores no simulator states"):
            w.append(synthetic_episode(3, states=True))
    with DatasetWriter.create(tmp_path / "s.hdf5", provenance={"domain": "sim"}, env_args={}) as w:
        with pytest.raises(ValueError, match="needs its simulator states"):
            w.append(synthetic_episode(3, states=False))
    with pytest.raises(ValueError, match="domain"):
        DatasetWriter.create(tmp_path / "x.hdf5", provenance={"domain": "lab"}, env_args={})


def test_reader_refuses_a_lab_file_holding_states(tmp_path: Path) -> None:
    path = tmp_path / "real.hdf5"
    write_synthetic_dataset(path, [3, 4], domain="real")
    with h5py.File(path, "r+") as f:
        f["data/demo_1"].create_dataset("states", data=np.zeros((4, 5)))
    with pytest.raises(CorruptDatasetError, match="holds simulator 'states'"):
        open_dataset(path, verify="none")


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
        # Every array carries HDF5's fletcher32 checksum (which needs chunked storage).
        arrays: list[h5py.Dataset] = []
        f.visititems(lambda name, obj: arrays.append(obj) if isinstance(obj, h5py.Dataset) else None)
        assert len(arrays) > len(LENGTHS) * 20
        assert all(d.fletcher32 and d.chunks is not None for d in arrays)
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


def test_content_hash_is_deterministic_and_sees_values(tmp_path: Path) -> None:
    a = write_synthetic_dataset(tmp_path / "a.hdf5", [3, 4], seed=1)
    b = write_synthetic_dataset(tmp_path / "b.hdf5", [3, 4], seed=1)
    c = write_synthetic_dataset(tmp_path / "c.hdf5", [3, 4], seed=2)
    assert a == b
    assert a != c
    with open_dataset(tmp_path / "a.hdf5") as f:
        assert f.content_hash == a


def _restored(src: Path, dst: Path, **storage: object) -> None:
    """Copies ``src`` to ``dst`` with every array stored with other HDF5 options (chunks, compression)."""
    with h5py.File(src, "r") as fin, h5py.File(dst, "w") as fout:

        def copy_attrs(a: h5py.AttributeManager, b: h5py.AttributeManager) -> None:
            for key, value in a.items():
                b[key] = value

        copy_attrs(fin.attrs, fout.attrs)

        def visit(name: str, obj: object) -> None:
            if isinstance(obj, h5py.Group):
                copy_attrs(obj.attrs, fout.require_group(name).attrs)
            elif isinstance(obj, h5py.Dataset):
                maxshape = (None,) if name.startswith("mask/") else None
                fout.create_dataset(name, data=obj[()], maxshape=maxshape, **storage)
                copy_attrs(obj.attrs, fout[name].attrs)

        fin.visititems(visit)


def test_content_hash_does_not_depend_on_storage(small_file: Path, tmp_path: Path) -> None:
    with open_dataset(small_file) as f:
        original = f.content_hash
    for i, storage in enumerate(
        [
            {"chunks": True},
            {"compression": "gzip", "compression_opts": 9, "chunks": True},
            {"compression": "lzf", "shuffle": True, "chunks": True},
        ]
    ):
        other = tmp_path / f"restored{i}.hdf5"
        _restored(small_file, other, **storage)
        assert other.read_bytes() != small_file.read_bytes()
        with open_dataset(other, verify="full") as f:
            assert f.content_hash == original


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


# -- integrity: everything a reader trusts is covered ---------------------------------------------------


def _edit_json(attrs: h5py.AttributeManager, key: str, **changes: object) -> None:
    record = json.loads(attrs[key])
    record.update(changes)
    attrs[key] = json.dumps(record, sort_keys=True)


def _edit_stats_mean(f: h5py.File) -> None:
    mean = np.array(f["stats/actions"].attrs["mean"])
    mean[0] += 0.5
    f["stats/actions"].attrs["mean"] = mean


EDITS = {
    "domain": (lambda f: _edit_json(f.attrs, "provenance", domain="real"), "provenance"),
    "provenance seed": (lambda f: _edit_json(f.attrs, "provenance", seed=123), "provenance"),
    "env_args": (lambda f: _edit_json(f["data"].attrs, "env_args", env_name="Other-v0"), "env_args"),
    "generation": (lambda f: _edit_json(f.attrs, "generation", seed=5), "generation settings"),
    "success": (lambda f: f["data/demo_3"].attrs.__setitem__("success", True), "attributes of demo 3"),
    "seed": (lambda f: f["data/demo_2"].attrs.__setitem__("seed", 99), "attributes of demo 2"),
    "failure_cause": (lambda f: f["data/demo_3"].attrs.__setitem__("failure_cause", ""), "attributes of demo 3"),
    "outcomes": (lambda f: f["data/demo_0"].attrs.__setitem__("object_outcomes", '["sorted"]'), "attributes of demo 0"),
    "stats mean": (_edit_stats_mean, "normalization statistics"),
    "stats count": (lambda f: f["stats/actions"].attrs.__setitem__("count", 1), "normalization statistics"),
    "attempts": (lambda f: f.attrs.__setitem__("attempts", 1000), "summary counters"),
    "complete": (lambda f: f.attrs.__setitem__("complete", False), "summary counters"),
    "mask": (lambda f: f["mask/valid"].__setitem__(0, b"demo_0"), "filter keys"),
}


def test_software_versions_are_not_part_of_the_hash(small_file: Path) -> None:
    # Another numpy or h5py writing identical data must give the same hash (pinned canonical hashes).
    with open_dataset(small_file) as f:
        before = f.content_hash
    with h5py.File(small_file, "r+") as f:
        _edit_json(f.attrs, "provenance", versions={"numpy": "9.9.9", "h5py": "0.0.1"})
    with open_dataset(small_file, verify="full") as f:
        assert f.content_hash == before


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_edited_metadata_fails_verification(small_file: Path, edit: str) -> None:
    change, named = EDITS[edit]
    with h5py.File(small_file, "r+") as f:
        change(f)
    for mode in ("quick", "full"):
        with pytest.raises(HashMismatchError, match=named) as info:
            open_dataset(small_file, verify=mode)
        assert str(small_file) in str(info.value) and "modified" in str(info.value)
    # The loaders verify too (fully, by default): no wrongly normalized actions, no sim data labelled real.
    with pytest.raises(HashMismatchError):
        TrajectoryDataset(small_file, normalize="standard")


# Attributes that are not what the schema stores (not merely edited values): refused with the attribute named,
# in every verify mode that reads them ("none" included), instead of a raw KeyError/JSONDecodeError or a misleading
# "modified". Each: change, message, the verify modes.
ALL_MODES = ("none", "quick", "full")
MALFORMED = {
    "provenance not JSON": (
        lambda f: f.attrs.__setitem__("provenance", "{oops"),
        "root attribute 'provenance': not valid JSON",
        ALL_MODES,
    ),
    "generation a list": (
        lambda f: f.attrs.__setitem__("generation", "[1]"),
        "root attribute 'generation' must be a JSON object",
        ALL_MODES,
    ),
    "env_args too deep": (
        lambda f: f["data"].attrs.__setitem__("env_args", "[" * 100_000 + "]" * 100_000),
        "attribute data.env_args: nested 100000 levels deep; at most 64",
        ALL_MODES,
    ),
    "format mark": (
        lambda f: f.attrs.__setitem__("r2s2r_format", "other.format"),
        "root attribute r2s2r_format is 'other.format'; an r2s2r_envs dataset has 'r2s2r_envs.datasets'",
        ALL_MODES,
    ),
    "content_parts empty": (
        lambda f: f.attrs.__setitem__("content_parts", "{}"),
        "root attribute 'content_parts' must map exactly ['env_args', 'generation'",
        ("quick", "full"),
    ),
    "outcomes not JSON": (
        lambda f: f["data/demo_0"].attrs.__setitem__("object_outcomes", "{bad"),
        "demo 0's object_outcomes: not valid JSON",
        ("none",),  # the other modes find the demo's attributes changed
    ),
    "stats without a mean": (
        lambda f: f["stats/actions"].attrs.__delitem__("mean"),
        "the statistics /stats/actions cannot be read",
        ("none",),
    ),
}


@pytest.mark.parametrize("problem", sorted(MALFORMED))
def test_malformed_metadata_is_named_in_every_verify_mode(small_file: Path, problem: str) -> None:
    change, message, modes = MALFORMED[problem]
    with h5py.File(small_file, "r+") as f:
        change(f)
    for mode in modes:
        with pytest.raises(CorruptDatasetError, match=re.escape(message)) as info:
            with open_dataset(small_file, verify=mode) as d:  # reading everything, as a loader would
                for demo_id in d.demo_ids:
                    d.demo_attrs(demo_id)
                d.stats()
        assert str(small_file) in str(info.value)


def test_full_verification_recomputes_the_statistics(small_file: Path) -> None:
    # Statistics that are wrong although their hash was recomputed (as by a buggy writer) pass the quick check only.
    with h5py.File(small_file, "r+") as f:
        _edit_stats_mean(f)
        hashes = {int(g.attrs["demo_id"]): str(g.attrs["sha256"]) for g in f["data"].values()}
        _store_content_hash(f, hashes)
    with open_dataset(small_file, verify="quick"):
        pass
    with pytest.raises(HashMismatchError, match="normalization statistics of 'actions' do not match its arrays"):
        open_dataset(small_file, verify="full")


def _flip_byte(path: Path, dataset: str, *, at: int = 3) -> None:
    """Flips one bit of one byte inside the stored data of ``dataset`` (its first chunk), as disk damage would."""
    with h5py.File(path, "r") as f:
        dset = f[dataset]
        # Chunked storage (fletcher32 needs it): get_offset() is for contiguous data, chunks have their own address.
        info = dset.id.get_chunk_info(0)
        assert info.size > at
        offset = info.byte_offset + at
    with open(path, "r+b") as fh:
        fh.seek(offset)
        byte = fh.read(1)
        fh.seek(offset)
        fh.write(bytes([byte[0] ^ 0x10]))


@pytest.mark.parametrize("array", ["actions", "action_labels", "obs/arm_qpos", "obs/scene_image", "states", "rewards"])
def test_one_flipped_byte_in_array_data_is_never_returned(small_file: Path, array: str) -> None:
    _flip_byte(small_file, f"data/demo_2/{array}")
    # Quick verification reads no arrays; the checksum then fails when the array is read, naming file and demo.
    with open_dataset(small_file, verify="quick") as f:
        assert f.demo(1).actions.shape == (LENGTHS[1], 22)  # other demos stay readable
        with pytest.raises(CorruptDatasetError, match=rf"{small_file}.*'{array}' of demo 2.*checksum"):
            f.demo(2)
        with pytest.raises(CorruptDatasetError, match="demo 2"):
            f.read(2, array)
    with pytest.raises(CorruptDatasetError, match=rf"'{array}' of demo 2"):
        open_dataset(small_file, verify="full")
    if array in ("actions", "obs/arm_qpos"):  # what a loader reads
        with pytest.raises(CorruptDatasetError, match="demo 2"):
            TrajectoryDataset(small_file, verify="quick")
    if array == "action_labels":  # what a loader reads for clean labels
        TrajectoryDataset(small_file, verify="quick")
        with pytest.raises(CorruptDatasetError, match="'action_labels' of demo 2"):
            TrajectoryDataset(small_file, verify="quick", labels="clean")


def test_float_schema_version_is_refused(small_file: Path) -> None:
    for value in (1.7, 2.0):
        with h5py.File(small_file, "r+") as f:
            f.attrs["r2s2r_schema_version"] = value
        with pytest.raises(CorruptDatasetError, match="schema version must be an integer"):
            open_dataset(small_file)
    with h5py.File(small_file, "r+") as f:
        f.attrs["r2s2r_schema_version"] = "2"
    with pytest.raises(CorruptDatasetError, match="schema version must be an integer"):
        open_dataset(small_file)


# -- schema version 3: clean action labels --------------------------------------------------------------


def _noisy_episode(length: int, tag: int, rng: np.random.Generator):
    """A synthetic episode whose executed actions are its labels plus noise on the 6 arm entries (as generate's
    noise injection records them)."""
    episode = synthetic_episode(length, tag=tag)
    labels = episode.actions.copy()
    noisy = labels.copy()
    noisy[:, :6] += rng.normal(0.0, 0.1, (length, 6)).astype(np.float32)
    episode.actions, episode.action_labels = noisy, labels
    return episode


def test_action_labels_are_stored_hashed_and_summarized(tmp_path: Path) -> None:
    path = tmp_path / "labels.hdf5"
    rng = np.random.default_rng(0)
    episodes = [_noisy_episode(n, k, rng) for k, n in enumerate([4, 6, 3])]
    with DatasetWriter.create(path, provenance={"domain": "sim"}, env_args={}, generation={"action_noise": 0.1}) as w:
        for ep in episodes:
            w.append(ep)
    with open_dataset(path) as f:
        assert f.schema_version == schema.SCHEMA_VERSION == 3 and f.has_action_labels
        assert f.action_noise == 0.1 and f.label_array() == "action_labels"
        for k, ep in enumerate(episodes):
            demo = f.demo(k)
            np.testing.assert_array_equal(demo.actions, ep.actions)
            np.testing.assert_array_equal(demo.action_labels, ep.action_labels)
            assert not np.array_equal(demo.actions, demo.action_labels)
        stats = f.stats()
    labels = np.concatenate([ep.action_labels for ep in episodes]).astype(np.float64)
    np.testing.assert_allclose(stats["action_labels"].mean, labels.mean(0), rtol=1e-9)
    np.testing.assert_allclose(stats["action_labels"].max, labels.max(0))
    assert not np.allclose(stats["actions"].mean[:6], stats["action_labels"].mean[:6])
    # The labels are covered by the demo's array hash, their statistics by the file's.
    with h5py.File(path, "r+") as f:
        f["data/demo_1/action_labels"][0, 0] += 1.0
    with pytest.raises(HashMismatchError, match="arrays of demo 1"):
        open_dataset(path)
    with h5py.File(path, "r+") as f:
        f["data/demo_1/action_labels"][0, 0] -= 1.0
        f["stats/action_labels"].attrs["mean"] = np.zeros(22)
    with pytest.raises(HashMismatchError, match="normalization statistics"):
        open_dataset(path)


def test_an_episode_without_labels_stores_its_actions_as_labels(tmp_path: Path) -> None:
    # No noise injected (lab data, noise 0, toy data): the executed actions are the demonstrator's own.
    path = tmp_path / "plain.hdf5"
    write_synthetic_dataset(path, [3, 5], domain="real")
    with open_dataset(path) as f:
        for k in f.demo_ids:
            demo = f.demo(k)
            np.testing.assert_array_equal(demo.action_labels, demo.actions)
        assert f.label_array() == "action_labels"
    episode = synthetic_episode(4)
    episode.action_labels = episode.actions[:, :6]
    with pytest.raises(ValueError, match=r"action_labels has shape \(4, 6\), expected the shape of actions"):
        episode.arrays()


def test_a_version_3_file_needs_its_action_labels(small_file: Path) -> None:
    with h5py.File(small_file, "r+") as f:
        del f["data/demo_3/action_labels"]
    with pytest.raises(CorruptDatasetError, match="data/demo_3 lacks the array 'action_labels'"):
        open_dataset(small_file, verify="none")


def test_a_version_3_file_with_labels_of_another_shape_is_refused(small_file: Path) -> None:
    with h5py.File(small_file, "r+") as f:
        labels = f["data/demo_3/action_labels"][()]
        del f["data/demo_3/action_labels"]
        f["data/demo_3"].create_dataset("action_labels", data=labels[:, :6])
    with pytest.raises(CorruptDatasetError, match=r"demo_3/action_labels has shape \(6, 6\), its actions \(6, 22\)"):
        open_dataset(small_file, verify="none")


# -- schema version 2 -----------------------------------------------------------------------------------


def test_version_2_files_are_still_read_without_labels(small_file: Path) -> None:
    digest = downgrade_to_v2(small_file)
    with open_dataset(small_file, verify="full") as f:
        assert f.schema_version == 2 and f.content_hash == digest and not f.has_action_labels
        demo = f.demo(0)
        assert demo.action_labels is None and demo.actions.shape == (LENGTHS[0], 22)
        assert "action_labels" not in f.stats()
        # Made without action noise: the executed actions are the clean labels.
        assert f.action_noise == 0.0 and f.label_array() == "actions"
    with pytest.raises(schema.UnsupportedSchemaError, match="appended only to files of schema version 3"):
        DatasetWriter.resume(small_file)


def test_version_2_files_with_injected_noise_have_no_clean_labels(small_file: Path) -> None:
    downgrade_to_v2(small_file, action_noise=0.1)
    with open_dataset(small_file) as f:
        assert f.action_noise == 0.1
        with pytest.raises(schema.NoCleanLabelsError) as info:
            f.label_array()
    message = str(info.value)
    assert isinstance(info.value, schema.DatasetError)
    for part in (str(small_file), "schema version 2", "injected noise (action_noise sigma=0.1)", "r2s2r generate"):
        assert part in message, part
    assert "r2s2r datasets make NAME" in message and "labels='executed'" in message


@pytest.mark.parametrize(
    "generation,noise",
    [
        ({}, 0.0),
        ({"action_noise": 0.0}, 0.0),
        ({"action_noise": 0.2}, 0.2),
        ({"subset_of": {"name": "x"}, "source_generation": {"action_noise": 0.1}}, 0.1),
        ({"subset_of": {"name": "x"}, "source_generation": {"seed": 0}}, 0.0),
        ({"action_noise": "0.1"}, math.nan),
    ],
)
def test_injected_action_noise_reads_the_generation_record(generation: dict, noise: float) -> None:
    found = schema.injected_action_noise(generation)
    assert found == noise or (math.isnan(noise) and math.isnan(found))


# -- schema version 1 -----------------------------------------------------------------------------------


def test_version_1_sim_files_are_still_read(small_file: Path) -> None:
    digest = downgrade_to_v1(small_file)
    with open_dataset(small_file, verify="full") as f:
        assert f.schema_version == 1 and f.content_hash == digest
        assert f.demo(0).states is not None and f.demo(0).action_labels is None
        assert f.label_array() == "actions"  # no noise recorded: the actions are the labels
    assert len(TrajectoryDataset(small_file)) == sum(LENGTHS)
    # Version 1's rules: the arrays are covered.
    with h5py.File(small_file, "r+") as f:
        f["data/demo_2/actions"][0, 0] += 1.0
    with pytest.raises(HashMismatchError, match="demo 2"):
        open_dataset(small_file)
    with pytest.raises(schema.UnsupportedSchemaError, match="appended only to files of schema version 3"):
        DatasetWriter.resume(small_file)


def test_version_1_lab_files_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "lab_v1.hdf5"
    write_synthetic_dataset(path, [3, 4], domain="sim")
    downgrade_to_v1(path)
    with h5py.File(path, "r+") as f:
        _edit_json(f.attrs, "provenance", domain="real")  # version 1 wrote lab files with states
    for mode in ("full", "none"):
        with pytest.raises(UnsupportedSchemaError, match="hidden simulator state.*must be regenerated"):
            open_dataset(path, verify=mode)


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
    assert "schema version(s) 1, 2" in str(info.value)


def test_newer_schema_version_names_supported_versions(small_file: Path) -> None:
    with h5py.File(small_file, "r+") as f:
        f.attrs["r2s2r_schema_version"] = max(SUPPORTED_SCHEMA_VERSIONS) + 1
    with pytest.raises(UnsupportedSchemaError, match=r"schema version 4, which is newer") as info:
        open_dataset(small_file)
    assert "reads schema version(s) 1, 2, 3" in str(info.value)
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
        with pytest.raises(TypeError):
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


def test_a_writer_refused_by_a_reader_elsewhere_is_named(tmp_path: Path) -> None:
    """Resuming a file another process is reading: HDF5's lock refuses the writer; the message names the file and
    what to do, not ``BlockingIOError: Unable to synchronously open file`` (issue 50)."""
    import subprocess
    import sys

    from r2s2r_envs.datasets.schema import DatasetError

    path = tmp_path / "read.hdf5"
    write_synthetic_dataset(path, [3])
    code = f"import h5py, sys\nf = h5py.File({str(path)!r}, 'r')\nprint('open', flush=True)\nsys.stdin.read()"
    reader = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert reader.stdout is not None and reader.stdout.readline().strip() == "open"
        with pytest.raises(DatasetError, match=r"read\.hdf5 is open in another process .* then run again"):
            DatasetWriter.resume(path)
    finally:
        reader.communicate("", timeout=60)
    with DatasetWriter.resume(path) as w:  # once the reader is gone
        w.append(synthetic_episode(2))


def test_verify_expect_pins_a_trusted_hash(small_file: Path, capsys) -> None:
    from r2s2r_envs.cli import main

    with open_dataset(small_file) as f:
        trusted = f.content_hash
    assert main(["datasets", "verify", str(small_file), "--expect", trusted.upper()]) == 0
    # A rehashed file verifies by its own hash; only a hash pinned from elsewhere tells it apart.
    assert main(["datasets", "verify", str(small_file), "--expect", "0" * 64]) == 1
    err = capsys.readouterr().err
    assert f"content hash {trusted} is not the expected {'0' * 64}" in err
    with pytest.raises(SystemExit):
        main(["datasets", "verify", str(small_file), "--expect", "abc"])
    assert "expected a SHA-256 as 64 hex digits, got 'abc'" in capsys.readouterr().err
