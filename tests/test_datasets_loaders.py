"""Loaders (numpy and torch) and co-training mixtures, on synthetic files with recognizable values.

Synthetic demo ``k`` has ``arm_qpos[t, 0] == t``, ``arm_qpos[t, 1] == k``, ``actions[t, 0] == t`` and
``actions[t, 1] == k`` (see ``r2s2r_envs.datasets.toy.synthetic_episode``).
"""

from __future__ import annotations

import math
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from conftest import BLOCK_TORCH, downgrade_to_v1, downgrade_to_v2

from r2s2r_envs.datasets import (
    CoTrainingMixture,
    DatasetWriter,
    EmptyDatasetError,
    NoCleanLabelsError,
    TrajectoryDataset,
    open_dataset,
    suggest_real_fraction,
)
from r2s2r_envs.datasets.mixture import draw_domains
from r2s2r_envs.datasets.toy import synthetic_episode, write_synthetic_dataset

LENGTHS = [6, 2, 9, 4, 7, 3, 5, 8, 4, 6, 5]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("loaders")
    paths = {
        "sim": root / "sim.hdf5",
        "real_a": root / "real_a.hdf5",
        "real_b": root / "real_b.hdf5",
        "images": root / "images.hdf5",
    }
    write_synthetic_dataset(paths["sim"], LENGTHS, domain="sim", seed=1)
    write_synthetic_dataset(paths["real_a"], [10] * 10, domain="real", seed=2)  # 100 samples
    write_synthetic_dataset(paths["real_b"], [30] * 10, domain="real", seed=3)  # 300 samples
    write_synthetic_dataset(paths["images"], [4, 5], image_size=6, seed=4)
    return paths


# -- sequence layout ---------------------------------------------------------------------------------


@pytest.mark.parametrize("frame_stack,action_chunk", [(1, 1), (3, 4), (2, 10)])
def test_frame_stack_and_action_chunk_values(files: dict[str, Path], frame_stack: int, action_chunk: int) -> None:
    ds = TrajectoryDataset(files["sim"], frame_stack=frame_stack, action_chunk=action_chunk)
    assert len(ds) == sum(LENGTHS)
    batch = ds.get_batch(np.arange(len(ds)))
    assert batch["obs"]["arm_qpos"].shape == (len(ds), frame_stack, 7)
    assert batch["actions"].shape == (len(ds), action_chunk, 22)
    i = 0
    for k, n in enumerate(LENGTHS):
        for t in range(n):
            frames = np.arange(t - frame_stack + 1, t + 1)
            np.testing.assert_array_equal(batch["obs"]["arm_qpos"][i, :, 0], np.maximum(frames, 0))
            np.testing.assert_array_equal(batch["obs_mask"][i], frames >= 0)
            steps = np.arange(t, t + action_chunk)
            np.testing.assert_array_equal(batch["actions"][i, :, 0], np.minimum(steps, n - 1))  # edge padding
            np.testing.assert_array_equal(batch["action_mask"][i], steps <= n - 1)
            assert np.all(batch["actions"][i, :, 1] == k)
            assert batch["demo_id"][i] == k and batch["step"][i] == t
            i += 1


def test_without_padding_only_full_windows_are_samples(files: dict[str, Path]) -> None:
    ds = TrajectoryDataset(files["sim"], frame_stack=2, action_chunk=3, pad_frame_stack=False, pad_action_chunk=False)
    assert len(ds) == sum(max(0, n - 1 - 2) for n in LENGTHS)
    batch = ds.get_batch(np.arange(len(ds)))
    assert batch["obs_mask"].all() and batch["action_mask"].all()


def test_zero_action_padding(files: dict[str, Path]) -> None:
    ds = TrajectoryDataset(files["sim"], action_chunk=5, action_padding="zero")
    batch = ds.get_batch(np.arange(len(ds)))
    assert np.all(batch["actions"][~batch["action_mask"]] == 0.0)
    assert np.any(~batch["action_mask"])


def test_single_item_matches_batch(files: dict[str, Path]) -> None:
    ds = TrajectoryDataset(files["sim"], frame_stack=2, action_chunk=3)
    item = ds[7]
    batch = ds.get_batch([7])
    np.testing.assert_array_equal(item["obs"]["arm_qpos"], batch["obs"]["arm_qpos"][0])
    assert item["actions"].shape == (3, 22)
    with pytest.raises(IndexError):
        ds.get_batch([len(ds)])


def test_observation_key_selection(files: dict[str, Path]) -> None:
    default = TrajectoryDataset(files["images"])
    assert "scene_image" not in default.obs_keys and "arm_qpos" in default.obs_keys
    ds = TrajectoryDataset(files["images"], obs_keys=["eef_pos", "scene_image"], frame_stack=2)
    batch = ds.get_batch([0, 1])
    assert set(batch["obs"]) == {"eef_pos", "scene_image"}
    assert batch["obs"]["scene_image"].shape == (2, 2, 6, 6, 3)
    assert batch["obs"]["scene_image"].dtype == np.uint8
    with pytest.raises(KeyError, match=r"unknown observation key\(s\) \['joint_angles'\]; valid: \[.*'eef_pos'"):
        TrajectoryDataset(files["images"], obs_keys=["joint_angles"])


def test_filter_keys_and_demo_subsets(files: dict[str, Path]) -> None:
    valid = TrajectoryDataset(files["sim"], filter_key="valid")
    train = TrajectoryDataset(files["sim"], filter_key="train")
    assert valid.demo_ids == [9]
    assert sorted(train.demo_ids + valid.demo_ids) == list(range(len(LENGTHS)))
    assert len(TrajectoryDataset(files["sim"], demo_ids=[2, 3])) == LENGTHS[2] + LENGTHS[3]
    with pytest.raises(KeyError, match="no filter key 'test'"):
        TrajectoryDataset(files["sim"], filter_key="test")
    with pytest.raises(EmptyDatasetError):
        TrajectoryDataset(files["sim"], demo_ids=[999])


def test_next_obs_is_shifted_obs(files: dict[str, Path]) -> None:
    ds = TrajectoryDataset(files["sim"], load_next_obs=True)
    batch = ds.get_batch(np.arange(len(ds)))
    np.testing.assert_array_equal(batch["next_obs"]["arm_qpos"][:, 0, 0], batch["obs"]["arm_qpos"][:, 0, 0] + 1)


def test_standard_normalization_uses_stored_stats(files: dict[str, Path]) -> None:
    ds = TrajectoryDataset(files["sim"], normalize="standard")
    batch = ds.get_batch(np.arange(len(ds)))
    actions = batch["actions"][:, 0].astype(np.float64)
    np.testing.assert_allclose(actions.mean(0), 0.0, atol=1e-5)
    np.testing.assert_allclose(actions.std(0), 1.0, atol=1e-4)
    raw = TrajectoryDataset(files["sim"]).get_batch(np.arange(len(ds)))["actions"]
    np.testing.assert_allclose(ds.normalizer.unnormalize("actions", batch["actions"]), raw, atol=1e-5)


def test_minmax_normalization_maps_to_unit_interval(files: dict[str, Path]) -> None:
    ds = TrajectoryDataset(files["sim"], normalize="minmax")
    batch = ds.get_batch(np.arange(len(ds)))
    obs = batch["obs"]["arm_qpos"][:, 0]
    assert obs.min() >= -1.0 - 1e-6 and obs.max() <= 1.0 + 1e-6
    np.testing.assert_allclose(obs.min(0), -1.0, atol=1e-6)
    np.testing.assert_allclose(obs.max(0), 1.0, atol=1e-6)


def test_loading_memory_stays_near_the_arrays(tmp_path: Path) -> None:
    path = tmp_path / "mem.hdf5"
    write_synthetic_dataset(path, [200] * 40)
    tracemalloc.start()
    ds = TrajectoryDataset(path, load_next_obs=True)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert ds.nbytes == 40 * 200 * (2 * 4 * (7 + 7 + 16 + 16 + 3 + 4 + 9 + 12 + 18 + 9) + 4 * 22)
    assert peak < 2 * ds.nbytes


# -- torch -------------------------------------------------------------------------------------------


def test_core_imports_and_loads_without_torch(files: dict[str, Path]) -> None:
    code = (
        BLOCK_TORCH + "import r2s2r_envs.datasets as d, r2s2r_envs.datasets.generate, r2s2r_envs.datasets.cli\n"
        f"ds = d.TrajectoryDataset({str(files['sim'])!r}, frame_stack=2)\n"
        "assert len(ds) > 0 and ds.get_batch([0, 1])['actions'].shape == (2, 1, 22)\n"
        "try:\n    import r2s2r_envs.datasets.torch_data\nexcept ImportError as e:\n    print('IMPORT-ERROR', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "IMPORT-ERROR" in out.stdout and "r2s2r_envs[torch]" in out.stdout


def test_torch_dataset_with_dataloader(files: dict[str, Path]) -> None:
    import torch  # the torch extra, installed by `make`: never skipped
    from torch.utils.data import BatchSampler, DataLoader, SequentialSampler

    from r2s2r_envs.datasets.torch_data import TorchTrajectoryDataset

    ds = TrajectoryDataset(files["sim"], frame_stack=2, action_chunk=4, normalize="standard")
    tds = TorchTrajectoryDataset(ds)
    batch = next(iter(DataLoader(tds, batch_size=8)))
    assert batch["obs"]["arm_qpos"].shape == (8, 2, 7)
    assert batch["actions"].shape == (8, 4, 22) and batch["actions"].dtype == torch.float32
    assert batch["action_mask"].dtype == torch.bool
    fast = next(iter(DataLoader(tds, sampler=BatchSampler(SequentialSampler(tds), 8, False), batch_size=None)))
    for key in ("actions", "action_mask", "domain"):
        assert torch.equal(fast[key], batch[key])
    assert torch.equal(fast["obs"]["arm_qpos"], batch["obs"]["arm_qpos"])


def test_torch_cotraining_dataset(files: dict[str, Path]) -> None:
    import torch  # the torch extra, installed by `make`: never skipped
    from torch.utils.data import DataLoader

    from r2s2r_envs.datasets.torch_data import TorchCoTrainingDataset

    mix = CoTrainingMixture([TrajectoryDataset(files["sim"]), TrajectoryDataset(files["real_a"])], 0.5, seed=0)
    batches = list(DataLoader(TorchCoTrainingDataset(mix, 32, num_batches=3, seed=1), batch_size=None))
    assert len(batches) == 3
    assert batches[0]["actions"].shape == (32, 1, 22)
    assert batches[0]["domain"].dtype == torch.int64
    assert 0 < int(batches[0]["domain"].sum()) < 32


# -- mixtures ----------------------------------------------------------------------------------------


def _z(count: float, n: float, p: float) -> float:
    return (count - n * p) / math.sqrt(n * p * (1 - p))


def test_mixture_batch_composition_is_statistically_right(files: dict[str, Path]) -> None:
    sim = TrajectoryDataset(files["sim"])
    real_a = TrajectoryDataset(files["real_a"])
    real_b = TrajectoryDataset(files["real_b"])
    p, batch_size, n_batches = 0.2, 64, 2000
    mix = CoTrainingMixture([sim, real_a, real_b], real_fraction=p, seed=123)
    per_batch = np.empty(n_batches)
    from_b = 0
    for i in range(n_batches):
        which, _ = mix.draw(batch_size)
        per_batch[i] = np.isin(which, [1, 2]).sum()
        from_b += int((which == 2).sum())
    n = batch_size * n_batches
    # Real share: Binomial(n, p) overall.
    assert abs(_z(per_batch.sum(), n, p)) < 4.0
    # Per-batch counts disperse like Binomial(B, p): dispersion statistic ~ chi2(K), normal approximation.
    dispersion = ((per_batch - batch_size * p) ** 2).sum() / (batch_size * p * (1 - p))
    assert abs((dispersion - n_batches) / math.sqrt(2 * n_batches)) < 4.0
    # Within the real domain, datasets are drawn in proportion to their sizes (300 of 400 samples in real_b).
    assert abs(_z(from_b, per_batch.sum(), 0.75)) < 4.0


def test_mixture_domain_labels_match_the_data_origin(files: dict[str, Path]) -> None:
    with open_dataset(files["real_a"]) as f, open_dataset(files["sim"]) as g:
        assert not f.has_states and g.has_states  # lab files store no simulator states; loaders need none
    sim = TrajectoryDataset(files["sim"])
    real = TrajectoryDataset(files["real_a"])
    # arm_qpos[:, 2] is random per row: it identifies which file a sample came from.
    real_values = set(real.get_batch(np.arange(len(real)))["obs"]["arm_qpos"][:, 0, 2].tolist())
    sim_values = set(sim.get_batch(np.arange(len(sim)))["obs"]["arm_qpos"][:, 0, 2].tolist())
    assert not real_values & sim_values
    batch = CoTrainingMixture([sim, real], 0.5, seed=0).sample(256)
    for value, domain in zip(batch["obs"]["arm_qpos"][:, 0, 2].tolist(), batch["domain"].tolist()):
        assert value in (real_values if domain == 1 else sim_values)
    assert 0.3 < batch["domain"].mean() < 0.7
    mix = CoTrainingMixture([sim, real], 0.5)
    assert mix.content_hashes == {str(sim.path): sim.content_hash, str(real.path): real.content_hash}
    assert sim.content_hash != real.content_hash


def test_stratified_composition_has_minimal_variance() -> None:
    rng = np.random.default_rng(0)
    counts = np.array([draw_domains(50, 0.33, rng, "stratified").sum() for _ in range(4000)])
    assert set(counts.tolist()) <= {16, 17}
    assert abs(counts.mean() / 50 - 0.33) < 0.005


@pytest.mark.parametrize("p", [0.0, 1.0])
def test_mixture_extremes(files: dict[str, Path], p: float) -> None:
    mix = CoTrainingMixture([TrajectoryDataset(files["sim"]), TrajectoryDataset(files["real_a"])], p, seed=0)
    assert np.all(mix.sample(100)["domain"] == int(p))


def test_mixture_rejects_missing_domain_and_bad_fraction(files: dict[str, Path]) -> None:
    sim = TrajectoryDataset(files["sim"])
    with pytest.raises(ValueError, match="needs a real dataset"):
        CoTrainingMixture([sim], 0.1)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        CoTrainingMixture([sim], 1.5)
    other = TrajectoryDataset(files["real_a"], frame_stack=2)
    with pytest.raises(ValueError, match="frame_stack"):
        CoTrainingMixture([sim, other], 0.5)


def test_mixture_normalizes_with_merged_statistics(files: dict[str, Path]) -> None:
    sim = TrajectoryDataset(files["sim"])
    real = TrajectoryDataset(files["real_b"])
    mix = CoTrainingMixture([sim, real], 0.5, normalize="standard", seed=0)
    merged = mix.normalizer.stats["actions"]
    assert merged.count == sim.stats["actions"].count + real.stats["actions"].count
    both = np.concatenate(
        [sim.get_batch(np.arange(len(sim)))["actions"][:, 0], real.get_batch(np.arange(len(real)))["actions"][:, 0]]
    ).astype(np.float64)
    np.testing.assert_allclose(merged.mean, both.mean(0), atol=1e-6)
    np.testing.assert_allclose(merged.std, both.std(0), atol=1e-6)


def test_domain_override(files: dict[str, Path]) -> None:
    assert TrajectoryDataset(files["sim"], domain="real").domain == "real"
    with pytest.raises(ValueError, match="domain"):
        TrajectoryDataset(files["sim"], domain="lab")


# -- clean action labels -----------------------------------------------------------------------------


def _write_noisy(path: Path, lengths: list[int], sigma: float = 0.1) -> Path:
    """A sim file whose executed actions are the labels plus noise on the 6 arm entries, as noise injection makes."""
    rng = np.random.default_rng(7)
    with DatasetWriter.create(
        path, provenance={"domain": "sim"}, env_args={}, generation={"action_noise": sigma}, overwrite=True
    ) as w:
        for k, n in enumerate(lengths):
            episode = synthetic_episode(n, tag=k, rng=rng)
            episode.action_labels = episode.actions.copy()
            episode.actions = episode.actions.copy()
            episode.actions[:, :6] += rng.normal(0.0, sigma, (n, 6)).astype(np.float32)
            w.append(episode)
    return path


def _all_actions(ds: TrajectoryDataset) -> np.ndarray:
    return ds.get_batch(np.arange(len(ds)))["actions"][:, 0]


def _same(a, b) -> bool:
    return a.count == b.count and all(
        np.array_equal(getattr(a, f), getattr(b, f)) for f in ("mean", "m2", "min", "max")
    )


def test_clean_labels_are_the_samples_actions_and_statistics(tmp_path: Path) -> None:
    path = _write_noisy(tmp_path / "noisy.hdf5", [5, 8, 6])
    with open_dataset(path) as f:
        actions = np.concatenate([f.read(k, "actions") for k in f.demo_ids])
        labels = np.concatenate([f.read(k, "action_labels") for k in f.demo_ids])
        stored = f.stats()
    executed = TrajectoryDataset(path)
    clean = TrajectoryDataset(path, labels="clean", action_chunk=3)
    assert executed.labels == "executed" and clean.labels == "clean"
    np.testing.assert_array_equal(_all_actions(executed), actions)
    np.testing.assert_array_equal(_all_actions(clean), labels)
    # The chunk holds the labels of the next steps (actions[t, 0] == t in synthetic demos).
    np.testing.assert_array_equal(clean.get_batch(np.array([1]))["actions"][0, :, 0], [1, 2, 3])
    assert _same(executed.stats["actions"], stored["actions"]) and _same(
        clean.stats["actions"], stored["action_labels"]
    )
    assert not _same(stored["actions"], stored["action_labels"])
    assert sorted(clean.stats) == sorted(executed.stats) and "action_labels" not in clean.stats
    # Normalization fits what is trained on: the labels come out standardized.
    normalized = _all_actions(TrajectoryDataset(path, labels="clean", normalize="standard")).astype(np.float64)
    np.testing.assert_allclose(normalized.mean(0), 0.0, atol=1e-5)
    np.testing.assert_allclose(normalized.std(0)[:6], 1.0, atol=1e-4)
    # A mixture merges the labels' statistics.
    write_synthetic_dataset(tmp_path / "real.hdf5", [4], domain="real")
    real = TrajectoryDataset(tmp_path / "real.hdf5", labels="clean", action_chunk=3)
    mix = CoTrainingMixture([clean, real], 0.5, normalize="standard", seed=0)
    assert mix.normalizer.stats["actions"].count == len(labels) + 4
    np.testing.assert_allclose(
        mix.normalizer.stats["actions"].mean, stored["action_labels"].merge(real.stats["actions"]).mean
    )


@pytest.mark.parametrize("downgrade", [downgrade_to_v2, downgrade_to_v1])
def test_old_files_made_without_noise_give_their_actions_as_clean_labels(tmp_path: Path, downgrade) -> None:
    path = tmp_path / "old.hdf5"
    write_synthetic_dataset(path, [4, 6, 5])
    downgrade(path)
    with open_dataset(path) as f:
        assert f.schema_version in (1, 2) and f.demo(0).action_labels is None
    clean, executed = TrajectoryDataset(path, labels="clean"), TrajectoryDataset(path)
    np.testing.assert_array_equal(_all_actions(clean), _all_actions(executed))
    assert _same(clean.stats["actions"], executed.stats["actions"])


def test_an_old_file_of_noisy_actions_refuses_clean_labels(tmp_path: Path) -> None:
    path = _write_noisy(tmp_path / "noisy-v2.hdf5", [5, 8], sigma=0.1)
    downgrade_to_v2(path, action_noise=0.1)
    with pytest.raises(NoCleanLabelsError) as info:
        TrajectoryDataset(path, labels="clean")
    message = str(info.value)
    for part in (str(path), "schema version 2", "contain injected noise (action_noise sigma=0.1)"):
        assert part in message, part
    assert "regenerate it with this version" in message.lower() and "r2s2r datasets make NAME" in message
    # The executed actions are still there, for replay or for whoever wants them.
    assert len(TrajectoryDataset(path)) == 13


def test_labels_must_be_executed_or_clean(files: dict[str, Path]) -> None:
    for bad in ("noisy", "CLEAN", None):
        with pytest.raises(ValueError, match=r"labels must be one of \('executed', 'clean'\).*got"):
            TrajectoryDataset(files["sim"], labels=bad)


def test_a_mixture_refuses_datasets_of_different_labels(files: dict[str, Path]) -> None:
    sim = TrajectoryDataset(files["sim"], labels="clean")
    real = TrajectoryDataset(files["real_a"])
    with pytest.raises(ValueError, match="datasets disagree on labels: .*'clean'.*'executed'"):
        CoTrainingMixture([sim, real], 0.5)
    assert CoTrainingMixture([sim, TrajectoryDataset(files["real_a"], labels="clean")], 0.5).sample(8)


# -- real_fraction suggestion ------------------------------------------------------------------------


def test_suggest_real_fraction_rule() -> None:
    s = suggest_real_fraction(50, 1000)
    assert s.rule_applies
    assert s.low == pytest.approx(50 / 1050)
    assert s.high == pytest.approx(math.sqrt(0.05))
    # The worked example of docs/concepts.md ("real_fraction").
    assert (round(s.low, 3), round(s.high, 2)) == (0.048, 0.22)
    low, high = s
    assert low < high


def test_suggest_real_fraction_outside_rule_regime() -> None:
    s = suggest_real_fraction(50, 200)  # M/N = 4
    assert not s.rule_applies
    assert s.low == s.high == pytest.approx(0.2)
    assert suggest_real_fraction(10, 0).low == 1.0
    with pytest.raises(ValueError):
        suggest_real_fraction(0, 10)


@pytest.mark.parametrize("n,m", [(1, 6), (5, 100), (50, 251), (3, 10_000)])
def test_suggested_range_is_ordered_when_rule_applies(n: int, m: int) -> None:
    s = suggest_real_fraction(n, m)
    assert s.rule_applies and 0 < s.low < s.high < 1
