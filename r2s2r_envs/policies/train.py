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

Determinism: batches come from a numpy generator and every torch random draw from a ``torch.Generator``, both seeded
with ``seed``; on one machine with the same ``threads`` two runs give identical weights (on the CPU; ``device="cuda"``
trains faster but not bit-reproducibly).

Example::

    from r2s2r_envs.policies.config import TrainConfig
    from r2s2r_envs.policies.train import train

    result = train(TrainConfig(method="flow-cfg-adda", real=("lab-50",), sim=("ungrounded-1000",),
                               real_fraction=0.22, seed=0, out="runs/cfg-adda-s0", steps=2000))
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from r2s2r_envs._version import __version__
from r2s2r_envs.datasets.loaders import TrajectoryDataset
from r2s2r_envs.datasets.mixture import CoTrainingMixture
from r2s2r_envs.datasets.reader import open_dataset
from r2s2r_envs.datasets.stats import RunningStats, merge_stats
from r2s2r_envs.policies.checkpoint import (
    CHECKPOINT_FORMAT,
    CHECKPOINT_VERSION,
    CONFIG_FILE,
    LOG_FILE,
    LOSS_PLOT,
    WEIGHTS_FILE,
    weights_digest,
)
from r2s2r_envs.policies.config import ConfigError, TrainConfig, VerifyMode, check_config
from r2s2r_envs.policies.data import DatasetRef, grounding_variant, resolve_datasets, task_family
from r2s2r_envs.policies.features import TASK_KEYS, VISIBILITY_KEY, FeatureError, make_features
from r2s2r_envs.policies.method import (
    Batch,
    Method,
    MethodError,
    Spec,
    import_method,
    loss_dict,
    method_name,
    module_digest,
)
from r2s2r_envs.policies.models import PolicyModel
from r2s2r_envs.policies.pipeline import Pipeline, feature_keys, weighted_merge

#: The class ``load_policy`` returns (recorded as ``policy_class``).
POLICY_CLASS = "r2s2r_envs.policies.runtime.TrainedPolicy"
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
    """The observation keys a run loads: the feature stage's, or ``obs_keys`` (every low-dimensional key if empty).

    ``spec``: the keys every dataset of the run has; the ``"task"`` stage reads ``object_visible`` where they do.

    Raises:
        ConfigError: keys the data lacks, camera keys without ``encoder="cnn"`` (or the reverse).
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
    keys = list(config.obs_keys) or [k for k, shape in spec.items() if len(shape) <= 1]
    unknown = [k for k in keys if k not in spec]
    if unknown:
        raise ConfigError(f"obs_keys {unknown} are not in the data; it has {sorted(spec)}")
    images = [k for k in keys if len(spec[k]) == 3]
    if images and config.encoder != "cnn":
        raise ConfigError(f"obs_keys {images} are camera images: train with encoder='cnn' (--encoder cnn)")
    if config.encoder == "cnn" and not images:
        cameras = sorted(k for k, s in spec.items() if len(s) == 3)
        raise ConfigError(f"encoder='cnn' needs camera keys in obs_keys (the data has {cameras})")
    return keys


def load_datasets(
    config: TrainConfig,
    refs: list[DatasetRef],
    demo_ids: list[list[int]] | None = None,
    verify: VerifyMode | None = None,
) -> list[TrajectoryDataset]:
    """Loads the datasets (raw values, frame stacks and action chunks of the config).

    Args:
        config: the run.
        refs: the datasets.
        demo_ids: the demos to load of each dataset (default: all the run trains on).
        verify: the hash check, instead of the config's (``"none"`` for a file already verified).

    Raises:
        ConfigError: unknown observation keys, or camera keys without ``encoder="cnn"`` (or the reverse).
    """
    common = {k: v for k, v in refs[0].obs_spec.items() if all(k in r.obs_spec for r in refs)}
    keys = observation_keys(config, common)
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
    if config.features != "raw":
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


def build_model(config: TrainConfig, pipeline: Pipeline) -> PolicyModel:
    """The network of a config (sizes from the pipeline)."""
    return PolicyModel(**model_config(config, pipeline))


def model_config(config: TrainConfig, pipeline: Pipeline) -> dict[str, Any]:
    """The ``model`` section of ``config.json``: the arguments of :class:`PolicyModel`."""
    return {
        "state_dim": pipeline.state_dim,
        "chunk_dim": pipeline.chunk_dim,
        "generative": config.generative,
        "cfg": config.uses_cfg,
        "adda": config.uses_adda,
        "image_keys": list(pipeline.image_keys),
        "frame_stack": config.frame_stack,
        "hidden_dim": config.hidden_dim,
        "layers": config.layers,
        "feature_dim": config.feature_dim,
        "architecture": config.architecture,
    }


def user_method(config: TrainConfig) -> type[Method] | None:
    """The :class:`~r2s2r_envs.policies.method.Method` class of a config whose ``method`` is ``module:Class``.

    Raises:
        ConfigError: the class cannot be imported, is not a ``Method`` or lacks ``loss``/``predict``.
    """
    if config.method_class is None:
        return None
    try:
        return import_method(config.method_class)
    except MethodError as exc:
        raise ConfigError(f"--method {config.method}: {exc}") from None


def method_spec(config: TrainConfig, pipeline: Pipeline) -> Spec:
    """The sizes a user's method is built for: the pipeline's data and the recipe's network."""
    return Spec(
        state_dim=pipeline.state_dim,
        action_dim=pipeline.action_dim,
        action_chunk=pipeline.action_chunk,
        frame_stack=pipeline.frame_stack,
        image_keys=tuple(pipeline.image_keys),
        hidden_dim=config.hidden_dim,
        layers=config.layers,
        feature_dim=config.feature_dim,
    )


class Trainee:
    """What the training loop trains: the network (whose ``state_dict`` is saved), its losses on a batch, and the
    checkpoint's ``model`` section. :meth:`for_config` gives a reference method's or a user's."""

    #: The losses logged every step (``None``: those the first step returns).
    log_keys: list[str] | None = None

    def __init__(self, module: torch.nn.Module, model_section: dict[str, Any]) -> None:
        self.module = module
        self.model_section = model_section

    def losses(self, module: torch.nn.Module, batch: Batch, *, training: bool) -> dict[str, Any]:
        """``{"loss": the total minimized, "action": the validation loss, ...}`` of ``module`` (the trained network
        or its EMA copy) on a batch; ``training=False`` for the validation loss."""
        raise NotImplementedError

    @staticmethod
    def for_config(config: TrainConfig, pipeline: Pipeline) -> Trainee:
        """The trainee of a run (its network initialized from torch's global generator)."""
        cls = user_method(config)
        if cls is None:
            return ReferenceTrainee(config, pipeline)
        return UserTrainee(cls, config, pipeline)


class ReferenceTrainee(Trainee):
    """A reference method: a :class:`PolicyModel` and its losses (CFG label dropout and ADDA's reversal ramp)."""

    def __init__(self, config: TrainConfig, pipeline: Pipeline) -> None:
        super().__init__(build_model(config, pipeline), model_config(config, pipeline))
        self.config = config
        self.log_keys = ["loss", "action"]
        if config.uses_adda:
            self.log_keys += ["domain", "domain_accuracy", "reversal_scale"]

    def losses(self, module: torch.nn.Module, batch: Batch, *, training: bool) -> dict[str, Any]:
        assert batch.target is not None and batch.weight is not None
        model = cast(PolicyModel, module)
        if not training:
            return model.losses(batch.inputs, batch.target, batch.weight, batch.domain, batch.generator)
        scale = reversal_scale(self.config, batch.step)
        out: dict[str, Any] = model.losses(
            batch.inputs,
            batch.target,
            batch.weight,
            batch.domain,
            batch.generator,
            cfg_dropout=self.config.cfg_dropout,
            reversal_scale=scale,
        )
        out["reversal_scale"] = scale
        return out


class UserTrainee(Trainee):
    """A user's :class:`~r2s2r_envs.policies.method.Method` (``method`` given as ``module:Class``)."""

    def __init__(self, cls: type[Method], config: TrainConfig, pipeline: Pipeline) -> None:
        spec = method_spec(config, pipeline)
        path = cast(str, config.method_class)
        try:
            module = cls(spec)
        except Exception as exc:
            raise ConfigError(f"--method {path}: {path}(spec) failed: {type(exc).__name__}: {exc}") from exc
        if not any(True for _ in module.parameters()):
            raise ConfigError(f"--method {path}: the method has no parameters to train (build them in __init__)")
        super().__init__(module, {"method_class": path, "spec": spec.to_dict()})
        self.path = path

    def losses(self, module: torch.nn.Module, batch: Batch, *, training: bool) -> dict[str, Any]:
        try:
            return loss_dict(cast(Method, module).loss(batch), self.path)
        except MethodError as exc:
            raise ConfigError(str(exc)) from None


def batch_tensors(
    pipeline: Pipeline, batch: dict[str, Any], device: torch.device | str = "cpu"
) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor]:
    """A raw loader batch through the pipeline: ``(inputs, normalized targets, loss weights)`` on ``device``."""
    inputs = {k: torch.from_numpy(v).to(device) for k, v in pipeline.encode_obs(batch["obs"]).items()}
    target = torch.from_numpy(pipeline.encode_actions(batch["actions"])).to(device)
    mask = np.repeat(batch["action_mask"].astype(np.float32), pipeline.action_dim, axis=1)
    return inputs, target, torch.from_numpy(mask).to(device)


class ResidentBatches:
    """Every training sample encoded once and kept on the training device; a batch is a gather.

    The mixture draws each batch's composition as it would for :meth:`CoTrainingMixture.sample` (the same random
    stream, so the same samples), and the batch is gathered from tensors made once by the pipeline: the same
    inputs, targets, loss weights and domains as encoding each batch anew (the feature stage and the normalization
    work sample by sample), without the per-step gathering, feature computation and host-to-device copies. For
    low-dimensional inputs only (camera frames would not fit).

    Args:
        mixture: the training mixture (its datasets and random stream).
        pipeline: the shared pipeline.
        device: where the tensors live and the batches are gathered.
        chunk: samples encoded at a time while building.
    """

    def __init__(self, mixture: CoTrainingMixture, pipeline: Pipeline, device: torch.device, chunk: int = 8192) -> None:
        if pipeline.image_keys:
            raise ValueError("ResidentBatches holds low-dimensional inputs only; camera frames are encoded per batch")
        self.mixture = mixture
        self.action_dim = pipeline.action_dim
        state, target, mask, domain, offsets = [], [], [], [], [0]
        for d in mixture.datasets:
            for start in range(0, len(d), chunk):
                batch = d.get_batch(np.arange(start, min(start + chunk, len(d))), normalizer=mixture.normalizer)
                inputs, targets, _ = batch_tensors(pipeline, batch)  # the per-step encoding, once per sample
                state.append(inputs["state"])
                target.append(targets)
                mask.append(torch.from_numpy(batch["action_mask"]))  # compact: widened per action at sampling
                domain.append(torch.from_numpy(batch["domain"]))
            offsets.append(offsets[-1] + len(d))
        self.offsets = np.asarray(offsets[:-1], dtype=np.int64)
        self.state = torch.cat(state).to(device)
        self.target = torch.cat(target).to(device)
        self.mask = torch.cat(mask).to(device)
        self.domain = torch.cat(domain).to(device)
        self.device = device

    @staticmethod
    def nbytes(datasets: list[TrajectoryDataset], pipeline: Pipeline) -> int:
        """Memory the tensors take for ``datasets``."""
        per_sample = 4 * (pipeline.state_dim + pipeline.chunk_dim) + pipeline.action_chunk + 8
        return per_sample * sum(len(d) for d in datasets)

    def sample(self, batch_size: int) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor, torch.Tensor]:
        """One batch: ``(inputs, normalized targets, loss weights, domain labels)``, as :func:`batch_tensors` and
        the batch's ``domain`` give for ``mixture.sample(batch_size)``."""
        which, local = self.mixture.draw(batch_size)
        index = torch.from_numpy(self.offsets[which] + local).to(self.device)
        mask = self.mask.index_select(0, index).to(torch.float32)
        weight = mask.repeat_interleave(self.action_dim, dim=1)
        return (
            {"state": self.state.index_select(0, index)},
            self.target.index_select(0, index),
            weight,
            self.domain.index_select(0, index),
        )


#: Largest sample tensors kept resident (:class:`ResidentBatches`); bigger data is encoded batch by batch.
RESIDENT_LIMIT_BYTES = 8 * 2**30


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


class EMA:
    """Exponential moving average of a model's parameters and buffers (the weights that are saved).

    The decay at update ``n`` is ``min(decay, (1 + n) / (10 + n))``, so the average follows the fast early changes.
    """

    def __init__(self, model: torch.nn.Module, decay: float) -> None:
        self.decay = float(decay)
        self.updates = 0
        self.state = {k: v.detach().clone() for k, v in model.state_dict().items()}

    @torch.no_grad()
    def update(self, model: torch.nn.Module) -> None:
        self.updates += 1
        d = min(self.decay, (1 + self.updates) / (10 + self.updates))
        for k, v in model.state_dict().items():
            if v.dtype.is_floating_point:
                self.state[k].mul_(d).add_(v.detach(), alpha=1 - d)
            else:
                self.state[k].copy_(v)


@torch.no_grad()
def validation_loss(
    model: torch.nn.Module,
    pipeline: Pipeline,
    batches: list[dict[str, Any]],
    device: torch.device,
    seed: int,
    trainee: Trainee | None = None,
) -> float:
    """Mean action loss of ``model`` on fixed validation batches, with fixed random draws (flow noise and times:
    comparable between checkpoints); ``trainee`` gives the losses (default: a :class:`PolicyModel`'s)."""
    model.eval()
    generator = torch.Generator(device=device).manual_seed(seed)
    total, weight = 0.0, 0.0
    for batch in batches:
        inputs, target, w = batch_tensors(pipeline, batch, device)
        domain = torch.from_numpy(batch["domain"]).to(device)
        if trainee is None:
            losses = cast(PolicyModel, model).losses(inputs, target, w, domain, generator)
        else:
            sample = Batch(inputs=inputs, domain=domain, generator=generator, target=target, weight=w)
            losses = trainee.losses(model, sample, training=False)
        total += float(losses["action"]) * float(w.sum())
        weight += float(w.sum())
    model.train()
    return total / max(weight, 1.0)


def _validation_batches(config: TrainConfig, datasets: list[TrajectoryDataset]) -> list[dict[str, Any]]:
    """Up to 4,096 samples of the held-out demos, drawn once (seeded), in batches of ``batch_size``."""
    if not datasets:
        return []
    rng = np.random.default_rng([config.seed, 104729])
    batches = []
    for d in datasets:
        n = min(len(d), max(1, 4096 // len(datasets)))
        idx = np.sort(rng.choice(len(d), size=n, replace=False))
        for start in range(0, n, config.batch_size):
            batches.append(d.get_batch(idx[start : start + config.batch_size]))
    return batches


def reversal_scale(config: TrainConfig, step: int) -> float:
    """The encoder's adversarial weight at ``step``: DANN's ``2 / (1 + exp(-10 p)) - 1`` ramp over the warm-up."""
    if not config.uses_adda:
        return 0.0
    warm = config.adda_warmup * config.steps
    p = 1.0 if warm <= 0 else min(1.0, step / warm)
    return config.adda_weight * (2.0 / (1.0 + math.exp(-10.0 * p)) - 1.0)


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
    splits = split_demos(config, refs)
    datasets = load_datasets(config, refs, [train_ids for train_ids, _ in splits])
    with_val = [(ref, val_ids) for ref, (_, val_ids) in zip(refs, splits) if val_ids]
    # The same files were verified when their training demos were loaded.
    held_out = (
        load_datasets(config, [r for r, _ in with_val], [v for _, v in with_val], verify="none") if with_val else []
    )
    pipeline = build_pipeline(config, datasets)
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
    torch.manual_seed(config.seed)
    generator = torch.Generator(device=device).manual_seed(config.seed)
    trainee = Trainee.for_config(config, pipeline)
    model = trainee.module.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(config, s))
    ema = EMA(model, config.ema_decay) if config.ema_decay > 0 else None
    val_batches = _validation_batches(config, held_out)
    # Validation points: val_points over the run, the last at the last step.
    points = range(1, config.val_points + 1)
    val_steps = {max(0, round(config.steps * k / config.val_points) - 1) for k in points} if val_batches else set()
    evaluated = copy.deepcopy(model) if ema is not None and val_batches else None
    best: tuple[float, int, dict[str, torch.Tensor]] | None = None
    load_time = time.perf_counter() - t0

    history: dict[str, list[float]] = {k: [] for k in trainee.log_keys or ()}
    validation: list[dict[str, float]] = []
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
        if ema is not None:
            ema.update(model)
        for key in history:
            if key not in losses:
                raise ConfigError(f"--method {config.method}: loss returned no {key!r} at step {step} (step 0 did)")
            value = losses[key]
            history[key].append(value if isinstance(value, float) else float(value.detach()))
        real_share.append(float(domain.float().mean()))
        if step in val_steps:
            state = ema.state if ema is not None else model.state_dict()
            target_model = model
            if evaluated is not None:
                evaluated.load_state_dict(state)
                target_model = evaluated
            loss = validation_loss(target_model, pipeline, val_batches, device, config.seed, trainee)
            validation.append({"step": step + 1, "loss": loss})
            if best is None or loss < best[0]:
                best = (loss, step + 1, {k: v.detach().clone() for k, v in state.items()})
        if bar is not None:
            bar.update(1)
            if step % 50 == 0 or step == config.steps - 1:
                bar.set_postfix(loss=f"{history['loss'][-1]:.4f}")
        if not math.isfinite(history["loss"][-1]):
            raise FloatingPointError(f"the loss became {history['loss'][-1]} at step {step}; lower --lr")
    if bar is not None:
        bar.close()
    train_time = time.perf_counter() - t1
    if best is not None:
        final_state, chosen_step = best[2], best[1]
    else:
        final_state = ema.state if ema is not None else model.state_dict()
        chosen_step = config.steps
    model.load_state_dict(final_state)

    metadata = _metadata(config, refs, datasets, [len(v) for _, v in splits])
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
        "validation": validation,
        "validation_demos": {str(ref.path): val_ids for ref, (_, val_ids) in zip(refs, splits) if val_ids},
        "checkpoint_step": chosen_step,
        "ema_decay": config.ema_decay,
    }
    _write(out, config, pipeline, model, metadata, log, trainee.model_section)
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


def _metadata(
    config: TrainConfig, refs: list[DatasetRef], datasets: list[TrajectoryDataset], held_out: list[int]
) -> dict[str, Any]:
    # ``episodes``: the demos the policy was given (trained on or held out for its validation loss).
    entries = [
        {
            "name": ref.name,
            "path": str(ref.path),
            "sha256": ref.content_hash,
            "domain": ref.domain,
            "env_id": ref.env_id,
            "episodes": ds.num_demos + n_val,
            "validation_episodes": n_val,
            "samples": len(ds),
        }
        for ref, ds, n_val in zip(refs, datasets, held_out)
    ]
    variants = sorted({v for ref in refs if ref.domain == "sim" and (v := grounding_variant(ref.env_id))})
    real_env = [ref.env_id for ref in refs if ref.domain == "real"]
    cls = user_method(config)
    # A user's method: its name, its class and the SHA-256 of its module's file (what code trained the weights).
    user = {} if cls is None else {"method_class": config.method, "method_source_sha256": module_digest(config.method)}
    return {
        "method": config.method if cls is None else method_name(cls),
        "real_fraction": config.real_fraction,
        "variant": "+".join(variants) if variants else None,
        "datasets": entries,
        "training_seed": config.seed,
        "n_real_demos": sum(e["episodes"] for e in entries if e["domain"] == "real"),
        "n_sim_demos": sum(e["episodes"] for e in entries if e["domain"] == "sim"),
        "policy_class": POLICY_CLASS,
        "demos": config.demos,
        "env_id": real_env[0] if real_env else refs[0].env_id,
        "steps": config.steps,
        "recipe": config.recipe,
        "features": config.features,
        "versions": {"r2s2r_envs": __version__, "torch": torch.__version__},
        **user,
    }


_TRAINING_SUMMARY = (
    "final_loss",
    "load_time_s",
    "train_time_s",
    "samples_per_s",
    "threads",
    "device",
    "checkpoint_step",
)


def _write(
    out: Path,
    config: TrainConfig,
    pipeline: Pipeline,
    model: torch.nn.Module,
    metadata: dict[str, Any],
    log: dict[str, Any],
    model_section: dict[str, Any],
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    torch.save({k: v.detach().cpu() for k, v in model.state_dict().items()}, out / WEIGHTS_FILE)
    (out / LOG_FILE).write_text(json.dumps(log) + "\n")
    _plot(out / LOSS_PLOT, config, log)
    document = {
        "format": CHECKPOINT_FORMAT,
        "checkpoint_version": CHECKPOINT_VERSION,
        "config": config.to_dict(),
        "metadata": metadata,
        "pipeline": pipeline.to_dict(),
        "model": model_section,
        "training": {k: log[k] for k in _TRAINING_SUMMARY},
        "weights_sha256": weights_digest(out / WEIGHTS_FILE),
    }
    from r2s2r_envs.safe_json import with_content_hash

    # config.json last, atomically: its presence marks a finished checkpoint.
    tmp = out / (CONFIG_FILE + ".tmp")
    tmp.write_text(json.dumps(with_content_hash(document), indent=2) + "\n")  # a hash of its own content
    os.replace(tmp, out / CONFIG_FILE)


def _plot(path: Path, config: TrainConfig, log: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    history = log["history"]
    steps = np.arange(1, len(history["loss"]) + 1)
    window = max(1, len(steps) // 100)
    fig, ax = plt.subplots(figsize=(7, 4))
    for key in ("loss", "action", "domain"):
        if key in history and (key != "action" or "domain" in history):
            y = np.convolve(history[key], np.ones(window) / window, mode="valid")
            ax.plot(steps[window - 1 :], y, label=key)
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_yscale("log" if min(history["loss"]) > 0 else "linear")
    ax.set_title(f"{config.method}, real_fraction={config.real_fraction}, seed={config.seed}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
