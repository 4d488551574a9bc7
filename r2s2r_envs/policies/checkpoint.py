"""The checkpoint directory written by ``r2s2r train --out DIR`` and its checks (no torch).

Layout (docs/baselines.md, "Checkpoints"):

* ``config.json``: ``format``, ``checkpoint_version``, the resolved training ``config``, the policy ``metadata``
  (method, ``real_fraction``, grounding ``variant``, datasets with content hashes, training seed, numbers of real
  and sim demos, policy class), the observation/action ``pipeline`` (keys, shapes, normalization statistics) and
  the ``model`` sizes;
* ``policy.pt``: the network weights (a plain ``state_dict``, read with ``torch.load(weights_only=True)``: a
  checkpoint is data, never code), whose SHA-256 ``config.json`` records (``weights_sha256``, from version 2:
  a changed or damaged file is refused);
* ``train_log.json``: loss curve and training time; ``loss.png``: the loss curve.

:func:`read_checkpoint` checks a directory and returns its ``config.json`` without importing torch (so an
evaluation or a leaderboard can read the metadata of a policy on a machine without torch).
"""

from __future__ import annotations

import os
from typing import Any

from r2s2r_envs.evaluation.schema import METHOD_KEYS
from r2s2r_envs.policies.checkpoint_layout import (
    CHECKPOINT_FORMAT,
    CHECKPOINT_VERSION,
    CONFIG_FILE,
    LOG_FILE,
    LOSS_PLOT,
    READABLE_CHECKPOINT_VERSIONS,
    WEIGHTS_FILE,
    CheckpointError,
    weights_digest,
)
from r2s2r_envs.policies.zoo import resolve_checkpoint
from r2s2r_envs.safe_json import JSONFileError, check_content_hash, read_json

#: Keys every checkpoint's ``metadata`` carries: those of a result's ``method`` section, which an evaluation
#: copies from it (``r2s2r_envs.evaluation.schema.METHOD_KEYS``, the one list).
METADATA_KEYS: tuple[str, ...] = METHOD_KEYS


#: Environment variable that lets :func:`read_checkpoint` read a ``config.json`` without its hashes (``1``).
TRUST_UNHASHED_ENV = "R2S2R_TRUST_UNHASHED"
#: The hashes a checkpoint's ``config.json`` carries: of its own content, and of the weights file.
HASH_FIELDS: tuple[str, ...] = ("content_sha256", "weights_sha256")


def trust_unhashed_from_env() -> bool:
    """Whether the user said to read checkpoints without hashes (``R2S2R_TRUST_UNHASHED=1``)."""
    return os.environ.get(TRUST_UNHASHED_ENV, "").strip().lower() in ("1", "true", "yes")


def read_checkpoint(path: str | os.PathLike[str], *, trust_unhashed: bool | None = None) -> dict[str, Any]:
    """Checks a checkpoint directory and returns the content of its ``config.json``.

    A ``config.json`` without ``content_sha256`` or ``weights_sha256`` (version 1 wrote neither; a version-2 file
    written before ``content_sha256`` existed lacks it) is refused unless the user trusts it: without them a flipped
    weight or an edited normalization statistic would change every action unnoticed.

    Args:
        path: a directory written by ``r2s2r train --out DIR``, or ``zoo:NAME`` (a shipped reference checkpoint,
            :mod:`r2s2r_envs.policies.zoo`).
        trust_unhashed: read a ``config.json`` that lacks its hashes (unverified); default: whether the environment
            variable ``R2S2R_TRUST_UNHASHED`` is ``1``.

    Raises:
        FileNotFoundError: the directory does not exist.
        CheckpointError: it is not a checkpoint (no ``config.json`` or ``policy.pt``), the file is not a checkpoint
            config, or it has another checkpoint version (the message names the one this package reads).
    """
    root = resolve_checkpoint(path)
    if not root.exists():
        raise FileNotFoundError(
            f"no policy checkpoint at {root}: the directory does not exist (write one with r2s2r train --out DIR)"
        )
    if not root.is_dir():
        raise CheckpointError(f"{root} is a file; a policy checkpoint is a directory (r2s2r train --out DIR)")
    config_path = root / CONFIG_FILE
    if not config_path.is_file():
        raise CheckpointError(f"{root} is not a policy checkpoint: it has no {CONFIG_FILE} (written by r2s2r train)")
    try:  # bounded and strict: a NaN/Infinity statistic or a 100,000-deep file is refused naming the file
        data = read_json(config_path)
    except JSONFileError as exc:
        raise CheckpointError(f"{exc} (a checkpoint's {CONFIG_FILE} is strict JSON, written by r2s2r train)") from None
    if not isinstance(data, dict) or data.get("format") != CHECKPOINT_FORMAT:
        fmt = data.get("format") if isinstance(data, dict) else None
        raise CheckpointError(
            f"{config_path} is not a policy checkpoint config (format {fmt!r}, expected {CHECKPOINT_FORMAT!r})"
        )
    version = data.get("checkpoint_version")
    if version not in READABLE_CHECKPOINT_VERSIONS:
        raise CheckpointError(
            f"{root} has checkpoint version {version!r}; this version of r2s2r_envs reads versions "
            f"{list(READABLE_CHECKPOINT_VERSIONS)} (retrain with this version, or use the r2s2r_envs version that "
            "wrote it)"
        )
    missing = [field for field in HASH_FIELDS if field not in data]
    trusted = trust_unhashed_from_env() if trust_unhashed is None else trust_unhashed
    if missing and not trusted:
        raise CheckpointError(
            f"{config_path} (checkpoint version {version}) has no {' or '.join(missing)}, so neither it nor "
            f"{WEIGHTS_FILE} can be verified: a damaged weight or statistic would change the policy's actions "
            f"unnoticed. Accepted: a config.json with both hashes (r2s2r train writes them; retrain). To read this "
            f"one unverified, because you trust its source, set {TRUST_UNHASHED_ENV}=1"
        )
    # After format and version: its own content_sha256 (r2s2r train writes it; an older file has none).
    try:
        data = check_content_hash(data, str(config_path), fix="retrain, or restore the checkpoint from its source")
    except JSONFileError as exc:
        raise CheckpointError(str(exc)) from None
    for key in ("config", "metadata", "pipeline", "model"):
        if not isinstance(data.get(key), dict):
            raise CheckpointError(f"{config_path} lacks its {key!r} section")
    missing = [k for k in METADATA_KEYS if k not in data["metadata"]]
    if missing:
        raise CheckpointError(f"{config_path}: metadata lacks {missing}")
    if not (root / WEIGHTS_FILE).is_file():
        raise CheckpointError(f"{root} has no {WEIGHTS_FILE} (the weights); the training run did not finish")
    expected = data.get("weights_sha256")
    if (version >= 2 or expected is not None) and expected != (actual := weights_digest(root / WEIGHTS_FILE)):
        raise CheckpointError(
            f"{root / WEIGHTS_FILE} does not match the weights its config.json records (sha256 {expected}, the "
            f"file has {actual}): the file was changed or damaged; retrain or restore it"
        )
    return data


__all__ = [
    "CHECKPOINT_FORMAT",
    "CHECKPOINT_VERSION",
    "CONFIG_FILE",
    "HASH_FIELDS",
    "LOG_FILE",
    "LOSS_PLOT",
    "METADATA_KEYS",
    "READABLE_CHECKPOINT_VERSIONS",
    "TRUST_UNHASHED_ENV",
    "WEIGHTS_FILE",
    "CheckpointError",
    "read_checkpoint",
    "trust_unhashed_from_env",
    "weights_digest",
]
