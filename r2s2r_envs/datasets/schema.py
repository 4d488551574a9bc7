"""The r2s2r_envs dataset schema: robomimic's HDF5 layout plus provenance and a content hash.

A dataset file is a robomimic dataset (robomimic and its users read it as it is) with extra,
namespaced metadata. Layout of schema version 3 (docs/datasets.md, "Layout")::

    /                                   attrs: r2s2r_schema_version (int), r2s2r_format (str),
                                               provenance (JSON), generation (JSON),
                                               content_sha256, content_parts (JSON), num_demos, complete,
                                               episodes_requested, valid_fraction, attempts, successes
    /data                               attrs: total (samples over all demos), env_args (JSON, robomimic)
    /data/demo_<k>                      attrs: demo_id (int k, the order), num_samples, seed,
                                               demonstrator_seed, attempt, success, success_any_step,
                                               failure_cause, time_to_sort, unstable, terminated,
                                               truncated, object_outcomes (JSON), episode_return,
                                               arrays_sha256, sha256
    /data/demo_<k>/obs/<key>            (T, ...) observation at step t
    /data/demo_<k>/next_obs/<key>       (T, ...) observation after the action at step t
    /data/demo_<k>/actions              (T, A) float32, the action executed at step t (consistent with next_obs:
                                               replay runs these)
    /data/demo_<k>/action_labels        (T, A) float32, the demonstrator's own action at step t before noise
                                               injection (the label to learn); equal to actions where no noise
                                               was injected (lab data, action_noise 0). Schema version 3
    /data/demo_<k>/rewards              (T,)   float32
    /data/demo_<k>/dones                (T,)   uint8, 1 at the last step of the demo
    /data/demo_<k>/states               (T, S) float64, full MuJoCo state before step t (replay);
                                               simulated datasets only: a lab dataset (domain "real") has none
    /mask/<filter>                      demo group names (bytes): train, valid, success
    /stats/<name>                       attrs count, mean, m2, std, min, max for "actions", "action_labels"
                                        and every low-dimensional "obs/<key>" (normalization statistics)

Every array is chunked with HDF5's fletcher32 checksum, so a damaged byte fails when it is read.

Content hash of versions 2 and 3 (the same rules; version 3 adds the ``action_labels`` array, hashed like every
array, and its statistics): everything a reader trusts (docs/datasets.md, "Integrity").

* Per demo, ``arrays_sha256`` is SHA-256 over every array's path, dtype, shape and bytes, in sorted path order
  (:func:`array_items_hash`), and ``sha256`` is SHA-256 over ``arrays_sha256`` and the canonical JSON of the
  demo's other attributes (:func:`demo_hash`): success, seed, failure cause, outcomes, ...
* Per file, :func:`file_parts` hashes the stored provenance, ``env_args`` and generation settings (their JSON text),
  the summary counters, the filter keys under ``/mask`` and the normalization statistics under ``/stats``;
  ``content_parts`` stores these part hashes so a reader can name what was modified.
* ``content_sha256`` is SHA-256 over the part hashes and the ``demo_id:sha256`` lines in demo-id order
  (:func:`content_hash`).

Everything is hashed by value, so the hash depends neither on compression or chunking nor on how many workers
wrote the file. Version 1 hashed the arrays only (:func:`dataset_hash_v1`); version-1 files of simulated data are
still read under that rule, version-1 lab files are refused (they hold the lab's hidden simulator state).

Versions 1 and 2 have no ``action_labels``: their ``actions`` are the clean labels only where the generation record
says no noise was injected (:func:`injected_action_noise`; docs/datasets.md, "Schema version 3").
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import h5py

#: Schema version this code writes.
SCHEMA_VERSION: int = 3
#: Schema versions this code reads.
SUPPORTED_SCHEMA_VERSIONS: tuple[int, ...] = (1, 2, 3)
#: First schema version whose demos carry ``action_labels``.
ACTION_LABELS_VERSION: int = 3
#: The per-demo array of the demonstrator's clean actions (before noise injection).
ACTION_LABELS: str = "action_labels"
#: Value of the root ``r2s2r_format`` attribute, marks a file as ours.
FORMAT_NAME: str = "r2s2r_envs.datasets"

# robomimic EnvType.GYM_TYPE (robomimic/envs/env_base.py): the env is made with gym.make(env_name, **env_kwargs).
ROBOMIMIC_GYM_ENV_TYPE: int = 2

DOMAINS: tuple[str, ...] = ("real", "sim")

#: Per-demo arrays (besides obs/next_obs) every dataset of the current schema version has.
COMMON_ARRAY_KEYS: tuple[str, ...] = ("actions", ACTION_LABELS, "rewards", "dones")
#: Per-demo arrays of a simulated dataset: the common ones plus the simulator ``states`` (exact replay).
SIM_ARRAY_KEYS: tuple[str, ...] = (*COMMON_ARRAY_KEYS, "states")
#: Streams (besides the low-dimensional ``obs/<key>``) with normalization statistics under ``/stats``.
ACTION_STREAMS: tuple[str, ...] = ("actions", ACTION_LABELS)
# Filter keys written under /mask.
MASK_KEYS: tuple[str, ...] = ("train", "valid", "success")
#: Parts of the file (besides the demos) covered by the content hash of versions 2 and 3 (``content_parts``).
CONTENT_PARTS: tuple[str, ...] = ("env_args", "generation", "masks", "provenance", "stats", "summary")
# Demo attributes that hold hashes: everything else in a demo group's attributes is covered by its sha256.
DEMO_HASH_ATTRS: tuple[str, ...] = ("arrays_sha256", "sha256")

_HASH_PREFIX_V1 = b"r2s2r-content-v1\n"
_HASH_PREFIX = b"r2s2r-content-v2\n"
_DEMO_PREFIX = b"r2s2r-demo-v2\n"


class DatasetError(ValueError):
    """A dataset file cannot be used. The message names the file, the problem and what is accepted."""


class NotADatasetError(DatasetError):
    """The file is not an r2s2r_envs dataset (not HDF5, or another program's HDF5 file)."""


class UnsupportedSchemaError(DatasetError):
    """The file's schema version is not one this version of r2s2r_envs reads."""


class CorruptDatasetError(DatasetError):
    """The file is truncated, damaged, misses a required key or fails its content hash."""


class HashMismatchError(CorruptDatasetError):
    """The file's content does not match the content hash stored with it."""


class EmptyDatasetError(DatasetError):
    """The file is a valid dataset with no demonstrations."""


class NoCleanLabelsError(DatasetError):
    """The file has no clean action labels: a file of schema version 1 or 2 (no ``action_labels``) whose actions
    contain injected noise, asked for its clean labels (``TrajectoryDataset(..., labels="clean")``)."""


def supported_versions_text() -> str:
    """Returns a short phrase naming the schema versions this code reads."""
    from r2s2r_envs._version import __version__

    versions = ", ".join(str(v) for v in SUPPORTED_SCHEMA_VERSIONS)
    return f"r2s2r_envs {__version__} reads schema version(s) {versions}"


def array_keys(domain: str, version: int = SCHEMA_VERSION) -> tuple[str, ...]:
    """The per-demo arrays (besides ``obs``/``next_obs``) a dataset of ``domain`` and schema ``version`` must have.

    A lab dataset (``"real"``) stores no simulator ``states``: they would reveal the lab's hidden physics
    (docs/concepts.md, "Honesty rules"). Files before schema version 3 have no ``action_labels``.

    Raises:
        ValueError: for a domain other than ``"real"`` or ``"sim"``.
    """
    if domain not in DOMAINS:
        raise ValueError(f"unknown domain {domain!r}; expected one of {DOMAINS}")
    keys = COMMON_ARRAY_KEYS if domain == "real" else SIM_ARRAY_KEYS
    if version < ACTION_LABELS_VERSION:
        keys = tuple(k for k in keys if k != ACTION_LABELS)
    return keys


def injected_action_noise(generation: Mapping[str, Any]) -> float:
    """The standard deviation of the action noise a file's generation record says was injected (0.0: none).

    ``generate(..., action_noise=...)`` records it as ``action_noise``, only when non-zero; a file made from another
    one (the ablation's demo subsets) records its source's settings under ``source_generation``, which is followed.
    A value that is not a number is returned as NaN (unknown, so not noise-free).
    """
    record: Any = generation
    while isinstance(record, Mapping):
        noise = record.get("action_noise")
        if noise is not None:
            if isinstance(noise, bool) or not isinstance(noise, (int, float)):
                return math.nan
            if noise:
                return float(noise)
        record = record.get("source_generation")
    return 0.0


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
    if isinstance(obj, bytes):
        return obj.decode()
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON-serializable: {obj!r}")


def sha256_text(text: str | bytes) -> str:
    """SHA-256 hex digest of a string (UTF-8) or bytes."""
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()


def array_items_hash(items: Iterable[tuple[str, np.ndarray]]) -> str:
    """SHA-256 over named arrays, in sorted name order, covering name, dtype, shape and bytes.

    Args:
        items: ``(path, array)`` pairs, e.g. ``("obs/arm_qpos", array)``.

    Returns:
        The hex digest.
    """
    h = hashlib.sha256()
    for name, arr in sorted(items, key=lambda item: item[0]):
        arr = np.asarray(arr)
        # Little-endian bytes, so the hash does not depend on the machine.
        little = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<"))
        shape = ",".join(str(s) for s in little.shape)
        h.update(f"{name}|{little.dtype.str}|{shape}\n".encode())
        h.update(little.data if little.ndim else little.tobytes())
    return h.hexdigest()


def demo_attrs_json(attrs: Mapping[str, Any]) -> str:
    """Canonical JSON of a demo's attributes as stored (numpy scalars as plain values), hash attributes left out."""
    return to_json({str(k): v for k, v in attrs.items() if k not in DEMO_HASH_ATTRS})


def demo_hash(arrays_sha256: str, attrs: Mapping[str, Any]) -> str:
    """A demo's hash (schema versions 2 and 3): over its arrays' hash and its other attributes (success, seed,
    outcomes, ...)."""
    h = hashlib.sha256(_DEMO_PREFIX)
    h.update(f"arrays:{arrays_sha256}\nattrs:".encode())
    h.update(demo_attrs_json(attrs).encode())
    return h.hexdigest()


def dataset_hash_v1(demo_hashes: Mapping[int, str]) -> str:
    """Schema version 1's file hash: combines per-demo array hashes in demo-id order (arrays only)."""
    h = hashlib.sha256(_HASH_PREFIX_V1)
    for demo_id in sorted(demo_hashes):
        h.update(f"{int(demo_id)}:{demo_hashes[demo_id]}\n".encode())
    return h.hexdigest()


def content_hash(parts: Mapping[str, str], demo_hashes: Mapping[int, str]) -> str:
    """The file hash of schema versions 2 and 3: the part hashes (:data:`CONTENT_PARTS`) and the demo hashes in
    demo-id order.

    Raises:
        KeyError: if a part is missing.
    """
    h = hashlib.sha256(_HASH_PREFIX)
    for name in CONTENT_PARTS:
        h.update(f"{name}:{parts[name]}\n".encode())
    for demo_id in sorted(demo_hashes):
        h.update(f"demo {int(demo_id)}:{demo_hashes[demo_id]}\n".encode())
    return h.hexdigest()


def summary_record(f: h5py.File) -> dict[str, Any]:
    """The summary counters a reader trusts (demo and sample counts, attempts, successes, completeness)."""
    return {
        "num_demos": int(f.attrs["num_demos"]),
        "total": int(f["data"].attrs["total"]),
        "attempts": int(f.attrs["attempts"]),
        "successes": int(f.attrs["successes"]),
        "complete": bool(f.attrs["complete"]),
        "episodes_requested": int(f.attrs["episodes_requested"]),
        "valid_fraction": float(f.attrs["valid_fraction"]),
    }


def masks_hash(masks: Mapping[str, Sequence[str]]) -> str:
    """SHA-256 over every filter key and the demo names under it, in stored order."""
    h = hashlib.sha256()
    for key in sorted(masks):
        h.update(f"{key}:{','.join(masks[key])}\n".encode())
    return h.hexdigest()


def stats_hash(stats: Mapping[str, Mapping[str, Any]]) -> str:
    """SHA-256 over normalization statistics as stored: per ``/stats`` group name, every attribute by value."""
    items: list[tuple[str, np.ndarray]] = []
    for name in sorted(stats):
        items.extend((f"{name}/{key}", np.asarray(value)) for key, value in sorted(stats[name].items()))
    return array_items_hash(items)


def content_parts(
    *,
    provenance_json: str,
    env_args_json: str,
    generation_json: str,
    summary: Mapping[str, Any],
    masks: Mapping[str, Sequence[str]],
    stats: Mapping[str, Mapping[str, Any]],
) -> dict[str, str]:
    """The hash of every file-level part covered by the version-2 content hash (keys: :data:`CONTENT_PARTS`).

    The JSON attributes are hashed as stored text, so any edit of them, even one that keeps the meaning, counts;
    except the provenance's software ``versions`` (Python, numpy, h5py, ...), which are left out: they say what
    wrote the file, not what it holds, and two software stacks that write identical data must agree on its hash
    (the canonical datasets' pinned hashes would otherwise break with every numpy release).
    """
    return {
        "env_args": sha256_text(env_args_json),
        "generation": sha256_text(generation_json),
        "masks": masks_hash(masks),
        "provenance": sha256_text(_without_versions(provenance_json)),
        "stats": stats_hash(stats),
        "summary": sha256_text(to_json(dict(summary))),
    }


def _without_versions(provenance_json: str) -> str:
    try:
        record = json.loads(provenance_json)
    except ValueError:
        return provenance_json  # not JSON: hashed as is (and reported as damaged by the reader)
    if not isinstance(record, dict) or "versions" not in record:
        return provenance_json
    record = {k: v for k, v in record.items() if k != "versions"}
    return to_json(record)


def file_parts(f: h5py.File) -> dict[str, str]:
    """:func:`content_parts` of an open file, from what it stores (what a reader checks)."""
    masks = {
        key: [n.decode() if isinstance(n, bytes) else str(n) for n in f["mask"][key][()]] for key in f["mask"].keys()
    }
    return content_parts(
        provenance_json=str(f.attrs["provenance"]),
        env_args_json=str(f["data"].attrs["env_args"]),
        generation_json=str(f.attrs["generation"]),
        summary=summary_record(f),
        masks=masks,
        stats={name: dict(grp.attrs) for name, grp in f["stats"].items()},
    )


def is_low_dim(arr_shape: tuple[int, ...], dtype: np.dtype) -> bool:
    """True for a per-step array that is a flat float vector (normalizable), False for images etc.

    Args:
        arr_shape: the per-step shape (without the time axis).
        dtype: the array dtype.
    """
    return len(arr_shape) <= 1 and np.issubdtype(dtype, np.floating)


def is_image(arr_shape: tuple[int, ...], dtype: np.dtype) -> bool:
    """True for a per-step array that is an RGB image: ``(H, W, 3)`` uint8, as robomimic's ``rgb`` modality reads
    it (robomimic moves the channels first and scales to [0, 1] itself)."""
    return len(arr_shape) == 3 and arr_shape[-1] == 3 and np.dtype(dtype) == np.uint8


def robomimic_modalities(obs_spec: Mapping[str, tuple[tuple[int, ...], np.dtype]]) -> dict[str, list[str]]:
    """The observation keys under the robomimic modality that reads them: what a robomimic config lists under
    ``observation.modalities.obs`` to train on every key (docs/datasets.md#image-datasets).

    Args:
        obs_spec: per observation key, its per-step shape and dtype (``DatasetFile.obs_spec()``).

    Returns:
        ``{"low_dim": [...], "rgb": [...]}``, keys sorted: flat float vectors (:func:`is_low_dim`) and images
        (:func:`is_image`); a key of neither kind is in neither list.
    """
    return {
        "low_dim": sorted(k for k, (shape, dtype) in obs_spec.items() if is_low_dim(shape, dtype)),
        "rgb": sorted(k for k, (shape, dtype) in obs_spec.items() if is_image(shape, dtype)),
    }


def is_stats_stream(name: str, arr: np.ndarray) -> bool:
    """Whether the writer keeps normalization statistics of the demo array at ``name`` (``actions``,
    ``action_labels``, low-dimensional obs)."""
    return name in ACTION_STREAMS or (name.startswith("obs/") and is_low_dim(arr.shape[1:], arr.dtype))


def is_valid_split(demo_id: int, valid_fraction: float) -> bool:
    """Whether demo ``demo_id`` belongs to the ``valid`` split.

    Demo k is in ``valid`` when ``floor((k + 1) f) > floor(k f)``: exactly ``floor(n f)`` of the first ``n``
    demos, spread evenly, decided from the id alone so the split never changes as a file grows.
    """
    if valid_fraction <= 0.0:
        return False
    return math.floor((demo_id + 1) * valid_fraction + 1e-9) > math.floor(demo_id * valid_fraction + 1e-9)
