"""The checks a dataset file passes before it is read: its structure and its content hash.

:func:`~r2s2r_envs.datasets.reader.open_dataset` checks a file's root (:func:`check_root`: schema version, format
mark, required attributes and groups) and its demos (:func:`index_demos`: groups, attributes, arrays), then its
content hash (:func:`verify_parts`, :func:`verify_content`; what the hash covers: ``datasets.schema``).  Every
problem is a :class:`~r2s2r_envs.datasets.schema.DatasetError` subclass whose message names the file and what is
wrong; an array HDF5 cannot read is a :class:`~r2s2r_envs.datasets.schema.CorruptDatasetError` naming the demo and
the array (:func:`read_error`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import h5py
import numpy as np

from r2s2r_envs.datasets import schema
from r2s2r_envs.datasets.schema import (
    CorruptDatasetError,
    HashMismatchError,
    NotADatasetError,
    UnsupportedSchemaError,
)
from r2s2r_envs.datasets.stats import RunningStats
from r2s2r_envs.safe_json import JSONFileError, loads

VerifyMode = Literal["full", "quick", "none"]
VERIFY_MODES: tuple[str, ...] = ("full", "quick", "none")

_ROOT_ATTRS = ("provenance", "generation", "content_sha256", "num_demos", "attempts", "successes", "complete")
# Schema version 2 adds what its content hash needs.
_ROOT_ATTRS_V2 = (*_ROOT_ATTRS, "content_parts", "episodes_requested", "valid_fraction")
_DEMO_ATTRS = ("demo_id", "num_samples", "sha256", "seed", "success")
_DEMO_ATTRS_V2 = (*_DEMO_ATTRS, "arrays_sha256")
# Relative tolerance of full verification's recomputed statistics (float sums may round differently across machines).
_STATS_RTOL = 1e-9
# What a reader is told about each part of the file that the version-2 content hash covers.
_PART_NAMES = {
    "provenance": "the provenance (root attribute 'provenance': env, domain, world, demonstrator, versions)",
    "env_args": "robomimic's env_args (attribute data.env_args)",
    "generation": "the generation settings (root attribute 'generation')",
    "summary": "the summary counters (num_demos, total, attempts, successes, complete, ...)",
    "masks": "the filter keys under /mask",
    "stats": "the normalization statistics under /stats",
}


# ---------------------------------------------------------------------------------------------- structure
def check_root(path: Path, f: h5py.File) -> int:
    """The file's schema version, after checking its root: an r2s2r_envs dataset of a supported version, its format
    mark, and the attributes and groups that version requires."""
    version = f.attrs.get("r2s2r_schema_version")
    if version is None:
        raise NotADatasetError(foreign_message(path, f))
    # A stored 1.7 must not pass as version 1: only integer types are accepted.
    if isinstance(version, np.ndarray) and version.shape in ((), (1,)):
        version = version.reshape(()).item() if version.dtype.kind in "iu" else version
    if isinstance(version, (bool, np.bool_)) or not isinstance(version, (int, np.integer)):
        raise CorruptDatasetError(
            f"{path}: schema version must be an integer, the file stores r2s2r_schema_version = {version!r} "
            f"({type(version).__name__}); {schema.supported_versions_text()}"
        )
    version = int(version)
    if version not in schema.SUPPORTED_SCHEMA_VERSIONS:
        newer = version > max(schema.SUPPORTED_SCHEMA_VERSIONS)
        hint = "upgrade r2s2r_envs to read it" if newer else "regenerate it with this version"
        raise UnsupportedSchemaError(
            f"{path} has schema version {version}, which is {'newer than' if newer else 'not'} a supported one: "
            f"{schema.supported_versions_text()}; {hint}"
        )
    # The format mark is outside the content hash: it is checked for its one value instead.
    if "r2s2r_format" in f.attrs and str(f.attrs["r2s2r_format"]) != schema.FORMAT_NAME:
        raise CorruptDatasetError(
            f"{path}: root attribute r2s2r_format is {str(f.attrs['r2s2r_format'])[:80]!r}; an r2s2r_envs dataset "
            f"has {schema.FORMAT_NAME!r}"
        )
    missing = [a for a in (_ROOT_ATTRS if version == 1 else _ROOT_ATTRS_V2) if a not in f.attrs]
    for group in ("data", "mask", "stats"):
        if group not in f:
            missing.append(f"/{group}")
    if "data" in f:
        missing += [f"data.attrs[{a!r}]" for a in ("total", "env_args") if a not in f["data"].attrs]
    if missing:
        raise CorruptDatasetError(f"{path}: schema version {version} requires {missing}, which are missing")
    return version


def index_demos(
    path: Path, f: h5py.File, schema_version: int, domain: str
) -> tuple[dict[int, str], dict[int, int], dict[int, str]]:
    """Reads and checks the demo list (ids, lengths, arrays present): by demo id, its group's name, its number of
    samples and its stored hash."""
    groups: dict[int, str] = {}
    lengths: dict[int, int] = {}
    hashes: dict[int, str] = {}
    data = f["data"]
    first_keys: list[str] | None = None
    required_attrs = _DEMO_ATTRS if schema_version == 1 else _DEMO_ATTRS_V2
    required_arrays = schema.array_keys(domain, schema_version)
    for name, grp in data.items():
        if not isinstance(grp, h5py.Group):
            raise CorruptDatasetError(f"{path}: data/{name} is not a demo group")
        missing = [a for a in required_attrs if a not in grp.attrs]
        if missing:
            raise CorruptDatasetError(f"{path}: data/{name} lacks attribute(s) {missing}")
        demo_id = int(grp.attrs["demo_id"])
        if name != schema.demo_group_name(demo_id):
            raise CorruptDatasetError(
                f"{path}: group data/{name} has demo_id {demo_id}; expected data/{schema.demo_group_name(demo_id)}"
            )
        n = int(grp.attrs["num_samples"])
        if domain == "real" and "states" in grp:
            raise CorruptDatasetError(
                f"{path}: data/{name} of a lab dataset (domain 'real') holds simulator 'states', which lab "
                "datasets never store (they reveal the lab's hidden physics); regenerate the file"
            )
        for key in required_arrays:
            if key not in grp:
                raise CorruptDatasetError(f"{path}: data/{name} lacks the array {key!r}")
            if grp[key].shape[0] != n:
                raise CorruptDatasetError(
                    f"{path}: data/{name}/{key} has {grp[key].shape[0]} rows, num_samples says {n}"
                )
        labels = schema.ACTION_LABELS
        if labels in required_arrays and grp[labels].shape != grp["actions"].shape:
            raise CorruptDatasetError(
                f"{path}: data/{name}/{labels} has shape {grp[labels].shape}, its actions "
                f"{grp['actions'].shape}; they must agree"
            )
        for sub in ("obs", "next_obs"):
            if sub not in grp:
                raise CorruptDatasetError(f"{path}: data/{name} lacks the group {sub!r}")
        keys = sorted(grp["obs"].keys())
        if first_keys is None:
            first_keys = keys
        elif keys != first_keys:
            raise CorruptDatasetError(f"{path}: data/{name} has observation keys {keys}, other demos have {first_keys}")
        if sorted(grp["next_obs"].keys()) != keys:
            raise CorruptDatasetError(f"{path}: data/{name} has different obs and next_obs keys")
        groups[demo_id] = name
        lengths[demo_id] = n
        hashes[demo_id] = str(grp.attrs["sha256"])
    if sorted(groups) != list(range(len(groups))):
        raise CorruptDatasetError(f"{path}: demo ids must be 0..{len(groups) - 1}, found {sorted(groups)[:10]}...")
    num_samples, num_demos = int(sum(lengths.values())), len(groups)
    total = int(data.attrs["total"])
    if total != num_samples:
        raise CorruptDatasetError(f"{path}: data.attrs['total'] is {total}, the demos hold {num_samples}")
    if int(f.attrs["num_demos"]) != num_demos:
        raise CorruptDatasetError(
            f"{path}: num_demos says {int(f.attrs['num_demos'])}, the file holds {num_demos} demos"
        )
    return groups, lengths, hashes


# ---------------------------------------------------------------------------------------------- content hash
def verify_content(
    path: Path,
    f: h5py.File,
    mode: VerifyMode,
    *,
    schema_version: int,
    groups: dict[int, str],
    hashes: dict[int, str],
    stored_stats: Callable[[], dict[str, RunningStats]],
) -> None:
    """Checks the content hash in ``mode`` ``"quick"`` or ``"full"`` (``DatasetFile.verify``), from the demo index
    (:func:`index_demos`); ``stored_stats``: the file's normalization statistics (``DatasetFile.stats``).

    Raises:
        HashMismatchError: naming what does not match (a part of the file, or the first such demo).
        CorruptDatasetError: if an array cannot be read (e.g. a failed checksum).
    """
    if schema_version == 1:
        _verify_v1(path, f, mode, groups, hashes)
        return
    modified = "was modified after the file was written"
    parts = verify_parts(path, f)
    for demo_id in sorted(groups):
        attrs = f["data"][groups[demo_id]].attrs
        if schema.demo_hash(str(attrs["arrays_sha256"]), dict(attrs)) != hashes[demo_id]:
            raise HashMismatchError(
                f"{path}: the attributes of demo {demo_id} (success, seed, outcomes, ...) {modified}; "
                "they do not match the demo's stored hash"
            )
    expected = str(f.attrs["content_sha256"])
    if schema.content_hash(parts, hashes) != expected:
        raise HashMismatchError(
            f"{path}: the part and demo hashes do not combine to the stored content hash {expected[:12]}...; "
            "the file was modified after it was written"
        )
    if mode == "quick":
        return
    recomputed: dict[str, RunningStats] = {}
    for demo_id in sorted(groups):
        items = _demo_arrays(path, f, groups, demo_id)
        stored = str(f["data"][groups[demo_id]].attrs["arrays_sha256"])
        if schema.array_items_hash(items) != stored:
            raise HashMismatchError(
                f"{path}: the arrays of demo {demo_id} do not match its stored hash; the file is "
                "damaged or was modified after it was written"
            )
        for name, arr in items:
            if schema.is_stats_stream(name, arr):
                new = RunningStats.from_array(arr)
                recomputed[name] = new if name not in recomputed else recomputed[name].merge(new)
    _check_stats(path, stored_stats(), recomputed)


def _verify_v1(path: Path, f: h5py.File, mode: VerifyMode, groups: dict[int, str], hashes: dict[int, str]) -> None:
    expected = str(f.attrs["content_sha256"])
    if schema.dataset_hash_v1(hashes) != expected:
        raise HashMismatchError(
            f"{path}: the per-demo hashes do not combine to the stored content hash {expected[:12]}...; "
            "the file was modified after it was written"
        )
    if mode == "quick":
        return
    for demo_id in sorted(groups):
        if schema.array_items_hash(_demo_arrays(path, f, groups, demo_id)) != hashes[demo_id]:
            raise HashMismatchError(
                f"{path}: the arrays of demo {demo_id} do not match its stored hash; the file is "
                "damaged or was modified after it was written"
            )


def verify_parts(path: Path, f: h5py.File) -> dict[str, str]:
    """Checks the file-level parts of the version-2 content hash against ``content_parts``; returns them."""
    stored = json_attr(path, f.attrs["content_parts"], "root attribute 'content_parts'")
    lacking = [name for name in schema.CONTENT_PARTS if not isinstance(stored.get(name), str)]
    if lacking or set(stored) - set(schema.CONTENT_PARTS):
        raise CorruptDatasetError(
            f"{path}: root attribute 'content_parts' must map exactly {list(schema.CONTENT_PARTS)} to their "
            f"hashes; it lacks {lacking} and has {sorted(stored)}: the attribute was damaged or edited, so what "
            "else changed cannot be told"
        )
    parts = schema.file_parts(f)
    for name in schema.CONTENT_PARTS:
        if parts[name] != stored.get(name):
            raise HashMismatchError(
                f"{path}: {_PART_NAMES[name]} was modified after the file was written; its hash does not "
                "match the one stored with the file"
            )
    return parts


def _demo_arrays(path: Path, f: h5py.File, groups: dict[int, str], demo_id: int) -> list[tuple[str, np.ndarray]]:
    grp = f["data"][groups[demo_id]]
    items: list[tuple[str, np.ndarray]] = []
    for array in array_paths(grp):
        try:
            items.append((array, grp[array][()]))
        except (OSError, RuntimeError, ValueError) as exc:
            raise read_error(path, demo_id, array, exc) from exc
    return items


def _check_stats(path: Path, stored: dict[str, RunningStats], recomputed: dict[str, RunningStats]) -> None:
    """Compares the stored normalization statistics with those recomputed from the arrays."""
    if sorted(stored) != sorted(recomputed):
        raise HashMismatchError(
            f"{path}: /stats has statistics of {sorted(stored)}, the arrays give {sorted(recomputed)}"
        )
    for name, want in recomputed.items():
        have = stored[name]
        same = have.count == want.count and all(
            np.allclose(getattr(have, field), getattr(want, field), rtol=_STATS_RTOL, atol=1e-12)
            for field in ("mean", "m2", "min", "max")
        )
        if not same:
            raise HashMismatchError(
                f"{path}: the normalization statistics of {name!r} do not match its arrays; "
                "the file was modified after it was written"
            )


# ---------------------------------------------------------------------------------------------- messages
def json_attr(path: Path, text: Any, what: str, kind: type = dict) -> Any:
    """A JSON attribute parsed with the bounded reader (``r2s2r_envs.safe_json``) and of ``kind``; a
    ``CorruptDatasetError`` naming the attribute otherwise."""
    try:
        value = loads(str(text), what=f"{path}: {what}")
    except JSONFileError as exc:
        raise CorruptDatasetError(f"{exc}; the file was damaged or edited") from None
    if not isinstance(value, kind):
        want = "object" if kind is dict else kind.__name__
        raise CorruptDatasetError(f"{path}: {what} must be a JSON {want}, got {type(value).__name__}")
    return value


def foreign_message(path: Path, f: h5py.File) -> str:
    """What an HDF5 file without an r2s2r_envs schema version is (another robomimic dataset names its env)."""
    base = f"{path} is not an r2s2r_envs dataset (no r2s2r_schema_version attribute)"
    if "data" in f and isinstance(f["data"], h5py.Group):
        env_name = "unknown env"
        try:
            env_name = json.loads(f["data"].attrs["env_args"]).get("env_name", env_name)
        except (KeyError, ValueError, TypeError, AttributeError):
            pass
        base += f"; it looks like a robomimic dataset from {env_name!r}, which robomimic reads directly"
    return f"{base}. {schema.supported_versions_text()}"


def read_error(path: Path, demo_id: int, array: str, exc: BaseException) -> CorruptDatasetError:
    """The error for an array of a demo that HDF5 cannot read (a failed checksum named as damage)."""
    text = str(exc)
    if "checksum" in text.lower() or "filter" in text.lower():
        why = "its HDF5 checksum fails: the bytes on disk were damaged or altered after writing"
    else:
        why = f"HDF5 says: {text}"
    return CorruptDatasetError(
        f"{path}: cannot read {array!r} of demo {demo_id}: {why}. Regenerate the file or restore it from a copy"
    )


def array_paths(grp: h5py.Group) -> list[str]:
    """Every array under a demo's group, e.g. ``["actions", "obs/arm_qpos", ...]``, sorted."""
    paths: list[str] = []
    grp.visititems(lambda name, obj: paths.append(name) if isinstance(obj, h5py.Dataset) else None)
    return sorted(paths)
