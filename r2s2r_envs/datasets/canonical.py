"""The benchmark's canonical datasets: one spec file, built on demand into a cache and hash-checked.

The spec (``canonical.json``, shipped inside the package so it works from a pip install; docs/datasets.md,
"Canonical datasets") lists each dataset with the settings that make it, the equivalent ``r2s2r generate``
command and its content hash. ``r2s2r datasets make --all`` builds the missing ones (resuming interrupted builds),
verifies every hash and reports datasets whose env is not registered in this installation (a grounded variant not
built yet) as skipped.

The spec is data, never code: its ``demonstrator`` is a registered demonstrator name (or null for the env's own),
never an importable ``module:function``.

An entry's ``obs_mode`` is one the envs take; one that stores images (the ``*-rgb64`` sets: the head camera's
``scene_image`` and the ``wrist_image`` beside the state keys) names their size as ``env_kwargs["image_size"]``, so
the recipe does not follow the env's default resolution (docs/datasets.md#image-datasets).
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import json
import os
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from r2s2r_envs.datasets.reader import open_dataset
from r2s2r_envs.datasets.schema import SCHEMA_VERSION, DatasetError
from r2s2r_envs.envs.observations import OBS_MODES
from r2s2r_envs.mappings import check_choice, check_keys

SPEC_VERSION = 1
#: Environment variable naming the cache directory.
CACHE_ENV_VAR = "R2S2R_DATA_DIR"
#: Resource name of the spec shipped inside the package ``r2s2r_envs.datasets``.
SPEC_RESOURCE = "canonical.json"
# What a registered demonstrator name looks like: no ':' or '/', so nothing in a spec reads as an importable path.
_NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")

Status = Literal["built", "present", "unknown-build", "skipped", "hash-mismatch", "failed"]


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
        env_kwargs: env arguments (JSON object).
        demonstrator: a registered demonstrator name (``None``: the env's own).
        action_noise: noise injected into the demonstrator's arm actions (``generate``'s ``action_noise``; 0: none).
        file: file name inside the cache directory.
        sha256: expected content hash, built on the reference machine (``None`` until pinned with ``--update-spec``).
        other_builds: content hashes of the same recipe built on other kinds of machine, each with a description of
            the machine (floating-point differences between CPUs change the rollouts); a file with one of them is
            verified like the pinned one.
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
    action_noise: float = 0.0
    file: str = ""
    sha256: str | None = None
    other_builds: dict[str, str] = dataclasses.field(default_factory=dict)
    command: str = ""
    description: str = ""

    @property
    def image_size(self) -> int | None:
        """The side of the stored images, pixels (``env_kwargs["image_size"]``); ``None`` for a state-only set (and
        for an image set that does not name it, which :func:`load_spec` refuses)."""
        size = self.env_kwargs.get("image_size")
        return int(size) if "rgb" in self.obs_mode and size is not None else None

    def known_build(self, digest: str) -> str | None:
        """Where a file of content hash ``digest`` was built (``"the reference machine"`` or another machine's
        description), or None if the spec knows no build of that hash."""
        if self.sha256 is not None and digest == self.sha256:
            return "the reference machine"
        return self.other_builds.get(digest)

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
        if self.action_noise:
            parts += ["--action-noise", repr(float(self.action_noise))]
        parts += ["--out", out or self.file]
        return shlex.join(parts)

    def generate(
        self,
        out: str | os.PathLike[str],
        *,
        episodes: int | None = None,
        workers: int = 1,
        progress: bool = True,
        overwrite: bool = False,
    ) -> Any:
        """Generates (or resumes) ``out`` by this dataset's recipe, as :meth:`generate_command` says, with ``episodes``
        demos (default: the recipe's); returns ``datasets.generate``'s result."""
        from r2s2r_envs.datasets.generate import generate

        return generate(
            self.env_id,
            self.episodes if episodes is None else episodes,
            out,
            workers=workers,
            seed=self.seed,
            successes_only=self.successes_only,
            obs_mode=self.obs_mode,
            env_kwargs=self.env_kwargs,
            demonstrator=self.demonstrator,
            action_noise=self.action_noise,
            overwrite=overwrite,
            progress=progress,
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class MakeReport:
    """What :func:`make_datasets` did for one dataset.

    Attributes:
        name: the dataset.
        path: its file in the cache.
        status: ``built``, ``present``, ``unknown-build`` (a hash the spec does not know, in a file that follows the
            recipe: usable, with a warning where it is used), ``skipped`` (env not registered), ``hash-mismatch``
            (stale or foreign: not usable) or ``failed``.
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
        """Whether this dataset is usable (built or present with a known hash or following the recipe, or skipped):
        ``r2s2r datasets make`` exits 0 when every report is."""
        return self.status in ("built", "present", "unknown-build", "skipped")


def default_spec_path() -> Path:
    """The spec shipped inside the package (``r2s2r_envs/datasets/canonical.json``), as a file path.

    Raises:
        FileNotFoundError: the package is installed without it, or not as plain files (e.g. zipped); pass a spec.
    """
    resource = importlib.resources.files("r2s2r_envs.datasets").joinpath(SPEC_RESOURCE)
    if isinstance(resource, Path) and resource.is_file():
        return resource
    raise FileNotFoundError(
        f"the package's canonical datasets spec {SPEC_RESOURCE} is not available as a file ({resource}); "
        "pass --spec PATH"
    )


def read_spec_text(path: str | os.PathLike[str] | None = None) -> str:
    """The text of the spec at ``path``, or of the one shipped inside the package (read through importlib.resources).

    Raises:
        FileNotFoundError: ``path`` does not exist, or the package was installed without its spec.
    """
    if path is not None:
        return Path(path).read_text()
    resource = importlib.resources.files("r2s2r_envs.datasets").joinpath(SPEC_RESOURCE)
    try:
        return resource.read_text()
    except FileNotFoundError:
        raise FileNotFoundError(
            f"the package's canonical datasets spec {SPEC_RESOURCE} is missing (a broken install?); pass --spec PATH"
        ) from None


def default_cache_dir() -> Path:
    """``$R2S2R_DATA_DIR`` or ``~/.cache/r2s2r_envs/datasets``."""
    env = os.environ.get(CACHE_ENV_VAR)
    return Path(env) if env else Path.home() / ".cache" / "r2s2r_envs" / "datasets"


def load_spec(path: str | os.PathLike[str] | None = None) -> list[CanonicalDataset]:
    """Reads and checks a spec file.

    Args:
        path: the spec; ``None`` for the one shipped inside the package.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: naming the entry and field at fault (unknown fields, duplicates, a ``demonstrator`` that is not
            a name, an ``obs_mode`` the envs do not take, images without their ``image_size``, a ``command`` that
            does not match the fields).
    """
    where = str(path) if path is not None else f"r2s2r_envs/datasets/{SPEC_RESOURCE}"
    try:
        raw = json.loads(read_spec_text(path))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where}: not valid JSON ({exc})") from None
    if not isinstance(raw, dict) or raw.get("spec_version") != SPEC_VERSION:
        version = raw.get("spec_version") if isinstance(raw, dict) else None
        raise ValueError(f"{where}: spec_version {version!r}; this code reads version {SPEC_VERSION}")
    fields = sorted(f.name for f in dataclasses.fields(CanonicalDataset))
    entries: list[CanonicalDataset] = []
    for i, item in enumerate(raw.get("datasets", [])):
        if not isinstance(item, dict):
            raise ValueError(f"{where}: datasets[{i}] must be a JSON object, got {item!r}")
        check_keys(item, fields, what="field", where=f"{where}: datasets[{i}]", error=ValueError)
        demonstrator = item.get("demonstrator")
        if demonstrator is not None and not (isinstance(demonstrator, str) and _NAME_PATTERN.fullmatch(demonstrator)):
            raise ValueError(
                f"{where}: datasets[{i}] demonstrator {demonstrator!r} is not a demonstrator name: a spec names a "
                "registered demonstrator (r2s2r_envs.behavior.demonstrator_names()) or null for the env's own, and "
                "never an importable 'module:function'"
            )
        if not isinstance(item.get("env_kwargs", {}), dict):
            raise ValueError(f"{where}: datasets[{i}] env_kwargs must be a JSON object")
        _check_observations(item, f"{where}: datasets[{i}]")
        builds = item.get("other_builds", {})
        if not (
            isinstance(builds, dict)
            and all(isinstance(k, str) and re.fullmatch("[0-9a-f]{64}", k) for k in builds)
            and all(isinstance(v, str) and v for v in builds.values())
        ):
            raise ValueError(
                f"{where}: datasets[{i}] other_builds must map 64-hex-digit content hashes to machine descriptions, "
                f"got {builds!r}"
            )
        try:
            entry = CanonicalDataset(**item)
        except TypeError as exc:
            raise ValueError(f"{where}: datasets[{i}]: {exc}") from None
        if not entry.file:
            entry = dataclasses.replace(entry, file=f"{entry.name}.hdf5")
        expected = entry.generate_command()
        if entry.command and entry.command != expected:
            raise ValueError(
                f"{where}: dataset {entry.name!r}: command {entry.command!r} does not match its fields ({expected!r})"
            )
        entries.append(entry)
    names = [e.name for e in entries]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"{where}: duplicate dataset names {duplicates}")
    return entries


def _check_observations(item: Mapping[str, Any], where: str) -> None:
    """An entry's ``obs_mode`` is one the envs take, and images come with their size: an image set names
    ``env_kwargs["image_size"]`` (an integer; the env checks its range when the set is made), a state-only set none.

    Raises:
        ValueError: naming the entry, what it gives and what is valid.
    """
    mode = item.get("obs_mode", "state")
    check_choice(mode, OBS_MODES, what="obs_mode", where=where)
    size = dict(item.get("env_kwargs") or {}).get("image_size")
    if "rgb" in str(mode) and (isinstance(size, bool) or not isinstance(size, int)):
        raise ValueError(
            f"{where}: obs_mode {mode!r} stores images: env_kwargs must name their image_size, an integer number of "
            f"pixels (the image sets use 64), got {size!r}"
        )
    if "rgb" not in str(mode) and size is not None:
        raise ValueError(
            f"{where}: env_kwargs names image_size {size!r}, but obs_mode {mode!r} stores no images; use an obs_mode "
            f"with images ({[m for m in OBS_MODES if 'rgb' in m]}) or drop image_size"
        )


def make_datasets(
    spec_path: str | os.PathLike[str] | None = None,
    *,
    names: Sequence[str] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    workers: int = 1,
    update_spec: bool = False,
    progress: bool = True,
    rebuild_stale: bool = False,
    obs_mode: str | None = None,
) -> list[MakeReport]:
    """Builds missing canonical datasets into the cache and verifies every hash.

    Args:
        spec_path: the spec file (default: the one shipped inside the package).
        names: datasets to make (default: all).
        cache_dir: where the files go (default :func:`default_cache_dir`).
        workers: worker processes per generation.
        update_spec: write the hashes of datasets that have none into the spec file (the package's own spec
            when ``spec_path`` is ``None``: meant for a source checkout).
        progress: show progress bars.
        rebuild_stale: a cached file of an older dataset schema is moved aside (renamed
            ``<name>.schema-v<N>.hdf5``, never deleted) and the dataset built again; without it such a file is
            reported as failed.
        obs_mode: make only the datasets of this observation mode (``"state"``: the state sets; ``"state+rgb"``:
            the image sets, gigabytes each), of ``names`` or of all.

    Returns:
        One report per dataset.

    Raises:
        KeyError: for a name not in the spec (the message lists the names).
        ValueError: the spec is invalid, or ``obs_mode`` is not one the envs take.
    """
    if obs_mode is not None:
        check_choice(obs_mode, OBS_MODES, what="obs_mode")
    entries = load_spec(spec_path)
    by_name = {e.name: e for e in entries}
    if names:
        where = str(spec_path) if spec_path is not None else "the canonical datasets spec"
        check_keys(names, sorted(by_name), what="dataset", where=where)
        selected = [by_name[n] for n in names]
    else:
        selected = entries
    if obs_mode is not None:
        selected = [e for e in selected if e.obs_mode == obs_mode]
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    reports: list[MakeReport] = []
    pinned: dict[str, str] = {}
    for entry in selected:
        report = _make_one(
            entry,
            cache / entry.file,
            workers=workers,
            progress=progress,
            update_spec=update_spec,
            rebuild_stale=rebuild_stale,
        )
        if entry.sha256 is None and report.status in ("built", "present") and report.sha256 is not None:
            pinned[entry.name] = report.sha256
        reports.append(report)
    if update_spec and pinned:
        _write_hashes(Path(spec_path) if spec_path is not None else default_spec_path(), pinned)
    return reports


def _make_one(
    entry: CanonicalDataset, path: Path, *, workers: int, progress: bool, update_spec: bool, rebuild_stale: bool
) -> MakeReport:
    """Builds one canonical dataset if it is missing or incomplete, verifies it and reports on it."""
    import gymnasium as gym

    from r2s2r_envs.datasets.generate import GenerationError

    moved = ""

    def report(status: Status, sha256: str | None, message: str) -> MakeReport:
        return MakeReport(name=entry.name, path=path, status=status, sha256=sha256, message=message + moved)

    if entry.env_id not in gym.registry:
        return report("skipped", None, f"env {entry.env_id!r} is not registered in this installation")
    if rebuild_stale and path.exists() and (old := _schema_version(path)) not in (None, SCHEMA_VERSION):
        aside = _aside(path, old)
        path.rename(aside)
        moved = f" (the schema-{old} file was moved to {aside.name})"
    status: Status = "present"
    try:
        if not path.exists() or not _complete(path):
            entry.generate(path, workers=workers, progress=progress)
            status = "built"
        with open_dataset(path, verify="full") as f:
            digest, complete, version = f.content_hash, f.complete, f.schema_version
    except (DatasetError, GenerationError, ValueError) as exc:
        return report("failed", None, str(exc))
    if version != SCHEMA_VERSION:
        # An older file's hash follows older rules: it can never match (or be pinned as) a current hash.
        return report(
            "failed", digest, f"built with schema version {version}; delete it, or make it with --rebuild-stale"
        )
    if not complete:
        return report("failed", digest, "generation was interrupted; run the command again to resume")
    if digest == entry.sha256:
        return report(status, digest, "hash verified")
    if (where := entry.known_build(digest)) is not None:
        return report(status, digest, f"hash verified (a known build: {where})")
    if entry.sha256 is None and not entry.other_builds:  # nothing pinned: the recipe is the check
        if status != "built" and (differences := recipe_differences(entry, path)):
            return report(
                "hash-mismatch",
                digest,
                f"no hash pinned, and the file is stale or foreign ({'; '.join(differences)}); delete it to rebuild",
            )
        note = "hash written to the spec" if update_spec else "no expected hash in the spec (use --update-spec)"
        return report(status, digest, note)
    differences = recipe_differences(entry, path)
    if not differences:  # what a build on another kind of CPU gives: usable, said, not a failure
        return report("unknown-build", digest, mismatch_message(entry, path, digest, differences=differences))
    return report("hash-mismatch", digest, mismatch_message(entry, path, digest, differences=differences))


def _schema_version(path: Path) -> int | None:
    """The schema version of a dataset file, or ``None`` if it cannot be read as one."""
    try:
        with open_dataset(path, verify="none") as f:
            return int(f.schema_version)
    except DatasetError:
        return None


def _aside(path: Path, version: int) -> Path:
    """A free name beside ``path`` for its schema-``version`` file: ``<stem>.schema-v<N>[.k].hdf5``."""
    candidate = path.with_name(f"{path.stem}.schema-v{version}{path.suffix}")
    k = 1
    while candidate.exists():
        candidate = path.with_name(f"{path.stem}.schema-v{version}.{k}{path.suffix}")
        k += 1
    return candidate


def recipe_differences(entry: CanonicalDataset, path: str | os.PathLike[str]) -> list[str]:
    """How a cached file departs from the recipe of canonical dataset ``entry`` (empty: it follows the recipe).

    A file whose content hash differs from the pinned one but which follows the recipe (same env, env arguments,
    seed, observation mode, demonstrator, action noise and success filter, complete with at least the spec's demos,
    of the current dataset schema, made by the installed version of this package, and the same world record and
    demonstrator settings as the env of this installation gives now: its world, grounding file and behavior model
    by hash, the planner's tuned settings) was built on another kind of machine: floating-point differences change
    the rollouts (docs/datasets.md, "Canonical datasets"). Anything listed here marks a stale or foreign file
    instead.
    """
    from r2s2r_envs._version import __version__

    try:
        with open_dataset(path, verify="none") as f:
            generation, provenance = dict(f.generation), dict(f.provenance)
            complete, num_demos, version = f.complete, f.num_demos, f.schema_version
    except DatasetError as exc:
        return [str(exc)]
    recipe_kwargs, recipe_files = _recorded_kwargs(entry)
    expected = {
        "env_id": entry.env_id,
        "env_kwargs": recipe_kwargs,
        "seed": entry.seed,
        "obs_mode": entry.obs_mode,
        "demonstrator": entry.demonstrator,
        "action_noise": float(entry.action_noise),
        "successes_only": entry.successes_only,
    }
    found = {key: generation.get(key) for key in expected}
    found["action_noise"] = float(generation.get("action_noise", 0.0))
    differences = [
        _difference(key, found[key], value, generation, recipe_files)
        for key, value in expected.items()
        if found[key] != value
    ]
    if version != SCHEMA_VERSION:
        differences.append(f"dataset schema version {version} (this package writes {SCHEMA_VERSION})")
    if not complete:
        differences.append("an interrupted generation")
    if num_demos < entry.episodes:
        differences.append(f"{num_demos} demos (the recipe: {entry.episodes})")
    made_by = (provenance.get("versions") or {}).get("r2s2r_envs")
    if made_by != __version__:
        differences.append(f"made by r2s2r_envs {made_by} (installed: {__version__})")
    if not differences:  # only then is the env worth making
        differences += _env_differences(entry, provenance)
    return differences


def _recorded_kwargs(entry: CanonicalDataset) -> tuple[dict[str, Any], dict[str, Any]]:
    """The env arguments a file of ``entry`` records and the files read by value: a file named by path is read by
    value, as generation does (``datasets.env_values``); the shipped recipes name no file and record their
    arguments as they are."""
    import gymnasium as gym

    from r2s2r_envs.datasets.env_values import record_by_value

    if entry.env_id not in gym.registry:
        return dict(entry.env_kwargs), {}
    try:
        return record_by_value(entry.env_id, entry.env_kwargs)
    except (OSError, ValueError, TypeError, KeyError):  # a file the env refuses: generation reports it
        return dict(entry.env_kwargs), {}


def _difference(key: str, found: Any, expected: Any, generation: Mapping[str, Any], files: Mapping[str, Any]) -> str:
    """One recipe difference; a file recorded by value is named by its file and hashes, not printed."""
    if key != "env_kwargs" or not isinstance(found, Mapping) or not isinstance(expected, Mapping):
        return f"{key} {found!r} (the recipe: {expected!r})"
    from r2s2r_envs.datasets.env_values import FILES_KEY

    had = generation.get(FILES_KEY) or {}
    parts = []
    for name in sorted(k for k in set(found) | set(expected) if found.get(k) != expected.get(k)):
        if name in had or name in files:
            old, new = (had.get(name) or {}).get("sha256"), (files.get(name) or {}).get("sha256")
            parts.append(
                f"{name}: recorded from a file with sha256 {str(old)[:16]}..., the recipe's file now has "
                f"{str(new)[:16]}..."
            )
        else:
            parts.append(f"{name} {found.get(name)!r} (the recipe: {expected.get(name)!r})")
    return f"env_kwargs differ: {'; '.join(parts)}"


def _env_differences(entry: CanonicalDataset, provenance: Mapping[str, Any]) -> list[str]:
    """How the file's world record and demonstrator settings differ from what the env of this installation
    records now (a grounding file or behavior model changed since the file was made, a retuned planner)."""
    import gymnasium as gym

    from r2s2r_envs.datasets.generate import lab_record, make_demonstrator_for

    ignored = ("mujoco_version", "obs_mode")  # versions are not part of the recipe; obs_mode is compared above
    try:
        env = gym.make(entry.env_id, obs_mode=entry.obs_mode, **_recorded_kwargs(entry)[0])
    except Exception as exc:  # noqa: BLE001 - any failure to make the env is reported, not raised
        return [f"{entry.env_id} cannot be made here to compare ({type(exc).__name__}: {exc})"]
    try:
        base = env.unwrapped
        world = base.provenance() if hasattr(base, "provenance") else {}
        real = getattr(base, "domain", "sim") == "real"
        if real:
            world = lab_record(world, entry.env_id)
        else:
            settings = getattr(make_demonstrator_for(env, entry.demonstrator), "settings", {})
    finally:
        env.close()
    now = json.loads(json.dumps({k: v for k, v in world.items() if k not in ignored}, default=str))
    recorded = {k: v for k, v in dict(provenance.get("world") or {}).items() if k not in ignored}
    out = []
    if keys := sorted(k for k in set(now) | set(recorded) if now.get(k) != recorded.get(k)):
        out.append(f"its env record differs from this installation's {entry.env_id} in {keys}")
    if not real:
        had = dict((provenance.get("demonstrator") or {}).get("settings") or {})
        now_settings = json.loads(json.dumps(settings, default=str))
        if keys := sorted(k for k in set(had) | set(now_settings) if had.get(k) != now_settings.get(k)):
            changes = ", ".join(f"{k} {had.get(k)!r} -> {now_settings.get(k)!r}" for k in keys)
            out.append(f"its demonstrator's settings differ from what {entry.env_id}'s uses now ({changes})")
    return out


def mismatch_message(
    entry: CanonicalDataset, path: str | os.PathLike[str], digest: str, *, differences: list[str] | None = None
) -> str:
    """What a cached file whose content hash is not the pinned one is, and what to do about it (``differences``:
    :func:`recipe_differences`, computed here when not given)."""
    known = [h[:16] + "..." for h in (entry.sha256, *entry.other_builds) if h]
    head = f"content hash {digest[:16]}... is not a build the spec knows ({', '.join(known) or 'none pinned yet'})"
    differences = recipe_differences(entry, path) if differences is None else differences
    if differences:
        return f"{head}: stale or foreign ({'; '.join(differences)}); delete the file to rebuild"
    return (
        f"{head}, but the file follows the recipe and was made by this version: built on another kind of machine "
        "than the reference (floating-point differences change the rollouts) or by earlier code of this version. "
        "Training and the ablation use it with a warning and record its hash; delete it to rebuild. A row trained on "
        "it is off-track on every track (tracks accept known builds only, docs/leaderboard.md#tracks): for a track, "
        "use a file of a known build (r2s2r datasets verify FILE --expect SHA256)"
    )


def spec_entries_for_display(entries: Iterable[CanonicalDataset], cache_dir: Path) -> list[dict[str, Any]]:
    """Rows for ``r2s2r datasets list``: name, env, demos, whether cached (and complete), expected hash, the builds
    the spec knows (``known_builds``: the pinned hash and ``other_builds``) and, for a cached file, whether the hash
    it records is one of them (``cached_build``: ``"known"``, ``"unknown"`` or None; the recorded hash, not one
    recomputed: ``r2s2r datasets verify NAME`` recomputes it)."""
    rows = []
    for e in entries:
        path = cache_dir / e.file
        recorded = _recorded_hash(path) if path.exists() else None
        rows.append(
            {
                "name": e.name,
                "env_id": e.env_id,
                "episodes": e.episodes,
                "cached": path.exists(),
                # An interrupted build leaves a resumable file: cached, not complete (``datasets make`` resumes it).
                "complete": path.exists() and _complete(path),
                "sha256": e.sha256,
                "known_builds": len([h for h in (e.sha256, *e.other_builds) if h]),
                "cached_build": None if recorded is None else "known" if e.known_build(recorded) else "unknown",
                "path": str(path),
            }
        )
    return rows


def _recorded_hash(path: Path) -> str | None:
    """The content hash a dataset file records (not recomputed), or None if it cannot be read as a dataset."""
    try:
        with open_dataset(path, verify="none", allow_empty=True) as f:
            return f.content_hash
    except DatasetError:
        return None


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
