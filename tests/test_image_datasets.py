"""Image datasets: images stored compressed in frame chunks, read back exactly by the reader, the loaders and
robomimic, and the canonical image sets (``*-rgb64``) valid; bad image recipes refused naming what is valid."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import h5py
import numpy as np
import pytest

from r2s2r_envs.datasets import TrajectoryDataset, open_dataset, writer
from r2s2r_envs.datasets.canonical import load_spec, make_datasets
from r2s2r_envs.datasets.generate import generate
from r2s2r_envs.datasets.toy import TOY_DEMONSTRATOR, register_toy_env, synthetic_episode
from r2s2r_envs.datasets.writer import DatasetWriter

TOY = register_toy_env()
CAMERAS = ("scene_image", "wrist_image")
# The image track's resolution (issue 47: 64 px costs 1.9 MB per demo, 84 px 2.9 MB). tracks.py defines no image
# track yet; when it does, its datasets are these sets.
TRACK_IMAGE_SIZE = 64
LENGTHS = (20, 5, 17)


def _write(path: Path, lengths: tuple[int, ...] = LENGTHS, size: int = 12) -> list:
    """A sim file of synthetic episodes with random images (H.264's and gzip's worst case); returns the episodes."""
    rng = np.random.default_rng(0)
    episodes = [synthetic_episode(n, tag=k, image_size=size, rng=rng) for k, n in enumerate(lengths)]
    provenance = {"env_id": TOY, "domain": "sim", "world": {"world": "synthetic"}, "seed": 0}
    env_args = {"env_name": TOY, "type": 2, "env_kwargs": {}}
    with DatasetWriter.create(path, provenance=provenance, env_args=env_args, episodes_requested=len(lengths)) as w:
        for episode in episodes:
            w.append(episode)
    return episodes


@pytest.fixture(scope="module")
def picksort_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two short PickSort demos (-v1, one object) with 32 px images: what the canonical image sets store."""
    out = tmp_path_factory.mktemp("images") / "picksort-rgb32.hdf5"
    kwargs = {"image_size": 32, "num_objects": 1}
    generate(
        "PickSort-Ungrounded-v1", 2, out, obs_mode="state+rgb", env_kwargs=kwargs, episode_steps=40, progress=False
    )
    return out


# ---------------------------------------------------------------------- storage
def test_images_are_gzip_compressed_in_16_frame_chunks_with_checksums(picksort_file: Path) -> None:
    with h5py.File(picksort_file, "r") as f:
        demo = f["data/demo_0"]
        for group in ("obs", "next_obs"):
            for key in CAMERAS:
                d = demo[f"{group}/{key}"]
                assert d.shape == (40, 32, 32, 3) and d.dtype == np.uint8
                assert (d.compression, d.compression_opts, d.fletcher32) == ("gzip", 6, True)
                assert d.chunks == (16, 32, 32, 3)  # a frame read decodes 16 frames, not the demo
                # Rendered frames compress well; random ones would not (the synthetic test below).
                assert d.id.get_storage_size() < d.size / 4, (group, key)
        # The state arrays keep their storage: the low-dimensional keys one plain chunk, the states gzip 1 + shuffle.
        assert demo["obs/arm_qpos"].compression is None and demo["obs/arm_qpos"].chunks == (40, 7)
        assert (demo["states"].compression, demo["states"].compression_opts, demo["states"].shuffle) == (
            "gzip",
            1,
            True,
        )


def test_a_demo_shorter_than_a_chunk_is_one_chunk(tmp_path: Path) -> None:
    _write(tmp_path / "d.hdf5")
    with h5py.File(tmp_path / "d.hdf5", "r") as f:
        assert f["data/demo_0/obs/wrist_image"].chunks == (16, 12, 12, 3)
        assert f["data/demo_1/obs/wrist_image"].chunks == (5, 12, 12, 3)


def test_the_content_hash_does_not_depend_on_the_image_filter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(tmp_path / "gzip6.hdf5")
    monkeypatch.setattr(writer, "_IMAGE_COMPRESSION", {"compression": "lzf"})
    monkeypatch.setattr(writer, "_IMAGE_CHUNK_FRAMES", 1)
    _write(tmp_path / "lzf.hdf5")
    with h5py.File(tmp_path / "lzf.hdf5", "r") as f:
        assert f["data/demo_0/obs/scene_image"].compression == "lzf"
    with open_dataset(tmp_path / "gzip6.hdf5") as a, open_dataset(tmp_path / "lzf.hdf5") as b:  # verify="full"
        assert a.content_hash == b.content_hash


# ---------------------------------------------------------------------- reading back
def test_images_round_trip_exactly_through_the_reader_and_the_loader(tmp_path: Path) -> None:
    path = tmp_path / "d.hdf5"
    episodes = _write(path)
    with open_dataset(path) as f:
        assert f.obs_spec()["scene_image"] == ((12, 12, 3), np.dtype(np.uint8))
        for k, episode in enumerate(episodes):
            demo = f.demo(k)
            for key in CAMERAS:
                np.testing.assert_array_equal(demo.obs[key], episode.observations[key][:-1])
                np.testing.assert_array_equal(demo.next_obs[key], episode.observations[key][1:])
    ds = TrajectoryDataset(path, obs_keys=["arm_qpos", *CAMERAS], frame_stack=2, action_chunk=1, load_next_obs=True)
    batch = ds.get_batch(np.arange(len(ds)))
    assert len(ds) == sum(LENGTHS)
    for key in CAMERAS:
        assert batch["obs"][key].dtype == np.uint8  # images are never normalized
        for i, (k, t) in enumerate(zip(batch["demo_id"], batch["step"], strict=True)):
            frames = episodes[k].observations[key]
            np.testing.assert_array_equal(batch["obs"][key][i, 1], frames[t])
            np.testing.assert_array_equal(batch["obs"][key][i, 0], frames[max(t - 1, 0)])  # the repeated first frame
            np.testing.assert_array_equal(batch["next_obs"][key][i, 1], frames[t + 1])


def test_robomimic_reads_the_images_under_the_modalities_the_file_names(picksort_file: Path) -> None:
    import robomimic.utils.dataset as robomimic_dataset
    import robomimic.utils.obs_utils as ObsUtils

    with open_dataset(picksort_file) as f:
        modalities = f.robomimic_modalities()
        first = f.read(0, "obs/wrist_image")
    assert modalities["rgb"] == list(CAMERAS)
    assert "arm_qpos" in modalities["low_dim"] and not set(modalities["low_dim"]) & set(CAMERAS)
    ObsUtils.initialize_obs_utils_with_obs_specs({"obs": modalities})
    ds = robomimic_dataset.SequenceDataset(
        hdf5_path=str(picksort_file),
        obs_keys=[*modalities["low_dim"], *modalities["rgb"]],
        dataset_keys=["actions"],
        seq_length=4,
        hdf5_cache_mode="low_dim",  # images read per sample, as for the 1,000-demo sets
    )
    item = ds[0]
    assert item["obs"]["wrist_image"].shape == (4, 32, 32, 3) and item["obs"]["wrist_image"].dtype == np.uint8
    np.testing.assert_array_equal(item["obs"]["wrist_image"], first[:4])


def test_datasets_info_prints_the_robomimic_modalities(picksort_file: Path, capsys: pytest.CaptureFixture) -> None:
    from r2s2r_envs.cli import main

    assert main(["datasets", "info", str(picksort_file), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["robomimic_obs"]["rgb"] == list(CAMERAS) and len(info["robomimic_obs"]["low_dim"]) == 10
    assert main(["datasets", "info", str(picksort_file)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("robomimic_obs"))
    assert json.loads(line.split(None, 1)[1]) == info["robomimic_obs"]  # JSON, for a robomimic config


# ---------------------------------------------------------------------- the canonical image sets
def test_the_canonical_image_sets_are_the_lab_v3_and_v1_variants_at_the_track_resolution() -> None:
    entries = {e.name: e for e in load_spec()}
    images = {name: e for name, e in entries.items() if e.image_size is not None}
    assert sorted(images) == [
        "behaviorgrounded-v1-1000-rgb64",
        "fullygrounded-v1-1000-rgb64",
        "lab-v3-50-rgb64",
        "ungrounded-v1-1000-rgb64",
        "worldgrounded-v1-1000-rgb64",
    ]
    for name, e in images.items():
        assert e.env_id in gym.registry and e.env_id.endswith("-v1"), name
        assert e.obs_mode == "state+rgb" and e.env_kwargs == {"image_size": TRACK_IMAGE_SIZE}, name
        assert name.endswith(f"-rgb{e.image_size}") and e.successes_only and e.demonstrator is None
        assert e.sha256 is None  # not pinned yet; known builds name their renderer (it changes the images' bytes)
        assert all("EGL" in machine or "GPU" in machine for machine in e.other_builds.values()), name
        assert f"--obs-mode state+rgb --env-kwargs '{{\"image_size\": {TRACK_IMAGE_SIZE}}}'" in e.command
    lab, state_lab = images["lab-v3-50-rgb64"], entries["lab-50"]
    assert (lab.env_id, lab.episodes, lab.seed, lab.action_noise) == ("PickSort-Real-v1", 50, state_lab.seed, 0.0)
    for variant in ("ungrounded", "worldgrounded", "behaviorgrounded", "fullygrounded"):
        sim, state = images[f"{variant}-v1-1000-rgb64"], entries[f"{variant}-1000"]
        assert (sim.episodes, sim.seed, sim.action_noise) == (state.episodes, state.seed, state.action_noise)
    assert all(e.image_size is None for e in entries.values() if e.obs_mode == "state")


def test_the_image_recipes_make_envs_that_give_64_px_head_and_wrist_images() -> None:
    for e in load_spec():
        if e.image_size is None:
            continue
        env = gym.make(e.env_id, obs_mode=e.obs_mode, **e.env_kwargs)
        try:
            for key in CAMERAS:
                space = env.observation_space[key]
                assert space.shape == (64, 64, 3) and space.dtype == np.uint8, (e.name, key)
            assert "arm_qpos" in env.observation_space.spaces
        finally:
            env.close()


# ---------------------------------------------------------------------- bad recipes
def _spec(tmp_path: Path, *entries: dict) -> Path:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"spec_version": 1, "datasets": list(entries)}))
    return path


def _entry(**fields: object) -> dict:
    return {"name": "x", "env_id": TOY, "episodes": 2, "seed": 0, "demonstrator": TOY_DEMONSTRATOR, **fields}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"obs_mode": "rgbd"}, r"unknown obs_mode 'rgbd'; valid: \['state', 'rgb', 'state\+rgb'\]"),
        ({"obs_mode": "state+rgb"}, r"obs_mode 'state\+rgb' stores images: env_kwargs must name their image_size"),
        (
            {"obs_mode": "state+rgb", "env_kwargs": {"image_size": "64"}},
            r"obs_mode 'state\+rgb' stores images: .*image_size, an integer number of pixels .*got '64'",
        ),
        (
            {"obs_mode": "state", "env_kwargs": {"image_size": 64}},
            r"env_kwargs names image_size 64, but obs_mode 'state' stores no images; "
            r"use an obs_mode with images \(\['rgb', 'state\+rgb'\]\)",
        ),
    ],
)
def test_a_spec_with_a_bad_image_recipe_is_refused(tmp_path: Path, fields: dict, message: str) -> None:
    with pytest.raises(ValueError, match=r"spec.json: datasets\[0\]: " + message):
        load_spec(_spec(tmp_path, _entry(**fields)))


def test_an_image_size_out_of_range_fails_to_make_naming_the_range(tmp_path: Path) -> None:
    spec = _spec(
        tmp_path,
        _entry(env_id="PickSort-Ungrounded-v1", demonstrator=None, obs_mode="state+rgb", env_kwargs={"image_size": 8}),
    )
    (report,) = make_datasets(spec, cache_dir=tmp_path / "cache", progress=False)
    assert report.status == "failed" and not report.ok
    assert "image_size must be an integer in [16, " in report.message and "got 8" in report.message
    assert not (tmp_path / "cache" / "x.hdf5").exists()


def test_make_by_observation_mode(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    spec = _spec(
        tmp_path,
        _entry(name="toy-state"),
        _entry(name="toy-rgb16", obs_mode="state+rgb", env_kwargs={"image_size": 16}),
    )
    cache = tmp_path / "cache"
    (report,) = make_datasets(spec, cache_dir=cache, progress=False, obs_mode="state")
    assert report.name == "toy-state" and report.status == "built" and not (cache / "toy-rgb16.hdf5").exists()
    from r2s2r_envs.cli import main

    argv = ["datasets", "make", "--all", "--obs-mode", "state+rgb", "--spec", str(spec), "--cache-dir", str(cache)]
    assert main([*argv, "--no-progress"]) == 0
    assert "toy-rgb16" in capsys.readouterr().out
    with open_dataset(cache / "toy-rgb16.hdf5") as f:
        assert f.obs_spec()["wrist_image"] == ((16, 16, 3), np.dtype(np.uint8))
        assert f.generation["obs_mode"] == "state+rgb" and f.generation["env_kwargs"]["image_size"] == 16
    with pytest.raises(ValueError, match=r"unknown obs_mode 'depth'; valid: \['state', 'rgb', 'state\+rgb'\]"):
        make_datasets(spec, cache_dir=cache, progress=False, obs_mode="depth")
