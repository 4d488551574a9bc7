"""Crash-safe, incremental writer of r2s2r_envs datasets.

Why a file stays valid when the writing process is killed:

* The file is created with HDF5's ``none`` file-space strategy: space freed during a session is never
  reused, so nothing the last flush wrote is overwritten by later data.
* The metadata cache is told never to evict, so between two flushes no changed metadata reaches the disk.
* Every value that changes after creation (counters, the content hash, normalization statistics) is an
  attribute, i.e. metadata; arrays are only ever added.

The file on disk is therefore always the state of the last flush (new array bytes past its end are
ignored) and a flush follows every demo. What remains is a kill *during* the flush itself (about a
millisecond per demo); :func:`r2s2r_envs.datasets.reader.open_dataset` then reports a damaged file.
The file is also created under a temporary name and renamed once its skeleton is complete, so a file
under the final name always has the full schema. The default, oldest HDF5 file format is used: newer
superblocks record "open for writing" and refuse to open after a crash (and robomimic's SWMR reader
still reads the old format).

Every array is chunked with HDF5's fletcher32 checksum (docs/datasets.md, "Integrity"): a byte damaged on disk
makes the read fail instead of returning altered data. The only arrays written again after creation are the
``/mask`` filter keys, which grow in place; a chunk rewritten before a crash carries its own new checksum and the
last flush's metadata still records the old length, so the file stays valid.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from r2s2r_envs.datasets import schema
from r2s2r_envs.datasets.stats import RunningStats

# Images (T, H, W, C) uint8 are most of an image dataset: gzip (readable by every HDF5 reader) at zlib's default
# level 6, in chunks of 16 frames.  On 64 px lab frames that is 9.6x smaller than raw and 17% smaller than level 4
# for ~22 ms more per 325-frame array (level 9: 6% smaller again, 2.6x the write time); 1-frame chunks are 1.7x
# larger, 64-frame chunks make a one-frame read (robomimic's sampler) 2.4x slower; shuffle does nothing on one-byte
# values (benchmarks/results/dataset-speed/image-datasets.json, "storage_options").
_IMAGE_CHUNK_FRAMES = 16
_IMAGE_COMPRESSION = dict(compression="gzip", compression_opts=6)
# MuJoCo states (hundreds to >1,000 float64 per step: warm-start and actuator-delay buffers included, so replay is
# exact) are most of a state-only file; gzip level 1 with byte shuffling makes them ~3x smaller for next to no
# write time.  The content hash is over values, so it does not depend on this.
_STATES_COMPRESSION = dict(compression="gzip", compression_opts=1, shuffle=True)
# Other arrays are chunked only because fletcher32 needs chunks; one chunk per demo array up to this size keeps a
# loader's read of an array one checksum and one I/O.
_MAX_CHUNK_BYTES = 1 << 20
_MASK_DTYPE = "S32"


@dataclasses.dataclass(kw_only=True)
class Episode:
    """One recorded episode, as produced by a rollout, before it is written.

    Attributes:
        observations: per key, ``T + 1`` observations (the reset observation and one after each step).
        actions: ``(T, A)`` actions sent to the env (executed: what replay runs).
        action_labels: ``(T, A)`` the demonstrator's own actions, before noise injection (the labels to learn);
            ``None`` when they are the executed ones (no noise injected, lab data), stored as a copy of ``actions``.
        rewards: ``(T,)`` rewards.
        states: ``(T, S)`` full simulator state before each step (``env.unwrapped.get_state()``) for a simulated
            episode; ``None`` for a lab episode (domain ``"real"``), whose hidden state is never recorded.
        terminated: whether the episode ended by termination (task over) rather than by the time limit.
        truncated: whether the episode ended by the time limit.
        seed: the seed passed to ``env.reset``.
        demonstrator_seed: the seed passed to the demonstrator's ``reset``.
        attempt: index of the attempt that produced this episode (counts failed attempts too).
        success: ``info["is_success"]`` at the last step.
        success_any_step: whether ``info["is_success"]`` was true at any step.
        failure_cause: ``info["failure_cause"]`` at the last step (``None`` on success).
        time_to_sort: ``info["time_to_sort"]`` at the last step, seconds (``None`` if not sorted).
        unstable: whether the simulation diverged (``info["unstable"]``).
        object_outcomes: ``info["object_outcomes"]`` at the last step.
    """

    observations: dict[str, np.ndarray]
    actions: np.ndarray
    rewards: np.ndarray
    action_labels: np.ndarray | None = None
    states: np.ndarray | None = None
    terminated: bool = False
    truncated: bool = False
    seed: int | None = None
    demonstrator_seed: int | None = None
    attempt: int | None = None
    success: bool = False
    success_any_step: bool = False
    failure_cause: str | None = None
    time_to_sort: float | None = None
    unstable: bool = False
    object_outcomes: list[str] = dataclasses.field(default_factory=list)

    @property
    def num_samples(self) -> int:
        """Number of transitions ``T``."""
        return int(len(self.actions))

    def arrays(self) -> dict[str, np.ndarray]:
        """The demo's arrays under their robomimic paths (``obs/<key>``, ``next_obs/<key>``, ``actions``,
        ``action_labels``, ...).

        ``states`` is included only when the episode has them (simulated episodes); ``action_labels`` always (a copy
        of ``actions`` when the episode has none of its own).

        Raises:
            ValueError: if lengths or shapes disagree or the episode is empty.
        """
        t = self.num_samples
        if t == 0:
            raise ValueError("an episode needs at least one step")
        out: dict[str, np.ndarray] = {}
        for key, seq in self.observations.items():
            seq = np.asarray(seq)
            if len(seq) != t + 1:
                raise ValueError(f"observation {key!r} has {len(seq)} entries, expected T + 1 = {t + 1}")
            out[f"obs/{key}"] = seq[:-1]
            out[f"next_obs/{key}"] = seq[1:]
        dones = np.zeros(t, dtype=np.uint8)
        dones[-1] = 1
        out["actions"] = np.asarray(self.actions, dtype=np.float32).reshape(t, -1)
        if self.action_labels is None:
            out[schema.ACTION_LABELS] = out["actions"].copy()
        else:
            labels = np.asarray(self.action_labels, dtype=np.float32)
            if labels.shape != out["actions"].shape:
                raise ValueError(
                    f"action_labels has shape {labels.shape}, expected the shape of actions {out['actions'].shape}"
                )
            out[schema.ACTION_LABELS] = labels
        out["rewards"] = np.asarray(self.rewards, dtype=np.float32).reshape(t)
        out["dones"] = dones
        if self.states is not None:
            states = np.asarray(self.states, dtype=np.float64)
            if len(states) != t:
                raise ValueError(f"states has {len(states)} rows, expected one per step ({t})")
            out["states"] = states.reshape(t, -1)
        return out

    def attrs(self) -> dict[str, Any]:
        """The demo's outcome attributes as HDF5 can store them (no ``None``)."""
        return {
            "seed": -1 if self.seed is None else int(self.seed),
            "demonstrator_seed": -1 if self.demonstrator_seed is None else int(self.demonstrator_seed),
            "attempt": -1 if self.attempt is None else int(self.attempt),
            "success": bool(self.success),
            "success_any_step": bool(self.success_any_step),
            "failure_cause": self.failure_cause or "",
            "time_to_sort": math.nan if self.time_to_sort is None else float(self.time_to_sort),
            "unstable": bool(self.unstable),
            "terminated": bool(self.terminated),
            "truncated": bool(self.truncated),
            "object_outcomes": schema.to_json(list(self.object_outcomes)),
            "episode_return": float(np.sum(np.asarray(self.rewards, dtype=np.float64))),
        }


class DatasetWriter:
    """Appends demos to a dataset file, flushing after each so the file is always valid.

    Create a new file with :meth:`create` or continue an existing one with :meth:`resume`. Use as a
    context manager or call :meth:`close`. The file's domain (``provenance["domain"]``, ``"sim"`` if absent)
    decides whether episodes carry simulator ``states``: simulated episodes must, lab episodes must not.

    Example:
        >>> with DatasetWriter.create("demos.hdf5", provenance=prov, env_args=args) as w:  # doctest: +SKIP
        ...     w.append(episode)
    """

    def __init__(self, path: Path, file: h5py.File) -> None:
        """Use :meth:`create` or :meth:`resume`."""
        self.path = Path(path)
        self._f = file
        _disable_metadata_evictions(file)
        self._demo_hashes: dict[int, str] = {}
        self._stats: dict[str, RunningStats] = {}
        self._total = 0
        self._successes = 0
        for grp in self._f["data"].values():
            demo_id = int(grp.attrs["demo_id"])
            self._demo_hashes[demo_id] = str(grp.attrs["sha256"])
            self._total += int(grp.attrs["num_samples"])
            self._successes += bool(grp.attrs["success"])
        for name, grp in self._f["stats"].items():
            self._stats[_stats_name_from_group(name)] = RunningStats.from_attrs(grp.attrs)
        self.valid_fraction = float(self._f.attrs.get("valid_fraction", 0.0))
        self.domain: str = _domain_of(self.provenance)
        # In-memory copies of what the content hash covers, so an append never reads the file back to hash it
        # (a reader recomputes the same parts from the file, with schema.file_parts).
        self._texts = {key: str(self._f.attrs[key]) for key in ("provenance", "generation")}
        self._texts["env_args"] = str(self._f["data"].attrs["env_args"])
        self._masks: dict[str, list[str]] = {
            key: [n.decode() for n in self._f["mask"][key][()]] for key in self._f["mask"].keys()
        }
        self._stats_attrs: dict[str, dict[str, Any]] = {name: dict(grp.attrs) for name, grp in self._f["stats"].items()}

    # -- construction ------------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        path: str | os.PathLike[str],
        *,
        provenance: Mapping[str, Any],
        env_args: Mapping[str, Any],
        generation: Mapping[str, Any] | None = None,
        episodes_requested: int | None = None,
        valid_fraction: float = 0.1,
        overwrite: bool = False,
    ) -> DatasetWriter:
        """Creates a new, empty dataset file.

        Args:
            path: where to write. Parent folders are created.
            provenance: JSON-able description of where the data comes from (env, domain, world, demonstrator,
                versions, seeds); stored as is in the root attribute ``provenance``. ``provenance["domain"]``
                (``"sim"`` if absent) decides whether demos carry simulator states.
            env_args: robomimic's ``env_args``: ``{"env_name", "type", "env_kwargs"}``.
            generation: JSON-able settings of the generating run, compared on resume.
            episodes_requested: the number of demos the run aims for (``complete`` is set when reached).
            valid_fraction: share of demos put in the ``valid`` filter key (the rest are ``train``).
            overwrite: replace an existing file instead of failing.

        Raises:
            FileExistsError: if ``path`` exists and ``overwrite`` is false.
            ValueError: if ``valid_fraction`` is not in ``[0, 1)`` or the domain is not ``"real"`` or ``"sim"``.
        """
        path = Path(path)
        if path.exists() and not overwrite:
            raise FileExistsError(f"{path} exists; resume it, choose another path, or overwrite it")
        if not 0.0 <= valid_fraction < 1.0:
            raise ValueError(f"valid_fraction must be in [0, 1), got {valid_fraction}")
        _domain_of(provenance)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".creating")
        with h5py.File(tmp, "w", fs_strategy="none") as f:
            f.attrs["r2s2r_schema_version"] = schema.SCHEMA_VERSION
            f.attrs["r2s2r_format"] = schema.FORMAT_NAME
            f.attrs["provenance"] = schema.to_json(dict(provenance))
            f.attrs["generation"] = schema.to_json(dict(generation or {}))
            f.attrs["episodes_requested"] = -1 if episodes_requested is None else int(episodes_requested)
            f.attrs["valid_fraction"] = float(valid_fraction)
            f.attrs["num_demos"] = 0
            f.attrs["attempts"] = 0
            f.attrs["successes"] = 0
            f.attrs["complete"] = False
            data = f.create_group("data")
            data.attrs["total"] = 0
            data.attrs["env_args"] = schema.to_json(dict(env_args))
            mask = f.create_group("mask")
            for key in schema.MASK_KEYS:
                mask.create_dataset(
                    key, shape=(0,), maxshape=(None,), dtype=_MASK_DTYPE, chunks=(256,), fletcher32=True
                )
            f.create_group("stats")
            _store_content_hash(f, {})
        os.replace(tmp, path)
        return cls(path, _open_for_writing(path))

    @classmethod
    def resume(cls, path: str | os.PathLike[str]) -> DatasetWriter:
        """Opens an existing dataset file to append more demos.

        Raises:
            DatasetError: if the file is not a valid dataset of the schema version this code writes.
        """
        from r2s2r_envs.datasets.reader import open_dataset

        # Validates structure and every stored hash before anything is appended.
        with open_dataset(path, verify="quick", allow_empty=True) as f:
            version = f.schema_version
        if version != schema.SCHEMA_VERSION:
            raise schema.UnsupportedSchemaError(
                f"{path} has schema version {version}; demos are appended only to files of schema version "
                f"{schema.SCHEMA_VERSION} (one file, one set of rules): write to a new file"
            )
        return cls(Path(path), _open_for_writing(Path(path)))

    # -- state -------------------------------------------------------------------------------------

    @property
    def num_demos(self) -> int:
        """Demos in the file."""
        return len(self._demo_hashes)

    @property
    def attempts(self) -> int:
        """Attempts recorded so far (episodes run, including discarded failures)."""
        return int(self._f.attrs["attempts"])

    @property
    def successes(self) -> int:
        """Successful demos in the file."""
        return self._successes

    @property
    def provenance(self) -> dict[str, Any]:
        """The stored provenance."""
        return json.loads(self._f.attrs["provenance"])

    @property
    def generation(self) -> dict[str, Any]:
        """The stored generation settings."""
        return json.loads(self._f.attrs["generation"])

    @property
    def content_hash(self) -> str:
        """Content hash of the file as written so far (see :mod:`r2s2r_envs.datasets.schema`)."""
        return str(self._f.attrs["content_sha256"])

    # -- writing -----------------------------------------------------------------------------------

    def append(self, episode: Episode, *, attempts: int | None = None, flush: bool = True) -> int:
        """Writes one demo and (by default) flushes.

        Args:
            episode: the episode to store.
            attempts: total attempts consumed once this demo is counted (for ``--successes-only`` runs);
                defaults to one more than before.
            flush: flush the file after writing (leave on unless batching deliberately).

        Returns:
            The demo id (``k`` of ``demo_<k>``).

        Raises:
            ValueError: the episode does not fit the file (keys, shapes, or states where the domain forbids them).
        """
        arrays = episode.arrays()
        obs_keys = sorted(k[len("obs/") :] for k in arrays if k.startswith("obs/"))
        self._check_domain(arrays)
        self._check_consistent(arrays, obs_keys)
        demo_id = self.num_demos
        arrays_hash = schema.array_items_hash(arrays.items())
        name = schema.demo_group_name(demo_id)
        mask_lengths = {key: self._f["mask"][key].shape[0] for key in schema.MASK_KEYS}
        try:
            grp = self._f["data"].create_group(name)
            for path, arr in arrays.items():
                grp.create_dataset(path, data=arr, **_dataset_options(path, arr))
            attrs = {"demo_id": demo_id, "num_samples": episode.num_samples, **episode.attrs()}
            for key, value in attrs.items():
                grp.attrs[key] = value
            grp.attrs["arrays_sha256"] = arrays_hash
            demo_hash = schema.demo_hash(arrays_hash, attrs)
            grp.attrs["sha256"] = demo_hash
            self._update_masks(demo_id, bool(episode.success))
        except BaseException:
            # Never leave half a demo behind for the next flush (or close) to persist.
            if name in self._f["data"]:
                del self._f["data"][name]
            for key, n in mask_lengths.items():
                self._f["mask"][key].resize((n,))
            raise

        self._demo_hashes[demo_id] = demo_hash
        self._commit_masks(demo_id, bool(episode.success))
        self._total += episode.num_samples
        self._successes += bool(episode.success)
        self._update_stats(arrays)
        self._f["data"].attrs["total"] = self._total
        self._f.attrs["num_demos"] = self.num_demos
        self._f.attrs["successes"] = self._successes
        self._f.attrs["attempts"] = int(attempts) if attempts is not None else self.attempts + 1
        requested = int(self._f.attrs["episodes_requested"])
        self._f.attrs["complete"] = requested >= 0 and self.num_demos >= requested
        self._store_content_hash()
        if flush:
            self.flush()
        return demo_id

    def set_attempts(self, attempts: int, *, flush: bool = True) -> None:
        """Records the attempts consumed (e.g. after failed attempts that were not stored)."""
        self._f.attrs["attempts"] = int(attempts)
        self._store_content_hash()
        if flush:
            self.flush()

    def set_episodes_requested(self, episodes: int) -> None:
        """Changes the target number of demos (a resumed run asking for more) and updates ``complete``."""
        self._f.attrs["episodes_requested"] = int(episodes)
        self._f.attrs["complete"] = self.num_demos >= episodes
        self._store_content_hash()
        self.flush()

    def flush(self) -> None:
        """Writes everything to disk; after this the file on disk is complete and valid."""
        self._f.flush()
        try:
            fd = self._f.id.get_vfd_handle()
        except Exception:  # noqa: BLE001 - drivers without a POSIX handle (e.g. "core") skip the fsync
            return
        os.fsync(fd)

    def close(self) -> None:
        """Flushes and closes the file."""
        if self._f.id.valid:
            self.flush()
            self._f.close()

    def __enter__(self) -> DatasetWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ---------------------------------------------------------------------------------

    def _store_content_hash(self) -> None:
        """Writes the part hashes and the content hash of the file as it now is."""
        summary = {
            "num_demos": self.num_demos,
            "total": self._total,
            "attempts": self.attempts,
            "successes": self._successes,
            "complete": bool(self._f.attrs["complete"]),
            "episodes_requested": int(self._f.attrs["episodes_requested"]),
            "valid_fraction": self.valid_fraction,
        }
        parts = schema.content_parts(
            provenance_json=self._texts["provenance"],
            env_args_json=self._texts["env_args"],
            generation_json=self._texts["generation"],
            summary=summary,
            masks=self._masks,
            stats=self._stats_attrs,
        )
        self._f.attrs["content_parts"] = schema.to_json(parts)
        self._f.attrs["content_sha256"] = schema.content_hash(parts, self._demo_hashes)

    def _check_domain(self, arrays: Mapping[str, np.ndarray]) -> None:
        if self.domain == "real" and "states" in arrays:
            raise ValueError(
                f"{self.path} is a lab dataset (domain 'real'): it stores no simulator states, which would reveal "
                "the lab's hidden physics; record the episode with states=None"
            )
        if self.domain == "sim" and "states" not in arrays:
            raise ValueError(
                f"{self.path} is a simulated dataset (domain 'sim'): every demo needs its simulator states "
                "(env.unwrapped.get_state() before each step) so it can be replayed"
            )

    def _check_consistent(self, arrays: Mapping[str, np.ndarray], obs_keys: list[str]) -> None:
        if self.num_demos == 0:
            return
        first = self._f["data"][schema.demo_group_name(0)]
        known = sorted(first["obs"].keys())
        if known != obs_keys:
            raise ValueError(f"episode observation keys {obs_keys} differ from the file's {known}")
        for name in schema.array_keys(self.domain):
            if first[name].shape[1:] != arrays[name].shape[1:]:
                raise ValueError(
                    f"episode {name} have per-step shape {arrays[name].shape[1:]}, the file has {first[name].shape[1:]}"
                )

    def _update_masks(self, demo_id: int, success: bool) -> None:
        name = schema.demo_group_name(demo_id).encode()
        valid = schema.is_valid_split(demo_id, self.valid_fraction)
        for key, member in (("train", not valid), ("valid", valid), ("success", success)):
            if member:
                dset = self._f["mask"][key]
                n = dset.shape[0]
                dset.resize((n + 1,))
                dset[n] = name

    def _commit_masks(self, demo_id: int, success: bool) -> None:
        """Mirrors :meth:`_update_masks` in memory once the demo is written for good."""
        name = schema.demo_group_name(demo_id)
        valid = schema.is_valid_split(demo_id, self.valid_fraction)
        for key, member in (("train", not valid), ("valid", valid), ("success", success)):
            if member:
                self._masks.setdefault(key, []).append(name)

    def _update_stats(self, arrays: Mapping[str, np.ndarray]) -> None:
        for name, arr in arrays.items():
            if schema.is_stats_stream(name, arr):
                new = RunningStats.from_array(arr)
                old = self._stats.get(name)
                self._stats[name] = new if old is None else old.merge(new)
                group_name = _stats_group_name(name)
                grp = self._f["stats"].require_group(group_name)
                attrs = self._stats[name].to_attrs()
                for key, value in attrs.items():
                    grp.attrs[key] = value
                self._stats_attrs[group_name] = attrs


def _open_for_writing(path: Path) -> h5py.File:
    """``path`` opened to append to, or a ``DatasetError`` naming it when another process has it open: HDF5's
    lock refuses a writer while anyone reads or writes the file (``BlockingIOError: Unable to synchronously open
    file`` otherwise reaches the user)."""
    try:
        return h5py.File(path, "r+")
    except BlockingIOError:
        raise schema.DatasetError(
            f"{path} is open in another process (a generation writing it, or a training, replay or verify reading "
            "it: HDF5 locks the file); wait for that process to finish or stop it, then run again (every completed "
            "demo is kept)"
        ) from None


def _domain_of(provenance: Mapping[str, Any]) -> str:
    domain = provenance.get("domain", "sim")
    if domain not in schema.DOMAINS:
        raise ValueError(f"provenance domain is {domain!r}; expected one of {schema.DOMAINS}")
    return str(domain)


def _dataset_options(path: str, arr: np.ndarray) -> dict[str, Any]:
    """Storage options of one demo array: always chunked with a fletcher32 checksum, compressed where it pays."""
    if arr.ndim >= 3:  # images (T, H, W, C)
        chunks = (min(_IMAGE_CHUNK_FRAMES, len(arr)),) + arr.shape[1:]
        return dict(**_IMAGE_COMPRESSION, chunks=chunks, fletcher32=True)
    row_bytes = max(1, arr.itemsize * int(np.prod(arr.shape[1:], dtype=np.int64)))
    rows = max(1, min(len(arr), _MAX_CHUNK_BYTES // row_bytes))
    options: dict[str, Any] = dict(chunks=(rows,) + arr.shape[1:], fletcher32=True)
    if path == "states":
        options.update(_STATES_COMPRESSION)
    return options


def _store_content_hash(f: h5py.File, demo_hashes: Mapping[int, str]) -> None:
    """Recomputes the part hashes and content hash of a file from what it stores and writes both (new files)."""
    parts = schema.file_parts(f)
    f.attrs["content_parts"] = schema.to_json(parts)
    f.attrs["content_sha256"] = schema.content_hash(parts, demo_hashes)


def _stats_group_name(name: str) -> str:
    # "obs/arm_qpos" -> "obs.arm_qpos": one flat group per stream.
    return name.replace("/", ".")


def _stats_name_from_group(group: str) -> str:
    return group.replace(".", "/", 1) if group.startswith("obs.") else group


def _disable_metadata_evictions(f: h5py.File) -> None:
    config = f.id.get_mdc_config()
    config.evictions_enabled = False
    # HDF5 requires automatic cache resizing off when evictions are disabled.
    config.incr_mode = 0  # H5C_incr__off
    config.flash_incr_mode = 0  # H5C_flash_incr__off
    config.decr_mode = 0  # H5C_decr__off
    f.id.set_mdc_config(config)
