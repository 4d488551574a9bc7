"""Reference checkpoints that ship with the package: the model zoo (no torch here).

``zoo:NAME`` names a checkpoint directory under ``r2s2r_envs/policies/zoo/NAME`` wherever a policy checkpoint is
accepted: :func:`r2s2r_envs.policies.load_policy`, ``r2s2r evaluate --policy zoo:NAME``. Each entry is an ordinary
``r2s2r train`` checkpoint (its ``config.json`` holds the training config, the datasets' content hashes and the
package version that trained it); ``zoo/index.json`` lists the entries with a one-line description and the record
their measured results are in. docs/baselines.md, "Model zoo", lists them.
"""

from __future__ import annotations

import json
import os
from importlib import resources
from pathlib import Path
from typing import Any

from r2s2r_envs.policies.checkpoint import CheckpointError

#: Prefix of a zoo name where a checkpoint path is accepted.
ZOO_PREFIX = "zoo:"


class ZooError(CheckpointError):
    """A ``zoo:NAME`` that names no shipped checkpoint; the message lists the names there are."""


def zoo_root() -> Path:
    """The directory of the shipped checkpoints."""
    return Path(str(resources.files("r2s2r_envs.policies") / "zoo"))


def zoo_index() -> dict[str, dict[str, Any]]:
    """``{name: entry}`` of ``zoo/index.json`` (empty when the package ships none)."""
    index = zoo_root() / "index.json"
    if not index.is_file():
        return {}
    return {e["name"]: e for e in json.loads(index.read_text())["checkpoints"]}


def is_zoo_name(spec: str | os.PathLike[str]) -> bool:
    """Whether a policy argument names a zoo checkpoint (``zoo:NAME``)."""
    return isinstance(spec, str) and spec.startswith(ZOO_PREFIX)


def resolve_checkpoint(spec: str | os.PathLike[str]) -> Path:
    """The checkpoint directory of a path or a ``zoo:NAME``.

    Raises:
        ZooError: ``zoo:NAME`` with a name the zoo does not have (the message lists those it has).
    """
    if not is_zoo_name(spec):
        return Path(spec)
    name = str(spec)[len(ZOO_PREFIX) :]
    index = zoo_index()
    path = zoo_root() / name
    if name not in index or not (path / "config.json").is_file():
        raise ZooError(f"no zoo checkpoint {name!r}; the zoo has {sorted(index) or 'none'} (docs/baselines.md)")
    return path
