"""Baseline policies and their training (the ``torch`` extra: ``pip install "r2s2r_envs[torch]"``).

* :func:`load_policy`: a trained policy from a ``r2s2r train --out DIR`` directory, with ``reset(seed)``,
  ``act(obs)`` (the evaluation protocol's ``Policy``) and ``metadata``.
* :mod:`~r2s2r_envs.policies.config`: :class:`~r2s2r_envs.policies.config.TrainConfig` and the methods
  (``bc``, ``flow``, ``flow-cfg``, ``flow-adda``, ``flow-cfg-adda``).
* :mod:`~r2s2r_envs.policies.train`: :func:`~r2s2r_envs.policies.train.train` (``r2s2r train``).
* :mod:`~r2s2r_envs.policies.method`: the method API, :class:`Method`, :class:`Batch`, :class:`Spec` (also
  importable from here, needing torch): a new training method in one class (docs/byo_method.md).
* :mod:`~r2s2r_envs.policies.pipeline`: the observation/action pipeline shared by training and inference.
* :mod:`~r2s2r_envs.policies.checkpoint`: the checkpoint layout; :func:`read_checkpoint` reads a checkpoint's
  config and metadata without torch.

Importing this package does not import torch; :func:`load_policy`, the method API and the training module do.
docs/baselines.md describes the methods, the commands and measured numbers.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from r2s2r_envs.policies import zoo
from r2s2r_envs.policies.checkpoint import CheckpointError, read_checkpoint
from r2s2r_envs.policies.config import METHODS, RECIPES, TrainConfig

if TYPE_CHECKING:
    from r2s2r_envs.policies.runtime import TrainedPolicy

TORCH_HINT = (
    "r2s2r_envs.policies needs torch for training and inference; install the extra: pip install 'r2s2r_envs[torch]'"
)


def load_policy(path: str | os.PathLike[str], **settings: Any) -> TrainedPolicy:
    """Loads a policy written by ``r2s2r train --out DIR`` (needs torch).

    Args:
        path: the checkpoint directory, or ``zoo:NAME`` for a reference checkpoint that ships with the package
            (:mod:`r2s2r_envs.policies.zoo`, docs/baselines.md#model-zoo).
        settings: execution settings instead of the training config's: ``execute_steps``, ``temporal_ensemble``.

    Returns:
        A :class:`~r2s2r_envs.policies.runtime.TrainedPolicy`: ``reset(seed)``, ``act(obs)``, ``metadata``.

    Raises:
        FileNotFoundError: the directory does not exist.
        CheckpointError: not a checkpoint, another checkpoint version, or weights that do not fit.
        ImportError: torch is not installed.
    """
    read_checkpoint(path)  # clear errors before torch is imported
    try:
        from r2s2r_envs.policies.runtime import load_policy as _load
    except ImportError as exc:
        if getattr(exc, "name", None) == "torch":
            raise ImportError(TORCH_HINT) from exc
        raise
    return _load(path, **settings)


#: Names of :mod:`r2s2r_envs.policies.method` importable from this package (imported on first use: they need torch).
_METHOD_API = ("Batch", "Method", "MethodError", "Spec")


def __getattr__(name: str) -> Any:
    if name in _METHOD_API:
        try:
            from r2s2r_envs.policies import method
        except ImportError as exc:
            if getattr(exc, "name", None) == "torch":
                raise ImportError(TORCH_HINT) from exc
            raise
        return getattr(method, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["METHODS", "RECIPES", "CheckpointError", "TrainConfig", "load_policy", "read_checkpoint", "zoo"]
