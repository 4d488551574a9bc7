"""``r2s2r datasets export``: LeRobot v3.0 and Minari, read back bit for bit; bad input; the robomimic adapter.

The LeRobot and robomimic-checkpoint tests run where their packages import: lerobot 0.6 needs Python >= 3.12 and
torch < 2.12, robomimic's models need torchvision, none of which sits beside this suite's CPU torch 2.13, so they
are skipped in the project's venv and run in a separate interop venv (benchmarks/results/interop/README.md).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest

from r2s2r_envs.datasets import open_dataset
from r2s2r_envs.datasets.export import (
    INFO_KEY,
    LEROBOT_CODEBASE_VERSION,
    ExportError,
    export_dataset,
    export_lerobot,
    export_minari,
)
from r2s2r_envs.datasets.schema import UnsupportedSchemaError
from r2s2r_envs.datasets.toy import write_synthetic_dataset

pq = pytest.importorskip("pyarrow.parquet")

LENGTHS = [7, 4, 9, 5, 6]
IMAGE_SIZE = 16


@pytest.fixture(scope="module")
def sim_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("export") / "sim.hdf5"
    write_synthetic_dataset(path, LENGTHS, image_size=IMAGE_SIZE)
    return path


@pytest.fixture(scope="module")
def lab_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("export") / "lab.hdf5"
    write_synthetic_dataset(path, [6, 3, 8], domain="real")
    return path


@pytest.fixture(scope="module")
def lerobot_dir(sim_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("lerobot") / "sim"
    export_lerobot(sim_file, out, progress=False)
    return out


def _data_table(root: Path):
    files = sorted((root / "data").glob("chunk-*/file-*.parquet"))
    assert files
    import pyarrow as pa

    return pa.concat_tables([pq.read_table(p) for p in files])


def _column(table, name: str) -> np.ndarray:
    import pyarrow as pa

    col = table.column(name).combine_chunks()
    if pa.types.is_fixed_size_list(col.type):
        return col.flatten().to_numpy().reshape(len(col), col.type.list_size)
    return col.to_numpy(zero_copy_only=False)


# ---------------------------------------------------------------------- LeRobot


def test_lerobot_layout_and_info(sim_file: Path, lerobot_dir: Path) -> None:
    for rel in ("meta/info.json", "meta/stats.json", "meta/tasks.parquet", "meta/episodes/chunk-000/file-000.parquet"):
        assert (lerobot_dir / rel).is_file(), rel
    info = json.loads((lerobot_dir / "meta/info.json").read_text())
    assert info["codebase_version"] == LEROBOT_CODEBASE_VERSION
    assert info["fps"] == 20 and info["robot_type"]
    assert info["total_episodes"] == len(LENGTHS) and info["total_frames"] == sum(LENGTHS)
    feats = info["features"]
    with open_dataset(sim_file) as f:
        low_dim = [k for k in f.obs_keys if not k.endswith("_image")]
        assert feats["observation.state"]["shape"] == [sum(int(np.prod(f.obs_spec()[k][0])) for k in low_dim)]
        assert feats["observation.state"]["names"][:7] == [f"arm_qpos.joint{i}" for i in range(1, 8)]
        for key in low_dim:
            assert f"observation.{key}" in feats
        assert feats["observation.images.scene_image"]["dtype"] == "video"
        assert feats["observation.images.scene_image"]["shape"] == [IMAGE_SIZE, IMAGE_SIZE, 3]
        assert feats["action"]["shape"] == [22] and feats["action"]["names"][0] == "tcp_dx"
        prov = info[INFO_KEY]
        assert prov["source_content_sha256"] == f.content_hash
        assert prov["domain"] == "sim" and prov["env_id"] == f.env_id
        assert prov["env_kwargs"] == f.env_args["env_kwargs"]
        assert prov["provenance"] == f.provenance
    stats = json.loads((lerobot_dir / "meta/stats.json").read_text())
    assert set(stats["action"]) >= {"min", "max", "mean", "std", "count", "q01", "q50", "q99"}
    assert stats["action"]["count"] == [sum(LENGTHS)]
    assert np.asarray(stats["observation.images.scene_image"]["mean"]).shape == (3, 1, 1)
    tasks = pq.read_table(lerobot_dir / "meta/tasks.parquet")
    assert tasks.column("task_index").to_pylist() == [0]
    assert b"pandas" in tasks.schema.metadata  # read back by pandas with the task as index, as LeRobot does


def test_lerobot_round_trip_bit_for_bit(sim_file: Path, lerobot_dir: Path) -> None:
    table = _data_table(lerobot_dir)
    episodes = pq.read_table(lerobot_dir / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    assert table.num_rows == sum(LENGTHS)
    with open_dataset(sim_file) as f:
        low_dim = [k for k in f.obs_keys if not k.endswith("_image")]
        state = _column(table, "observation.state")
        action, executed = _column(table, "action"), _column(table, "action.executed")
        assert state.dtype == np.float32 and action.dtype == np.float32
        for ep, demo_id in zip(episodes, f.demo_ids):
            lo, hi = ep["dataset_from_index"], ep["dataset_to_index"]
            assert hi - lo == ep["length"] == f.demo_length(demo_id)
            assert ep["r2s2r/demo_id"] == demo_id
            expected_state = np.concatenate([f.read(demo_id, f"obs/{k}") for k in low_dim], axis=1)
            np.testing.assert_array_equal(state[lo:hi], expected_state)
            arm = _column(table, "observation.arm_qpos")[lo:hi]
            np.testing.assert_array_equal(arm, f.read(demo_id, "obs/arm_qpos"))
            np.testing.assert_array_equal(action[lo:hi], f.read(demo_id, "action_labels"))
            np.testing.assert_array_equal(executed[lo:hi], f.read(demo_id, "actions"))
            np.testing.assert_array_equal(_column(table, "next.reward")[lo:hi], f.read(demo_id, "rewards"))
            np.testing.assert_array_equal(_column(table, "next.done")[lo:hi], f.read(demo_id, "dones").astype(bool))
            np.testing.assert_array_equal(_column(table, "frame_index")[lo:hi], np.arange(hi - lo))
            np.testing.assert_array_equal(_column(table, "index")[lo:hi], np.arange(lo, hi))
            assert ep["tasks"] and ep["videos/observation.images.scene_image/to_timestamp"] == pytest.approx(hi / 20.0)


def test_lerobot_videos_hold_every_frame(lerobot_dir: Path) -> None:
    import imageio_ffmpeg

    for key in ("scene_image", "wrist_image"):
        path = lerobot_dir / f"videos/observation.images.{key}/chunk-000/file-000.mp4"
        frames, _ = imageio_ffmpeg.count_frames_and_secs(str(path))
        assert frames == sum(LENGTHS)


def test_lerobot_rolls_data_files(sim_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "small-files"
    export_lerobot(sim_file, out, data_file_mb=1e-6, progress=False)  # every episode in a file of its own
    files = sorted((out / "data").glob("chunk-*/file-*.parquet"))
    assert len(files) == len(LENGTHS)
    episodes = pq.read_table(out / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    assert [e["data/file_index"] for e in episodes] == list(range(len(LENGTHS)))


def test_lab_dataset_exports_with_lab_provenance(lab_file: Path, tmp_path: Path) -> None:
    result = export_lerobot(lab_file, tmp_path / "lab", progress=False)
    info = json.loads((tmp_path / "lab/meta/info.json").read_text())
    assert result.episodes == 3 and info[INFO_KEY]["domain"] == "real"
    assert "lab" in info[INFO_KEY]["states"]
    assert not (tmp_path / "lab/videos").exists() and info["video_path"] is None


def test_lerobot_dataset_loads_the_export(sim_file: Path, lerobot_dir: Path) -> None:
    """LeRobot's own LeRobotDataset (root=DIR, no hub) reads the export: frames, actions and states bit for bit."""
    pytest.importorskip("lerobot", reason="lerobot 0.6 needs Python >= 3.12 and torch < 2.12 (interop venv)")
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    ds = LeRobotDataset("r2s2r/test", root=lerobot_dir, video_backend="pyav")
    assert len(ds) == sum(LENGTHS) and ds.num_episodes == len(LENGTHS) and ds.fps == 20
    with open_dataset(sim_file) as f:
        item = ds[LENGTHS[0] + 2]  # demo 1, step 2
        np.testing.assert_array_equal(item["action"].numpy(), f.read(1, "action_labels")[2])
        np.testing.assert_array_equal(item["observation.arm_qpos"].numpy(), f.read(1, "obs/arm_qpos")[2])
        image = item["observation.images.scene_image"].numpy()  # (C, H, W) in [0, 1], lossy (H.264)
        assert image.shape == (3, IMAGE_SIZE, IMAGE_SIZE)
        # The synthetic images are random noise, H.264's worst case: check that the decoded frame is the right one,
        # i.e. nearer (in brightness) to its own source frame than to any other frame of the file.
        frames = np.concatenate([f.read(d, "obs/scene_image") for d in f.demo_ids]).astype(np.float32).mean(-1)
        errors = np.abs(frames - image.transpose(1, 2, 0).mean(-1) * 255).mean(axis=(1, 2))
        assert int(np.argmin(errors)) == LENGTHS[0] + 2
        assert item["task"]


# ---------------------------------------------------------------------- Minari


def test_minari_round_trip(sim_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    minari = pytest.importorskip("minari")
    out = tmp_path / "minari"
    result = export_minari(sim_file, out, progress=False)
    assert result.dataset_id == "r2s2r/sim-v0" and result.episodes == len(LENGTHS)
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(out))
    ds = minari.load_dataset(result.dataset_id)
    assert ds.total_episodes == len(LENGTHS) and ds.total_steps == sum(LENGTHS)
    with open_dataset(sim_file) as f:
        assert set(ds.observation_space.spaces) == set(f.obs_keys)
        assert INFO_KEY in ds.storage.metadata["description"]
        for episode, demo_id in zip(ds.iterate_episodes(), f.demo_ids):
            np.testing.assert_array_equal(episode.actions, f.read(demo_id, "action_labels"))
            obs = f.read(demo_id, "obs/eef_pos")
            np.testing.assert_array_equal(episode.observations["eef_pos"][:-1], obs)
            np.testing.assert_array_equal(episode.observations["eef_pos"][-1], f.read(demo_id, "next_obs/eef_pos")[-1])
            np.testing.assert_array_equal(episode.observations["scene_image"][:-1], f.read(demo_id, "obs/scene_image"))
            np.testing.assert_array_equal(episode.rewards, f.read(demo_id, "rewards"))
            assert bool(episode.terminations[-1] or episode.truncations[-1])


# ---------------------------------------------------------------------- bad input


def test_unknown_format_is_refused(sim_file: Path, tmp_path: Path) -> None:
    with pytest.raises(ExportError, match=r"unknown export format 'csv'; choose one of \['lerobot', 'minari'\]"):
        export_dataset(sim_file, tmp_path / "x", format="csv")
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("fmt", ["lerobot", "minari"])
def test_non_empty_output_folder_is_refused(sim_file: Path, tmp_path: Path, fmt: str) -> None:
    if fmt == "minari":
        pytest.importorskip("minari")
    out = tmp_path / "busy"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(ExportError, match="exists and is not empty"):
        export_dataset(sim_file, out, format=fmt, progress=False)
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    export_dataset(sim_file, empty, format=fmt, progress=False)  # an empty folder is fine
    assert any(empty.iterdir())


def test_bad_fps_is_refused(sim_file: Path, tmp_path: Path) -> None:
    with pytest.raises(ExportError, match="fps must be a whole number"):
        export_lerobot(sim_file, tmp_path / "out", fps=0, progress=False)
    assert not (tmp_path / "out").exists()


def test_other_schema_version_is_refused(sim_file: Path, tmp_path: Path) -> None:
    other = tmp_path / "v9.hdf5"
    shutil.copy(sim_file, other)
    with h5py.File(other, "r+") as f:
        f.attrs["r2s2r_schema_version"] = 9
    with pytest.raises(UnsupportedSchemaError, match="schema version 9"):
        export_lerobot(other, tmp_path / "out", progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v9.hdf5"]  # no output, no staging folder


def test_failure_midway_leaves_nothing(sim_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from r2s2r_envs.datasets.export import lerobot

    original, calls = lerobot._LeRobotWriter.add_episode, []

    def failing(self, demo_id: int) -> None:
        calls.append(demo_id)
        if len(calls) == 3:
            raise OSError("disk full (simulated)")
        original(self, demo_id)

    monkeypatch.setattr(lerobot._LeRobotWriter, "add_episode", failing)
    with pytest.raises(OSError, match="disk full"):
        export_lerobot(sim_file, tmp_path / "out", progress=False)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("fmt", ["lerobot", "minari"])
def test_export_refuses_an_array_edited_in_place(sim_file: Path, tmp_path: Path, fmt: str) -> None:
    """An action edited with h5py keeps a valid HDF5 checksum: only the demo's array hash tells; the export checks it
    before writing anything, so it can never certify (``source_content_sha256``) data it did not verify."""
    from r2s2r_envs.datasets.schema import HashMismatchError

    if fmt == "minari":
        pytest.importorskip("minari")
    edited = tmp_path / "edited.hdf5"
    shutil.copy(sim_file, edited)
    with h5py.File(edited, "r+") as f:
        actions = f["data"][sorted(f["data"])[0]]["actions"]
        actions[0, 0] = actions[0, 0] + 0.5
    with pytest.raises(HashMismatchError, match=r"edited\.hdf5: the arrays of demo 0 do not match"):
        export_dataset(edited, tmp_path / "out", format=fmt, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["edited.hdf5"]  # no output, no staging folder


def test_export_records_how_its_source_was_verified(sim_file: Path, lerobot_dir: Path, tmp_path: Path) -> None:
    info = json.loads((lerobot_dir / "meta/info.json").read_text())
    assert info[INFO_KEY]["source_verification"].startswith("full:")
    export_lerobot(sim_file, tmp_path / "quick", verify="quick", progress=False)
    info = json.loads((tmp_path / "quick/meta/info.json").read_text())
    assert info[INFO_KEY]["source_verification"].startswith("quick:")
    with pytest.raises(ExportError, match=r"verify='none' is not an export verification; choose one of"):
        export_lerobot(sim_file, tmp_path / "none", verify="none", progress=False)  # type: ignore[arg-type]
    assert not (tmp_path / "none").exists()


def test_minari_export_to_a_relative_folder(sim_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("minari")
    monkeypatch.chdir(tmp_path)
    result = export_minari(sim_file, "rel/minari", progress=False)
    assert result.episodes == len(LENGTHS)
    assert (tmp_path / "rel/minari/r2s2r/sim-v0/data").is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rel"]


@pytest.mark.parametrize("dataset_id", ["foo", "../escaped/x-v0", "/abs/x-v0", "a/../../b-v0", "a/./b-v0", ""])
def test_minari_dataset_id_stays_inside_out(sim_file: Path, tmp_path: Path, dataset_id: str) -> None:
    pytest.importorskip("minari")
    out = tmp_path / "work" / "out"
    with pytest.raises(ExportError, match=r"--dataset-id .* is not a Minari dataset id: give \[NAMESPACE/\]NAME-v"):
        export_minari(sim_file, out, dataset_id=dataset_id, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing written, inside --out or outside it


def test_cli_export(sim_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from r2s2r_envs.cli import main

    out = tmp_path / "cli"
    assert main(["datasets", "export", str(sim_file), "--format", "lerobot", "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out}: LeRobot v3.0 dataset, {len(LENGTHS)} episodes, {sum(LENGTHS)} frames" in printed
    assert main(["datasets", "export", str(sim_file), "--format", "lerobot", "--out", str(out)]) == 1
    assert "exists and is not empty" in capsys.readouterr().err
    assert main(["datasets", "export", str(sim_file), "--format", "tfrecord", "--out", str(tmp_path / "t")]) == 1
    assert "unknown export format 'tfrecord'" in capsys.readouterr().err
    assert (
        main(["datasets", "export", str(tmp_path / "nope.hdf5"), "--format", "lerobot", "--out", str(tmp_path / "n")])
        == 1
    )
    assert "no such dataset file" in capsys.readouterr().err


# ---------------------------------------------------------------------- robomimic checkpoints


def test_robomimic_checkpoint_runs_through_the_protocol(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """robomimic's own train() makes a BC-RNN checkpoint from one of our files; the adapter evaluates it."""
    pytest.importorskip("torchvision", reason="robomimic's models import torchvision (interop venv)")
    pytest.importorskip("robomimic")
    import torch
    from robomimic.config import config_factory
    from robomimic.scripts.train import train

    from r2s2r_envs.cli import main

    data = tmp_path / "demos.hdf5"
    write_synthetic_dataset(data, [12, 9, 14, 10, 11, 8, 13, 9, 10, 12])
    config = config_factory("bc")
    with config.values_unlocked():
        config.train.data = str(data)
        config.train.output_dir = str(tmp_path / "runs")
        config.experiment.name = "bc_rnn"
        config.train.num_epochs = 1
        config.experiment.epoch_every_n_steps = 2
        config.experiment.validate = False
        config.experiment.rollout.enabled = False
        config.experiment.save.enabled = True
        config.experiment.save.every_n_epochs = 1
        config.experiment.logging.terminal_output_to_txt = False
        config.experiment.logging.log_tb = False
        config.train.hdf5_cache_mode = "low_dim"
        config.train.seq_length = 4
        config.train.batch_size = 4
        config.train.num_data_workers = 0
        config.train.cuda = False
        config.observation.modalities.obs.low_dim = ["arm_qpos", "eef_pos", "hand_qpos"]
        config.observation.modalities.obs.rgb = []
        config.algo.rnn.enabled = True
        config.algo.rnn.horizon = 4
        config.algo.rnn.hidden_dim = 16
        config.algo.actor_layer_dims = []
        config.algo.gmm.enabled = False
    train(config, device=torch.device("cpu"))
    (checkpoint,) = sorted((tmp_path / "runs").rglob("*.pth"))
    adapter = tmp_path / "my_adapter.py"
    adapter.write_text(
        "from r2s2r_envs.evaluation.adapters import RobomimicCheckpoint\n\n"
        f"make_policy = RobomimicCheckpoint({str(checkpoint)!r})\n"
    )
    monkeypatch.setattr("sys.path", list(__import__("sys").path))
    argv = ["evaluate", "--policy", f"{adapter}:make_policy", "--env", "PickSort-Ungrounded-v0", "--episodes", "2"]
    out = tmp_path / "result.json"
    assert main([*argv, "--num-objects", "1", "--episode-steps", "30", "--no-progress", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["policy"]["name"] == "robomimic:bc" and result["episodes"] == 2
    assert result["policy"]["settings"]["obs_keys"] == ["arm_qpos", "eef_pos", "hand_qpos"]
