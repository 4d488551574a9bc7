"""Reader of r2s2r_envs datasets: validates the schema and the content hash, then serves demos.

Every problem with a file surfaces as a :class:`~r2s2r_envs.datasets.schema.DatasetError` subclass whose
message names the file, what is wrong and what is accepted, never as a traceback from inside h5py. A damaged
array (its HDF5 fletcher32 checksum fails) raises :class:`~r2s2r_envs.datasets.schema.CorruptDatasetError`
naming the file, the demo and the array when it is read.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import h5py
import numpy as np

from r2s2r_envs.datasets import schema
from r2s2r_envs.datasets.schema import (
    CorruptDatasetError,
    DatasetError,
    EmptyDatasetError,
    HashMismatchError,
    NoCleanLabelsError,
    NotADatasetError,
    UnsupportedSchemaError,
)
from r2s2r_envs.datasets.stats import RunningStats
from r2s2r_envs.safe_json import JSONFileError, loads

VerifyMode = Literal["full", "quick", "none"]
VERIFY_MODES: tuple[str, ...] = ("full", "quick", "none")

_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
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


@dataclasses.dataclass(frozen=True, kw_only=True)
class Demo:
    """One demonstration read from a file.

    Attributes:
        demo_id: the demo's id (its position in the file's order).
        obs: per observation key, ``(T, ...)`` observations.
        next_obs: per observation key, ``(T, ...)`` next observations (empty if not requested).
        actions: ``(T, A)`` float32, the executed actions (what replay runs).
        action_labels: ``(T, A)`` float32, the demonstrator's own actions before noise injection (schema version
            3); ``None`` for an older file, which has none (see :meth:`DatasetFile.label_array`).
        rewards: ``(T,)`` float32.
        dones: ``(T,)`` uint8, 1 at the last step.
        states: ``(T, S)`` float64 simulator states; ``None`` if not requested or the file has none (a lab
            dataset never has: docs/datasets.md, "Schema version 2").
        attrs: seed, demonstrator_seed, attempt, success, success_any_step, failure_cause (``None`` on
            success), time_to_sort (``None`` if unsorted), unstable, terminated, truncated,
            object_outcomes (list), episode_return, sha256.
    """

    demo_id: int
    obs: dict[str, np.ndarray]
    next_obs: dict[str, np.ndarray]
    actions: np.ndarray
    rewards: np.ndarray
    dones: np.ndarray
    states: np.ndarray | None
    attrs: dict[str, Any]
    action_labels: np.ndarray | None = None

    @property
    def num_samples(self) -> int:
        """Number of transitions ``T``."""
        return int(len(self.actions))


class DatasetFile:
    """An open, validated dataset file. Create with :func:`open_dataset`.

    Attributes:
        path: the file.
        schema_version: the file's schema version.
        provenance: where the data comes from (env, world, demonstrator, versions, seeds).
        generation: settings of the run that generated the file (empty if written by other means).
        env_args: robomimic's ``env_args`` (``env_name``, ``type``, ``env_kwargs``).
    """

    def __init__(self, path: Path, f: h5py.File) -> None:
        """Use :func:`open_dataset`."""
        self.path = path
        self._f = f
        self.schema_version: int = int(f.attrs["r2s2r_schema_version"])
        self.provenance: dict[str, Any] = _json_attr(path, f.attrs["provenance"], "root attribute 'provenance'")
        self.generation: dict[str, Any] = _json_attr(path, f.attrs["generation"], "root attribute 'generation'")
        self.env_args: dict[str, Any] = _json_attr(path, f["data"].attrs["env_args"], "attribute data.env_args")
        self._groups: dict[int, str] = {}
        self._lengths: dict[int, int] = {}
        self._hashes: dict[int, str] = {}

    # -- metadata ----------------------------------------------------------------------------------

    @property
    def domain(self) -> str:
        """``"real"`` or ``"sim"``."""
        return str(self.provenance.get("domain", "sim"))

    @property
    def has_states(self) -> bool:
        """Whether demos carry simulator ``states`` (simulated datasets do, lab datasets never)."""
        return self.domain == "sim"

    @property
    def has_action_labels(self) -> bool:
        """Whether demos carry ``action_labels`` (schema version 3 and later)."""
        return self.schema_version >= schema.ACTION_LABELS_VERSION

    @property
    def action_noise(self) -> float:
        """Standard deviation of the noise injected into the demonstrator's arm actions, from the generation record
        (0.0: none; :func:`~r2s2r_envs.datasets.schema.injected_action_noise`)."""
        return schema.injected_action_noise(self.generation)

    def label_array(self) -> str:
        """The per-demo array that holds the demonstrator's clean actions (the labels to learn).

        ``"action_labels"`` in a file of schema version 3; in an older file, which has none, ``"actions"`` if its
        generation record says no noise was injected (then the executed actions are the demonstrator's own).

        Raises:
            NoCleanLabelsError: an older file whose actions contain injected noise: its clean labels were never
                stored (the message names the file, its schema version, the noise and how to regenerate it).
        """
        if self.has_action_labels:
            return schema.ACTION_LABELS
        sigma = self.action_noise
        if sigma == 0.0:
            return "actions"
        env = self.env_id or "ENV"
        raise NoCleanLabelsError(
            f"{self.path} has schema version {self.schema_version}, which stores no action_labels, and its actions "
            f"contain injected noise (action_noise sigma={sigma:g}): they are the executed, perturbed actions, not "
            "the demonstrator's clean labels. Regenerate it with this version (schema version "
            f"{schema.SCHEMA_VERSION}, which stores the clean labels): r2s2r generate {env} ... --action-noise "
            f"{sigma:g}, or r2s2r datasets make NAME for a canonical dataset; or load it with labels='executed'"
        )

    @property
    def env_id(self) -> str:
        """The id of the env that made the data."""
        return str(self.provenance.get("env_id", self.env_args.get("env_name", "")))

    @property
    def content_hash(self) -> str:
        """SHA-256 over the file's content (see :mod:`r2s2r_envs.datasets.schema`; version 1: arrays only)."""
        return str(self._f.attrs["content_sha256"])

    @property
    def demo_ids(self) -> list[int]:
        """Demo ids in order."""
        return sorted(self._groups)

    @property
    def num_demos(self) -> int:
        """Number of demos."""
        return len(self._groups)

    @property
    def num_samples(self) -> int:
        """Total transitions over all demos."""
        return int(sum(self._lengths.values()))

    @property
    def complete(self) -> bool:
        """Whether the generating run reached its requested number of demos (false after an interruption)."""
        return bool(self._f.attrs["complete"])

    @property
    def attempts(self) -> int:
        """Episodes run to obtain the demos (more than ``num_demos`` for successes-only runs)."""
        return int(self._f.attrs["attempts"])

    @property
    def successes(self) -> int:
        """Number of successful demos."""
        return int(self._f.attrs["successes"])

    def demo_length(self, demo_id: int) -> int:
        """Number of transitions of one demo."""
        return self._lengths[self._check_id(demo_id)]

    @property
    def obs_keys(self) -> list[str]:
        """Observation keys stored for every demo."""
        if not self._groups:
            return []
        return sorted(self._f["data"][self._groups[self.demo_ids[0]]]["obs"].keys())

    def obs_spec(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """Per observation key, its per-step shape and dtype."""
        grp = self._f["data"][self._groups[self.demo_ids[0]]]["obs"]
        return {k: (tuple(grp[k].shape[1:]), grp[k].dtype) for k in sorted(grp.keys())}

    @property
    def action_dim(self) -> int:
        """Action dimension."""
        return int(self._f["data"][self._groups[self.demo_ids[0]]]["actions"].shape[1])

    def masks(self) -> dict[str, list[int]]:
        """Filter keys (``train``, ``valid``, ``success``, ...) and the demo ids under each."""
        out: dict[str, list[int]] = {}
        for key, dset in self._f["mask"].items():
            out[key] = sorted(self._id_from_group_name(n) for n in dset[()])
        return out

    def stats(self) -> dict[str, RunningStats]:
        """Normalization statistics per stream (``"actions"``, ``"action_labels"`` from schema version 3,
        ``"obs/<key>"``) over all demos."""
        out: dict[str, RunningStats] = {}
        for name, grp in self._f["stats"].items():
            stream = name.replace(".", "/", 1) if name.startswith("obs.") else name
            try:
                out[stream] = RunningStats.from_attrs(grp.attrs)
            except (KeyError, ValueError, TypeError) as exc:
                raise CorruptDatasetError(
                    f"{self.path}: the statistics /stats/{name} cannot be read ({exc}); the file was damaged or edited"
                ) from None
        return out

    # -- data --------------------------------------------------------------------------------------

    def demo_attrs(self, demo_id: int) -> dict[str, Any]:
        """The outcome attributes of one demo (see :class:`Demo`)."""
        attrs = dict(self._f["data"][self._groups[self._check_id(demo_id)]].attrs)
        out: dict[str, Any] = {}
        for key, value in attrs.items():
            if isinstance(value, np.generic):
                value = value.item()
            out[key] = value
        out["failure_cause"] = out.get("failure_cause") or None
        tts = out.get("time_to_sort")
        out["time_to_sort"] = None if tts is None or (isinstance(tts, float) and math.isnan(tts)) else tts
        text = out.get("object_outcomes", "[]")
        out["object_outcomes"] = _json_attr(self.path, text, f"demo {demo_id}'s object_outcomes", kind=list)
        return out

    def read(self, demo_id: int, path: str) -> np.ndarray:
        """Reads one array of one demo, e.g. ``read(3, "obs/arm_qpos")``.

        Raises:
            KeyError: naming the paths that exist, if ``path`` does not.
            CorruptDatasetError: if HDF5 cannot read the data.
        """
        grp = self._f["data"][self._groups[self._check_id(demo_id)]]
        if path not in grp:
            raise KeyError(f"{self.path}: demo {demo_id} has no array {path!r}; it has {_array_paths(grp)}")
        try:
            return grp[path][()]
        except (OSError, RuntimeError, ValueError) as exc:
            raise _read_error(self.path, demo_id, path, exc) from exc

    def read_into(self, demo_id: int, path: str, out: np.ndarray) -> None:
        """Reads one array of one demo straight into ``out`` (no temporary copy).

        Raises:
            KeyError: naming the paths that exist, if ``path`` does not.
            CorruptDatasetError: if HDF5 cannot read the data (e.g. a failed checksum).
        """
        grp = self._f["data"][self._groups[self._check_id(demo_id)]]
        if path not in grp:
            raise KeyError(f"{self.path}: demo {demo_id} has no array {path!r}; it has {_array_paths(grp)}")
        try:
            grp[path].read_direct(out)
        except (OSError, RuntimeError, ValueError, TypeError) as exc:
            raise _read_error(self.path, demo_id, path, exc) from exc

    def demo(
        self,
        demo_id: int,
        *,
        obs_keys: list[str] | None = None,
        next_obs: bool = True,
        states: bool = True,
    ) -> Demo:
        """Reads one demo.

        Args:
            demo_id: which demo.
            obs_keys: observation keys to read (default: all).
            next_obs: also read ``next_obs``.
            states: also read the simulator states, if the file has them (``Demo.states`` is ``None`` otherwise).
        """
        keys = self._check_obs_keys(obs_keys)
        return Demo(
            demo_id=int(demo_id),
            obs={k: self.read(demo_id, f"obs/{k}") for k in keys},
            next_obs={k: self.read(demo_id, f"next_obs/{k}") for k in keys} if next_obs else {},
            actions=self.read(demo_id, "actions"),
            action_labels=self.read(demo_id, schema.ACTION_LABELS) if self.has_action_labels else None,
            rewards=self.read(demo_id, "rewards"),
            dones=self.read(demo_id, "dones"),
            states=self.read(demo_id, "states") if states and self.has_states else None,
            attrs=self.demo_attrs(demo_id),
        )

    def demos(self, **kwargs: Any) -> Iterator[Demo]:
        """Iterates over all demos in order; keyword arguments as for :meth:`demo`."""
        for demo_id in self.demo_ids:
            yield self.demo(demo_id, **kwargs)

    # -- verification ------------------------------------------------------------------------------

    def verify(self, mode: VerifyMode = "full") -> None:
        """Checks the content hash.

        Args:
            mode: ``"quick"`` recomputes every hash from the stored metadata: the provenance, ``env_args``,
                generation settings, summary counters, filter keys, normalization statistics and every demo's
                attributes (reads no arrays; a damaged array still fails its checksum when read). ``"full"`` also
                recomputes every demo's array hash and the normalization statistics from the arrays (reads the
                whole file). ``"none"`` does nothing. Version-1 files: arrays only, as that version defined.

        Raises:
            HashMismatchError: naming what does not match (a part of the file, or the first such demo).
            CorruptDatasetError: if an array cannot be read (e.g. a failed checksum).
        """
        if mode not in VERIFY_MODES:
            raise ValueError(f"unknown verify mode {mode!r}; choose one of {VERIFY_MODES}")
        if mode == "none":
            return
        if self.schema_version == 1:
            self._verify_v1(mode)
            return
        modified = "was modified after the file was written"
        parts = self._verify_parts()
        for demo_id in self.demo_ids:
            attrs = self._f["data"][self._groups[demo_id]].attrs
            if schema.demo_hash(str(attrs["arrays_sha256"]), dict(attrs)) != self._hashes[demo_id]:
                raise HashMismatchError(
                    f"{self.path}: the attributes of demo {demo_id} (success, seed, outcomes, ...) {modified}; "
                    "they do not match the demo's stored hash"
                )
        expected = self.content_hash
        if schema.content_hash(parts, self._hashes) != expected:
            raise HashMismatchError(
                f"{self.path}: the part and demo hashes do not combine to the stored content hash {expected[:12]}...; "
                "the file was modified after it was written"
            )
        if mode == "quick":
            return
        recomputed: dict[str, RunningStats] = {}
        for demo_id in self.demo_ids:
            items = self._demo_arrays(demo_id)
            stored = str(self._f["data"][self._groups[demo_id]].attrs["arrays_sha256"])
            if schema.array_items_hash(items) != stored:
                raise HashMismatchError(
                    f"{self.path}: the arrays of demo {demo_id} do not match its stored hash; the file is "
                    "damaged or was modified after it was written"
                )
            for name, arr in items:
                if schema.is_stats_stream(name, arr):
                    new = RunningStats.from_array(arr)
                    recomputed[name] = new if name not in recomputed else recomputed[name].merge(new)
        self._check_stats(recomputed)

    def _verify_v1(self, mode: VerifyMode) -> None:
        expected = self.content_hash
        if schema.dataset_hash_v1(self._hashes) != expected:
            raise HashMismatchError(
                f"{self.path}: the per-demo hashes do not combine to the stored content hash {expected[:12]}...; "
                "the file was modified after it was written"
            )
        if mode == "quick":
            return
        for demo_id in self.demo_ids:
            if schema.array_items_hash(self._demo_arrays(demo_id)) != self._hashes[demo_id]:
                raise HashMismatchError(
                    f"{self.path}: the arrays of demo {demo_id} do not match its stored hash; the file is "
                    "damaged or was modified after it was written"
                )

    def _verify_parts(self) -> dict[str, str]:
        """Checks the file-level parts of the version-2 content hash against ``content_parts``; returns them."""
        stored = _json_attr(self.path, self._f.attrs["content_parts"], "root attribute 'content_parts'")
        lacking = [name for name in schema.CONTENT_PARTS if not isinstance(stored.get(name), str)]
        if lacking or set(stored) - set(schema.CONTENT_PARTS):
            raise CorruptDatasetError(
                f"{self.path}: root attribute 'content_parts' must map exactly {list(schema.CONTENT_PARTS)} to their "
                f"hashes; it lacks {lacking} and has {sorted(stored)}: the attribute was damaged or edited, so what "
                "else changed cannot be told"
            )
        parts = schema.file_parts(self._f)
        for name in schema.CONTENT_PARTS:
            if parts[name] != stored.get(name):
                raise HashMismatchError(
                    f"{self.path}: {_PART_NAMES[name]} was modified after the file was written; its hash does not "
                    "match the one stored with the file"
                )
        return parts

    def _demo_arrays(self, demo_id: int) -> list[tuple[str, np.ndarray]]:
        grp = self._f["data"][self._groups[demo_id]]
        items: list[tuple[str, np.ndarray]] = []
        for path in _array_paths(grp):
            try:
                items.append((path, grp[path][()]))
            except (OSError, RuntimeError, ValueError) as exc:
                raise _read_error(self.path, demo_id, path, exc) from exc
        return items

    def _check_stats(self, recomputed: dict[str, RunningStats]) -> None:
        """Compares the stored normalization statistics with those recomputed from the arrays."""
        stored = self.stats()
        if sorted(stored) != sorted(recomputed):
            raise HashMismatchError(
                f"{self.path}: /stats has statistics of {sorted(stored)}, the arrays give {sorted(recomputed)}"
            )
        for name, want in recomputed.items():
            have = stored[name]
            same = have.count == want.count and all(
                np.allclose(getattr(have, f), getattr(want, f), rtol=_STATS_RTOL, atol=1e-12)
                for f in ("mean", "m2", "min", "max")
            )
            if not same:
                raise HashMismatchError(
                    f"{self.path}: the normalization statistics of {name!r} do not match its arrays; "
                    "the file was modified after it was written"
                )

    # -- lifecycle ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Closes the file."""
        if self._f.id.valid:
            self._f.close()

    def __enter__(self) -> DatasetFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"DatasetFile({str(self.path)!r}, env_id={self.env_id!r}, domain={self.domain!r}, "
            f"demos={self.num_demos}, samples={self.num_samples}, hash={self.content_hash[:12]})"
        )

    # -- internals ---------------------------------------------------------------------------------

    def _check_id(self, demo_id: int) -> int:
        demo_id = int(demo_id)
        if demo_id not in self._groups:
            raise KeyError(f"{self.path}: no demo {demo_id}; demo ids are 0..{self.num_demos - 1}")
        return demo_id

    def _check_obs_keys(self, obs_keys: list[str] | None) -> list[str]:
        available = self.obs_keys
        if obs_keys is None:
            return available
        unknown = [k for k in obs_keys if k not in available]
        if unknown:
            raise KeyError(f"{self.path}: no observation key(s) {unknown}; the file has {available}")
        return list(obs_keys)

    def _id_from_group_name(self, name: bytes | str) -> int:
        name = name.decode() if isinstance(name, bytes) else name
        grp = self._f["data"].get(name)
        if grp is None:
            raise CorruptDatasetError(f"{self.path}: a filter key names {name!r}, which is not a demo")
        return int(grp.attrs["demo_id"])

    def _index_demos(self) -> None:
        """Reads and checks the demo list (ids, lengths, arrays present)."""
        data = self._f["data"]
        first_keys: list[str] | None = None
        required_attrs = _DEMO_ATTRS if self.schema_version == 1 else _DEMO_ATTRS_V2
        required_arrays = schema.array_keys(self.domain, self.schema_version)
        for name, grp in data.items():
            if not isinstance(grp, h5py.Group):
                raise CorruptDatasetError(f"{self.path}: data/{name} is not a demo group")
            missing = [a for a in required_attrs if a not in grp.attrs]
            if missing:
                raise CorruptDatasetError(f"{self.path}: data/{name} lacks attribute(s) {missing}")
            demo_id = int(grp.attrs["demo_id"])
            if name != schema.demo_group_name(demo_id):
                raise CorruptDatasetError(
                    f"{self.path}: group data/{name} has demo_id {demo_id}; "
                    f"expected data/{schema.demo_group_name(demo_id)}"
                )
            n = int(grp.attrs["num_samples"])
            if self.domain == "real" and "states" in grp:
                raise CorruptDatasetError(
                    f"{self.path}: data/{name} of a lab dataset (domain 'real') holds simulator 'states', which lab "
                    "datasets never store (they reveal the lab's hidden physics); regenerate the file"
                )
            for key in required_arrays:
                if key not in grp:
                    raise CorruptDatasetError(f"{self.path}: data/{name} lacks the array {key!r}")
                if grp[key].shape[0] != n:
                    raise CorruptDatasetError(
                        f"{self.path}: data/{name}/{key} has {grp[key].shape[0]} rows, num_samples says {n}"
                    )
            labels = schema.ACTION_LABELS
            if labels in required_arrays and grp[labels].shape != grp["actions"].shape:
                raise CorruptDatasetError(
                    f"{self.path}: data/{name}/{labels} has shape {grp[labels].shape}, its actions "
                    f"{grp['actions'].shape}; they must agree"
                )
            for sub in ("obs", "next_obs"):
                if sub not in grp:
                    raise CorruptDatasetError(f"{self.path}: data/{name} lacks the group {sub!r}")
            keys = sorted(grp["obs"].keys())
            if first_keys is None:
                first_keys = keys
            elif keys != first_keys:
                raise CorruptDatasetError(
                    f"{self.path}: data/{name} has observation keys {keys}, other demos have {first_keys}"
                )
            if sorted(grp["next_obs"].keys()) != keys:
                raise CorruptDatasetError(f"{self.path}: data/{name} has different obs and next_obs keys")
            self._groups[demo_id] = name
            self._lengths[demo_id] = n
            self._hashes[demo_id] = str(grp.attrs["sha256"])
        if sorted(self._groups) != list(range(len(self._groups))):
            raise CorruptDatasetError(
                f"{self.path}: demo ids must be 0..{len(self._groups) - 1}, found {sorted(self._groups)[:10]}..."
            )
        total = int(data.attrs["total"])
        if total != self.num_samples:
            raise CorruptDatasetError(f"{self.path}: data.attrs['total'] is {total}, the demos hold {self.num_samples}")
        if int(self._f.attrs["num_demos"]) != self.num_demos:
            raise CorruptDatasetError(
                f"{self.path}: num_demos says {int(self._f.attrs['num_demos'])}, the file holds {self.num_demos} demos"
            )


def open_dataset(
    path: str | os.PathLike[str],
    *,
    verify: VerifyMode = "full",
    allow_empty: bool = False,
) -> DatasetFile:
    """Opens and validates a dataset file.

    Args:
        path: the HDF5 file.
        verify: ``"full"`` (default) recomputes the content hash from every array; ``"quick"`` checks only
            the structure and the per-demo hash list; ``"none"`` checks only the structure.
        allow_empty: accept a file without demos (e.g. a generation interrupted before its first demo).

    Returns:
        The open file; close it or use it as a context manager.

    Raises:
        FileNotFoundError: if ``path`` does not exist.
        NotADatasetError: not an HDF5 file, or an HDF5 file that is not ours (e.g. another robomimic dataset).
        UnsupportedSchemaError: a schema version this code does not read (the message names those it reads).
        CorruptDatasetError: truncated or damaged, a required key missing, or a content hash mismatch.
        EmptyDatasetError: no demos and ``allow_empty`` is false.
    """
    if verify not in VERIFY_MODES:
        raise ValueError(f"unknown verify mode {verify!r}; choose one of {VERIFY_MODES}")
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such dataset file")
    if path.is_dir():
        raise NotADatasetError(f"{path} is a directory, not a dataset file")
    size = path.stat().st_size
    if size == 0:
        raise NotADatasetError(f"{path} is an empty file (0 bytes), not a dataset; {schema.supported_versions_text()}")
    with open(path, "rb") as fh:
        head = fh.read(8)
    if head != _HDF5_SIGNATURE:
        raise NotADatasetError(
            f"{path} is not an HDF5 file (no HDF5 signature); r2s2r_envs datasets are HDF5 files in robomimic's "
            f"layout; {schema.supported_versions_text()}"
        )
    try:
        f = h5py.File(path, "r")
    except BlockingIOError as exc:
        raise DatasetError(
            f"{path} is locked: another process has it open for writing (a generation still running?); "
            "wait for it to finish or stop it (an interrupted run keeps every completed demo)"
        ) from exc
    except OSError as exc:
        raise CorruptDatasetError(
            f"{path} cannot be opened: it is truncated or damaged (HDF5 says: {exc}). If a generation run was "
            "killed while writing, re-run it to resume, or regenerate the file"
        ) from exc
    try:
        dataset = _validate(path, f, verify, allow_empty)
    except DatasetError:
        f.close()
        raise
    except (OSError, RuntimeError, KeyError, ValueError, TypeError) as exc:
        f.close()
        raise CorruptDatasetError(f"{path} is damaged: HDF5 failed while reading its structure ({exc})") from exc
    return dataset


def _validate(path: Path, f: h5py.File, verify: VerifyMode, allow_empty: bool) -> DatasetFile:
    version = f.attrs.get("r2s2r_schema_version")
    if version is None:
        raise NotADatasetError(_foreign_message(path, f))
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
    dataset = DatasetFile(path, f)
    if version >= 2 and verify != "none":
        # Before anything is read from the metadata, so an edited domain is reported as an edit.
        dataset._verify_parts()
    domain = dataset.provenance.get("domain", "sim") if isinstance(dataset.provenance, dict) else None
    if domain not in schema.DOMAINS:
        raise CorruptDatasetError(f"{path}: provenance domain is {domain!r}; expected one of {schema.DOMAINS}")
    if version == 1 and domain == "real":
        raise UnsupportedSchemaError(
            f"{path} is a schema-version-1 lab dataset (domain 'real'): it holds the lab's hidden simulator state "
            "(MuJoCo states, which reveal the lab's physics) and must be regenerated with this version "
            f"(r2s2r generate ...), whose lab datasets store none; {schema.supported_versions_text()}"
        )
    dataset._index_demos()
    if dataset.num_demos == 0 and not allow_empty:
        raise EmptyDatasetError(
            f"{path} is a valid dataset with no demonstrations (attempts recorded: {dataset.attempts}); "
            "generate demos into it first"
        )
    dataset.verify(verify)
    return dataset


def _json_attr(path: Path, text: Any, what: str, kind: type = dict) -> Any:
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


def _foreign_message(path: Path, f: h5py.File) -> str:
    base = f"{path} is not an r2s2r_envs dataset (no r2s2r_schema_version attribute)"
    if "data" in f and isinstance(f["data"], h5py.Group):
        env_name = "unknown env"
        try:
            env_name = json.loads(f["data"].attrs["env_args"]).get("env_name", env_name)
        except (KeyError, ValueError, TypeError, AttributeError):
            pass
        base += f"; it looks like a robomimic dataset from {env_name!r}, which robomimic reads directly"
    return f"{base}. {schema.supported_versions_text()}"


def _read_error(path: Path, demo_id: int, array: str, exc: BaseException) -> CorruptDatasetError:
    text = str(exc)
    if "checksum" in text.lower() or "filter" in text.lower():
        why = "its HDF5 checksum fails: the bytes on disk were damaged or altered after writing"
    else:
        why = f"HDF5 says: {text}"
    return CorruptDatasetError(
        f"{path}: cannot read {array!r} of demo {demo_id}: {why}. Regenerate the file or restore it from a copy"
    )


def _array_paths(grp: h5py.Group) -> list[str]:
    paths: list[str] = []
    grp.visititems(lambda name, obj: paths.append(name) if isinstance(obj, h5py.Dataset) else None)
    return sorted(paths)
