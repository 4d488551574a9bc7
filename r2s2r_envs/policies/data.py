"""Which data a training run uses: datasets by canonical name or file, checked before any training (no torch).

A dataset argument is a canonical name (``r2s2r datasets list``; the file is looked up in the cache,
``$R2S2R_DATA_DIR`` or ``~/.cache/r2s2r_envs/datasets``) or a path to an HDF5 file. Before anything is loaded
:func:`resolve_datasets` checks that every dataset exists, that ``--real`` ones hold real (lab) data and ``--sim``
ones simulated data, and that all of them are of one task (same env family, observation keys and shapes, action
size), so a mistake fails at once with a message naming the file.
"""

from __future__ import annotations

import dataclasses
import re
import warnings
from collections.abc import Sequence
from pathlib import Path

from r2s2r_envs.datasets.canonical import CanonicalDataset, default_cache_dir, load_spec, recipe_differences
from r2s2r_envs.datasets.reader import open_dataset
from r2s2r_envs.datasets.schema import DatasetError

# "PickSort-Ungrounded-v0" -> family "PickSort", variant "Ungrounded"; "ToyPickSort-v0" -> family "ToyPickSort".
_ENV_ID = re.compile(r"^(?P<family>[^-]+)(?:-(?P<variant>.+))?-v\d+$")
#: The variant name of the lab's env id (real data, not a grounding variant).
REAL_VARIANT = "Real"


class DataSelectionError(ValueError):
    """A dataset argument that cannot be used: missing, of the wrong domain or of another task."""


class UnpinnedDatasetWarning(UserWarning):
    """A canonical dataset used although its content hash is not the pinned one (it follows the recipe)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class DatasetRef:
    """A dataset chosen for training.

    Attributes:
        name: the canonical name, or ``None`` for a file given by path.
        path: the HDF5 file.
        domain: ``"real"`` or ``"sim"`` (as the file records it).
        env_id: the env that made it.
        content_hash: the file's content hash.
        obs_spec: shape of every observation key.
        action_dim: action size.
    """

    name: str | None
    path: Path
    domain: str
    env_id: str
    content_hash: str
    obs_spec: dict[str, tuple[int, ...]]
    action_dim: int


def task_family(env_id: str) -> str:
    """The task an env id belongs to: ``"PickSort"`` for every PickSort id."""
    m = _ENV_ID.match(env_id)
    return m.group("family") if m else env_id


def grounding_variant(env_id: str) -> str | None:
    """The grounding variant of a sim env id (``"Ungrounded"`` for ``PickSort-Ungrounded-v0``), else ``None``."""
    m = _ENV_ID.match(env_id)
    variant = m.group("variant") if m else None
    return None if variant in (None, REAL_VARIANT) else variant


def resolve_path(arg: str) -> tuple[str | None, Path]:
    """``(canonical name or None, file)`` for a dataset argument.

    Raises:
        DataSelectionError: neither an existing file nor a canonical name, or a canonical dataset not built yet.
    """
    name, path, _entry = _resolve(arg)
    return name, path


def _resolve(arg: str) -> tuple[str | None, Path, CanonicalDataset | None]:
    """``(canonical name or None, file, the canonical spec entry or None)``."""
    path = Path(arg).expanduser()
    if path.is_file():
        return None, path, None
    try:
        entries = {e.name: e for e in load_spec()}
    except (FileNotFoundError, ValueError):
        entries = {}
    if arg in entries:
        cached = default_cache_dir() / entries[arg].file
        if not cached.is_file():
            raise DataSelectionError(
                f"canonical dataset {arg!r} is not built yet (expected at {cached}): run `r2s2r datasets make {arg}`"
            )
        return arg, cached, entries[arg]
    if path.exists():
        raise DataSelectionError(f"dataset {arg!r} is a directory; give an HDF5 file or a canonical name")
    raise DataSelectionError(
        f"no dataset {arg!r}: not a file and not a canonical dataset name; canonical names: {sorted(entries)} "
        "(`r2s2r datasets list`)"
    )


def _check_unpinned(role: str, arg: str, path: Path, digest: str, entry: CanonicalDataset) -> None:
    """A canonical dataset whose content hash is not the pinned one: usable with a warning when it follows the
    canonical recipe (built on another kind of machine), refused when stale or foreign."""
    differences = recipe_differences(entry, path)
    if differences:
        raise DataSelectionError(
            f"--{role} {arg}: the cached {path} is stale or foreign ({'; '.join(differences)}): delete the file and "
            f"run `r2s2r datasets make {arg}`"
        )
    known = ", ".join(h[:16] + "..." for h in (entry.sha256, *entry.other_builds) if h) or "none pinned yet"
    warnings.warn(
        f"--{role} {arg}: {path} has content hash {digest[:16]}..., not a build the spec knows ({known}); it follows "
        "the canonical recipe and was made by this version (another kind of machine, "
        "docs/datasets.md#canonical-datasets); using it: results record its hash",
        UnpinnedDatasetWarning,
        stacklevel=3,
    )


def resolve_datasets(real: Sequence[str], sim: Sequence[str]) -> list[DatasetRef]:
    """Finds and checks the training datasets (headers only; the data is loaded later).

    Args:
        real: real dataset arguments (names or files).
        sim: simulated dataset arguments.

    Returns:
        The real ones first, then the sim ones.

    Raises:
        DataSelectionError: a missing dataset, a real one that holds sim data or the other way round, or datasets
            of different tasks (env family, shapes of shared observation keys, action size); keys only some hold
            are left out of the run.
    """
    refs: list[DatasetRef] = []
    for role, args in (("real", real), ("sim", sim)):
        for arg in args:
            name, path, entry = _resolve(arg)
            try:
                with open_dataset(path, verify="none") as f:
                    ref = DatasetRef(
                        name=name,
                        path=path,
                        domain=f.domain,
                        env_id=f.env_id,
                        content_hash=f.content_hash,
                        obs_spec={k: tuple(shape) for k, (shape, _dtype) in f.obs_spec().items()},
                        action_dim=int(f.action_dim),
                    )
            except DatasetError as exc:
                raise DataSelectionError(f"--{role} {arg}: {exc}") from None
            if entry is not None and entry.known_build(ref.content_hash) is None:
                _check_unpinned(role, arg, path, ref.content_hash, entry)
            if ref.domain != role:
                raise DataSelectionError(
                    f"--{role} {arg}: {path} holds {ref.domain} data (env {ref.env_id}); give it as --{ref.domain}"
                )
            refs.append(ref)
    if refs:
        first = refs[0]
        for ref in refs[1:]:
            if task_family(ref.env_id) != task_family(first.env_id):
                raise DataSelectionError(
                    f"datasets of different tasks: {first.path} is from {first.env_id}, {ref.path} from {ref.env_id}; "
                    "co-training needs data of one task"
                )
            if ref.action_dim != first.action_dim:
                raise DataSelectionError(
                    f"datasets of different tasks: {first.path} has {first.action_dim}-D actions, {ref.path} "
                    f"{ref.action_dim}-D"
                )
            # Keys only some datasets hold (an opt-in sensor) are left out of the run; shared keys must agree.
            diff = sorted(k for k in set(ref.obs_spec) & set(first.obs_spec) if ref.obs_spec[k] != first.obs_spec[k])
            if diff:
                raise DataSelectionError(
                    f"datasets disagree on observations {diff}: {first.path} {[first.obs_spec.get(k) for k in diff]}, "
                    f"{ref.path} {[ref.obs_spec.get(k) for k in diff]} (another task or env settings, e.g. num_objects)"
                )
    return refs
