"""Interoperability: robomimic 0.3.0's own SequenceDataset reads our files as they are."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

# Imported unconditionally: CI installs robomimic 0.3.0 (Makefile), and this test must not skip silently there.
import robomimic.utils.dataset as robomimic_dataset
import robomimic.utils.obs_utils as ObsUtils

from r2s2r_envs.datasets import TrajectoryDataset
from r2s2r_envs.datasets.toy import write_synthetic_dataset

LOW_DIM = ["arm_qpos", "eef_pos", "object_pos"]
LENGTHS = [7, 4, 9, 5, 6, 8, 3, 7, 5, 6, 4]


@pytest.fixture(scope="module")
def dataset_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("robomimic") / "demos.hdf5"
    write_synthetic_dataset(path, LENGTHS, image_size=8)
    return path


@pytest.fixture(autouse=True)
def obs_modalities() -> None:
    # robomimic needs to know each key's modality before it builds a dataset.
    ObsUtils.initialize_obs_utils_with_obs_specs({"obs": {"low_dim": LOW_DIM, "rgb": ["scene_image"]}})


@pytest.mark.parametrize("cache_mode", ["low_dim", "all", None])
def test_sequence_dataset_reads_generated_file(dataset_file: Path, cache_mode: str | None) -> None:
    ds = robomimic_dataset.SequenceDataset(
        hdf5_path=str(dataset_file),
        obs_keys=LOW_DIM + ["scene_image"],
        dataset_keys=["actions", "rewards", "dones"],
        frame_stack=2,
        seq_length=4,
        pad_frame_stack=True,
        pad_seq_length=True,
        hdf5_cache_mode=cache_mode,
        hdf5_use_swmr=True,
        filter_by_attribute="train",
    )
    assert ds.n_demos == len(LENGTHS) - 1  # demo_9 is in the "valid" split
    assert len(ds) == sum(LENGTHS) - LENGTHS[9]
    item = ds[0]
    # robomimic 0.3.0 returns frame_stack - 1 + seq_length steps of every key, first frame repeated at the start.
    assert item["obs"]["arm_qpos"].shape == (5, 7)
    assert item["obs"]["eef_pos"].shape == (5, 3)
    assert item["obs"]["scene_image"].shape == (5, 8, 8, 3)  # stored HWC; robomimic transposes in its encoders
    assert item["obs"]["scene_image"].dtype == np.uint8
    assert item["actions"].shape == (5, 22)
    assert item["rewards"].shape == (5,)
    # The first demo in robomimic's order is demo_0: actions[:, 0] counts steps, actions[:, 1] is the demo tag.
    np.testing.assert_array_equal(item["actions"][:, 0], [0, 0, 1, 2, 3])
    assert np.all(item["actions"][:, 1] == 0)


def test_robomimic_and_our_loader_agree(dataset_file: Path) -> None:
    theirs = robomimic_dataset.SequenceDataset(
        hdf5_path=str(dataset_file),
        obs_keys=LOW_DIM,
        dataset_keys=["actions"],
        frame_stack=1,
        seq_length=3,
        pad_seq_length=True,
        hdf5_cache_mode="low_dim",
    )
    ours = TrajectoryDataset(dataset_file, obs_keys=LOW_DIM, action_chunk=3)
    assert len(theirs) == len(ours)
    for index in (0, 5, len(ours) - 1):
        item, mine = theirs[index], ours[index]
        np.testing.assert_allclose(item["actions"], mine["actions"])
        np.testing.assert_allclose(item["obs"]["arm_qpos"][0], mine["obs"]["arm_qpos"][0])
