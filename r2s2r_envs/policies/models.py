"""The torch networks of the baselines: encoders, a BC head, a flow-matching head, CFG and an ADDA discriminator.

* :class:`Encoder`: flattened, normalized state frames (and optionally camera frames, each camera through a CNN of
  :mod:`r2s2r_envs.policies.vision`) to a feature vector. Everything domain-related acts on these features, which
  with cameras are an MLP over the proprioception and every camera's CNN features: they depend on the images, and
  the ADDA discriminator's reversed gradient reaches the CNNs. A frozen CNN (``sim-pose``) trains nothing: its
  features come cached in training (``inputs["feature/<camera>"]``, ``r2s2r_envs.policies.cached``) and the MLP over
  them is the trainable projection that ADDA aligns.
* BC (:class:`PolicyModel` with ``generative=False``): an MLP regressing the normalized action chunk (unimodal).
* Flow matching (``generative=True``) on the straight path ``x_t = (1 - t) x_0 + t x_1`` from noise ``x_0`` to the
  action chunk ``x_1``. The network predicts the chunk, ``x1_hat(x_t, t | features[, domain])``, trained by mean
  squared error to ``x_1``; the velocity is ``v = (x1_hat - x_t) / (1 - t)``, integrated with Euler steps from noise
  at inference (the last step lands on the prediction). Predicting ``x_1`` rather than ``v`` spares the network
  from carrying the whole noisy chunk (16 x 22 = 352 numbers) through hidden layers of width 256: a
  velocity-predicting version was measured with an open-loop action error ~4x that of a constant prediction
  after 5,000 steps (docs/baselines.md, "Measured").
* Classifier-free guidance (``cfg=True``): a domain label (sim 0, real 1) embedded into the velocity net, replaced by
  the "no label" token 2 with probability ``cfg_dropout`` in training; at inference
  ``v = v_none + w * (v_real - v_none)`` guides toward the real domain.
* ADDA-style alignment (``adda=True``): a domain discriminator on the encoder features behind a gradient reversal
  layer: the discriminator learns to tell real from sim, the encoder receives the negated, scaled gradient and
  learns features it cannot tell apart.

docs/baselines.md describes the methods and their settings.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from r2s2r_envs.policies import vision

#: Domain tokens of the CFG label: sim, real, and "no label" (the unconditional flow).
SIM, REAL, NO_LABEL = 0, 1, 2
_TIME_EMBED = 32
#: The first image policies' camera encoder, importable from here as before the encoders had a module of their own.
CameraEncoder = vision.CameraEncoder


def mlp(in_dim: int, hidden: int, layers: int, out_dim: int) -> nn.Sequential:
    """``layers`` hidden Linear+SiLU layers of width ``hidden`` and a linear output."""
    mods: list[nn.Module] = []
    d = in_dim
    for _ in range(layers):
        mods += [nn.Linear(d, hidden), nn.SiLU()]
        d = hidden
    mods.append(nn.Linear(d, out_dim))
    return nn.Sequential(*mods)


class FiLMBlock(nn.Module):
    """A pre-norm residual block, ``x + W2 silu(W1 film(norm(x)))``, optionally modulated by a condition (FiLM).

    The condition gives a per-channel scale and shift of the normalized input (zero at initialization, so the
    block starts as the identity plus a small MLP).

    Args:
        dim: width of the residual stream.
        cond_dim: width of the condition (0: no conditioning).
        expansion: hidden width of the block's MLP as a multiple of ``dim``.
    """

    def __init__(self, dim: int, cond_dim: int = 0, expansion: int = 2) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, expansion * dim)
        self.fc2 = nn.Linear(expansion * dim, dim)
        self.film = nn.Linear(cond_dim, 2 * dim) if cond_dim else None
        if self.film is not None:
            nn.init.zeros_(self.film.weight)
            nn.init.zeros_(self.film.bias)

    def forward(self, x: torch.Tensor, cond: torch.Tensor | None = None) -> torch.Tensor:
        h = self.norm(x)
        if self.film is not None:
            if cond is None:
                raise ValueError("a conditioned block needs its condition")
            scale, shift = self.film(cond).chunk(2, dim=-1)
            h = h * (1.0 + scale) + shift
        return x + self.fc2(F.silu(self.fc1(h)))


class ResidualMLP(nn.Module):
    """``in -> Linear -> blocks (FiLM-conditioned if cond_dim) -> LayerNorm -> Linear -> out``.

    Args:
        in_dim: input width.
        hidden: width of the residual stream.
        blocks: residual blocks.
        out_dim: output width.
        cond_dim: width of the condition every block is modulated by (0: none).
    """

    def __init__(self, in_dim: int, hidden: int, blocks: int, out_dim: int, cond_dim: int = 0) -> None:
        super().__init__()
        self.inp = nn.Linear(in_dim, hidden)
        self.blocks = nn.ModuleList(FiLMBlock(hidden, cond_dim) for _ in range(blocks))
        self.norm = nn.LayerNorm(hidden)
        self.out = nn.Linear(hidden, out_dim)

    def forward(self, x: torch.Tensor, cond: torch.Tensor | None = None) -> torch.Tensor:
        h = self.inp(x)
        for block in self.blocks:
            h = block(h, cond)
        return self.out(self.norm(h))


class _Plain(nn.Module):
    """An :func:`mlp` with the ``(x, cond)`` call of :class:`ResidualMLP` (the condition is concatenated)."""

    def __init__(self, in_dim: int, hidden: int, layers: int, out_dim: int, cond_dim: int = 0) -> None:
        super().__init__()
        self.net = mlp(in_dim + cond_dim, hidden, layers, out_dim)

    def forward(self, x: torch.Tensor, cond: torch.Tensor | None = None) -> torch.Tensor:
        return self.net(x if cond is None else torch.cat([x, cond], dim=-1))


def network(architecture: str, in_dim: int, hidden: int, layers: int, out_dim: int, cond_dim: int = 0) -> nn.Module:
    """A network of ``architecture`` (``"mlp"`` or ``"resmlp"``), called as ``net(x, cond)``."""
    if architecture == "resmlp":
        return ResidualMLP(in_dim, hidden, layers, out_dim, cond_dim)
    if architecture == "mlp":
        return _Plain(in_dim, hidden, layers, out_dim, cond_dim)
    raise ValueError(f"unknown architecture {architecture!r}; choose 'mlp' or 'resmlp'")


class _GradientReversal(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.scale = scale
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return -ctx.scale * grad, None


def gradient_reversal(x: torch.Tensor, scale: float) -> torch.Tensor:
    """Identity forward; multiplies the gradient by ``-scale`` backward (Ganin and Lempitsky's layer)."""
    return _GradientReversal.apply(x, float(scale))


class Encoder(nn.Module):
    """Policy inputs to a feature vector of width ``feature_dim``.

    Args:
        state_dim: width of the flattened state frames.
        image_keys: camera keys (one camera encoder each) or empty.
        frame_stack: frames per input (for the camera features' width).
        hidden_dim: MLP width.
        layers: MLP hidden layers.
        feature_dim: output width.
        architecture: ``"mlp"`` or ``"resmlp"`` (the MLP over the concatenated inputs).
        image_encoder: the camera encoder, one of :data:`~r2s2r_envs.policies.vision.IMAGE_ENCODERS`.
    """

    def __init__(
        self,
        *,
        state_dim: int,
        image_keys: list[str],
        frame_stack: int,
        hidden_dim: int,
        layers: int,
        feature_dim: int,
        architecture: str = "mlp",
        image_encoder: str = vision.LEGACY_IMAGE_ENCODER,
    ) -> None:
        super().__init__()
        self.image_keys = list(image_keys)
        cameras = {k.replace("/", "_"): vision.image_encoder(image_encoder, camera=k) for k in self.image_keys}
        self.cameras = nn.ModuleDict(cameras)
        in_dim = state_dim + frame_stack * sum(camera.out_dim for camera in cameras.values())
        self.architecture = architecture
        if architecture == "mlp":  # the first policies' encoder (kept so their checkpoints load)
            self.mlp: nn.Module = mlp(in_dim, hidden_dim, max(layers - 1, 1), feature_dim)
        else:
            self.mlp = network(architecture, in_dim, hidden_dim, max(layers - 1, 1), feature_dim)

    def forward(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        """Features ``(B, feature_dim)`` of ``inputs``: ``"state"`` and, per camera, its frames ``"image/<key>"``
        or a frozen encoder's features of them ``"feature/<key>"`` ``(B, F * out_dim)``, computed beforehand (a
        training run's cache)."""
        parts = [inputs["state"]]
        for key in self.image_keys:
            cached = inputs.get(f"feature/{key}")
            parts.append(self.cameras[key.replace("/", "_")](inputs[f"image/{key}"]) if cached is None else cached)
        x = torch.cat(parts, dim=-1)
        return self.mlp(x) if self.architecture == "mlp" else self.mlp(x, None)


def time_embedding(t: torch.Tensor, dim: int = _TIME_EMBED) -> torch.Tensor:
    """Sinusoidal embedding of flow times ``t`` in [0, 1], ``(B,) -> (B, dim)``."""
    half = dim // 2
    freqs = torch.exp(-math.log(1000.0) * torch.arange(half, dtype=t.dtype, device=t.device) / half)
    angles = 100.0 * t[:, None] * freqs[None]
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)


class PolicyModel(nn.Module):
    """Encoder plus a BC or flow head, with optional CFG domain label and ADDA discriminator.

    Args:
        state_dim: width of the flattened state input.
        chunk_dim: width of a flattened action chunk ``H * A``.
        generative: flow head (True) or BC regression (False).
        cfg: condition the flow on a domain label with label dropout.
        adda: add a domain discriminator behind gradient reversal.
        image_keys, frame_stack, hidden_dim, layers, feature_dim: encoder and MLP sizes.
        architecture: ``"mlp"`` or ``"resmlp"``.
        image_encoder: the camera encoder (:data:`~r2s2r_envs.policies.vision.IMAGE_ENCODERS`); a model section
            without one (the first image policies') has ``"conv4"``.
    """

    def __init__(
        self,
        *,
        state_dim: int,
        chunk_dim: int,
        generative: bool,
        cfg: bool,
        adda: bool,
        image_keys: list[str],
        frame_stack: int,
        hidden_dim: int,
        layers: int,
        feature_dim: int,
        architecture: str = "mlp",
        image_encoder: str = vision.LEGACY_IMAGE_ENCODER,
    ) -> None:
        super().__init__()
        if cfg and not generative:
            raise ValueError("classifier-free guidance needs the generative (flow) head")
        self.hparams = {
            "state_dim": state_dim,
            "chunk_dim": chunk_dim,
            "generative": generative,
            "cfg": cfg,
            "adda": adda,
            "image_keys": list(image_keys),
            "frame_stack": frame_stack,
            "hidden_dim": hidden_dim,
            "layers": layers,
            "feature_dim": feature_dim,
            "architecture": architecture,
        }
        if image_keys:  # a state model's section names no camera encoder
            self.hparams["image_encoder"] = image_encoder
        self.chunk_dim = chunk_dim
        self.architecture = architecture
        self.generative = generative
        self.cfg = cfg
        self.encoder = Encoder(
            state_dim=state_dim,
            image_keys=image_keys,
            frame_stack=frame_stack,
            hidden_dim=hidden_dim,
            layers=layers,
            feature_dim=feature_dim,
            architecture=architecture,
            image_encoder=image_encoder,
        )
        if architecture == "mlp":  # the first policies' heads: the condition concatenated to the input
            if generative:
                cond = feature_dim + _TIME_EMBED + (feature_dim if cfg else 0)
                self.head: nn.Module = mlp(chunk_dim + cond, hidden_dim, layers, chunk_dim)
            else:
                self.head = mlp(feature_dim, hidden_dim, layers, chunk_dim)
        elif generative:  # the noisy chunk is the residual stream; features, time and domain modulate it (FiLM)
            cond = feature_dim + _TIME_EMBED + (feature_dim if cfg else 0)
            self.head = network(architecture, chunk_dim, hidden_dim, layers, chunk_dim, cond_dim=cond)
        else:
            self.head = network(architecture, feature_dim, hidden_dim, layers, chunk_dim)
        self.domain_embedding = nn.Embedding(3, feature_dim) if cfg else None
        self.discriminator = mlp(feature_dim, hidden_dim, 1, 1) if adda else None

    # -- flow ----------------------------------------------------------------------------------------

    def denoise(
        self, x: torch.Tensor, t: torch.Tensor, features: torch.Tensor, domain: torch.Tensor | None
    ) -> torch.Tensor:
        """The predicted chunk ``x1_hat`` at ``x`` (``(B, H * A)``), time ``t`` (``(B,)``), features, domain tokens."""
        cond = [features, time_embedding(t)]
        if self.domain_embedding is not None:
            if domain is None:
                raise ValueError("a CFG model needs domain tokens")
            cond.append(self.domain_embedding(domain))
        if self.architecture == "mlp":
            return self.head(torch.cat([x, *cond], dim=-1))
        return self.head(x, torch.cat(cond, dim=-1))

    def regress(self, features: torch.Tensor) -> torch.Tensor:
        """BC's predicted chunk for encoder features."""
        return self.head(features) if self.architecture == "mlp" else self.head(features, None)

    def velocity(
        self, x: torch.Tensor, t: torch.Tensor, features: torch.Tensor, domain: torch.Tensor | None
    ) -> torch.Tensor:
        """The flow's velocity ``(x1_hat - x) / (1 - t)`` (for ``t < 1``)."""
        return (self.denoise(x, t, features, domain) - x) / (1.0 - t)[:, None]

    def guided_velocity(
        self, x: torch.Tensor, t: torch.Tensor, features: torch.Tensor, scale: float, toward: int = REAL
    ) -> torch.Tensor:
        """``v_none + scale * (v_toward - v_none)``: classifier-free guidance toward a domain (real by default).

        Without CFG, the plain velocity.
        """
        if self.domain_embedding is None:
            return self.velocity(x, t, features, None)
        b = len(x)
        tokens = torch.cat([torch.full((b,), int(toward)), torch.full((b,), NO_LABEL)]).to(x.device)
        both = self.velocity(torch.cat([x, x]), torch.cat([t, t]), torch.cat([features, features]), tokens)
        v_toward, v_none = both[:b], both[b:]
        return v_none + scale * (v_toward - v_none)

    # -- training ------------------------------------------------------------------------------------

    def losses(
        self,
        inputs: dict[str, torch.Tensor],
        target: torch.Tensor,
        weight: torch.Tensor,
        domain: torch.Tensor,
        generator: torch.Generator,
        *,
        cfg_dropout: float = 0.0,
        reversal_scale: float = 0.0,
    ) -> dict[str, torch.Tensor]:
        """The training losses of one batch.

        Args:
            inputs: encoded observations (``"state"`` and image keys).
            target: normalized action chunks ``(B, H * A)``.
            weight: 1 for real actions, 0 for padding past a demo's end, ``(B, H * A)``.
            domain: 1 real, 0 sim, ``(B,)`` int64.
            generator: the source of the flow's noise and times and of the label dropout.
            cfg_dropout: probability of replacing the domain label by the "no label" token.
            reversal_scale: the gradient reversal's scale (the encoder's adversarial weight).

        Returns:
            ``{"loss": total, "action": the policy loss, ...}`` and, with ADDA, ``"domain"`` (discriminator BCE,
            balanced over domains) and ``"domain_accuracy"``.
        """
        features = self.encoder(inputs)
        if self.generative:
            x1 = target
            x0 = torch.randn(x1.shape, generator=generator, dtype=x1.dtype, device=x1.device)
            t = torch.rand((len(x1),), generator=generator, dtype=x1.dtype, device=x1.device)
            xt = (1 - t[:, None]) * x0 + t[:, None] * x1
            tokens = None
            if self.cfg:
                drop = torch.rand((len(x1),), generator=generator, device=x1.device) < cfg_dropout
                tokens = torch.where(drop, torch.full_like(domain, NO_LABEL), domain)
            err = (self.denoise(xt, t, features, tokens) - x1) ** 2
        else:
            err = (self.regress(features) - target) ** 2
        action_loss = (err * weight).sum() / weight.sum().clamp_min(1.0)
        out = {"action": action_loss}
        total = action_loss
        if self.discriminator is not None:
            logits = self.discriminator(gradient_reversal(features, reversal_scale)).squeeze(-1)
            label = domain.to(logits.dtype)
            bce = F.binary_cross_entropy_with_logits(logits, label, reduction="none")
            domain_loss = torch.zeros((), dtype=logits.dtype, device=logits.device)
            present = 0
            for value in (0.0, 1.0):  # balanced over the domains present (real is usually the minority)
                mask = label == value
                if mask.any():
                    domain_loss = domain_loss + bce[mask].mean()
                    present += 1
            domain_loss = domain_loss / max(present, 1)
            out["domain"] = domain_loss
            out["domain_accuracy"] = ((logits > 0).to(label.dtype) == label).to(logits.dtype).mean().detach()
            total = total + domain_loss
        out["loss"] = total
        return out

    # -- inference -----------------------------------------------------------------------------------

    @torch.no_grad()
    def predict(
        self,
        inputs: dict[str, torch.Tensor],
        generator: torch.Generator,
        *,
        flow_steps: int,
        cfg_scale: float,
        toward: int = REAL,
    ) -> torch.Tensor:
        """Normalized action chunks ``(B, H * A)`` for encoded observations.

        BC returns its regression; the flow integrates ``flow_steps`` Euler steps from noise drawn from
        ``generator``, guided with ``cfg_scale`` toward the domain token ``toward`` (``REAL`` or ``SIM``) when it
        has a domain label.
        """
        features = self.encoder(inputs)
        if not self.generative:
            return self.regress(features)
        b = len(features)
        x = torch.randn((b, self.chunk_dim), generator=generator, dtype=features.dtype, device=features.device)
        dt = 1.0 / flow_steps
        for k in range(flow_steps):
            t = torch.full((b,), k * dt, dtype=features.dtype, device=features.device)
            x = x + dt * self.guided_velocity(x, t, features, cfg_scale, toward)
        return x
