"""The training configuration of ``r2s2r train``: one frozen, keyword-only dataclass, checked before any work.

No torch here: the CLI builds its options from :class:`TrainConfig`'s fields and checks a configuration
(:func:`check_config`) before the torch modules are imported. docs/baselines.md explains every field.
"""

from __future__ import annotations

import dataclasses
import math
import re
import typing
from typing import Any, Literal

from r2s2r_envs.mappings import check_keys
from r2s2r_envs.safe_json import plain_json

#: Training methods: behaviour cloning (an MLP, unimodal), flow matching over action chunks, and flow matching
#: with domain-aware co-training: classifier-free guidance on a domain label (cfg), an adversarial domain
#: discriminator on the encoder features (adda) or both (cfg-adda). docs/baselines.md describes each.
METHODS: tuple[str, ...] = ("bc", "flow", "flow-cfg", "flow-adda", "flow-cfg-adda")
Method = Literal["bc", "flow", "flow-cfg", "flow-adda", "flow-cfg-adda"]
#: A user's method given as ``module:Class`` (a :class:`r2s2r_envs.policies.method.Method` subclass).
METHOD_CLASS_PATTERN = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
Demos = Literal["success", "all"]
ActionNormalization = Literal["standard", "minmax"]
Encoder = Literal["mlp", "cnn"]
Composition = Literal["bernoulli", "stratified"]
VerifyMode = Literal["full", "quick", "none"]
Device = Literal["cpu", "cuda", "auto"]
Features = Literal["raw", "task", "proprio"]
ImageEncoder = Literal["conv4", "conv-gn", "resnet18-gn", "sim-pose"]
#: The camera encoders (``r2s2r_envs.policies.vision``): the first image policies' (conv4), the ``cpu-image``
#: recipe's small GroupNorm CNN (conv-gn), the ``gpu-image`` recipe's ResNet-18 with GroupNorm (resnet18-gn) and
#: the ``cpu-image-cached`` recipe's frozen encoder, shipped trained on simulator renders (sim-pose).
IMAGE_ENCODERS: tuple[str, ...] = typing.get_args(ImageEncoder)
#: The cameras of a PickSort env (``obs_mode`` ``"rgb"`` or ``"state+rgb"``), which the image recipes read.
CAMERA_KEYS: tuple[str, ...] = ("scene_image", "wrist_image")


@dataclasses.dataclass(frozen=True, kw_only=True)
class FrozenEncoder:
    """A camera encoder the suite ships trained, whose weights a policy never changes (``r2s2r_envs.policies.vision``
    builds it; no torch here, so a configuration is checked against it before torch is imported).

    Its features are computed once per frame of the training data and cached (``r2s2r_envs.policies.cached``):
    nothing moves the pixels in training, so ``image_shift`` must be 0. A retrained encoder gets a new name, so a
    name always means one set of weights (a checkpoint also holds its own copy of them).

    Attributes:
        name: the ``image_encoder`` value.
        file: the packed weights, relative to the ``r2s2r_envs.policies`` package.
        sha256: SHA-256 of that file (checked when it is read).
        cameras: the cameras it has a head for (``image_keys`` must be among them).
        image_size: the side of the frames it was trained on, pixels (the data's cameras must have it).
        out_dim: features per frame and camera.
        keypoints: spatial-softmax keypoints of each camera's head.
        trained_on: what its weights were fitted to (simulator renders only, never a lab image).
        record: the JSON of its training run (validation errors, time, parameters), relative to the repository.
    """

    name: str
    file: str
    sha256: str
    cameras: tuple[str, ...]
    image_size: int
    out_dim: int
    keypoints: int
    trained_on: str
    record: str


#: The frozen encoders, by ``image_encoder`` name (baselines/train_image_encoder.py trains them).
FROZEN_ENCODERS: dict[str, FrozenEncoder] = {
    "sim-pose": FrozenEncoder(
        name="sim-pose",
        file="encoders/sim-pose.pt",
        sha256="d92ebf2bf9e4b0db73408506649c7aa8fedbe719f4d38eae05695d7cfac749e3",
        cameras=CAMERA_KEYS,
        image_size=64,
        out_dim=64,
        keypoints=32,
        trained_on="the 64 px simulator renders of ungrounded-v1-1000-rgb64 (200 demos; no lab image)",
        record="experiments/image-encoder/sim-pose.json",
    )
}
Architecture = Literal["mlp", "resmlp"]
Labels = Literal["executed", "clean"]
NormalizationWeights = Literal["samples", "mixture"]

#: Named recipes: the value of every recipe field (docs/baselines.md, "Recipes"). A field left unset (``None``)
#: takes its recipe's value; a field given explicitly wins. ``cpu`` is the default of ``r2s2r train``; ``gpu`` the
#: same methods at a larger budget and model for one GPU; ``v1`` the first policies' settings (5,000 steps,
#: raw inputs, plain MLPs, no EMA), with which the earlier records were made. ``cpu-image``, ``cpu-image-cached`` and
#: ``gpu-image`` are the visuomotor recipes: both cameras and the proprioception, no object state (docs/baselines.md,
#: "Image recipes"); the state recipes leave the camera fields to :data:`STATE_INPUTS`.
RECIPES: dict[str, dict[str, Any]] = {
    "v1": {
        "steps": 5000,
        "batch_size": 1024,
        "lr": 2e-3,
        "warmup_steps": 0,
        "weight_decay": 1e-6,
        "grad_clip": 1.0,
        "ema_decay": 0.0,
        "demos": "success",
        "labels": "executed",
        "action_normalization": "standard",
        "normalization_weights": "samples",
        "features": "raw",
        "architecture": "mlp",
        "frame_stack": 2,
        "action_chunk": 16,
        "execute_steps": 8,
        "temporal_ensemble": 0.0,
        "hidden_dim": 256,
        "layers": 3,
        "feature_dim": 128,
        "flow_steps": 10,
        "cfg_dropout": 0.2,
        "cfg_scale": 1.5,
        "adda_weight": 0.1,
        "adda_warmup": 0.3,
        "composition": "bernoulli",
        "val_fraction": 0.0,
        "val_points": 10,
        "obs_noise": 0.0,
        "device": "cpu",
    },
}
RECIPES["cpu"] = {
    **RECIPES["v1"],
    "steps": 20000,
    "batch_size": 256,
    "lr": 1e-3,
    "warmup_steps": 500,
    "weight_decay": 1e-4,
    "ema_decay": 0.999,
    "labels": "clean",
    "normalization_weights": "mixture",
    "features": "task",
    "architecture": "resmlp",
    "action_chunk": 16,
    "execute_steps": 4,
    "hidden_dim": 256,
    "layers": 3,
    "feature_dim": 256,
    "val_fraction": 0.05,
    # Chosen on held-out simulated episodes (experiments/adda-weight/): 0.1 over-aligned the features.
    "adda_weight": 0.001,
}
RECIPES["gpu"] = {
    **RECIPES["cpu"],
    "steps": 100000,
    "batch_size": 1024,
    "hidden_dim": 512,
    "layers": 4,
    "feature_dim": 512,
    "device": "auto",
}
#: The camera fields' values where a recipe names none: a state policy's. The state recipes predate these fields
#: and leave them out, so their resolved values (which key stored results, e.g. the ablation's tasks) are unchanged.
STATE_INPUTS: dict[str, Any] = {"encoder": "mlp", "image_keys": (), "image_encoder": "conv4", "image_shift": 0}
# The visuomotor recipes keep the state recipes' method settings; what changes is the input (cameras and
# proprioception), the encoder and a smaller batch of a slower step (benchmarks/image_training_speed.py).
RECIPES["cpu-image"] = {
    **RECIPES["cpu"],
    "steps": 20000,
    "batch_size": 64,
    "lr": 3e-4,
    "features": "proprio",
    "encoder": "cnn",
    "image_keys": CAMERA_KEYS,
    "image_encoder": "conv-gn",
    "image_shift": 4,
}
# The cpu-image recipe with the frozen sim-pose encoder: its features are computed once per frame and cached, so a
# step costs what a state step of the same batch does (benchmarks/image_cached_speed.py); nothing shifts the pixels.
RECIPES["cpu-image-cached"] = {**RECIPES["cpu-image"], "image_encoder": "sim-pose", "image_shift": 0}
RECIPES["gpu-image"] = {
    **RECIPES["gpu"],
    "batch_size": 256,
    "lr": 3e-4,
    "features": "proprio",
    "encoder": "cnn",
    "image_keys": CAMERA_KEYS,
    "image_encoder": "resnet18-gn",
    "image_shift": 4,
}
#: The recipe of ``r2s2r train`` and of a :class:`TrainConfig` that names none.
DEFAULT_RECIPE = "cpu"
#: The default of every recipe field of :class:`TrainConfig`: unset (``None``), so that the recipe fills it in
#: ``__post_init__``. Typed ``Any`` so that each field keeps its own type: a constructed config holds no ``None``.
FROM_RECIPE: Any = None
#: The recipe of a checkpoint config written before recipes existed.
LEGACY_RECIPE = "v1"


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """Everything ``r2s2r train`` needs; written, resolved, to ``config.json`` next to the checkpoint.

    Attributes:
        method: the training method, one of :data:`METHODS` (bc, flow, flow-cfg, flow-adda, flow-cfg-adda), or a
            method class of yours as ``module:Class`` (docs/byo_method.md).
        real: real (lab) datasets: canonical names (``r2s2r datasets list``) or HDF5 files; empty for sim-only.
        sim: simulated datasets, the same way; empty for real-only.
        real_fraction: expected share of real samples in each batch, in [0, 1] (1.0: real only, 0.0: sim only).
        seed: training seed (weights, batches, noise); the same seed on one machine gives identical weights.
        out: output directory (created; an existing checkpoint there is refused unless ``overwrite``).
        recipe: the named recipe (:data:`RECIPES`: cpu, gpu, v1, cpu-image, cpu-image-cached, gpu-image) whose
            values fill every field below left unset.
        steps: gradient steps.
        batch_size: samples per batch.
        lr: AdamW learning rate (linear warm-up over ``warmup_steps``, then cosine decay to 10% at ``steps``).
        warmup_steps: steps of linear learning-rate warm-up from 0.
        weight_decay: AdamW weight decay.
        grad_clip: gradient norm clip (0 = off).
        ema_decay: decay of the exponential moving average of the weights that is saved and evaluated (0: the
            last weights); the decay ramps up as ``min(ema_decay, (1 + step) / (10 + step))``.
        demos: ``"success"`` trains on successful demos only (the file's ``mask/success``), ``"all"`` on every demo.
        labels: the training targets: ``"clean"`` (the demonstrator's own actions, before noise injection: the
            dataset's ``action_labels``) or ``"executed"`` (the actions executed, noise included).
        action_normalization: how action chunks are normalized for the networks: ``"standard"`` (zero mean, unit
            variance per dimension: the data then has the scale of the flow's Gaussian noise) or ``"minmax"``
            ([-1, 1] from the data's range).
        normalization_weights: how the datasets' statistics are merged for normalization: ``"mixture"`` (each
            dataset weighted by its share of the batches, so the real data is normalized by the statistics the
            training batches have) or ``"samples"`` (by sample counts).
        features: the feature stage (``r2s2r_envs.policies.features``): ``"task"`` (hand-relative objects, next
            object first, continuous hand rotation, inferred object status), ``"raw"`` (the observation keys
            concatenated) or ``"proprio"`` (the robot's own keys only, joints and hand pose, concatenated: what an
            image policy reads besides its cameras; no object state).
        architecture: ``"resmlp"`` (residual blocks with layer norm; the flow head conditioned by FiLM) or
            ``"mlp"`` (plain MLPs, the condition concatenated).
        obs_keys: observation keys (empty: every low-dimensional key of the data, or with ``features="proprio"``
            the robot's own); images only with ``encoder="cnn"``; ``features="task"`` reads its own keys.
        frame_stack: observations per input, ending at the current step.
        action_chunk: actions predicted per inference (``H``).
        execute_steps: actions of each predicted chunk executed before predicting again (receding horizon).
        temporal_ensemble: 0 for receding-horizon execution; ``k > 0`` predicts a chunk every step and executes the
            average of every chunk's prediction for the step, weighted ``exp(-k * age)`` (age in steps: newer
            predictions weigh more).
        hidden_dim: width of the MLPs.
        layers: hidden layers of each MLP (residual blocks with ``architecture="resmlp"``).
        feature_dim: width of the encoder's output (what the ADDA discriminator sees).
        encoder: ``"mlp"`` (state observations) or ``"cnn"`` (a CNN per camera of ``image_keys`` or ``obs_keys``
            plus an MLP over the concatenated features).
        image_keys: the cameras a ``"cnn"`` encoder reads (``scene_image``, ``wrist_image``).
        image_encoder: each camera's CNN: ``"conv-gn"`` (small, GroupNorm, spatial softmax; for 64 px on CPUs),
            ``"resnet18-gn"`` (ResNet-18 with GroupNorm; for a GPU), ``"conv4"`` (the first image policies') or
            ``"sim-pose"`` (frozen, shipped trained on simulator renders: :data:`FROZEN_ENCODERS`; its features are
            computed once per frame and cached, and only the MLP over them and the proprioception trains).
        image_shift: random-shift augmentation in training: each sample's frames of a camera move by up to this
            many pixels per axis, the border repeated (0: off). Never applied at inference, nor to a frozen
            encoder's cached features (it must be 0 there).
        flow_steps: Euler integration steps of the flow at inference.
        cfg_dropout: probability that a sample's domain label is replaced by the "no label" token in training.
        cfg_scale: guidance scale ``w`` at inference: ``v = v_none + w * (v_real - v_none)`` (1 = conditional on
            "real" without extrapolation).
        adda_weight: scale of the reversed discriminator gradient the encoder receives (the discriminator
            itself trains at full weight), reached after ``adda_warmup`` of the steps.
        adda_warmup: share of ``steps`` over which the adversarial weight ramps up (DANN schedule).
        composition: how each batch's real share is drawn: ``"bernoulli"`` (independent entries) or
            ``"stratified"`` (least variance); both have expectation ``real_fraction``.
        val_fraction: share of each dataset's demos (at least one, when > 0) held out of training; the validation
            loss on them is logged and the checkpoint with the lowest one is saved (never a lab episode).
        val_points: how many times the validation loss is measured, evenly over the run (the last at the last
            step); each is a checkpoint candidate.
        obs_noise: standard deviation of Gaussian noise added to the normalized state inputs of every training
            sample (0: off); a regularizer against small datasets' overfitting. Never applied at inference.
        threads: torch CPU threads. 1 by default: on a shared 2-core machine a second thread made steps up to 20x
            slower (docs/baselines.md, "Training speed"); try 2 on an idle machine.
        device: where the networks train: ``"cpu"`` (the default; deterministic), ``"cuda"`` (a GPU, if torch
            has one; faster for long runs, not bit-reproducible) or ``"auto"`` (cuda when available).  The
            checkpoint is the same either way and runs on the CPU.
        verify: dataset hash check when loading (``"full"`` recomputes every hash).
        progress: progress bar on stderr.
        overwrite: replace an existing checkpoint in ``out``.
    """

    method: str
    real: tuple[str, ...] = ()
    sim: tuple[str, ...] = ()
    real_fraction: float
    seed: int = 0
    out: str
    recipe: str = DEFAULT_RECIPE
    steps: int = FROM_RECIPE
    batch_size: int = FROM_RECIPE
    lr: float = FROM_RECIPE
    warmup_steps: int = FROM_RECIPE
    weight_decay: float = FROM_RECIPE
    grad_clip: float = FROM_RECIPE
    ema_decay: float = FROM_RECIPE
    demos: Demos = FROM_RECIPE
    labels: Labels = FROM_RECIPE
    action_normalization: ActionNormalization = FROM_RECIPE
    normalization_weights: NormalizationWeights = FROM_RECIPE
    features: Features = FROM_RECIPE
    architecture: Architecture = FROM_RECIPE
    obs_keys: tuple[str, ...] = ()
    frame_stack: int = FROM_RECIPE
    action_chunk: int = FROM_RECIPE
    execute_steps: int = FROM_RECIPE
    temporal_ensemble: float = FROM_RECIPE
    hidden_dim: int = FROM_RECIPE
    layers: int = FROM_RECIPE
    feature_dim: int = FROM_RECIPE
    encoder: Encoder = FROM_RECIPE
    image_keys: tuple[str, ...] = FROM_RECIPE
    image_encoder: ImageEncoder = FROM_RECIPE
    image_shift: int = FROM_RECIPE
    flow_steps: int = FROM_RECIPE
    cfg_dropout: float = FROM_RECIPE
    cfg_scale: float = FROM_RECIPE
    adda_weight: float = FROM_RECIPE
    adda_warmup: float = FROM_RECIPE
    composition: Composition = FROM_RECIPE
    val_fraction: float = FROM_RECIPE
    val_points: int = FROM_RECIPE
    obs_noise: float = FROM_RECIPE
    threads: int = 1
    device: Device = FROM_RECIPE
    verify: VerifyMode = "full"
    progress: bool = True
    overwrite: bool = False

    def __post_init__(self) -> None:
        if self.recipe not in RECIPES:
            raise ConfigError(f"unknown recipe {self.recipe!r}; choose one of {sorted(RECIPES)}")
        for name, value in recipe_values(self.recipe).items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)

    @property
    def method_class(self) -> str | None:
        """The ``module:Class`` of a user's method (``None`` for the reference methods)."""
        return self.method if isinstance(self.method, str) and METHOD_CLASS_PATTERN.fullmatch(self.method) else None

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
        return {f.name: plain_json(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Reads :meth:`to_dict` output; unknown fields are refused with the list of known ones.

        A config written before recipes existed (no ``recipe`` field) reads as the ``v1`` recipe, whose values
        were then the defaults.
        """
        known = sorted(f.name for f in dataclasses.fields(cls))
        check_keys(data, known, what="training config field", error=ValueError)
        kwargs: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
        kwargs.setdefault("recipe", LEGACY_RECIPE)
        return cls(**kwargs)


def recipe_values(recipe: str) -> dict[str, Any]:
    """Every value recipe ``recipe`` gives an unset field: its own and, where it names none, :data:`STATE_INPUTS`.

    Raises:
        KeyError: an unknown recipe.
    """
    return {**STATE_INPUTS, **RECIPES[recipe]}


def field_choices(name: str) -> tuple[str, ...] | None:
    """The allowed values of a ``Literal`` field of :class:`TrainConfig` (``None`` for other fields)."""
    hint = field_type(name)
    if typing.get_origin(hint) is Literal:
        return tuple(typing.get_args(hint))
    return None


def field_type(name: str) -> Any:
    """The type of a :class:`TrainConfig` field (a recipe field's is the type of its value: ``steps`` -> int)."""
    return typing.get_type_hints(TrainConfig)[name]


class ConfigError(ValueError):
    """A training configuration that cannot run; the message names the field, the value and what is accepted."""


def check_config(config: TrainConfig) -> None:
    """Checks every field that can be checked without reading data.

    Raises:
        ConfigError: naming the first field at fault and what it accepts.
    """
    if config.method not in METHODS and config.method_class is None:
        raise ConfigError(
            f"unknown method {config.method!r}; choose one of {list(METHODS)} or a Method class of yours as "
            "module:Class (docs/byo_method.md)"
        )
    choice_fields = ("demos", "labels", "action_normalization", "normalization_weights", "features", "architecture")
    for name in (*choice_fields, "encoder", "image_encoder", "composition", "verify", "device"):
        choices = typing.cast(tuple[str, ...], field_choices(name))  # Literal fields: never None
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
    positive: tuple[str, ...] = ("steps", "batch_size", "frame_stack", "action_chunk", "execute_steps", "hidden_dim")
    positive += ("layers", "val_points")
    for name in (*positive, "feature_dim", "flow_steps", "threads"):
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
    if isinstance(config.warmup_steps, bool) or not isinstance(config.warmup_steps, int) or config.warmup_steps < 0:
        raise ConfigError(f"warmup_steps must be an integer >= 0, got {config.warmup_steps!r}")
    for name, low, high in (("ema_decay", 0.0, 0.99999), ("val_fraction", 0.0, 0.5)):
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
            raise ConfigError(f"{name} must be a number in [{low}, {high}], got {value!r}")
    noise = config.obs_noise
    if isinstance(noise, bool) or not isinstance(noise, (int, float)) or not 0 <= noise <= 1:
        raise ConfigError(
            f"obs_noise must be a number in [0, 1] (a standard deviation in normalized input units; 0: off), "
            f"got {noise!r}"
        )
    te = config.temporal_ensemble
    if isinstance(te, bool) or not isinstance(te, (int, float)) or not math.isfinite(te) or te < 0:
        raise ConfigError(f"temporal_ensemble must be a finite number >= 0 (0: off), got {te!r}")
    if config.features == "task" and config.encoder == "cnn":
        raise ConfigError(
            "features='task' reads state observations; the cnn encoder trains on features='proprio' or 'raw'"
        )
    shift = config.image_shift
    if isinstance(shift, bool) or not isinstance(shift, int) or shift < 0:
        raise ConfigError(f"image_shift must be an integer >= 0 (pixels; 0: off), got {shift!r}")
    frozen = FROZEN_ENCODERS.get(config.image_encoder)
    if frozen is not None and config.encoder == "cnn":
        check_frozen_encoder(config, frozen)
    if config.encoder != "cnn" and (config.image_keys or shift):
        raise ConfigError(
            f"image_keys {list(config.image_keys)} and image_shift {shift} are for camera frames: train with "
            "encoder='cnn' (--encoder cnn), or use an image recipe (--recipe cpu-image)"
        )
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


def check_frozen_encoder(config: TrainConfig, frozen: FrozenEncoder) -> None:
    """What a frozen encoder (``image_encoder`` in :data:`FROZEN_ENCODERS`) asks of a configuration: no random
    shift (its features are cached per frame), cameras in ``image_keys`` that it has a head for, and a reference
    method.

    Raises:
        ConfigError: naming the field, its value and what is accepted.
    """
    if config.image_shift:
        raise ConfigError(
            f"image_shift {config.image_shift}: the frozen {frozen.name} encoder's features are computed once per "
            "frame and cached, so no random shift can move the pixels; set image_shift=0 (the cpu-image-cached "
            "recipe does) or train a CNN with image_encoder='conv-gn'"
        )
    if not config.image_keys:
        raise ConfigError(
            f"the frozen {frozen.name} encoder reads the cameras of image_keys, which is empty; name them (its "
            f"cameras: {list(frozen.cameras)}), as the cpu-image-cached recipe does"
        )
    unknown = [k for k in config.image_keys if k not in frozen.cameras]
    if unknown:
        raise ConfigError(
            f"image_keys {unknown}: the frozen {frozen.name} encoder has heads for the cameras "
            f"{list(frozen.cameras)} only ({frozen.image_size} px)"
        )
    if config.method_class is not None:
        raise ConfigError(
            f"--method {config.method}: the frozen {frozen.name} encoder's cached features are for the reference "
            f"methods {list(METHODS)}; a method class of yours reads the camera frames (image_encoder='conv-gn')"
        )
