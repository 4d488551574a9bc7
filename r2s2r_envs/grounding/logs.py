"""Lab logs: the commands sent to a cell, what its sensors measured and when, one HDF5 file per run.

A log directory holds ``manifest.json`` and one ``<run name>.hdf5`` per run (format in docs/lab_logs.md):

* ``manifest.json``: ``schema_version``, ``lab`` (name and config SHA-256, never its parameters), ``seed``,
  ``versions`` (r2s2r_envs, MuJoCo, numpy, h5py), and ``runs``: per run its file name, protocol, split and the
  SHA-256 of the file.
* each run file: attributes ``schema_version``, ``protocol``, ``settings`` (JSON), ``split`` (``"fit"`` or
  ``"heldout"``), ``seed``, ``control_mode``, ``setup`` (JSON of the operator set-up at reset), ``env_kwargs``
  (JSON), ``lab_name``, ``lab_config_sha256``, ``control_dt`` (s); datasets ``actions`` (T, A) float32,
  ``timestamps`` (T+1,) float64 (s since reset, when each observation was taken) and ``obs/<key>`` (T+1, ...).

``read_logs`` refuses what it cannot trust with a ``LogError`` that says what is wrong and what is accepted: a
missing or foreign manifest, another schema version, a truncated or altered file, inconsistent lengths.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from r2s2r_envs.mappings import check_keys
from r2s2r_envs.provenance import versions
from r2s2r_envs.safe_json import JSONFileError, loads, read_json

LOG_SCHEMA_VERSION = 1
MANIFEST = "manifest.json"
SPLITS = ("fit", "heldout")
CONTROL_MODES = ("task", "joint")
_RUN_ATTRS = (
    "schema_version",
    "protocol",
    "settings",
    "split",
    "seed",
    "control_mode",
    "setup",
    "env_kwargs",
    "lab_name",
    "lab_config_sha256",
    "control_dt",
)


class LogError(ValueError):
    """A log directory or run file that cannot be read as lab logs of this schema."""


@dataclasses.dataclass(frozen=True)
class LogRun:
    """One logged run: the commands sent and the observations measured after reset and after each command.

    Attributes:
        name: Run name (its file is ``<name>.hdf5``).
        protocol: Name of the excitation protocol that made it (``grounding.excitation.PROTOCOLS``).
        settings: The protocol's settings for this run (JSON-serializable).
        split: ``"fit"`` (used for identification) or ``"heldout"`` (validation only).
        seed: The reset seed.
        control_mode: ``"task"`` or ``"joint"``.
        setup: The operator set-up passed to ``reset(options={"setup": ...})`` (``{}``: none).
        env_kwargs: Arguments the env was made with (besides the lab), e.g. ``num_objects``, ``sensors``.
        actions: (T, A) float32 commands sent, one per control step.
        timestamps: (T+1,) float64 time of each observation, s since reset.
        obs: Observation key -> (T+1, ...) array, as the sensors gave them.
    """

    name: str
    protocol: str
    settings: dict[str, Any]
    split: str
    seed: int
    control_mode: str
    setup: dict[str, Any]
    env_kwargs: dict[str, Any]
    actions: np.ndarray
    timestamps: np.ndarray
    obs: dict[str, np.ndarray]

    @property
    def steps(self) -> int:
        """Number of commands T."""
        return int(self.actions.shape[0])

    @property
    def control_dt(self) -> float:
        """Control period, s (from the timestamps)."""
        return float(np.median(np.diff(self.timestamps))) if self.steps else 0.0

    def require(self, keys: Sequence[str], purpose: str) -> None:
        """Raise ``LogError`` naming the missing observation keys a parameter needs.

        Args:
            keys: Observation keys needed.
            purpose: What they are needed for (named in the message).
        """
        missing = [k for k in keys if k not in self.obs]
        if missing:
            raise LogError(
                f"run {self.name!r} ({self.protocol}) lacks the signal(s) {missing} needed for {purpose}; it has "
                f"{sorted(self.obs)}. Log it again with the sensors enabled (r2s2r log-lab does)"
            )


@dataclasses.dataclass(frozen=True)
class LogSet:
    """All runs of one log directory.

    Attributes:
        runs: Every run, in manifest order.
        lab_name: Name of the lab that was logged.
        lab_config_sha256: SHA-256 of that lab's config (identifies it without revealing it).
        file_sha256s: Run file name -> SHA-256 of the file.
        seed: Base seed of the logging session.
        directory: Where the logs were read from (None if built in memory).
    """

    runs: list[LogRun]
    lab_name: str
    lab_config_sha256: str
    file_sha256s: dict[str, str]
    seed: int
    directory: Path | None = None

    @property
    def fit(self) -> list[LogRun]:
        """Runs used for identification."""
        return [r for r in self.runs if r.split == "fit"]

    @property
    def heldout(self) -> list[LogRun]:
        """Runs kept for validation."""
        return [r for r in self.runs if r.split == "heldout"]

    def by_protocol(self, protocol: str, split: str | None = "fit") -> list[LogRun]:
        """Runs of one protocol (of one split; None: both)."""
        return [r for r in self.runs if r.protocol == protocol and (split is None or r.split == split)]

    @property
    def protocols(self) -> list[str]:
        """Protocol names present, in first-seen order."""
        return list(dict.fromkeys(r.protocol for r in self.runs))


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _check_run(run: LogRun) -> None:
    where = f"run {run.name!r}"
    if not run.name or any(c in run.name for c in "/\\") or run.name.startswith("."):
        raise LogError(f"{where}: a run name must be a plain file stem (no path separators)")
    if run.split not in SPLITS:
        raise LogError(f"{where}: split must be one of {list(SPLITS)}, got {run.split!r}")
    if run.control_mode not in CONTROL_MODES:
        raise LogError(f"{where}: control_mode must be one of {list(CONTROL_MODES)}, got {run.control_mode!r}")
    if run.actions.ndim != 2:
        raise LogError(f"{where}: actions must be (T, A), got shape {run.actions.shape}")
    t = run.actions.shape[0]
    if run.timestamps.shape != (t + 1,):
        raise LogError(f"{where}: timestamps must be (T+1,) = ({t + 1},), got {run.timestamps.shape}")
    if not run.obs:
        raise LogError(f"{where}: no observations")
    for key, value in run.obs.items():
        if value.shape[:1] != (t + 1,):
            raise LogError(f"{where}: obs/{key} must have T+1 = {t + 1} rows, got shape {value.shape}")


def write_logs(
    directory: str | Path,
    runs: Sequence[LogRun],
    *,
    lab_name: str,
    lab_config_sha256: str,
    seed: int,
) -> LogSet:
    """Write runs as a log directory (one HDF5 file per run plus ``manifest.json``) and return it as read back.

    Args:
        directory: Output directory (created; existing run files of the same names are overwritten).
        runs: The runs.
        lab_name: Name of the logged lab.
        lab_config_sha256: Its config hash.
        seed: Base seed of the session.

    Raises:
        LogError: a run is malformed (names the run and the problem) or two runs share a name.
    """
    import h5py

    directory = Path(directory)
    names = [r.name for r in runs]
    if len(set(names)) != len(names):
        raise LogError(f"run names must be unique, got duplicates {sorted({n for n in names if names.count(n) > 1})}")
    for run in runs:
        _check_run(run)
    directory.mkdir(parents=True, exist_ok=True)
    entries = []
    for run in runs:
        path = directory / f"{run.name}.hdf5"
        with h5py.File(path, "w") as f:
            f.attrs["schema_version"] = LOG_SCHEMA_VERSION
            f.attrs["protocol"] = run.protocol
            f.attrs["settings"] = json.dumps(run.settings, sort_keys=True)
            f.attrs["split"] = run.split
            f.attrs["seed"] = int(run.seed)
            f.attrs["control_mode"] = run.control_mode
            f.attrs["setup"] = json.dumps(run.setup, sort_keys=True)
            f.attrs["env_kwargs"] = json.dumps(run.env_kwargs, sort_keys=True)
            f.attrs["lab_name"] = lab_name
            f.attrs["lab_config_sha256"] = lab_config_sha256
            f.attrs["control_dt"] = run.control_dt
            f.create_dataset("actions", data=np.asarray(run.actions, dtype=np.float32), fletcher32=True)
            f.create_dataset("timestamps", data=np.asarray(run.timestamps, dtype=np.float64), fletcher32=True)
            group = f.create_group("obs")
            for key, value in run.obs.items():
                group.create_dataset(key, data=np.asarray(value), fletcher32=True)
        entries.append({"file": path.name, "protocol": run.protocol, "split": run.split, "sha256": file_sha256(path)})
    manifest = {
        "schema_version": LOG_SCHEMA_VERSION,
        "lab": {"name": lab_name, "config_sha256": lab_config_sha256},
        "seed": int(seed),
        "versions": versions("r2s2r_envs", "mujoco", "numpy", "h5py", "python"),
        "runs": entries,
    }
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return read_logs(directory)


def _read_manifest(directory: Path) -> dict[str, Any]:
    path = directory / MANIFEST
    if not directory.is_dir():
        raise LogError(f"log directory {str(directory)!r} does not exist (make one with `r2s2r log-lab`)")
    if not path.is_file():
        raise LogError(f"{str(directory)!r} is not a log directory: it has no {MANIFEST} (made by `r2s2r log-lab`)")
    try:
        manifest = read_json(path)
    except JSONFileError as exc:
        raise LogError(str(exc)) from None
    if not isinstance(manifest, Mapping):
        raise LogError(f"{path}: must be a JSON object")
    version = manifest.get("schema_version")
    if version != LOG_SCHEMA_VERSION:
        raise LogError(
            f"{path}: log schema version {version!r}; this r2s2r_envs reads version {LOG_SCHEMA_VERSION} "
            "(log the lab again with this version's `r2s2r log-lab`)"
        )
    required = [k for k in _MANIFEST_KEYS if k != "versions"]
    check_keys(manifest, _MANIFEST_KEYS, what="manifest key", where=str(path), required=required, error=LogError)
    lab = manifest["lab"]
    if not isinstance(lab, Mapping) or not all(isinstance(lab.get(k), str) for k in ("name", "config_sha256")):
        raise LogError(f"{path}: 'lab' must be an object with string 'name' and 'config_sha256', got {lab!r}")
    if not isinstance(manifest["seed"], int) or isinstance(manifest["seed"], bool):
        raise LogError(f"{path}: 'seed' must be an integer, got {manifest['seed']!r}")
    if not isinstance(manifest["runs"], list):
        raise LogError(f"{path}: 'runs' must be a list of run entries, got {type(manifest['runs']).__name__}")
    return dict(manifest)


#: Keys of a manifest and of each of its run entries (``write_logs`` writes exactly these).
_MANIFEST_KEYS = ("schema_version", "lab", "seed", "versions", "runs")
_ENTRY_KEYS = ("file", "protocol", "split", "sha256")


def _run_file(directory: Path, entry: Any) -> Path:
    """The run file an entry of the manifest names: a plain ``<run>.hdf5`` name inside the log directory."""
    where = f"{directory / MANIFEST}"
    if not isinstance(entry, Mapping):
        raise LogError(f"{where}: each run entry is an object of {list(_ENTRY_KEYS)}, got {type(entry).__name__}")
    check_keys(entry, _ENTRY_KEYS, what="run entry key", where=where, required=_ENTRY_KEYS, error=LogError)
    name = entry["file"]
    if not isinstance(name, str) or Path(name).name != name or name.startswith(".") or not name.endswith(".hdf5"):
        raise LogError(
            f"{where}: run file {name!r} must be a plain '<run>.hdf5' name inside the log directory (no folders)"
        )
    if not isinstance(entry["sha256"], str):
        raise LogError(f"{where}: run {name!r}: 'sha256' must be a hex string, got {entry['sha256']!r}")
    return directory / name


def _json_attr(path: Path, attrs: Any, key: str) -> dict[str, Any]:
    try:
        value = loads(str(attrs[key]), what=f"{path}: attribute {key!r}")
    except JSONFileError as exc:
        raise LogError(f"{exc}; it holds a JSON object") from None
    if not isinstance(value, dict):
        raise LogError(f"{path}: attribute {key!r} must be a JSON object, got {type(value).__name__}")
    return value


def _int_attr(path: Path, attrs: Any, key: str) -> int:
    """An integer attribute of a run file, or a ``LogError`` naming the file, the attribute and what it holds."""
    value = attrs[key]
    if isinstance(value, np.ndarray) and value.shape in ((), (1,)):
        value = value.reshape(()).item()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise LogError(
            f"{path}: attribute {key!r} must be an integer, got {str(value)[:80]!r} ({type(value).__name__}); the "
            "run file was damaged or edited: log the run again"
        )
    return int(value)


def _control_dt_attr(path: Path, value: Any) -> None:
    try:
        dt = float(value)
    except (TypeError, ValueError):
        dt = math.nan
    if not math.isfinite(dt) or dt <= 0:
        raise LogError(f"{path}: attribute 'control_dt' must be a finite period > 0 s, got {value}")


def _read_run(path: Path, expected_sha256: str, lab: Mapping[str, str]) -> LogRun:
    import h5py

    if not path.is_file():
        raise LogError(f"run file {str(path)!r} listed in the manifest is missing")
    digest = file_sha256(path)
    if digest != expected_sha256:
        raise LogError(
            f"{path}: SHA-256 {digest} differs from the manifest's {expected_sha256}: the file was truncated or "
            "changed after logging"
        )
    try:
        with h5py.File(path, "r") as f:
            missing = [a for a in _RUN_ATTRS if a not in f.attrs]
            if missing:
                raise LogError(f"{path}: missing attribute(s) {missing}; a run file has {list(_RUN_ATTRS)}")
            version = _int_attr(path, f.attrs, "schema_version")
            if version != LOG_SCHEMA_VERSION:
                raise LogError(f"{path}: log schema version {version}; this r2s2r_envs reads {LOG_SCHEMA_VERSION}")
            for key in ("name", "config_sha256"):  # the run file is hash-checked: the manifest's lab must agree
                if str(f.attrs[f"lab_{key}"]) != lab[key]:
                    raise LogError(
                        f"{path.parent / MANIFEST}: 'lab' has {key} {lab[key]!r}, but the run file {path.name} says "
                        f"{str(f.attrs[f'lab_{key}'])!r}; the manifest was changed after logging"
                    )
            for key in ("actions", "timestamps", "obs"):
                if key not in f:
                    raise LogError(f"{path}: missing {key!r}; a run file has actions, timestamps and obs/<key>")
            _control_dt_attr(path, f.attrs["control_dt"])
            if not isinstance(f["obs"], h5py.Group) or not all(isinstance(f["obs"][k], h5py.Dataset) for k in f["obs"]):
                raise LogError(f"{path}: 'obs' must be a group of datasets obs/<key>")
            run = LogRun(
                name=path.stem,
                protocol=str(f.attrs["protocol"]),
                settings=_json_attr(path, f.attrs, "settings"),
                split=str(f.attrs["split"]),
                seed=_int_attr(path, f.attrs, "seed"),
                control_mode=str(f.attrs["control_mode"]),
                setup=_json_attr(path, f.attrs, "setup"),
                env_kwargs=_json_attr(path, f.attrs, "env_kwargs"),
                actions=f["actions"][()],
                timestamps=f["timestamps"][()],
                obs={k: f["obs"][k][()] for k in f["obs"]},
            )
    except OSError as exc:
        raise LogError(f"{path}: not a readable HDF5 run file ({exc})") from None
    _check_run(run)
    return run


def read_logs(directory: str | Path) -> LogSet:
    """Read a log directory written by ``write_logs`` / ``r2s2r log-lab``.

    Raises:
        LogError: no manifest, another schema version, a missing, truncated or altered run file, or
            inconsistent array lengths; the message names the file and what is accepted.
    """
    directory = Path(directory)
    manifest = _read_manifest(directory)
    runs, hashes = [], {}
    for entry in manifest["runs"]:
        path = _run_file(directory, entry)
        run = _read_run(path, entry["sha256"], manifest["lab"])
        for key in ("protocol", "split"):  # the run file is hash-checked: the manifest's copy must agree with it
            if entry[key] != getattr(run, key):
                raise LogError(
                    f"{directory / MANIFEST}: run {path.name!r} has {key} {entry[key]!r}, but its run file says "
                    f"{getattr(run, key)!r}; the manifest was changed after logging"
                )
        runs.append(run)
        hashes[path.name] = entry["sha256"]
    lab = manifest["lab"]
    return LogSet(
        runs=runs,
        lab_name=lab["name"],
        lab_config_sha256=lab["config_sha256"],
        file_sha256s=hashes,
        seed=int(manifest["seed"]),
        directory=directory,
    )
