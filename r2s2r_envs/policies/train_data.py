"""What a training run trains on, checked and loaded: the datasets of the config (before anything heavy), the
demos held out for the validation loss, the observation keys, the loaded datasets and the shared
:class:`~r2s2r_envs.policies.pipeline.Pipeline` with statistics merged over them."""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any, cast

import numpy as np

from r2s2r_envs.datasets.loaders import TrajectoryDataset
from r2s2r_envs.datasets.reader import open_dataset
from r2s2r_envs.datasets.stats import RunningStats, merge_stats
from r2s2r_envs.mappings import check_keys
from r2s2r_envs.policies.checkpoint import CONFIG_FILE
from r2s2r_envs.policies.config import ConfigError, TrainConfig, VerifyMode, check_config
from r2s2r_envs.policies.data import DatasetRef, resolve_datasets, task_family
from r2s2r_envs.policies.features import (
    KEYWISE_SETS,
    PROPRIO_KEYS,
    TASK_KEYS,
    VISIBILITY_KEY,
    FeatureError,
    make_features,
)
from r2s2r_envs.policies.pipeline import Pipeline, feature_keys, weighted_merge
from r2s2r_envs.policies.trainee import user_method


def prepare(config: TrainConfig) -> tuple[list[DatasetRef], Path]:
    """Every check that needs no data loaded: the config, the datasets' existence, domains and task, the output.

    Raises:
        ConfigError: a bad field or an output directory that already holds a checkpoint (without ``overwrite``).
        DataSelectionError: a dataset that is missing, of the wrong domain or of another task.
    """
    check_config(config)
    user_method(config)  # an unusable method class fails before any data is read
    real = config.real if config.real_fraction > 0 else ()
    sim = config.sim if config.real_fraction < 1 else ()
    refs = resolve_datasets(real, sim)
    out = Path(config.out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"out {out} is a file; give a directory")
    if (out / CONFIG_FILE).exists() and not config.overwrite:
        raise ConfigError(f"{out} already holds a checkpoint; choose another --out or pass --overwrite")
    return refs, out


def split_demos(config: TrainConfig, refs: list[DatasetRef]) -> list[tuple[list[int], list[int]]]:
    """``(training demo ids, validation demo ids)`` per dataset.

    ``val_fraction`` of the demos (at least one, rounded up) of every dataset of the domain the validation loss is
    measured on are held out: the simulated datasets when there are any (the scarce real demos are all trained
    on), else the real ones. Which demos is drawn from ``seed``. Nothing is held out with ``val_fraction = 0``.
    """
    val_domain = "sim" if any(r.domain == "sim" for r in refs) else "real"
    splits = []
    for k, ref in enumerate(refs):
        with open_dataset(ref.path, verify="none") as f:
            masks = f.masks()
            if config.demos == "success" and "success" not in masks:
                raise ConfigError(
                    f"{ref.path} has no mask/success (its masks: {sorted(masks)}); train on every demo with demos='all'"
                )
            ids = list(masks["success"]) if config.demos == "success" else list(f.demo_ids)
        n_val = 0
        if config.val_fraction > 0 and ref.domain == val_domain and len(ids) > 1:
            n_val = min(len(ids) - 1, max(1, math.ceil(config.val_fraction * len(ids))))
        rng = np.random.default_rng([config.seed, k, 7919])
        held = set(rng.choice(ids, size=n_val, replace=False).tolist()) if n_val else set()
        splits.append(([i for i in ids if i not in held], [i for i in ids if i in held]))
    return splits


def observation_keys(config: TrainConfig, spec: dict[str, tuple[int, ...]]) -> list[str]:
    """The observation keys a run loads: the feature stage's, or ``obs_keys`` (every low-dimensional key if empty;
    with ``features="proprio"`` the robot's own), then the cameras of ``image_keys``.

    ``spec``: the keys every dataset of the run has; the ``"task"`` stage reads ``object_visible`` where they do,
    the ``"proprio"`` stage the robot's opt-in sensors where they do.

    Raises:
        ConfigError: keys the data lacks, a camera key that is not an image, camera keys without
            ``encoder="cnn"`` (or the reverse), object keys with ``features="proprio"``.
    """
    if config.features == "task":
        missing = [k for k in TASK_KEYS if k not in spec]
        if missing:
            raise ConfigError(
                f"features='task' needs observation key(s) {missing}, which the data lacks (it has {sorted(spec)}); "
                "use data recorded with obs_mode 'state', or features='raw'"
            )
        if config.obs_keys and sorted(config.obs_keys) != sorted(TASK_KEYS):
            raise ConfigError(
                f"features='task' reads its own keys {list(TASK_KEYS)}; leave obs_keys empty (got "
                f"{list(config.obs_keys)}) or use features='raw'"
            )
        return feature_keys("task", list(spec))
    if config.features == "proprio" and not config.obs_keys:
        missing = [k for k in PROPRIO_KEYS if k not in spec]
        if missing:
            raise ConfigError(
                f"features='proprio' needs observation key(s) {missing}, which the data lacks (it has {sorted(spec)})"
            )
        keys = feature_keys("proprio", list(spec))
    else:
        keys = list(config.obs_keys) or [k for k, shape in spec.items() if len(shape) <= 1]
    check_keys(keys, sorted(spec), what="observation key", where="obs_keys", error=ConfigError)
    check_keys(config.image_keys, sorted(spec), what="camera key", where="image_keys", error=ConfigError)
    not_images = [k for k in config.image_keys if len(spec[k]) != 3]
    if not_images:
        cameras = sorted(k for k, s in spec.items() if len(s) == 3)
        raise ConfigError(f"image_keys {not_images} are not camera images (the data's cameras: {cameras})")
    if config.features == "proprio":
        try:
            make_features("proprio", [k for k in keys if len(spec[k]) <= 1], spec)
        except FeatureError as exc:
            raise ConfigError(str(exc)) from None
    keys += [k for k in config.image_keys if k not in keys]
    images = [k for k in keys if len(spec[k]) == 3]
    if images and config.encoder != "cnn":
        raise ConfigError(f"obs_keys {images} are camera images: train with encoder='cnn' (--encoder cnn)")
    if config.encoder == "cnn" and not images:
        cameras = sorted(k for k, s in spec.items() if len(s) == 3)
        raise ConfigError(
            f"encoder='cnn' needs camera keys in image_keys or obs_keys (the data has {cameras}); record the data "
            "with obs_mode 'rgb' or 'state+rgb' for image policies"
        )
    smallest = min((min(spec[k][:2]) for k in images), default=0)
    if images and 2 * config.image_shift >= smallest:
        raise ConfigError(f"image_shift {config.image_shift} must be below half the cameras' side ({smallest} px)")
    return keys


def load_datasets(
    config: TrainConfig,
    refs: list[DatasetRef],
    demo_ids: list[list[int]] | None = None,
    verify: VerifyMode | None = None,
    *,
    frames: bool = True,
) -> list[TrajectoryDataset]:
    """Loads the datasets (raw values, frame stacks and action chunks of the config).

    Args:
        config: the run.
        refs: the datasets.
        demo_ids: the demos to load of each dataset (default: all the run trains on).
        verify: the hash check, instead of the config's (``"none"`` for a file already verified).
        frames: load the camera frames; ``False`` checks the camera keys but leaves their frames in the file (a
            frozen encoder's features are extracted from it: ``r2s2r_envs.policies.cached``).

    Raises:
        ConfigError: unknown observation keys, or camera keys without ``encoder="cnn"`` (or the reverse).
    """
    common = {k: v for k, v in refs[0].obs_spec.items() if all(k in r.obs_spec for r in refs)}
    keys = observation_keys(config, common)
    if not frames:
        keys = [k for k in keys if len(common[k]) != 3]
    if config.features == "task" and VISIBILITY_KEY not in keys and any(VISIBILITY_KEY in r.obs_spec for r in refs):
        lacking = [r.path.name for r in refs if VISIBILITY_KEY not in r.obs_spec]
        warnings.warn(
            f"features='task' reads {VISIBILITY_KEY} only when every dataset has it; {lacking} lack it, so this run "
            f"trains without it (record them with sensors=['{VISIBILITY_KEY}'] to use it)",
            stacklevel=2,
        )
    return [
        TrajectoryDataset(
            ref.path,
            obs_keys=keys,
            frame_stack=config.frame_stack,
            action_chunk=config.action_chunk,
            filter_key="success" if config.demos == "success" else None,
            demo_ids=None if demo_ids is None else demo_ids[k],
            verify=config.verify if verify is None else verify,
            labels=config.labels,
        )
        for k, ref in enumerate(refs)
    ]


def mixture_weights(config: TrainConfig, datasets: list[TrajectoryDataset]) -> list[float]:
    """Each dataset's expected share of the training batches (its domain's share, split by sample counts)."""
    weights = []
    for d in datasets:
        domain_total = sum(len(o) for o in datasets if o.domain == d.domain)
        share = config.real_fraction if d.domain == "real" else 1.0 - config.real_fraction
        weights.append(share * len(d) / domain_total)
    return weights


def feature_stats(pipeline_features: Any, dataset: TrajectoryDataset, chunk: int = 8192) -> RunningStats:
    """Statistics of the feature stage's output over every transition of a dataset (each frame once)."""
    total: RunningStats | None = None
    for start in range(0, len(dataset), chunk):
        batch = dataset.get_batch(np.arange(start, min(start + chunk, len(dataset))))
        x = pipeline_features(batch["obs"])[:, -1]  # the sample's own step: every transition once
        part = RunningStats.from_array(x)
        total = part if total is None else total.merge(part)
    assert total is not None
    return total


def build_pipeline(config: TrainConfig, datasets: list[TrajectoryDataset]) -> Pipeline:
    """The shared pipeline: keys and shapes of the data, statistics merged over every dataset.

    Statistics are merged with each dataset's share of the batches (``normalization_weights="mixture"``) or its
    sample count (``"samples"``); the ``"task"`` features' statistics are computed over the training data.

    Raises:
        ConfigError: the data does not have what the feature stage needs.
    """
    ref = datasets[0]
    spec = ref.sample_spec()
    shapes = {k: spec[f"obs/{k}"][0][1:] for k in ref.obs_keys}
    low, high = _action_bounds(ref.env_id, spec["actions"][0][1], ref.domain)
    per_dataset = [dict(d.stats) for d in datasets]
    if config.features not in KEYWISE_SETS:
        try:
            stage = make_features(config.features, ref.obs_keys, shapes)
        except FeatureError as exc:
            raise ConfigError(str(exc)) from None
        for stats, d in zip(per_dataset, datasets):
            stats["features"] = feature_stats(stage, d)
    if config.normalization_weights == "samples":
        stats = merge_stats(per_dataset)
    else:
        weights = mixture_weights(config, datasets)
        names = [n for n in per_dataset[0] if all(n in s for s in per_dataset)]
        stats = {n: weighted_merge([s[n] for s in per_dataset], weights) for n in names}
    return Pipeline(
        obs_keys=[k for k in ref.obs_keys if len(shapes[k]) <= 1],
        image_keys=[k for k in ref.obs_keys if len(shapes[k]) == 3],
        obs_shapes=shapes,
        action_dim=spec["actions"][0][1],
        frame_stack=config.frame_stack,
        action_chunk=config.action_chunk,
        stats=stats,
        action_low=low,
        action_high=high,
        action_normalization=config.action_normalization,
        features=config.features,
    )


def _action_bounds(env_id: str, action_dim: int, domain: str) -> tuple[list[float] | None, list[float] | None]:
    """The action space bounds of the data's env (predictions are clipped to them), else ``None``.

    Every PickSort id acts in ``[-1, 1]`` (the env's documented action space): no env is made for it, so training
    never instantiates the lab. Another registered simulated env is made once to read its action space.
    """
    if task_family(env_id) == "PickSort":
        return [-1.0] * action_dim, [1.0] * action_dim
    import gymnasium as gym

    import r2s2r_envs  # noqa: F401 - registers the envs

    if domain == "real" or env_id not in gym.registry:
        return None, None
    env = gym.make(env_id)
    try:
        space = cast(gym.spaces.Box, env.action_space)  # every registered PickSort id's action space
        return np.asarray(space.low, dtype=np.float64).tolist(), np.asarray(space.high, dtype=np.float64).tolist()
    finally:
        env.close()
