"""The method API: a new training method in one class; the suite does the rest (needs torch).

A method is a :class:`Method` subclass, a ``torch.nn.Module`` that defines its network in ``__init__(spec)`` and
two functions of a :class:`Batch`:

* :meth:`Method.loss`: the training loss of a batch (a scalar tensor, or a dict with ``"loss"`` and anything else
  to log). A co-training method reads the batch's ``domain`` labels (1 real, 0 sim), e.g. to weight its loss.
* :meth:`Method.predict`: normalized action chunks ``(B, H * A)`` for a batch of observations.

Everything else is the suite's, the same as for the reference methods (``bc``, ``flow``, ...), which train through
the same loop: the datasets and their checks, the demos held out for checkpoint choice, the ``task`` features
(``batch.state``: the last ``frame_stack`` frames of features, normalized), the normalized action chunks with clean
labels (``batch.target``, ``batch.weight``), the co-training mixture (``real_fraction`` of each batch real), AdamW
with the recipe's steps, batch, warm-up and cosine decay, gradient clipping, the EMA of the weights, the checkpoint
with the lowest validation loss, the checkpoint directory with its metadata, and at inference the frame stack,
the chunk's execution and the mapping back to env actions. ``r2s2r train --method module:Class`` trains one,
``r2s2r evaluate --policy DIR`` evaluates it (docs/byo_method.md).

The checkpoint records the class as ``module:Class`` (its ``method_class``, with the SHA-256 of the module's
file); loading imports that module, so it must be importable where the policy is loaded (the current directory
or ``PYTHONPATH``), and loading a checkpoint runs its module's code: load only checkpoints whose code you trust.
The class must subclass :class:`Method` and define ``loss`` and ``predict``; anything else is refused with a
:class:`MethodError` naming what is wrong.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Mapping
from typing import Any, ClassVar

import torch
from torch import nn

from r2s2r_envs.policies.config import METHOD_CLASS_PATTERN


class MethodError(ValueError):
    """A method class that cannot be used: not importable, not a :class:`Method`, or missing ``loss``/``predict``."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Spec:
    """The sizes a method's network is built for (from the data and the recipe).

    Attributes:
        state_dim: width of ``batch.state``: ``frame_stack`` frames of features, flattened.
        action_dim: actions per step ``A``.
        action_chunk: actions per prediction ``H``.
        frame_stack: frames per input ``F``.
        image_keys: camera keys (``batch.inputs["image/<key>"]``, ``(B, F, H, W, 3)`` in [0, 1]); empty for state.
        hidden_dim: the recipe's network width (a suggestion: the method builds what it likes).
        layers: the recipe's number of hidden layers (a suggestion).
        feature_dim: the recipe's encoder output width (a suggestion).
    """

    state_dim: int
    action_dim: int
    action_chunk: int
    frame_stack: int
    image_keys: tuple[str, ...] = ()
    hidden_dim: int
    layers: int
    feature_dim: int

    @property
    def chunk_dim(self) -> int:
        """Width of a flattened action chunk, ``H * A`` (what :meth:`Method.predict` returns per row)."""
        return self.action_chunk * self.action_dim

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (written to the checkpoint's ``model`` section)."""
        return {**dataclasses.asdict(self), "image_keys": list(self.image_keys)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Spec:
        """Inverse of :meth:`to_dict`."""
        return cls(**{**data, "image_keys": tuple(data.get("image_keys", ()))})


@dataclasses.dataclass(frozen=True, kw_only=True)
class Batch:
    """A batch of samples, already through the pipeline, on the training device.

    Attributes:
        inputs: the network inputs: ``"state"`` ``(B, F * D)`` and ``"image/<key>"`` for camera keys.
        domain: ``(B,)`` int64, 1 for a real (lab) sample and 0 for a simulated one; at inference the domain of
            the env the policy acts in.
        generator: the source of every random draw (seeded: training and evaluations are reproducible).
        target: normalized action chunks ``(B, H * A)`` (the demonstrator's clean actions); ``None`` at inference.
        weight: ``(B, H * A)``: 1 for an action of the demo, 0 for padding past its end; ``None`` at inference.
        step: the training step (0 at inference).
        steps: the run's steps (0 at inference).
    """

    inputs: dict[str, torch.Tensor]
    domain: torch.Tensor
    generator: torch.Generator
    target: torch.Tensor | None = None
    weight: torch.Tensor | None = None
    step: int = 0
    steps: int = 0

    @property
    def state(self) -> torch.Tensor:
        """The normalized state input ``(B, F * D)`` (``inputs["state"]``)."""
        return self.inputs["state"]


class Method(nn.Module):
    """Base class of a training method: subclass it, build the network in ``__init__``, define ``loss`` and
    ``predict`` (see the module docstring and docs/byo_method.md).

    Args:
        spec: the sizes of the data and the recipe's network.

    Attributes:
        name: the method's name in results and on the leaderboard (default: the class name).
    """

    name: ClassVar[str] = ""

    def __init__(self, spec: Spec) -> None:
        super().__init__()
        self.spec = spec

    def loss(self, batch: Batch) -> torch.Tensor | Mapping[str, torch.Tensor]:
        """The loss to minimize on a training batch: a scalar, or ``{"loss": scalar, ...}`` (other entries are
        logged; ``"action"``, if given, is the validation loss that chooses the checkpoint, else ``"loss"``)."""
        raise NotImplementedError

    def predict(self, batch: Batch) -> torch.Tensor:
        """Normalized action chunks ``(B, H * A)`` for a batch of observations (``batch.target`` is ``None``)."""
        raise NotImplementedError


def method_name(cls: type[Method]) -> str:
    """The name results record for a method class: its ``name``, else the class name."""
    return cls.name or cls.__name__


def method_class_path(cls: type) -> str:
    """``module:Class`` of a class (what a checkpoint records as ``method_class``)."""
    return f"{cls.__module__}:{cls.__qualname__}"


def import_method(path: str) -> type[Method]:
    """The :class:`Method` subclass that ``module:Class`` names, imported with the current directory on the path.

    Raises:
        MethodError: not of the form ``module:Class``, a module that cannot be imported, no such class, a class
            that is not a :class:`Method` subclass, or one that does not define ``loss`` and ``predict``.
    """
    if not isinstance(path, str) or not METHOD_CLASS_PATTERN.fullmatch(path):
        raise MethodError(
            f"method class {path!r} is not of the form module:Class (e.g. byo_bc:DomainWeightedBC, the module "
            "importable from the current directory or PYTHONPATH)"
        )
    module_name, qualname = path.split(":")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` does: a module beside the command is found
    importlib.invalidate_caches()  # a module written since the last import is found
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, or the module's own code failing
        raise MethodError(
            f"cannot import the method class {path}: {type(exc).__name__}: {exc}. Its module must be importable "
            "here: run from the folder that holds it or add that folder to PYTHONPATH"
        ) from exc
    obj: Any = module
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    if obj is None:
        raise MethodError(f"module {module_name} ({getattr(module, '__file__', '?')}) has no class {qualname}")
    if not isinstance(obj, type) or not issubclass(obj, Method):
        raise MethodError(
            f"{path} is a {type(obj).__name__}, not a subclass of r2s2r_envs.policies.method.Method "
            "(docs/byo_method.md)"
        )
    missing = [m for m in ("loss", "predict") if getattr(obj, m) is getattr(Method, m)]
    if missing:
        raise MethodError(f"method class {path} does not define {' and '.join(missing)} (docs/byo_method.md)")
    return obj


def module_digest(path: str) -> str | None:
    """SHA-256 of the file of a method class's module (``None`` when it has no file), without importing it."""
    try:
        spec = importlib.util.find_spec(path.split(":")[0])
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not os.path.isfile(spec.origin):
        return None
    with open(spec.origin, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def loss_dict(value: Any, path: str) -> dict[str, torch.Tensor]:
    """A method's ``loss`` output as ``{"loss", "action", ...}`` (``"action"`` defaults to ``"loss"``).

    Raises:
        MethodError: neither a scalar tensor nor a mapping with a scalar ``"loss"``.
    """
    losses = {"loss": value} if isinstance(value, torch.Tensor) else dict(value) if isinstance(value, Mapping) else {}
    total = losses.get("loss")
    if not isinstance(total, torch.Tensor) or total.numel() != 1:
        raise MethodError(
            f"{path}.loss returned {type(value).__name__}: return a scalar tensor or a dict with a scalar 'loss'"
        )
    losses.setdefault("action", total)
    return losses


__all__ = ["Batch", "Method", "MethodError", "Spec", "import_method", "method_class_path", "method_name"]
