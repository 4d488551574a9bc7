"""Where the ablation keeps its results: one directory per task, named by its config hash, finished when marked.

Layout of an output directory ``DIR`` (docs/ablation.md, "Output files")::

    DIR/ablation.json                 manifest: format, schema version, the design, package version, the lab
    DIR/lab/<hash>.json               with --lab FILE: the copy of the lab file every task of the run makes its lab from
    DIR/store/<kind>/<key>/           one task's output (dataset, checkpoint, result, mixture arrays); an eval
                                      task's result.json (result.json.gz in an exported record)
    DIR/store/<kind>/<key>/task.json  written last, atomically: its presence marks the task finished
    DIR/store/attempts/<key>.jsonl    one line per attempt (start, end, error), kept across runs
    DIR/store/failed/<key>.json       the last failure of a task that ran out of retries (removed on success);
                                      ``"final": true`` for a chain stage that cannot deliver with these inputs
    DIR/results/...                   the evaluation results, schema v2, for ``r2s2r leaderboard``
    DIR/interventions/<condition>/... the interventions' evaluation results (diagnostic: no leaderboard)
    DIR/leaderboard/, DIR/report/     the leaderboard and the ablation's own report

A directory without ``task.json`` is the partial output of an interrupted or killed attempt: it is deleted and the
task runs again, never taken for finished.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

from r2s2r_envs.evaluation.result_files import GZIP_SUFFIX, RESULT_SUFFIXES, gzip_bytes, read_result_bytes
from r2s2r_envs.mappings import check_keys
from r2s2r_envs.safe_json import loads, read_json

#: Format name and schema version of ``ablation.json``; a directory of another version is refused.
MANIFEST_FORMAT = "r2s2r_envs.ablation"
MANIFEST_SCHEMA_VERSION = 1
MANIFEST = "ablation.json"
DONE_FILE = "task.json"
#: An eval task's result file, as the task writes it; an exported record keeps it compressed (``result.json.gz``).
RESULT_FILE = "result.json"
#: The run directory's copies of the results, for ``r2s2r leaderboard`` (rebuilt from the store by every run).
RESULTS_DIR = "results"
#: The run directory's copies of the interventions' results, per condition (rebuilt like ``results/``).
INTERVENTIONS_DIR = "interventions"


#: What a record keeps of a run directory (:func:`export_record`): every small file an analysis or a resumed run
#: reads; checkpoints (``policy/``), generated datasets, sysid's lab logs and mixture arrays stay behind.
RECORD_SKIPPED = ("policy", "logs", "*.hdf5", "*.npz", "index.html", ".*.tmp")


class StoreError(ValueError):
    """An output directory that cannot be used (another format or schema version, a file in its place)."""


def write_json_atomic(path: Path, data: Any, *, sort_keys: bool = True) -> None:
    """Writes JSON to ``path`` through a temporary file and a rename (never a half-written file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=sort_keys, allow_nan=False) + "\n")
    os.replace(tmp, path)


class Store:
    """The task results under one output directory.

    Args:
        root: the output directory (``--out``).
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    # ------------------------------------------------------------------ manifest
    def check_manifest(self) -> dict[str, Any] | None:
        """The existing manifest, after checking it is ours and of this schema version (``None`` if new).

        Raises:
            StoreError: ``root`` is a file, or holds a manifest of another format or schema version.
        """
        if self.root.exists() and not self.root.is_dir():
            raise StoreError(f"--out {self.root} is a file; give a directory")
        path = self.root / MANIFEST
        if not path.exists():
            return None
        try:  # the suite's bounded, strict reader: no RecursionError, no NaN
            data = read_json(path)
        except (OSError, ValueError) as exc:
            raise StoreError(f"{path} is not a readable ablation manifest ({exc}); give another --out") from None
        if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
            raise StoreError(f"{path} is not an ablation manifest (format {MANIFEST_FORMAT!r}); give another --out")
        version = data.get("schema_version")
        if version != MANIFEST_SCHEMA_VERSION:
            raise StoreError(
                f"{self.root} holds ablation results of schema version {version!r}; this version of r2s2r_envs "
                f"reads schema version {MANIFEST_SCHEMA_VERSION} only: give another --out (or delete the directory)"
            )
        check_manifest_fields(data, path)
        return data

    def write_manifest(
        self, design: dict[str, Any], package_version: str, *, lab: dict[str, str] | None = None
    ) -> None:
        """Records the design of the latest run (earlier designs' task results stay usable by hash) and the lab the
        directory is made for (``{"name", "config_sha256"}``; a directory is for one lab only)."""
        data = {
            "format": MANIFEST_FORMAT,
            "schema_version": MANIFEST_SCHEMA_VERSION,
            "design": design,
            "r2s2r_envs": package_version,
            "written": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        if lab is not None:
            data["lab"] = dict(lab)
        write_json_atomic(self.root / MANIFEST, data)

    # ------------------------------------------------------------------ tasks
    def task_dir(self, kind: str, key: str) -> Path:
        """The output directory of a task."""
        return self.root / "store" / kind / key

    def is_done(self, kind: str, key: str) -> bool:
        """Whether the task finished (its ``task.json`` exists)."""
        return (self.task_dir(kind, key) / DONE_FILE).is_file()

    def result_file(self, key: str) -> Path:
        """The result file of an eval task: ``result.json`` as the task wrote it, else ``result.json.gz`` where a
        record keeps it compressed (:func:`export_record`), else the path the task writes."""
        folder = self.task_dir("eval", key)
        plain, packed = folder / RESULT_FILE, folder / (RESULT_FILE + GZIP_SUFFIX)
        return packed if packed.is_file() and not plain.is_file() else plain

    def done_record(self, kind: str, key: str) -> dict[str, Any]:
        """What a finished task recorded (its ``task.json``)."""
        return read_json(self.task_dir(kind, key) / DONE_FILE)

    def start(self, kind: str, key: str, *, keep_partial: bool = False) -> Path:
        """Prepares a task's directory for an attempt.

        Args:
            kind: the task's kind.
            key: its config hash.
            keep_partial: keep an earlier attempt's output (a dataset generation resumes its crash-safe file);
                by default partial output is deleted.
        """
        path = self.task_dir(kind, key)
        if path.exists() and not keep_partial:
            shutil.rmtree(path)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def finish(self, kind: str, key: str, record: dict[str, Any]) -> None:
        """Marks a task finished with its record (atomic) and clears an earlier failure."""
        write_json_atomic(self.task_dir(kind, key) / DONE_FILE, record)
        failed = self.failed_path(key)
        if failed.exists():
            failed.unlink()

    def failed_path(self, key: str) -> Path:
        """Where a task's last failure is recorded."""
        return self.root / "store" / "failed" / f"{key}.json"

    def record_failure(self, task: dict[str, Any], error: str, *, final: bool = False) -> None:
        """Records that a task ran out of retries, or (``final``) that a chain stage cannot deliver with its inputs:
        a re-run then reuses the failure instead of running the stage again."""
        write_json_atomic(
            self.failed_path(task["key"]),
            {"task": task, "error": error, "attempts": self.attempts(task["key"]), "final": final},
        )

    def _failure_record(self, key: str) -> dict[str, Any] | None:
        """The task's failure record as written by :meth:`mark_failed` (``None`` if none can be read)."""
        path = self.failed_path(key)
        if not path.is_file():
            return None
        try:
            data = read_json(path)
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def final_failure(self, key: str) -> str | None:
        """The error of a task recorded as a final failure (``None`` if there is none)."""
        data = self._failure_record(key)
        return str(data.get("error")) if data is not None and data.get("final") else None

    def failure(self, key: str) -> str | None:
        """The recorded error of a task's last failure (``None`` if none is recorded)."""
        data = self._failure_record(key)
        return str(data.get("error")) if data is not None else None

    def log_attempt(self, key: str, event: dict[str, Any]) -> None:
        """Appends one line to the task's attempt log (start, end or error of one attempt)."""
        path = self.root / "store" / "attempts" / f"{key}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as f:
            f.write(json.dumps({"time": time.time(), "pid": os.getpid(), **event}) + "\n")

    def attempts(self, key: str) -> int:
        """How many attempts of a task have started (over all runs)."""
        path = self.root / "store" / "attempts" / f"{key}.jsonl"
        if not path.exists():
            return 0
        return sum(1 for line in path.read_text().splitlines() if _event(line, path) == "start")


def _event(line: str, path: Path) -> Any:
    """The ``event`` of one line of an attempt log (``None`` for a line that is not an object)."""
    record = loads(line, what=str(path)) if line.strip() else None
    return record.get("event") if isinstance(record, dict) else None


#: The manifest's keys, and what each holds.
_MANIFEST_FIELDS = {
    "format": "the text 'r2s2r_envs.ablation'",
    "schema_version": f"the integer {MANIFEST_SCHEMA_VERSION}",
    "design": "an object (the design of the latest run)",
    "r2s2r_envs": "a version text",
    "written": "a time text",
    "lab": "an object {'name': text, 'config_sha256': 64 hex digits, ...} (absent: the default lab)",
}


def check_manifest_fields(data: dict[str, Any], path: Path) -> None:
    """Each of the manifest's fields is of the kind :meth:`Store.write_manifest` writes.

    Raises:
        StoreError: naming the file, the field and what it accepts.
    """
    try:
        check_keys(data, sorted(_MANIFEST_FIELDS), what="manifest field", where=str(path), error=StoreError)
    except StoreError as exc:
        raise StoreError(f"{exc}: the file was edited or damaged; give another --out") from None
    lab = data.get("lab")
    fits = {
        "design": isinstance(data.get("design"), dict),
        "r2s2r_envs": isinstance(data.get("r2s2r_envs", ""), str),
        "written": isinstance(data.get("written", ""), str),
        "lab": "lab" not in data
        or (
            isinstance(lab, dict)
            and isinstance(lab.get("name"), str)
            and isinstance(lab.get("config_sha256"), str)
            and re.fullmatch(r"[0-9a-f]{64}", lab["config_sha256"]) is not None
        ),
    }
    bad = next((field for field, ok in fits.items() if not ok), None)
    if bad is not None:
        raise StoreError(
            f"{path}: field {bad!r} is {str(data.get(bad))[:80]!r}; it must be {_MANIFEST_FIELDS[bad]}: the file was "
            "edited or damaged; give another --out (or restore the manifest)"
        )


def export_record(root: str | os.PathLike[str], dest: str | os.PathLike[str]) -> Path:
    """Copies what a record keeps of the run directory ``root`` to ``dest``: the manifest, the run summary, lab
    copies, the report, the leaderboard's Markdown and JSON, and of every finished task its ``task.json`` and small
    outputs (an evaluation's result, a grounding file, a behavior model), failures and attempt logs; no checkpoint,
    dataset, lab log or mixture array (:data:`RECORD_SKIPPED`). Task directories without ``task.json`` (unfinished)
    are left out. ``dest`` resumes as a run directory: a training whose checkpoint is missing runs again only when
    a task still to run needs it.

    Evaluation results are kept gzip-compressed (``result.json.gz``, deterministic: the same result makes the same
    file; every reader takes both forms, :mod:`r2s2r_envs.evaluation.result_files`). ``results/`` (and
    ``interventions/``) holds copies of the store's results, which every run (and ``--report-only``) rebuilds from
    the store: a copy is left out, and a result there that the store does not hold is kept, compressed.

    Raises:
        StoreError: ``root`` is not an ablation run directory, or ``dest`` exists and is not empty.
    """
    source, target = Path(root), Path(dest)
    if not (source / MANIFEST).is_file():
        raise StoreError(f"{source} is not an ablation run directory (no {MANIFEST})")
    if target.exists() and any(target.iterdir()):
        raise StoreError(f"{target} exists and is not empty; export a record into a new directory")
    ignore = shutil.ignore_patterns(*RECORD_SKIPPED)
    store = source / "store"
    kinds = sorted(p for p in store.iterdir() if p.is_dir()) if store.is_dir() else []
    finished = {
        kind.name: [task for task in sorted(kind.iterdir()) if (task / DONE_FILE).is_file()]
        for kind in kinds
        if kind.name not in ("attempts", "failed")
    }
    kept = {
        hashlib.sha256(read_result_bytes(result)).hexdigest()
        for task in finished.get("eval", [])
        for result in (task / RESULT_FILE, task / (RESULT_FILE + GZIP_SUFFIX))
        if result.is_file()
    }
    for entry in sorted(source.iterdir()):
        if entry.name == "store":
            continue
        if entry.name in (RESULTS_DIR, INTERVENTIONS_DIR) and entry.is_dir():
            _export_results(entry, target / entry.name, kept)
        elif entry.is_dir():
            shutil.copytree(entry, target / entry.name, ignore=ignore)
        elif not any(entry.match(p) for p in RECORD_SKIPPED):
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy2(entry, target / entry.name)
    for kind in kinds:
        if kind.name in ("attempts", "failed"):
            shutil.copytree(kind, target / "store" / kind.name, ignore=ignore)
            continue
        for task in finished[kind.name]:
            copy = _record_copy if kind.name == "eval" else shutil.copy2
            shutil.copytree(task, target / "store" / kind.name / task.name, ignore=ignore, copy_function=copy)
    return target


def _record_copy(src: str, dst: str) -> str:
    """``shutil.copytree``'s copy of one file of an eval task into a record: its result compressed
    (``result.json.gz``)."""
    if Path(src).name != RESULT_FILE:
        return shutil.copy2(src, dst)
    packed = dst + GZIP_SUFFIX
    Path(packed).write_bytes(gzip_bytes(Path(src).read_bytes()))
    return packed


def _export_results(source: Path, target: Path, kept: set[str]) -> None:
    """The record's ``results/``: each result file there that the store does not hold (same bytes), compressed;
    nothing for a copy of a result the store holds (``results/`` is rebuilt from the store)."""
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        if any(fnmatch.fnmatch(part, p) for part in path.relative_to(source).parts for p in RECORD_SKIPPED):
            continue
        is_result = path.name.endswith(RESULT_SUFFIXES)
        if is_result and hashlib.sha256(read_result_bytes(path)).hexdigest() in kept:
            continue
        out = target / path.relative_to(source)
        out.parent.mkdir(parents=True, exist_ok=True)
        if is_result and not path.name.endswith(GZIP_SUFFIX):
            out.with_name(out.name + GZIP_SUFFIX).write_bytes(gzip_bytes(path.read_bytes()))
        else:
            shutil.copy2(path, out)
