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
"""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path
from typing import Any, Mapping

import h5py
import numpy as np

from r2s2r_envs.datasets import schema
from r2s2r_envs.datasets.stats import RunningStats

# Images are compressed (gzip is readable by every HDF5 reader); chunks of this many frames.
_IMAGE_CHUNK_FRAMES = 16
# MuJoCo states (hundreds to >1,000 float64 per step: warm-start and actuator-delay buffers included, so replay is
# exact) are most of a state-only file; gzip level 1 with byte shuffling makes them ~3x smaller for next to no
# write time.  The content hash is over the arrays, so it does not depend on this.
_STATES_COMPRESSION = dict(compression="gzip", compression_opts=1, shuffle=True)
_MASK_DTYPE = "S32"


@dataclasses.dataclass(kw_only=True)
class Episode:
    """One recorded episode, as produced by a rollout, before it is written.

    Attributes:
        observations: per key, ``T + 1`` observations (the reset observation and one after each step).
        actions: ``(T, A)`` actions sent to the env.
        rewards: ``(T,)`` rewards.
        states: ``(T, S)`` full simulator state before each step (``env.unwrapped.get_state()``).
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
    states: np.ndarray
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
        """The demo's arrays under their robomimic paths (``obs/<key>``, ``next_obs/<key>``, ``actions``, ...).

        Raises:
            ValueError: if lengths disagree or the episode is empty.
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
        out["rewards"] = np.asarray(self.rewards, dtype=np.float32).reshape(t)
        out["dones"] = dones
        out["states"] = np.asarray(self.states, dtype=np.float64).reshape(t, -1)
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
    context manager or call :meth:`close`.

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
        for name, grp in self._f["data"].items():
            demo_id = int(grp.attrs["demo_id"])
            self._demo_hashes[demo_id] = str(grp.attrs["sha256"])
            self._total += int(grp.attrs["num_samples"])
            self._successes += bool(grp.attrs["success"])
        for name, grp in self._f["stats"].items():
            self._stats[_stats_name_from_group(name)] = RunningStats.from_attrs(grp.attrs)
        self.valid_fraction = float(self._f.attrs.get("valid_fraction", 0.0))

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
    ) -> "DatasetWriter":
        """Creates a new, empty dataset file.

        Args:
            path: where to write. Parent folders are created.
            provenance: JSON-able description of where the data comes from (env, world, demonstrator,
                versions, seeds); stored as is in the root attribute ``provenance``.
            env_args: robomimic's ``env_args``: ``{"env_name", "type", "env_kwargs"}``.
            generation: JSON-able settings of the generating run, compared on resume.
            episodes_requested: the number of demos the run aims for (``complete`` is set when reached).
            valid_fraction: share of demos put in the ``valid`` filter key (the rest are ``train``).
            overwrite: replace an existing file instead of failing.

        Raises:
            FileExistsError: if ``path`` exists and ``overwrite`` is false.
            ValueError: if ``valid_fraction`` is not in ``[0, 1)``.
        """
        path = Path(path)
        if path.exists() and not overwrite:
            raise FileExistsError(f"{path} exists; resume it, choose another path, or overwrite it")
        if not 0.0 <= valid_fraction < 1.0:
            raise ValueError(f"valid_fraction must be in [0, 1), got {valid_fraction}")
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
            f.attrs["content_sha256"] = schema.dataset_hash({})
            data = f.create_group("data")
            data.attrs["total"] = 0
            data.attrs["env_args"] = schema.to_json(dict(env_args))
            mask = f.create_group("mask")
            for key in schema.MASK_KEYS:
                mask.create_dataset(key, shape=(0,), maxshape=(None,), dtype=_MASK_DTYPE, chunks=(256,))
            f.create_group("stats")
        os.replace(tmp, path)
        return cls(path, h5py.File(path, "r+"))

    @classmethod
    def resume(cls, path: str | os.PathLike[str]) -> "DatasetWriter":
        """Opens an existing dataset file to append more demos.

        Raises:
            DatasetError: if the file is not a valid dataset of a supported schema version.
        """
        from r2s2r_envs.datasets.reader import open_dataset

        # Validates structure and the per-demo hash list before anything is appended.
        with open_dataset(path, verify="quick", allow_empty=True):
            pass
        return cls(Path(path), h5py.File(path, "r+"))

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
        import json

        return json.loads(self._f.attrs["provenance"])

    @property
    def generation(self) -> dict[str, Any]:
        """The stored generation settings."""
        import json

        return json.loads(self._f.attrs["generation"])

    @property
    def content_hash(self) -> str:
        """Content hash over the demos written so far."""
        return schema.dataset_hash(self._demo_hashes)

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
        """
        arrays = episode.arrays()
        obs_keys = sorted(k[len("obs/"):] for k in arrays if k.startswith("obs/"))
        self._check_consistent(arrays, obs_keys)
        demo_id = self.num_demos
        demo_hash = schema.array_items_hash(arrays.items())
        name = schema.demo_group_name(demo_id)
        mask_lengths = {key: self._f["mask"][key].shape[0] for key in schema.MASK_KEYS}
        try:
            grp = self._f["data"].create_group(name)
            for path, arr in arrays.items():
                kwargs: dict[str, Any] = {}
                if arr.ndim >= 3:  # images (T, H, W, C)
                    chunks = (min(_IMAGE_CHUNK_FRAMES, len(arr)),) + arr.shape[1:]
                    kwargs = dict(compression="gzip", compression_opts=4, chunks=chunks)
                elif path == "states" and len(arr):
                    kwargs = dict(_STATES_COMPRESSION)
                grp.create_dataset(path, data=arr, **kwargs)
            grp.attrs["demo_id"] = demo_id
            grp.attrs["num_samples"] = episode.num_samples
            for key, value in episode.attrs().items():
                grp.attrs[key] = value
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
        self._total += episode.num_samples
        self._successes += bool(episode.success)
        self._update_stats(arrays)
        self._f["data"].attrs["total"] = self._total
        self._f.attrs["num_demos"] = self.num_demos
        self._f.attrs["successes"] = self._successes
        self._f.attrs["attempts"] = int(attempts) if attempts is not None else self.attempts + 1
        self._f.attrs["content_sha256"] = self.content_hash
        requested = int(self._f.attrs["episodes_requested"])
        self._f.attrs["complete"] = requested >= 0 and self.num_demos >= requested
        if flush:
            self.flush()
        return demo_id

    def set_attempts(self, attempts: int, *, flush: bool = True) -> None:
        """Records the attempts consumed (e.g. after failed attempts that were not stored)."""
        self._f.attrs["attempts"] = int(attempts)
        if flush:
            self.flush()

    def set_episodes_requested(self, episodes: int) -> None:
        """Changes the target number of demos (a resumed run asking for more) and updates ``complete``."""
        self._f.attrs["episodes_requested"] = int(episodes)
        self._f.attrs["complete"] = self.num_demos >= episodes
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

    def __enter__(self) -> "DatasetWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ---------------------------------------------------------------------------------

    def _check_consistent(self, arrays: Mapping[str, np.ndarray], obs_keys: list[str]) -> None:
        if self.num_demos == 0:
            return
        first = self._f["data"][schema.demo_group_name(0)]
        known = sorted(first["obs"].keys())
        if known != obs_keys:
            raise ValueError(f"episode observation keys {obs_keys} differ from the file's {known}")
        for name in ("actions", "states"):
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

    def _update_stats(self, arrays: Mapping[str, np.ndarray]) -> None:
        for name, arr in arrays.items():
            if name == "actions" or (name.startswith("obs/") and schema.is_low_dim(arr.shape[1:], arr.dtype)):
                new = RunningStats.from_array(arr)
                old = self._stats.get(name)
                self._stats[name] = new if old is None else old.merge(new)
                group_name = _stats_group_name(name)
                grp = self._f["stats"].require_group(group_name)
                for key, value in self._stats[name].to_attrs().items():
                    grp.attrs[key] = value


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

