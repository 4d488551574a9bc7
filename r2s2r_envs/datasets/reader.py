"""Reader of r2s2r_envs datasets: validates the schema and the content hash, then serves demos.

Every problem with a file surfaces as a :class:`~r2s2r_envs.datasets.schema.DatasetError` subclass whose
message names the file, what is wrong and what is accepted, never as a traceback from inside h5py. A damaged
array (its HDF5 fletcher32 checksum fails) raises :class:`~r2s2r_envs.datasets.schema.CorruptDatasetError`
naming the file, the demo and the array when it is read.  The checks of a file's structure and content hash live in
:mod:`r2s2r_envs.datasets.integrity`; this module opens a file and serves its demos.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from r2s2r_envs.datasets import schema
from r2s2r_envs.datasets.integrity import VERIFY_MODES as VERIFY_MODES
from r2s2r_envs.datasets.integrity import VerifyMode as VerifyMode
from r2s2r_envs.datasets.integrity import (
    array_paths,
    check_root,
    index_demos,
    json_attr,
    read_error,
    verify_content,
    verify_parts,
)
from r2s2r_envs.datasets.schema import (
    CorruptDatasetError,
    DatasetError,
    EmptyDatasetError,
    NoCleanLabelsError,
    NotADatasetError,
    UnsupportedSchemaError,
)
from r2s2r_envs.datasets.stats import RunningStats
from r2s2r_envs.mappings import check_keys

_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


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
        self.provenance: dict[str, Any] = json_attr(path, f.attrs["provenance"], "root attribute 'provenance'")
        self.generation: dict[str, Any] = json_attr(path, f.attrs["generation"], "root attribute 'generation'")
        self.env_args: dict[str, Any] = json_attr(path, f["data"].attrs["env_args"], "attribute data.env_args")
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

    def robomimic_modalities(self) -> dict[str, list[str]]:
        """The observation keys by robomimic modality, ``{"low_dim": [...], "rgb": [...]}``: a robomimic config's
        ``observation.modalities.obs`` that trains on every key (images under ``rgb``;
        :func:`~r2s2r_envs.datasets.schema.robomimic_modalities`)."""
        return schema.robomimic_modalities(self.obs_spec())

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
        out["object_outcomes"] = json_attr(self.path, text, f"demo {demo_id}'s object_outcomes", kind=list)
        return out

    def read(self, demo_id: int, path: str) -> np.ndarray:
        """Reads one array of one demo, e.g. ``read(3, "obs/arm_qpos")``.

        Raises:
            KeyError: naming the paths that exist, if ``path`` does not.
            CorruptDatasetError: if HDF5 cannot read the data.
        """
        grp = self._f["data"][self._groups[self._check_id(demo_id)]]
        if path not in grp:
            raise KeyError(f"{self.path}: demo {demo_id} has no array {path!r}; it has {array_paths(grp)}")
        try:
            return grp[path][()]
        except (OSError, RuntimeError, ValueError) as exc:
            raise read_error(self.path, demo_id, path, exc) from exc

    def read_into(self, demo_id: int, path: str, out: np.ndarray) -> None:
        """Reads one array of one demo straight into ``out`` (no temporary copy).

        Raises:
            KeyError: naming the paths that exist, if ``path`` does not.
            CorruptDatasetError: if HDF5 cannot read the data (e.g. a failed checksum).
        """
        grp = self._f["data"][self._groups[self._check_id(demo_id)]]
        if path not in grp:
            raise KeyError(f"{self.path}: demo {demo_id} has no array {path!r}; it has {array_paths(grp)}")
        try:
            grp[path].read_direct(out)
        except (OSError, RuntimeError, ValueError, TypeError) as exc:
            raise read_error(self.path, demo_id, path, exc) from exc

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
        verify_content(
            self.path,
            self._f,
            mode,
            schema_version=self.schema_version,
            groups=self._groups,
            hashes=self._hashes,
            stored_stats=self.stats,
        )

    def _verify_parts(self) -> dict[str, str]:
        """Checks the file-level parts of the version-2 content hash against ``content_parts``; returns them."""
        return verify_parts(self.path, self._f)

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
        check_keys(obs_keys, available, what="observation key", where=str(self.path))
        return list(obs_keys)

    def _id_from_group_name(self, name: bytes | str) -> int:
        name = name.decode() if isinstance(name, bytes) else name
        grp = self._f["data"].get(name)
        if grp is None:
            raise CorruptDatasetError(f"{self.path}: a filter key names {name!r}, which is not a demo")
        return int(grp.attrs["demo_id"])

    def _index_demos(self) -> None:
        """Reads and checks the demo list (ids, lengths, arrays present)."""
        self._groups, self._lengths, self._hashes = index_demos(self.path, self._f, self.schema_version, self.domain)


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
    version = check_root(path, f)
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
