"""Which weights a training run keeps: the moving average of its weights (:class:`EMA`) and the validation loss
on held-out demos (:func:`validation_loss`) at the run's validation points, the least of which
:class:`CheckpointChoice` keeps."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, cast

import numpy as np
import torch

from r2s2r_envs.datasets.loaders import TrajectoryDataset
from r2s2r_envs.policies.batches import batch_tensors
from r2s2r_envs.policies.config import TrainConfig
from r2s2r_envs.policies.method import Batch
from r2s2r_envs.policies.models import PolicyModel
from r2s2r_envs.policies.pipeline import Pipeline
from r2s2r_envs.policies.trainee import Trainee

#: How a loader batch becomes network inputs, targets and loss weights (``batch_tensors``'s signature).
Encode = Callable[[Pipeline, dict[str, Any], torch.device], tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor]]


class EMA:
    """Exponential moving average of a model's parameters and buffers (the weights that are saved).

    The decay at update ``n`` is ``min(decay, (1 + n) / (10 + n))``, so the average follows the fast early changes.
    A frozen parameter (one that requires no gradient: a shipped encoder's) is copied, not averaged, so it stays
    bit for bit what was loaded (``d x + (1 - d) x`` can round to a neighbour of ``x``).
    """

    def __init__(self, model: torch.nn.Module, decay: float) -> None:
        self.decay = float(decay)
        self.updates = 0
        self.state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        self.frozen = {name for name, p in model.named_parameters() if not p.requires_grad}

    @torch.no_grad()
    def update(self, model: torch.nn.Module) -> None:
        self.updates += 1
        d = min(self.decay, (1 + self.updates) / (10 + self.updates))
        for k, v in model.state_dict().items():
            if v.dtype.is_floating_point and k not in self.frozen:
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
    encode: Encode = batch_tensors,
) -> float:
    """Mean action loss of ``model`` on fixed validation batches, with fixed random draws (flow noise and times:
    comparable between checkpoints); ``trainee`` gives the losses (default: a :class:`PolicyModel`'s), ``encode``
    the inputs (default: the pipeline's; cached camera features: ``r2s2r_envs.policies.cached``)."""
    model.eval()
    generator = torch.Generator(device=device).manual_seed(seed)
    total, weight = 0.0, 0.0
    for batch in batches:
        inputs, target, w = encode(pipeline, batch, device)
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


def validation_batches(config: TrainConfig, datasets: list[TrajectoryDataset]) -> list[dict[str, Any]]:
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


class CheckpointChoice:
    """Which weights a run keeps: the exponential moving average of the weights (:class:`EMA`, with ``ema_decay``)
    or the weights themselves, at the validation point where the validation loss on the held-out demos is least;
    the last step's without held-out demos.

    The run calls :meth:`update_ema` after every optimizer step and :meth:`validate` once the step is logged; then
    :meth:`final` gives the chosen weights.  Validation points: ``val_points`` over the run, the last at the last
    step.
    """

    def __init__(
        self,
        config: TrainConfig,
        model: torch.nn.Module,
        held_out: list[TrajectoryDataset],
        pipeline: Pipeline,
        device: torch.device,
        trainee: Trainee,
        encode: Encode = batch_tensors,
    ) -> None:
        self.config, self.pipeline, self.device, self.trainee = config, pipeline, device, trainee
        self.encode = encode
        self.ema = EMA(model, config.ema_decay) if config.ema_decay > 0 else None
        self.batches = validation_batches(config, held_out)
        points = range(1, config.val_points + 1)
        self.steps = (
            {max(0, round(config.steps * k / config.val_points) - 1) for k in points} if self.batches else set()
        )
        # With EMA the average is validated in a copy of the network: the trained weights stay as they are.
        self.evaluated = copy.deepcopy(model) if self.ema is not None and self.batches else None
        self.best: tuple[float, int, dict[str, torch.Tensor]] | None = None
        #: ``{"step", "loss"}`` of every validation point so far (the training log's ``validation``).
        self.validation: list[dict[str, float]] = []

    def update_ema(self, model: torch.nn.Module) -> None:
        """After an optimizer step: the moving average follows the weights (without EMA: nothing)."""
        if self.ema is not None:
            self.ema.update(model)

    def validate(self, model: torch.nn.Module, step: int) -> None:
        """At a validation point: the validation loss of the weights kept, remembered if the least so far."""
        if step not in self.steps:
            return
        ema = self.ema
        state = ema.state if ema is not None else model.state_dict()
        target_model = model
        if self.evaluated is not None:
            self.evaluated.load_state_dict(state)
            target_model = self.evaluated
        loss = validation_loss(
            target_model, self.pipeline, self.batches, self.device, self.config.seed, self.trainee, self.encode
        )
        self.validation.append({"step": step + 1, "loss": loss})
        if self.best is None or loss < self.best[0]:
            self.best = (loss, step + 1, {k: v.detach().clone() for k, v in state.items()})

    def final(self, model: torch.nn.Module) -> tuple[dict[str, torch.Tensor], int]:
        """The weights chosen at the end of the run and the step they are of (1-based)."""
        if self.best is not None:
            return self.best[2], self.best[1]
        return (self.ema.state if self.ema is not None else model.state_dict()), self.config.steps
