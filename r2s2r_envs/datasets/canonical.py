"""The benchmark's canonical datasets: one spec file, built on demand into a cache and hash-checked.

The spec (``benchmarks/datasets.json`` in the repository) lists each dataset with the settings that make
it, the equivalent ``r2s2r generate`` command and its content hash. ``r2s2r datasets make --all`` builds
the missing ones (resuming interrupted builds), verifies every hash and reports datasets whose env is not
registered in this installation (a grounded variant not built yet) as skipped.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
from pathlib import Path
from typing import Any, Iterable, Literal, Sequence

from r2s2r_envs.datasets.reader import open_dataset
from r2s2r_envs.datasets.schema import DatasetError

SPEC_VERSION = 1
#: Environment variable naming the cache directory.
CACHE_ENV_VAR = "R2S2R_DATA_DIR"

Status = Literal["built", "present", "skipped", "hash-mismatch", "failed"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class CanonicalDataset:
    """One entry of the canonical datasets spec.

    Attributes:
        name: short unique name.
        env_id: registered env id.
        episodes: number of demos.
        seed: base seed.
        successes_only: keep only successful episodes.
        obs_mode: observation mode stored.
        env_kwargs: extra ``gymnasium.make`` arguments.
        demonstrator: ``"module:function"`` making the demonstrator (``None``: the env's own).
        file: file name inside the cache directory.
        sha256: expected content hash (``None`` until pinned with ``--update-spec``).
        command: the equivalent ``r2s2r generate`` command (must agree with the fields).
        description: what the dataset is for.
    """

    name: str
    env_id: str
    episodes: int
    seed: int
    successes_only: bool = True
    obs_mode: str = "state"
    env_kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    demonstrator: str | None = None
    file: str = ""
    sha256: str | None = None
    command: str = ""
    description: str = ""

    def generate_command(self, out: str | None = None) -> str:
        """The ``r2s2r generate`` command that makes this dataset."""
        parts = ["r2s2r", "generate", self.env_id, "--episodes", str(self.episodes), "--seed", str(self.seed)]
        if self.successes_only:
            parts.append("--successes-only")
        parts += ["--obs-mode", self.obs_mode]
        if self.env_kwargs:
            parts += ["--env-kwargs", json.dumps(self.env_kwargs, sort_keys=True)]
        if self.demonstrator:
            parts += ["--demonstrator", self.demonstrator]
        parts += ["--out", out or self.file]
        return shlex.join(parts)


@dataclasses.dataclass(frozen=True, kw_only=True)
class MakeReport:
    """What :func:`make_datasets` did for one dataset.

    Attributes:
        name: the dataset.
        path: its file in the cache.
        status: ``built``, ``present``, ``skipped`` (env not registered), ``hash-mismatch`` or ``failed``.
        sha256: the file's content hash, if it exists.
        message: details for the user.
    """

    name: str
    path: Path
    status: Status
    sha256: str | None
    message: str

    @property
    def ok(self) -> bool:
        """Whether this dataset is in order (built or present with the expected hash, or skipped)."""
        return self.status in ("built", "present", "skipped")


def default_spec_path() -> Path:
    """``benchmarks/datasets.json`` from the working directory, else from the source checkout."""
    candidates = [
        Path.cwd() / "benchmarks" / "datasets.json",
        Path(__file__).resolve().parents[2] / "benchmarks" / "datasets.json",
    ]
    for path in candidates:
        if path.exists():
            return path
    raise FileNotFoundError(
        f"no canonical datasets spec found (looked at {[str(c) for c in candidates]}); pass --spec PATH"
    )


def default_cache_dir() -> Path:
    """``$R2S2R_DATA_DIR`` or ``~/.cache/r2s2r_envs/datasets``."""
    env = os.environ.get(CACHE_ENV_VAR)
    return Path(env) if env else Path.home() / ".cache" / "r2s2r_envs" / "datasets"


def load_spec(path: str | os.PathLike[str]) -> list[CanonicalDataset]:
    """Reads and checks the spec file.

    Raises:
        ValueError: naming the entry and field at fault (unknown fields, duplicates, a ``command`` that
            does not match the fields).
    """
    raw = json.loads(Path(path).read_text())
    if raw.get("spec_version") != SPEC_VERSION:
        raise ValueError(f"{path}: spec_version {raw.get('spec_version')!r}; this code reads version {SPEC_VERSION}")
    fields = {f.name for f in dataclasses.fields(CanonicalDataset)}
    entries: list[CanonicalDataset] = []
    for i, item in enumerate(raw.get("datasets", [])):
        unknown = sorted(set(item) - fields)
        if unknown:
            raise ValueError(f"{path}: datasets[{i}] has unknown field(s) {unknown}; known: {sorted(fields)}")
        entry = CanonicalDataset(**item)
        if not entry.file:
            entry = dataclasses.replace(entry, file=f"{entry.name}.hdf5")
        expected = entry.generate_command()
        if entry.command and entry.command != expected:
            raise ValueError(
                f"{path}: dataset {entry.name!r}: command {entry.command!r} does not match its fields ({expected!r})"
            )
        entries.append(entry)
    names = [e.name for e in entries]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"{path}: duplicate dataset names {duplicates}")
    return entries


def make_datasets(
    spec_path: str | os.PathLike[str],
    *,
    names: Sequence[str] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    workers: int = 1,
    update_spec: bool = False,
    progress: bool = True,
) -> list[MakeReport]:
    """Builds missing canonical datasets into the cache and verifies every hash.

    Args:
        spec_path: the spec file.
        names: datasets to make (default: all).
        cache_dir: where the files go (default :func:`default_cache_dir`).
        workers: worker processes per generation.
        update_spec: write the hashes of datasets that have none into the spec file.
        progress: show progress bars.

    Returns:
        One report per dataset.

    Raises:
        KeyError: for a name not in the spec (the message lists the names).
    """
    import gymnasium as gym

    import r2s2r_envs  # noqa: F401 - registers the envs
    from r2s2r_envs.datasets.generate import DEFAULT_DEMONSTRATOR, GenerationError, generate

    entries = load_spec(spec_path)
    by_name = {e.name: e for e in entries}
    if names:
        unknown = [n for n in names if n not in by_name]
        if unknown:
            raise KeyError(f"no dataset(s) {unknown} in {spec_path}; it lists {sorted(by_name)}")
        selected = [by_name[n] for n in names]
    else:
        selected = entries
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    reports: list[MakeReport] = []
    pinned: dict[str, str] = {}
    for entry in selected:
        path = cache / entry.file
        if entry.env_id not in gym.registry:
            reports.append(MakeReport(name=entry.name, path=path, status="skipped", sha256=None,
                                      message=f"env {entry.env_id!r} is not registered in this installation"))
            continue
        status: Status = "present"
        try:
            if not path.exists() or not _complete(path):
                generate(entry.env_id, entry.episodes, path, workers=workers, seed=entry.seed,
                         successes_only=entry.successes_only, obs_mode=entry.obs_mode,
                         env_kwargs=entry.env_kwargs, demonstrator=entry.demonstrator or DEFAULT_DEMONSTRATOR,
                         progress=progress)
                status = "built"
            with open_dataset(path, verify="full") as f:
                digest = f.content_hash
                complete = f.complete
        except (DatasetError, GenerationError) as exc:
            reports.append(MakeReport(name=entry.name, path=path, status="failed", sha256=None, message=str(exc)))
            continue
        if not complete:
            reports.append(MakeReport(name=entry.name, path=path, status="failed", sha256=digest,
                                      message="generation was interrupted; run the command again to resume"))
        elif entry.sha256 is None:
            pinned[entry.name] = digest
            note = "hash written to the spec" if update_spec else "no expected hash in the spec (use --update-spec)"
            reports.append(MakeReport(name=entry.name, path=path, status=status, sha256=digest, message=note))
        elif entry.sha256 != digest:
            reports.append(MakeReport(
                name=entry.name, path=path, status="hash-mismatch", sha256=digest,
                message=f"content hash {digest[:16]}... differs from the spec's {entry.sha256[:16]}... (another "
                        "package/MuJoCo version or machine, or a changed env); delete the file to rebuild",
            ))
        else:
            reports.append(
                MakeReport(name=entry.name, path=path, status=status, sha256=digest, message="hash verified")
            )
    if update_spec and pinned:
        _write_hashes(Path(spec_path), pinned)
    return reports


def spec_entries_for_display(entries: Iterable[CanonicalDataset], cache_dir: Path) -> list[dict[str, Any]]:
    """Rows for ``r2s2r datasets list``: name, env, demos, whether cached, expected hash."""
    rows = []
    for e in entries:
        path = cache_dir / e.file
        rows.append({"name": e.name, "env_id": e.env_id, "episodes": e.episodes, "cached": path.exists(),
                     "sha256": e.sha256, "path": str(path)})
    return rows


def _complete(path: Path) -> bool:
    try:
        with open_dataset(path, verify="none", allow_empty=True) as f:
            return f.complete
    except DatasetError:
        return False


def _write_hashes(spec_path: Path, hashes: dict[str, str]) -> None:
    raw = json.loads(spec_path.read_text())
    for item in raw["datasets"]:
        if item["name"] in hashes and item.get("sha256") is None:
            item["sha256"] = hashes[item["name"]]
    tmp = spec_path.with_name(spec_path.name + ".tmp")
    tmp.write_text(json.dumps(raw, indent=2) + "\n")
    os.replace(tmp, spec_path)
