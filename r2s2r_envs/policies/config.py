"""The training configuration of ``r2s2r train``: one frozen, keyword-only dataclass, checked before any work.

No torch here: the CLI builds its options from :class:`TrainConfig`'s fields and checks a configuration
(:func:`check_config`) before the torch modules are imported. docs/baselines.md explains every field.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import Any, Literal

#: Training methods: behaviour cloning (an MLP, unimodal), flow matching over action chunks, and flow matching
#: with domain-aware co-training: classifier-free guidance on a domain label (cfg), an adversarial domain
#: discriminator on the encoder features (adda) or both (cfg-adda). docs/baselines.md describes each.
METHODS: tuple[str, ...] = ("bc", "flow", "flow-cfg", "flow-adda", "flow-cfg-adda")
Method = Literal["bc", "flow", "flow-cfg", "flow-adda", "flow-cfg-adda"]
Demos = Literal["success", "all"]
ActionNormalization = Literal["standard", "minmax"]
Encoder = Literal["mlp", "cnn"]
Composition = Literal["bernoulli", "stratified"]
VerifyMode = Literal["full", "quick", "none"]
Device = Literal["cpu", "cuda", "auto"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """Everything ``r2s2r train`` needs; written, resolved, to ``config.json`` next to the checkpoint.

    Attributes:
        method: the training method, one of :data:`METHODS` (bc, flow, flow-cfg, flow-adda, flow-cfg-adda).
        real: real (lab) datasets: canonical names (``r2s2r datasets list``) or HDF5 files; empty for sim-only.
        sim: simulated datasets, the same way; empty for real-only.
        real_fraction: expected share of real samples in each batch, in [0, 1] (1.0: real only, 0.0: sim only).
        seed: training seed (weights, batches, noise); the same seed on one machine gives identical weights.
        out: output directory (created; an existing checkpoint there is refused unless ``overwrite``).
        steps: gradient steps.
        batch_size: samples per batch.
        lr: AdamW learning rate (cosine decay to 10% over ``steps``).
        weight_decay: AdamW weight decay.
        grad_clip: gradient norm clip (0 = off).
        demos: ``"success"`` trains on successful demos only (the file's ``mask/success``), ``"all"`` on every demo.
        action_normalization: how action chunks are normalized for the networks: ``"standard"`` (zero mean, unit
            variance per dimension: the data then has the scale of the flow's Gaussian noise) or ``"minmax"``
            ([-1, 1] from the data's range).
        obs_keys: observation keys (empty: every low-dimensional key of the data); images only with
            ``encoder="cnn"``.
        frame_stack: observations per input, ending at the current step.
        action_chunk: actions predicted per inference (``H``).
        execute_steps: actions of each predicted chunk executed before predicting again (receding horizon).
        hidden_dim: width of the MLPs.
        layers: hidden layers of each MLP.
        feature_dim: width of the encoder's output (what the ADDA discriminator sees).
        encoder: ``"mlp"`` (state observations, the default) or ``"cnn"`` (a small CNN over the 128x128 cameras
            named in ``obs_keys`` plus an MLP over the rest).
        flow_steps: Euler integration steps of the flow at inference.
        cfg_dropout: probability that a sample's domain label is replaced by the "no label" token in training.
        cfg_scale: guidance scale ``w`` at inference: ``v = v_none + w * (v_real - v_none)`` (1 = conditional on
            "real" without extrapolation).
        adda_weight: weight of the domain discriminator's loss, reached after ``adda_warmup`` of the steps.
        adda_warmup: share of ``steps`` over which the adversarial weight ramps up (DANN schedule).
        composition: how each batch's real share is drawn: ``"bernoulli"`` (independent entries) or
            ``"stratified"`` (least variance); both have expectation ``real_fraction``.
        threads: torch CPU threads. 1 by default: on a shared 2-core machine a second thread made steps up to 20x
            slower (docs/baselines.md, "Training speed"); try 2 on an idle machine.
        device: where the networks train: ``"cpu"`` (the default; deterministic), ``"cuda"`` (a GPU, if torch
            has one; faster for long runs, not bit-reproducible) or ``"auto"`` (cuda when available).  The
            checkpoint is the same either way and runs on the CPU.
        verify: dataset hash check when loading (``"full"`` recomputes every hash).
        progress: progress bar on stderr.
        overwrite: replace an existing checkpoint in ``out``.
    """

    method: Method
    real: tuple[str, ...] = ()
    sim: tuple[str, ...] = ()
    real_fraction: float
    seed: int = 0
    out: str
    steps: int = 5000
    batch_size: int = 1024
    lr: float = 2e-3
    weight_decay: float = 1e-6
    grad_clip: float = 1.0
    demos: Demos = "success"
    action_normalization: ActionNormalization = "standard"
    obs_keys: tuple[str, ...] = ()
    frame_stack: int = 2
    action_chunk: int = 16
    execute_steps: int = 8
    hidden_dim: int = 256
    layers: int = 3
    feature_dim: int = 128
    encoder: Encoder = "mlp"
    flow_steps: int = 10
    cfg_dropout: float = 0.2
    cfg_scale: float = 1.5
    adda_weight: float = 0.1
    adda_warmup: float = 0.3
    composition: Composition = "bernoulli"
    threads: int = 1
    device: Device = "cpu"
    verify: VerifyMode = "full"
    progress: bool = True
    overwrite: bool = False

    @property
    def uses_cfg(self) -> bool:
        """Whether the method conditions on a domain label with classifier-free guidance."""
        return self.method in ("flow-cfg", "flow-cfg-adda")

    @property
    def uses_adda(self) -> bool:
        """Whether the method trains an adversarial domain discriminator on the encoder features."""
        return self.method in ("flow-adda", "flow-cfg-adda")

    @property
    def generative(self) -> bool:
        """Whether the policy is a flow over action chunks (every method but ``bc``)."""
        return self.method != "bc"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (tuples as lists)."""
        return {f.name: _jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Reads :meth:`to_dict` output; unknown fields are refused with the list of known ones."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown training config field(s) {unknown}; known: {sorted(known)}")
        kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
        return cls(**kwargs)


def _jsonable(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def field_choices(name: str) -> tuple[str, ...] | None:
    """The allowed values of a ``Literal`` field of :class:`TrainConfig` (``None`` for other fields)."""
    hints = typing.get_type_hints(TrainConfig)
    hint = hints[name]
    if typing.get_origin(hint) is Literal:
        return tuple(typing.get_args(hint))
    return None


class ConfigError(ValueError):
    """A training configuration that cannot run; the message names the field, the value and what is accepted."""


def check_config(config: TrainConfig) -> None:
    """Checks every field that can be checked without reading data.

    Raises:
        ConfigError: naming the first field at fault and what it accepts.
    """
    if config.method not in METHODS:
        raise ConfigError(f"unknown method {config.method!r}; choose one of {list(METHODS)}")
    for name in ("demos", "action_normalization", "encoder", "composition", "verify", "device"):
        choices = field_choices(name)
        if getattr(config, name) not in choices:
            raise ConfigError(f"{name} must be one of {list(choices)}, got {getattr(config, name)!r}")
    rf = config.real_fraction
    if isinstance(rf, bool) or not isinstance(rf, (int, float)) or not math.isfinite(rf) or not 0.0 <= rf <= 1.0:
        raise ConfigError(
            f"real_fraction must be a number in [0, 1] (the expected share of real samples per batch; 1.0 = real "
            f"only, 0.0 = sim only), got {rf!r}"
        )
    if rf > 0 and not config.real:
        raise ConfigError(f"real_fraction={rf} draws real samples: give a real dataset (--real NAME_OR_FILE)")
    if rf < 1 and not config.sim:
        raise ConfigError(f"real_fraction={rf} draws simulated samples: give a sim dataset (--sim NAME_OR_FILE)")
    if not config.out:
        raise ConfigError("out (the output directory) is required")
    positive = ("steps", "batch_size", "frame_stack", "action_chunk", "execute_steps", "hidden_dim", "layers")
    for name in (*positive, "feature_dim", "flow_steps", "threads"):
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
    if config.execute_steps > config.action_chunk:
        raise ConfigError(
            f"execute_steps ({config.execute_steps}) must be <= action_chunk ({config.action_chunk}): a policy "
            "executes part of each predicted chunk"
        )
    for name, low, high in (("cfg_dropout", 0.0, 1.0), ("adda_warmup", 0.0, 1.0)):
        value = getattr(config, name)
        if not low <= value <= high:
            raise ConfigError(f"{name} must be in [{low}, {high}], got {value!r}")
    if config.uses_cfg and not 0.0 < config.cfg_dropout < 1.0:
        raise ConfigError(
            f"{config.method} needs 0 < cfg_dropout < 1 (it learns both the labelled and the unlabelled flow), "
            f"got {config.cfg_dropout}"
        )
    for name in ("lr", "weight_decay", "grad_clip", "adda_weight", "cfg_scale"):
        value = getattr(config, name)
        if not math.isfinite(value) or value < 0 or (name == "lr" and value == 0):
            raise ConfigError(f"{name} must be a finite number {'> 0' if name == 'lr' else '>= 0'}, got {value!r}")
    if config.uses_adda and (rf in (0.0, 1.0)):
        raise ConfigError(
            f"{config.method} aligns real and sim features: it needs both domains in the batches "
            f"(0 < real_fraction < 1), got real_fraction={rf}"
        )
    if config.uses_cfg and rf in (0.0, 1.0):
        raise ConfigError(
            f"{config.method} guides toward the real domain label: it needs both domains in the batches "
            f"(0 < real_fraction < 1), got real_fraction={rf}"
        )
