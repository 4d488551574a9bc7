"""Camera encoders of the visuomotor policies and their training augmentation (needs torch).

Every encoder maps camera frames ``(B, F, H, W, 3)`` in [0, 1] (the pipeline's ``image/<key>`` inputs) to
``(B, F * out_dim)`` features, each frame encoded alone; :class:`~r2s2r_envs.policies.models.Encoder` holds one
per camera and concatenates their features with the low-dimensional input. The encoders (:data:`IMAGE_ENCODERS`,
chosen by ``TrainConfig.image_encoder``):

* ``"conv4"`` (:class:`CameraEncoder`): the first image policies' CNN, four strided convolutions with SiLU and
  an average pool, 64 features, no normalization. Kept so that their checkpoints load (a checkpoint whose model
  section names no encoder has this one).
* ``"conv-gn"`` (:class:`ConvGN`): the ``cpu-image`` recipe's, for 64 px frames on two CPU cores: five 3x3
  convolutions (16 to 64 channels) with GroupNorm and ReLU, three of them strided (64 px to an 8x8 map), a
  spatial-softmax head (32 keypoints, the expected image coordinates of each learned feature map: where things
  are, which a manipulation policy needs more than what) and a linear layer to 64 features. 76 k parameters.
* ``"resnet18-gn"`` (:class:`ResNet18GN`): the ``gpu-image`` recipe's, ResNet-18 (He et al., 2016: a 7x7 stem,
  max pool, four stages of two basic residual blocks, 64 to 512 channels) with GroupNorm (16 channels a group)
  in place of BatchNorm, whose batch statistics would differ between training batches, real and simulated
  shares and single observations at inference. Global average pool to 512 features. 11.2 M parameters,
  randomly initialized (nothing is downloaded).
* ``"sim-pose"`` (:class:`FrozenCamera`): the ``cpu-image-cached`` recipe's, frozen: ``conv-gn``'s architecture
  with weights the suite ships (``policies/encoders/sim-pose.pt``, int8, pinned by SHA-256 in
  :data:`~r2s2r_envs.policies.config.FROZEN_ENCODERS`), trained by baselines/train_image_encoder.py on simulator
  renders only to tell where the objects are (their positions, categories and status, next object first, as the
  ``task`` features order them). The two cameras share the convolutions; each has its own keypoints and output
  layer. Its features are standardized with their mean and deviation over its training frames. A policy never
  trains it: training computes its features once per frame (``r2s2r_envs.policies.cached``), inference on the
  live frames.

:func:`random_shift` is the training-time augmentation (``TrainConfig.image_shift``): each sample's frames of one
camera moved together by a random whole-pixel offset, the border repeated (the pad-and-crop of DrQ, Kostrikov et
al., 2021). It runs in training only; inference sees the frames as they are, which are the augmentation's mean.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from r2s2r_envs.policies.config import FROZEN_ENCODERS, FrozenEncoder

#: The camera encoders, by ``TrainConfig.image_encoder`` name (docs/baselines.md, "Image recipes").
IMAGE_ENCODERS: tuple[str, ...] = ("conv4", "conv-gn", "resnet18-gn", "sim-pose")
#: The encoder of a checkpoint whose model section names none (the first image policies').
LEGACY_IMAGE_ENCODER = "conv4"
_CONV4_FEATURES = 64


class FrameEncoder(nn.Module):
    """A camera encoder: ``(B, F, H, W, 3)`` frames in [0, 1] to ``(B, F * out_dim)`` features.

    Subclasses set :attr:`out_dim` and implement :meth:`encode` on ``(N, 3, H, W)`` images.
    """

    out_dim: int

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """``(N, 3, H, W)`` images to ``(N, out_dim)`` features."""
        raise NotImplementedError

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        b, f = images.shape[:2]
        x = images.reshape(b * f, *images.shape[2:]).permute(0, 3, 1, 2)
        return self.encode(x).reshape(b, f * self.out_dim)


class CameraEncoder(FrameEncoder):
    """``"conv4"``: four strided convolutions with SiLU and an average pool to 64 features (first made for 128x128
    cameras; the first image policies' encoder)."""

    out_dim = _CONV4_FEATURES

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, 16, 5, stride=2, padding=2),
            nn.SiLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1),
            nn.SiLU(),
            nn.Conv2d(32, 64, 3, stride=2, padding=1),
            nn.SiLU(),
            nn.Conv2d(64, _CONV4_FEATURES, 3, stride=2, padding=1),
            nn.SiLU(),
            nn.AdaptiveAvgPool2d(1),
        )

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).flatten(1)


class SpatialSoftmax(nn.Module):
    """Feature maps to keypoints (Levine et al., 2016): a 1x1 convolution to ``keypoints`` maps, a softmax over
    each map's positions, and the expected ``(x, y)`` image coordinate (in [-1, 1]) under each: ``(N, 2 K)``.

    Args:
        channels: channels of the input maps.
        keypoints: keypoints ``K``.
    """

    def __init__(self, channels: int, keypoints: int) -> None:
        super().__init__()
        self.keypoints = nn.Conv2d(channels, keypoints, 1)

    def forward(self, maps: torch.Tensor) -> torch.Tensor:
        k = self.keypoints(maps)
        n, c, h, w = k.shape
        attention = torch.softmax(k.reshape(n, c, h * w), dim=-1).reshape(n, c, h, w)
        ys = torch.linspace(-1.0, 1.0, h, dtype=maps.dtype, device=maps.device)
        xs = torch.linspace(-1.0, 1.0, w, dtype=maps.dtype, device=maps.device)
        x = (attention.sum(dim=2) * xs).sum(dim=-1)  # (N, K): marginal over rows, expectation over columns
        y = (attention.sum(dim=3) * ys).sum(dim=-1)
        return torch.cat([x, y], dim=-1)


def conv_gn(c_in: int, c_out: int, stride: int) -> list[nn.Module]:
    """A 3x3 convolution, GroupNorm (4 to 8 channels a group) and ReLU (the convolution has no bias: the norm's
    shift replaces it; ReLU, as a ResNet's, made a step 14% faster on the CPU than SiLU)."""
    conv = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
    return [conv, nn.GroupNorm(min(8, c_out // 4), c_out), nn.ReLU()]


class ConvGN(FrameEncoder):
    """``"conv-gn"``: the small GroupNorm CNN of the ``cpu-image`` recipe (module docstring).

    Args:
        keypoints: spatial-softmax keypoints.
        out_dim: features per frame.
    """

    def __init__(self, keypoints: int = 32, out_dim: int = 64) -> None:
        super().__init__()
        self.out_dim = out_dim
        self.net = nn.Sequential(
            *conv_gn(3, 16, 2),  # 64 px -> 32
            *conv_gn(16, 32, 2),  # -> 16
            *conv_gn(32, 32, 1),
            *conv_gn(32, 64, 2),  # -> 8
            *conv_gn(64, 64, 1),
        )
        self.pool = SpatialSoftmax(64, keypoints)
        self.out = nn.Linear(2 * keypoints, out_dim)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.pool(self.net(x)))


class BasicBlock(nn.Module):
    """ResNet's basic block with GroupNorm: ``relu(x' + norm(conv(relu(norm(conv(x))))))``, where ``x'`` is ``x``
    or, when the block changes the resolution or width, a strided 1x1 convolution and norm of it.

    The last norm's scale starts at zero, so each block starts as its shortcut (Goyal et al., 2017).
    """

    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.norm1 = nn.GroupNorm(c_out // 16, c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.norm2 = nn.GroupNorm(c_out // 16, c_out)
        nn.init.zeros_(self.norm2.weight)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(
                nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False), nn.GroupNorm(c_out // 16, c_out)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.norm1(self.conv1(x)))
        return F.relu(self.shortcut(x) + self.norm2(self.conv2(h)))


class ResNet18GN(FrameEncoder):
    """``"resnet18-gn"``: ResNet-18 with GroupNorm and a global average pool, 512 features (module docstring)."""

    out_dim = 512

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False),
            nn.GroupNorm(4, 64),
            nn.ReLU(),
            nn.MaxPool2d(3, stride=2, padding=1),
        )
        widths = (64, 128, 256, 512)
        blocks: list[nn.Module] = []
        c_in = 64
        for k, width in enumerate(widths):
            stride = 1 if k == 0 else 2
            blocks += [BasicBlock(c_in, width, stride), BasicBlock(width, width, 1)]
            c_in = width
        self.stages = nn.Sequential(*blocks)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return self.stages(self.stem(x)).mean(dim=(2, 3))


class FrozenCamera(FrameEncoder):
    """One camera's head of a frozen encoder (module docstring): ``conv-gn``'s network with the shipped weights,
    its features standardized; no parameter requires a gradient, and it stays in eval mode.

    Args:
        spec: the frozen encoder (:data:`~r2s2r_envs.policies.config.FROZEN_ENCODERS`).
        camera: the camera whose head it is, one of ``spec.cameras``.
        state: its weights as :func:`frozen_state` gives them (default: read from the shipped file).

    Raises:
        ValueError: a camera the encoder has no head for (the message lists those it has).
        FileNotFoundError: the shipped file is missing.
        RuntimeError: the shipped file is not the one pinned (another SHA-256).
    """

    def __init__(self, spec: FrozenEncoder, camera: str, state: dict[str, torch.Tensor] | None = None) -> None:
        super().__init__()
        if camera not in spec.cameras:
            raise ValueError(
                f"the frozen {spec.name} encoder has heads for the cameras {list(spec.cameras)} "
                f"({spec.image_size} px simulator renders), not {camera!r}"
            )
        self.name, self.camera, self.out_dim = spec.name, camera, spec.out_dim
        self.net = ConvGN(keypoints=spec.keypoints, out_dim=spec.out_dim)
        self.mean = nn.Parameter(torch.zeros(spec.out_dim))
        self.std = nn.Parameter(torch.ones(spec.out_dim))
        self.load_state_dict(frozen_state(spec, camera) if state is None else state)
        self.requires_grad_(False)
        self.eval()

    def train(self, mode: bool = True) -> FrozenCamera:
        """Stays in eval mode: a frozen encoder computes the same features in training and at inference."""
        return super().train(False)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return (self.net.encode(x) - self.mean) / self.std


def frozen_file(spec: FrozenEncoder) -> Path:
    """Where the package holds a frozen encoder's packed weights."""
    return Path(__file__).resolve().parent / spec.file


@functools.cache
def _shipped(name: str) -> dict[str, torch.Tensor]:
    from r2s2r_envs.policies.weights import load_state_dict_file

    spec = FROZEN_ENCODERS[name]
    path = frozen_file(spec)
    if not path.is_file():
        raise FileNotFoundError(
            f"the frozen {name} encoder's weights are missing ({path}); reinstall r2s2r_envs, or train them with "
            "baselines/train_image_encoder.py"
        )
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != spec.sha256:
        raise RuntimeError(
            f"{path} has SHA-256 {digest}, not the {spec.sha256} pinned for the {name} encoder "
            "(r2s2r_envs.policies.config.FROZEN_ENCODERS): the file was changed or damaged; reinstall r2s2r_envs"
        )
    return load_state_dict_file(path)


def frozen_state(spec: FrozenEncoder, camera: str) -> dict[str, torch.Tensor]:
    """The :class:`FrozenCamera` ``state_dict`` of ``camera`` from the shipped file (float32): the shared
    convolutions (``trunk.*``) and the camera's own keypoints, output layer and feature statistics
    (``<camera>.*``). The file is read and its SHA-256 checked once per process."""
    return split_frozen_state(_shipped(spec.name), camera)


def split_frozen_state(shipped: dict[str, torch.Tensor], camera: str) -> dict[str, torch.Tensor]:
    """One camera's :class:`FrozenCamera` ``state_dict`` from a frozen encoder's file layout (``trunk.*`` shared,
    ``<camera>.pool.*``, ``<camera>.out.*``, ``<camera>.mean``, ``<camera>.std``)."""
    state = {f"net.net.{k.removeprefix('trunk.')}": v.clone() for k, v in shipped.items() if k.startswith("trunk.")}
    own = {k.removeprefix(f"{camera}."): v.clone() for k, v in shipped.items() if k.startswith(f"{camera}.")}
    for key, value in own.items():
        state[key if key in ("mean", "std") else f"net.{key}"] = value
    return state


def image_encoder(name: str, camera: str | None = None) -> FrameEncoder:
    """A new camera encoder ``name`` (one of :data:`IMAGE_ENCODERS`).

    Args:
        name: the encoder.
        camera: the camera it reads; a frozen encoder has one head per camera (default: its first camera's),
            the others one network for any camera.

    Raises:
        ValueError: another name (the message lists :data:`IMAGE_ENCODERS`), or a camera a frozen encoder has no
            head for.
    """
    if name == "conv4":
        return CameraEncoder()
    if name == "conv-gn":
        return ConvGN()
    if name == "resnet18-gn":
        return ResNet18GN()
    if name in FROZEN_ENCODERS:
        spec = FROZEN_ENCODERS[name]
        return FrozenCamera(spec, spec.cameras[0] if camera is None else camera)
    raise ValueError(f"unknown image encoder {name!r}; choose one of {list(IMAGE_ENCODERS)}")


def random_shift(images: torch.Tensor, pad: int, generator: torch.Generator) -> torch.Tensor:
    """Each sample's frames ``(B, F, H, W, C)`` moved by one random offset in ``[-pad, pad]`` pixels per axis.

    The border is repeated (a crop of the frames padded by their edge pixels), every frame of a sample moves
    alike (the motion between them is kept), and the offsets are drawn from ``generator``. Works on any dtype.
    """
    if pad <= 0:
        return images
    b, f, h, w = images.shape[:4]
    device = images.device
    offsets = torch.randint(-pad, pad + 1, (2, b), generator=generator, device=device)
    rows = (torch.arange(h, device=device) + offsets[0][:, None]).clamp(0, h - 1)  # (B, H)
    cols = (torch.arange(w, device=device) + offsets[1][:, None]).clamp(0, w - 1)  # (B, W)
    batch = torch.arange(b, device=device)[:, None, None, None]
    frame = torch.arange(f, device=device)[None, :, None, None]
    return images[batch, frame, rows[:, None, :, None], cols[:, None, None, :]]
