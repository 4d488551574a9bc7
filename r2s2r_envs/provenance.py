"""Provenance: the versions of the software that wrote a file, in one form for every writer.

Datasets, lab logs, grounding files, behavior models and evaluation results record which versions made them, so a
number can be traced to its inputs and results compared only within one version (docs/architecture.md).
"""

from __future__ import annotations

import importlib
import platform

from r2s2r_envs._version import __version__
from r2s2r_envs.mappings import check_keys

#: The packages a provenance record may name, in the order every record lists them.
VERSION_NAMES: tuple[str, ...] = ("r2s2r_envs", "mujoco", "gymnasium", "numpy", "h5py", "python")


def versions(*names: str) -> dict[str, str]:
    """Versions of the named packages (``"python"``: the interpreter), in ``VERSION_NAMES`` order.

    Args:
        *names: Some of ``VERSION_NAMES``; none: all of them.

    Raises:
        ValueError: a name not in ``VERSION_NAMES`` (the message lists them).
    """
    check_keys(names, VERSION_NAMES, what="version name", error=ValueError)
    wanted = set(names or VERSION_NAMES)
    return {name: _version_of(name) for name in VERSION_NAMES if name in wanted}


def _version_of(name: str) -> str:
    if name == "python":
        return platform.python_version()
    if name == "r2s2r_envs":
        return __version__
    return str(importlib.import_module(name).__version__)  # imported on demand: h5py only for those who ask


__all__ = ["VERSION_NAMES", "versions"]
