"""The r2s2r_envs dataset schema: robomimic's HDF5 layout plus provenance.

A dataset file is a robomimic dataset (robomimic and its users read it as it is) with extra,
namespaced metadata. Layout of schema version 1::

    /                                   attrs: r2s2r_schema_version (int), r2s2r_format (str),
                                               provenance (JSON), generation (JSON),
                                               content_sha256, num_demos, complete, episodes_requested,
                                               attempts, successes
    /data                               attrs: total (samples over all demos), env_args (JSON, robomimic)
    /data/demo_<k>                      attrs: demo_id (int k, the order), num_samples, seed,
                                               demonstrator_seed, attempt, success, success_any_step,
                                               failure_cause, time_to_sort, unstable, terminated,
                                               truncated, object_outcomes (JSON), episode_return, sha256
    /data/demo_<k>/obs/<key>            (T, ...) observation at step t
    /data/demo_<k>/next_obs/<key>       (T, ...) observation after the action at step t
    /data/demo_<k>/actions              (T, A) float32
    /data/demo_<k>/rewards              (T,)   float32
    /data/demo_<k>/dones                (T,)   uint8, 1 at the last step of the demo
    /data/demo_<k>/states               (T, S) float64, full MuJoCo state before step t (replay)
    /mask/<filter>                      demo group names (bytes): train, valid, success
    /stats/<name>                       attrs count, mean, m2, std, min, max for "actions" and every
                                        low-dimensional "obs/<key>" (normalization statistics)

Everything the writer changes between two flushes is HDF5 metadata (attributes, links) or new space
at the end of the file, so a file is valid after every flush (see ``writer.py``).

The content hash covers the arrays only (not attributes): per demo, SHA-256 over every array's path,
dtype, shape and bytes, in sorted path order; per file, SHA-256 over the list of ``demo_id:demo_hash``
lines in demo-id order. It does not depend on compression, chunking or how many workers wrote the file.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any, Iterable, Mapping

import numpy as np

#: Schema version this code writes.
SCHEMA_VERSION: int = 1
#: Schema versions this code reads.
SUPPORTED_SCHEMA_VERSIONS: tuple[int, ...] = (1,)
#: Value of the root ``r2s2r_format`` attribute, marks a file as ours.
FORMAT_NAME: str = "r2s2r_envs.datasets"

# robomimic EnvType.GYM_TYPE (robomimic/envs/env_base.py): the env is made with gym.make(env_name, **env_kwargs).
ROBOMIMIC_GYM_ENV_TYPE: int = 2

DOMAINS: tuple[str, ...] = ("real", "sim")

# Names of the robomimic per-demo arrays besides obs/next_obs.
ARRAY_KEYS: tuple[str, ...] = ("actions", "rewards", "dones", "states")
# Filter keys written under /mask.
MASK_KEYS: tuple[str, ...] = ("train", "valid", "success")

_HASH_PREFIX = b"r2s2r-content-v1\n"


class DatasetError(ValueError):
    """A dataset file cannot be used. The message names the file, the problem and what is accepted."""


class NotADatasetError(DatasetError):
    """The file is not an r2s2r_envs dataset (not HDF5, or another program's HDF5 file)."""


class UnsupportedSchemaError(DatasetError):
    """The file's schema version is not one this version of r2s2r_envs reads."""


class CorruptDatasetError(DatasetError):
    """The file is truncated, damaged, misses a required key or fails its content hash."""


class HashMismatchError(CorruptDatasetError):
    """The arrays in the file do not match the content hash stored with them."""


class EmptyDatasetError(DatasetError):
    """The file is a valid dataset with no demonstrations."""


def supported_versions_text() -> str:
    """Returns a short phrase naming the schema versions this code reads."""
    from r2s2r_envs.datasets import _package_version

    versions = ", ".join(str(v) for v in SUPPORTED_SCHEMA_VERSIONS)
    return f"r2s2r_envs {_package_version()} reads schema version(s) {versions}"


def demo_group_name(demo_id: int) -> str:
    """Returns the robomimic group name of a demo (``demo_<k>``)."""
    return f"demo_{int(demo_id)}"


def to_json(value: Any) -> str:
    """Serializes ``value`` to canonical JSON (sorted keys), converting numpy scalars and arrays.

    Raises:
        TypeError: if ``value`` holds something JSON cannot represent.
    """
    return json.dumps(value, sort_keys=True, default=_json_default, allow_nan=True)


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON-serializable: {obj!r}")


def array_items_hash(items: Iterable[tuple[str, np.ndarray]]) -> str:
    """SHA-256 over named arrays, in sorted name order, covering name, dtype, shape and bytes.

    Args:
        items: ``(path, array)`` pairs, e.g. ``("obs/arm_qpos", array)``.

    Returns:
        The hex digest.
    """
    h = hashlib.sha256()
    for name, arr in sorted(items, key=lambda item: item[0]):
        # Little-endian bytes, so the hash does not depend on the machine.
        little = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<"))
        shape = ",".join(str(s) for s in little.shape)
        h.update(f"{name}|{little.dtype.str}|{shape}\n".encode())
        h.update(little.data if little.ndim else little.tobytes())
    return h.hexdigest()


def dataset_hash(demo_hashes: Mapping[int, str]) -> str:
    """Combines per-demo hashes into the file's content hash (in demo-id order)."""
    h = hashlib.sha256(_HASH_PREFIX)
    for demo_id in sorted(demo_hashes):
        h.update(f"{int(demo_id)}:{demo_hashes[demo_id]}\n".encode())
    return h.hexdigest()


def is_low_dim(arr_shape: tuple[int, ...], dtype: np.dtype) -> bool:
    """True for a per-step array that is a flat float vector (normalizable), False for images etc.

    Args:
        arr_shape: the per-step shape (without the time axis).
        dtype: the array dtype.
    """
    return len(arr_shape) <= 1 and np.issubdtype(dtype, np.floating)


def is_valid_split(demo_id: int, valid_fraction: float) -> bool:
    """Whether demo ``demo_id`` belongs to the ``valid`` split.

    Demo k is in ``valid`` when ``floor((k + 1) f) > floor(k f)``: exactly ``floor(n f)`` of the first ``n``
    demos, spread evenly, decided from the id alone so the split never changes as a file grows.
    """
    if valid_fraction <= 0.0:
        return False
    return math.floor((demo_id + 1) * valid_fraction + 1e-9) > math.floor(demo_id * valid_fraction + 1e-9)
