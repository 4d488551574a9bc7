"""Datasets: robomimic-compatible HDF5 with provenance, generation, loaders and co-training mixtures.

The core (schema, writer, reader, numpy loaders, mixtures) imports without torch; the torch ``Dataset``
wrappers live in :mod:`r2s2r_envs.datasets.torch_data` (install the ``torch`` extra).
"""

from __future__ import annotations

import functools


@functools.cache
def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("r2s2r_envs")
    except PackageNotFoundError:
        return "unknown"
