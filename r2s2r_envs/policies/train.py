"""Training of the baselines: :func:`train` (``r2s2r train`` is a thin shell over it; needs torch).

One run: check the configuration and the datasets (before anything heavy), load the datasets into memory with the
loaders' frame stacking and action chunks (raw values), mix them with ``real_fraction``
(:class:`~r2s2r_envs.datasets.mixture.CoTrainingMixture`), normalize through the shared
:class:`~r2s2r_envs.policies.pipeline.Pipeline` with statistics merged over the datasets, and train with AdamW
(cosine decay). Writes the checkpoint directory (``r2s2r_envs.policies.checkpoint``): ``config.json`` with the
resolved config and metadata, ``policy.pt``, ``train_log.json`` and ``loss.png``. docs/baselines.md has the
commands and measured numbers.

The reference methods (``bc``, ``flow``, ...) and a user's :class:`~r2s2r_envs.policies.method.Method` (``method``
given as ``module:Class``, docs/byo_method.md) go through the same loop: a :class:`Trainee` holds the network and its
losses on a :class:`~r2s2r_envs.policies.method.Batch`; everything else is shared.

The run's parts have modules of their own: what it trains on (``policies.train_data``), what it trains
(``policies.trainee``), its batches (``policies.batches``), which weights it keeps (``policies.checkpoint_choice``)
and what it writes (``policies.train_output``); their names are importable from here too.

Camera frames stay uint8 in memory (the loaders hold them as recorded) and are scaled to [0, 1] batch by batch;
the random-shift augmentation (``image_shift``) moves them in training only. With a frozen encoder (``image_encoder``
``sim-pose``, the ``cpu-image-cached`` recipe) no frame is held: its features of every frame are computed once
before the first step and gathered per batch (``policies.cached``).

Determinism: batches come from a numpy generator and every torch random draw (the augmentation's included) from a
``torch.Generator``, both seeded with ``seed``; on one machine with the same ``threads`` two runs give identical
weights (on the CPU; ``device="cuda"`` trains faster but not bit-reproducibly).

Example::

    from r2s2r_envs.policies.config import TrainConfig
    from r2s2r_envs.policies.train import train

    result = train(TrainConfig(method="flow-cfg-adda", real=("lab-50",), sim=("ungrounded-1000",),
                               real_fraction=0.22, seed=0, out="runs/cfg-adda-s0", steps=2000))
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from r2s2r_envs.datasets.loaders import TrajectoryDataset
from r2s2r_envs.datasets.mixture import CoTrainingMixture
from r2s2r_envs.policies.batches import RESIDENT_LIMIT_BYTES, ResidentBatches, batch_tensors
from r2s2r_envs.policies.cached import CachedBatches, build_cache, cached_batch_tensors, check_cameras, frozen_encoder
from r2s2r_envs.policies.checkpoint_choice import EMA, CheckpointChoice, validation_loss
from r2s2r_envs.policies.config import ConfigError, TrainConfig
from r2s2r_envs.policies.method import Batch
from r2s2r_envs.policies.train_data import (
    build_pipeline,
    feature_stats,
    load_datasets,
    mixture_weights,
    observation_keys,
    prepare,
    split_demos,
)
from r2s2r_envs.policies.train_output import POLICY_CLASS, run_metadata, write_checkpoint
from r2s2r_envs.policies.trainee import (
    ReferenceTrainee,
    Trainee,
    UserTrainee,
    build_model,
    method_spec,
    model_config,
    reversal_scale,
    user_method,
)
from r2s2r_envs.policies.vision import random_shift

# Learning rate at the end of the cosine schedule, as a share of ``lr``.
_FINAL_LR_SHARE = 0.1


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainResult:
    """What :func:`train` wrote.

    Attributes:
        out: the checkpoint directory.
        metadata: the policy metadata (as in ``config.json``).
        final_loss: mean total loss over the last 10% of the steps.
        load_time_s: seconds to check and load the data.
        train_time_s: seconds of the gradient steps.
        samples_per_s: training samples per second of ``train_time_s``.
    """

    out: Path
    metadata: dict[str, Any]
    final_loss: float
    load_time_s: float
    train_time_s: float
    samples_per_s: float


def resolve_device(device: str) -> torch.device:
    """The torch device of ``TrainConfig.device`` (``"auto"``: cuda when available, else cpu).

    Raises:
        ConfigError: ``"cuda"`` asked for but torch sees no GPU.
    """
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError(
            "device='cuda' but this torch build sees no GPU (torch.cuda.is_available() is False); "
            "use device='cpu' or 'auto'"
        )
    return torch.device(device)


def lr_factor(config: TrainConfig, step: int) -> float:
    """Learning rate at ``step`` as a share of ``lr``: linear warm-up over ``warmup_steps``, then cosine decay from
    1 to 10% at the end of the run."""
    warm = min(config.warmup_steps, config.steps - 1)
    if step < warm:
        return (step + 1) / warm
    progress = min(step - warm, config.steps - warm) / max(config.steps - warm, 1)
    return _FINAL_LR_SHARE + (1 - _FINAL_LR_SHARE) * 0.5 * (1 + math.cos(math.pi * progress))


def train(config: TrainConfig) -> TrainResult:
    """Trains a policy and writes its checkpoint directory.

    Args:
        config: the run (docs/baselines.md).

    Returns:
        Where it was written, the metadata, the final loss and timings.

    Raises:
        ConfigError: a bad setting (before any data is loaded).
        DataSelectionError: a missing dataset, one of the wrong domain or of another task (before loading).
        DatasetError: a dataset that fails its checks while loading.
    """
    t0 = time.perf_counter()
    device = resolve_device(config.device)  # before any data is loaded
    refs, out = prepare(config)
    frozen = frozen_encoder(config)  # its features are cached: the frames stay in the files
    if frozen is not None:
        check_cameras(frozen, refs, config.image_keys)
    splits = split_demos(config, refs)
    datasets = load_datasets(config, refs, [train_ids for train_ids, _ in splits], frames=frozen is None)
    with_val = [(ref, val_ids) for ref, (_, val_ids) in zip(refs, splits) if val_ids]
    # The same files were verified when their training demos were loaded.
    held_out = (
        load_datasets(config, [r for r, _ in with_val], [v for _, v in with_val], verify="none", frames=frozen is None)
        if with_val
        else []
    )
    pipeline = build_pipeline(config, datasets)
    cache = None
    if frozen is not None:
        cache = build_cache(config, frozen, refs, datasets, list(zip([r for r, _ in with_val], held_out)), pipeline)
        pipeline = cache.pipeline  # the cameras' keys and shapes: what the model and the checkpoint need
    mixture = CoTrainingMixture(
        datasets,
        config.real_fraction,
        composition=config.composition,
        seed=config.seed,
    )
    torch.set_num_threads(config.threads)
    # Low-dimensional data encoded once and kept on the device (the same batches, without per-step encoding).
    fits = ResidentBatches.nbytes(datasets, pipeline) <= RESIDENT_LIMIT_BYTES
    resident = ResidentBatches(mixture, pipeline, device) if not pipeline.image_keys and fits else None
    if cache is not None:  # features of a few hundred bytes a frame: always resident
        resident = CachedBatches(mixture, cache.state_pipeline, cache.features, device)
    torch.manual_seed(config.seed)
    generator = torch.Generator(device=device).manual_seed(config.seed)
    trainee = Trainee.for_config(config, pipeline)
    model = trainee.module.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(config, s))
    if cache is None:
        choice = CheckpointChoice(config, model, held_out, pipeline, device, trainee)  # EMA, validation points
    else:
        validation = cast(list[TrajectoryDataset], cache.held_out)  # get_batch and len, as validation needs
        choice = CheckpointChoice(
            config, model, validation, cache.state_pipeline, device, trainee, encode=cached_batch_tensors
        )
    load_time = time.perf_counter() - t0

    history: dict[str, list[float]] = {k: [] for k in trainee.log_keys or ()}
    real_share: list[float] = []
    t1 = time.perf_counter()
    bar = _progress(config)
    model.train()
    batch_size = config.batch_size
    assert batch_size is not None  # the recipe sets it (check_config)
    for step in range(config.steps):
        if resident is not None:
            inputs, target, weight, domain = resident.sample(batch_size)
        else:
            batch = mixture.sample(batch_size)
            inputs, target, weight = batch_tensors(pipeline, batch, device)
            domain = torch.from_numpy(batch["domain"]).to(device)
        if config.obs_noise > 0:
            noise = torch.randn(inputs["state"].shape, generator=generator, device=device)
            inputs["state"] = inputs["state"] + config.obs_noise * noise
        if config.image_shift > 0:  # training only, never at inference
            for key in pipeline.image_keys:
                inputs[f"image/{key}"] = random_shift(inputs[f"image/{key}"], config.image_shift, generator)
        batch_in = Batch(
            inputs=inputs,
            domain=domain,
            generator=generator,
            target=target,
            weight=weight,
            step=step,
            steps=config.steps,
        )
        losses = trainee.losses(model, batch_in, training=True)
        if not history:  # a user's method logs what its first step returns
            history = {k: [] for k in losses}
        optimizer.zero_grad(set_to_none=True)
        losses["loss"].backward()
        if config.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        schedule.step()
        choice.update_ema(model)
        for key in history:
            if key not in losses:
                raise ConfigError(f"--method {config.method}: loss returned no {key!r} at step {step} (step 0 did)")
            value = losses[key]
            history[key].append(value if isinstance(value, float) else float(value.detach()))
        real_share.append(float(domain.float().mean()))
        choice.validate(model, step)
        if bar is not None:
            bar.update(1)
            if step % 50 == 0 or step == config.steps - 1:
                bar.set_postfix(loss=f"{history['loss'][-1]:.4f}")
        if not math.isfinite(history["loss"][-1]):
            raise FloatingPointError(f"the loss became {history['loss'][-1]} at step {step}; lower --lr")
    if bar is not None:
        bar.close()
    train_time = time.perf_counter() - t1
    final_state, chosen_step = choice.final(model)
    model.load_state_dict(final_state)

    metadata = run_metadata(config, refs, datasets, [len(v) for _, v in splits])
    tail = history["loss"][-max(1, config.steps // 10) :]
    log = {
        "steps": config.steps,
        "batch_size": config.batch_size,
        "history": history,
        "real_share_per_batch_mean": float(np.mean(real_share)),
        "final_loss": float(np.mean(tail)),
        "load_time_s": load_time,
        "train_time_s": train_time,
        "samples_per_s": config.steps * config.batch_size / max(train_time, 1e-9),
        "num_samples": {str(d.path): len(d) for d in datasets},
        "threads": config.threads,
        "device": str(device),
        "validation": choice.validation,
        "validation_demos": {str(ref.path): val_ids for ref, (_, val_ids) in zip(refs, splits) if val_ids},
        "checkpoint_step": chosen_step,
        "ema_decay": config.ema_decay,
    }
    if cache is not None:
        log["frozen_encoder"] = cache.log()
    write_checkpoint(out, config, pipeline, model, metadata, log, trainee.model_section)
    return TrainResult(
        out=out,
        metadata=metadata,
        final_loss=cast(float, log["final_loss"]),
        load_time_s=load_time,
        train_time_s=train_time,
        samples_per_s=cast(float, log["samples_per_s"]),
    )


def _progress(config: TrainConfig) -> Any:
    if not config.progress:
        return None
    from tqdm import tqdm

    return tqdm(total=config.steps, desc=f"train {config.method}", unit="step", file=sys.stderr, dynamic_ncols=True)


#: The training API, importable from here as before the run's parts had modules of their own.
__all__ = [
    "EMA",
    "POLICY_CLASS",
    "RESIDENT_LIMIT_BYTES",
    "CheckpointChoice",
    "ReferenceTrainee",
    "ResidentBatches",
    "TrainResult",
    "Trainee",
    "UserTrainee",
    "batch_tensors",
    "build_model",
    "build_pipeline",
    "feature_stats",
    "load_datasets",
    "lr_factor",
    "method_spec",
    "mixture_weights",
    "model_config",
    "observation_keys",
    "prepare",
    "resolve_device",
    "reversal_scale",
    "split_demos",
    "train",
    "user_method",
    "validation_loss",
]
