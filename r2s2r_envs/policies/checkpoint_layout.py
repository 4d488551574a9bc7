"""The checkpoint directory's layout (file names, format, versions), its error and the weights' digest (no torch).

What :mod:`r2s2r_envs.policies.checkpoint` (which reads a directory) and :mod:`r2s2r_envs.policies.zoo` (which
resolves ``zoo:NAME`` to one) both need, below them both; every name here is importable from ``checkpoint`` too.
"""

from __future__ import annotations

import hashlib
import os

#: The ``format`` field of ``config.json``.
CHECKPOINT_FORMAT = "r2s2r_envs.policy_checkpoint"
#: Version of the checkpoint layout this package writes (2: feature stages, residual networks, recipes).
CHECKPOINT_VERSION = 2
#: Versions :func:`read_checkpoint` reads (version 1: raw features, plain MLPs; its config reads as recipe v1).
READABLE_CHECKPOINT_VERSIONS: tuple[int, ...] = (1, 2)
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "policy.pt"
LOG_FILE = "train_log.json"
LOSS_PLOT = "loss.png"


class CheckpointError(ValueError):
    """A directory that is not a usable policy checkpoint; the message names the path and what is wrong."""


def weights_digest(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a weights file's bytes (recorded in ``config.json`` as ``weights_sha256`` from version 2)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
