"""What the training loop trains: a :class:`Trainee`, the network of a run and its losses on a batch.

A reference method (``bc``, ``flow``, ...) is a :class:`ReferenceTrainee`: a
:class:`~r2s2r_envs.policies.models.PolicyModel` built from the run's recipe, with CFG label dropout and ADDA's
reversal ramp (:func:`reversal_scale`); a user's :class:`~r2s2r_envs.policies.method.Method` (``method`` given as
``module:Class``, docs/byo_method.md) is a :class:`UserTrainee`.  :func:`~r2s2r_envs.policies.train.train` runs
either through the same loop.
"""

from __future__ import annotations

import math
from typing import Any, cast

import torch

from r2s2r_envs.policies.config import ConfigError, TrainConfig
from r2s2r_envs.policies.method import Batch, Method, MethodError, Spec, import_method, loss_dict
from r2s2r_envs.policies.models import PolicyModel
from r2s2r_envs.policies.pipeline import Pipeline


def build_model(config: TrainConfig, pipeline: Pipeline) -> PolicyModel:
    """The network of a config (sizes from the pipeline)."""
    return PolicyModel(**model_config(config, pipeline))


def model_config(config: TrainConfig, pipeline: Pipeline) -> dict[str, Any]:
    """The ``model`` section of ``config.json``: the arguments of :class:`PolicyModel` (the camera encoder only
    with cameras)."""
    section = {
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
    if pipeline.image_keys:
        section["image_encoder"] = config.image_encoder
    return section


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


def reversal_scale(config: TrainConfig, step: int) -> float:
    """The encoder's adversarial weight at ``step``: DANN's ``2 / (1 + exp(-10 p)) - 1`` ramp over the warm-up."""
    if not config.uses_adda:
        return 0.0
    warm = config.adda_warmup * config.steps
    p = 1.0 if warm <= 0 else min(1.0, step / warm)
    return config.adda_weight * (2.0 / (1.0 + math.exp(-10.0 * p)) - 1.0)
