"""Reference checkpoints: the model zoo (no torch here).

``zoo:NAME`` names a reference checkpoint wherever a policy checkpoint is accepted:
:func:`r2s2r_envs.policies.load_policy`, ``r2s2r evaluate --policy zoo:NAME``. Each entry is an ordinary
``r2s2r train`` checkpoint (its ``config.json`` holds the training config, the datasets' content hashes and the
package version that trained it). The index ships with this package (``zoo/index.json``: the entries with a
one-line description, the record their measured results are in, and the SHA-256 of each file); the checkpoints
themselves are data in a package of their own, ``r2s2r_envs_zoo``, built from the repository's ``zoo/`` folder and
installed offline with ``pip install ./zoo`` (``make demo`` and ``make setup`` do), so that the core wheel stays
small. A checkpoint resolves only when its files have the hashes the index pins. docs/baselines.md, "Model zoo",
lists the entries.
"""

from __future__ import annotations

import json
import os
from importlib import resources
from pathlib import Path
from typing import Any

from r2s2r_envs.policies.checkpoint_layout import CONFIG_FILE, CheckpointError, weights_digest

#: Prefix of a zoo name where a checkpoint path is accepted.
ZOO_PREFIX = "zoo:"
#: The data package that holds the checkpoints, and how to install it.
ZOO_PACKAGE = "r2s2r_envs_zoo"
ZOO_INSTALL = "pip install ./zoo (from the root of a checkout of r2s2r_envs; make demo and make setup do it)"
#: The index field that pins each file of an entry: ``{file name: SHA-256}``.
HASHES_FIELD = "files_sha256"


class ZooError(CheckpointError):
    """A ``zoo:NAME`` that cannot be loaded: a name the zoo does not have (the message lists those it has), the
    data package not installed (the message says how to install it), or a file whose hash is not the pinned one."""


def zoo_index_path() -> Path:
    """The zoo's index, shipped with this package."""
    return Path(str(resources.files("r2s2r_envs.policies") / "zoo" / "index.json"))


def zoo_root() -> Path:
    """The folder of the checkpoints: the installed data package ``r2s2r_envs_zoo``.

    Raises:
        ZooError: the data package is not installed (the message names it and the install command).
    """
    try:
        return Path(str(resources.files(ZOO_PACKAGE)))
    except ModuleNotFoundError:
        raise ZooError(
            f"the model zoo's checkpoints are in the data package {ZOO_PACKAGE}, which is not installed: {ZOO_INSTALL}"
        ) from None


def zoo_index() -> dict[str, dict[str, Any]]:
    """``{name: entry}`` of ``zoo/index.json`` (empty when the package ships none)."""
    index = zoo_index_path()
    if not index.is_file():
        return {}
    return {e["name"]: e for e in json.loads(index.read_text())["checkpoints"]}


def is_zoo_name(spec: str | os.PathLike[str]) -> bool:
    """Whether a policy argument names a zoo checkpoint (``zoo:NAME``)."""
    return isinstance(spec, str) and spec.startswith(ZOO_PREFIX)


def verify_entry(name: str, entry: dict[str, Any], path: Path) -> None:
    """Checks that the files of the checkpoint ``path`` have the SHA-256 that the index entry pins.

    Raises:
        ZooError: the entry pins no hashes, or a file is missing or has another hash.
    """
    pinned = entry.get(HASHES_FIELD)
    if not isinstance(pinned, dict) or not pinned:
        raise ZooError(f"zoo checkpoint {name!r}: the zoo index pins no file hashes ({HASHES_FIELD})")
    for file, expected in sorted(pinned.items()):
        target = path / file
        if not target.is_file():
            raise ZooError(
                f"zoo checkpoint {name!r}: {target} is missing from the data package {ZOO_PACKAGE}; reinstall it: "
                f"{ZOO_INSTALL}"
            )
        actual = weights_digest(target)
        if actual != expected:
            raise ZooError(
                f"zoo checkpoint {name!r}: {target} has sha256 {actual}, the zoo index pins {expected}: the data "
                f"package {ZOO_PACKAGE} is damaged or of another version; reinstall it: {ZOO_INSTALL}"
            )


def resolve_checkpoint(spec: str | os.PathLike[str]) -> Path:
    """The checkpoint directory of a path or a ``zoo:NAME`` (whose files are checked against the pinned hashes).

    Raises:
        ZooError: ``zoo:NAME`` with a name the zoo does not have (the message lists those it has), the data package
            not installed, or a file whose hash differs from the index's.
    """
    if not is_zoo_name(spec):
        return Path(spec)
    name = str(spec)[len(ZOO_PREFIX) :]
    index = zoo_index()
    if name not in index:
        raise ZooError(f"no zoo checkpoint {name!r}; the zoo has {sorted(index) or 'none'} (docs/baselines.md)")
    path = zoo_root() / name
    if not (path / CONFIG_FILE).is_file():
        raise ZooError(
            f"zoo checkpoint {name!r} is in the index but not in the installed data package {ZOO_PACKAGE} "
            f"({path}); reinstall it: {ZOO_INSTALL}"
        )
    verify_entry(name, index[name], path)
    return path
