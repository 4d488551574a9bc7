"""Runs an ablation design on Ray: checks first, then the task graph, then the leaderboard and the report.

:func:`run_ablation` is what ``r2s2r ablation`` calls:

1. **Checks before any work** (:func:`preflight`): the design (unknown variant or method, bad numbers), the lab
   (``--lab``: made once, so that the lab config's own validation names an unknown or out-of-range field), the
   output directory (another format or schema version is refused, evaluation results in it must be schema v2, and
   a directory made for another lab is refused naming both labs' config hashes), every canonical dataset the
   design reads (missing: the message names the ``r2s2r datasets make`` command), and ray.
2. **The task graph on Ray** (:func:`run_tasks`): locally by default (``ray.init(num_cpus=workers)``, no
   dashboard, quiet logs), on a cluster with ``address``. Each task is one ``ray.remote`` call declaring its CPUs,
   with ``max_retries`` and ``retry_exceptions`` (a killed worker or an exception is retried). Finished tasks
   (``task.json`` present) are skipped; a task that fails after its retries is recorded in ``store/failed/`` and the
   tasks depending on it are reported as blocked, with the failure that blocks them, while the rest of the sweep
   goes on. A chain stage that cannot deliver (``chain.StageError``) fails at once, and a re-run reuses that
   failure (same inputs, same answer) instead of running it again.
3. **Outputs**: evaluation results copied to ``DIR/results/`` (schema v2, one folder per method and variant),
   ``r2s2r leaderboard`` over them into ``DIR/leaderboard/``, the interventions' results (diagnostic conditions, no
   benchmark score: never on the leaderboard) to ``DIR/interventions/<condition>/``, and the ablation's report into
   ``DIR/report/``.

Ray is imported only here, inside functions: the rest of ``r2s2r_envs.ablation`` imports without it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from r2s2r_envs._version import __version__
from r2s2r_envs.ablation.chain import LabError, LabRef, install_lab, lab_identity
from r2s2r_envs.ablation.design import AblationDesign, DesignError, Task, check_design, env_id_of
from r2s2r_envs.ablation.store import INTERVENTIONS_DIR, RESULTS_DIR, Store, StoreError
from r2s2r_envs.ablation.tasks import execute_task, format_error, has_output
from r2s2r_envs.evaluation.result_files import read_result_bytes, read_result_data, result_files

RAY_HINT = "the ablation runs its tasks on Ray; install the extra: pip install 'r2s2r_envs[ray]'"


class AblationError(ValueError):
    """Input the ablation cannot run with; raised before any work starts."""


@dataclasses.dataclass(kw_only=True)
class RunSummary:
    """What one run did.

    Attributes:
        total: tasks in the design.
        skipped: tasks already finished before this run (their results reused).
        ran: tasks run to completion by this run.
        failed: ``{key: error}`` of tasks that failed after their retries.
        blocked: keys of tasks not run because a task they depend on failed.
        blocked_reasons: ``{key: reason}`` of each blocked task: the failed task it needs, and its error.
        wall_time_s: seconds of the whole run (checks, tasks, leaderboard and report).
        task_time_s: seconds spent in the task graph.
        out: the output directory.
    """

    total: int
    skipped: int = 0
    ran: int = 0
    failed: dict[str, str] = dataclasses.field(default_factory=dict)
    blocked: list[str] = dataclasses.field(default_factory=list)
    blocked_reasons: dict[str, str] = dataclasses.field(default_factory=dict)
    wall_time_s: float = 0.0
    task_time_s: float = 0.0
    out: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return dataclasses.asdict(self)


# ---------------------------------------------------------------------- checks
def canonical_hashes(design: AblationDesign) -> dict[str, str]:
    """The content hash of every canonical dataset the design reads, from the cached files.

    Raises:
        AblationError: a canonical dataset is missing (the message names the command that builds it), stale (its
            hash differs from the one the canonical spec pins), unreadable, or has fewer demos than the design uses.
    """
    from r2s2r_envs.datasets.reader import open_dataset
    from r2s2r_envs.datasets.schema import DatasetError
    from r2s2r_envs.policies.data import DataSelectionError, resolve_datasets

    hashes: dict[str, str] = {}
    specs = [design.real, *(design.sim_spec(v) for v in design._sim_variants_used())]
    missing: list[tuple[str, str]] = []
    problems: list[tuple[str, str]] = []
    for spec in specs:
        if spec.canonical is None or spec.canonical in hashes:
            continue
        try:
            args = ([spec.canonical], []) if spec.domain == "real" else ([], [spec.canonical])
            (ref,) = resolve_datasets(*args)
        except DataSelectionError as exc:
            (missing if "not built yet" in str(exc) else problems).append((spec.canonical, str(exc)))
            continue
        hashes[spec.canonical] = ref.content_hash
        try:
            with open_dataset(ref.path, verify="none") as f:
                if f.num_demos < spec.episodes:
                    problems.append(
                        (spec.canonical, f"{ref.path} has {f.num_demos} demos; the design uses {spec.episodes}")
                    )
        except DatasetError as exc:
            problems.append((spec.canonical, str(exc)))
    if missing:
        names = " ".join(name for name, _ in missing)
        raise AblationError(
            f"missing dataset(s) {[n for n, _ in missing]}: build them first with `r2s2r datasets make {names}`"
        )
    if problems:
        raise AblationError("; ".join(f"dataset {name}: {msg}" for name, msg in problems))
    return hashes


def check_results_dir(root: Path) -> None:
    """Every evaluation result already under ``root/results`` must be of the current result schema version.

    Raises:
        AblationError: a result of another schema version (or not readable as JSON) is there.
    """
    from r2s2r_envs.evaluation.schema import RESULT_FORMAT, RESULT_SCHEMA_VERSION

    results = root / "results"
    if not results.is_dir():
        return
    for path in result_files(results):
        try:
            data = read_result_data(path)
        except (OSError, ValueError) as exc:
            raise AblationError(f"{path} is not readable JSON ({exc}); give another --out") from None
        if isinstance(data, dict) and data.get("format") == RESULT_FORMAT:
            if data.get("schema_version") != RESULT_SCHEMA_VERSION:
                raise AblationError(
                    f"{path} is an evaluation result of schema version {data.get('schema_version')!r}; this ablation "
                    f"writes schema version {RESULT_SCHEMA_VERSION}: give another --out (or remove {results})"
                )


def design_lab(design: AblationDesign, out: str | os.PathLike[str]) -> dict[str, str]:
    """The name and config hash of the lab a design runs on (the default lab without ``--lab``), checked.

    Raises:
        AblationError: the lab cannot be made (the message names the bad field), or a lab file changed since the
            design was made from it (its config hash differs).
    """
    lab = design.lab
    try:
        if lab is None:
            return lab_identity("default")
        copy = Path(out) / lab.file if lab.file else None
        if copy is not None and copy.is_file():
            return _lab_copy_identity(lab, copy)
        identity = lab_identity(lab.origin or lab.name)
    except LabError as exc:
        raise AblationError(str(exc)) from None
    if identity["config_sha256"] != lab.config_sha256:
        raise AblationError(
            f"lab {lab.origin or lab.name} has config {identity['config_sha256'][:12]} now, the design was made for "
            f"config {lab.config_sha256[:12]}: run the command again"
        )
    return identity


def _lab_copy_identity(lab: LabRef, copy: Path) -> dict[str, str]:
    """The identity of the run directory's copy of a lab file, which must be the lab the design was made for: a
    copy edited after it was copied is named as such (the lab the user gave is not at fault, and running again
    would not help)."""
    fix = (
        f"delete {copy} to have it copied again from {lab.origin or lab.name} (if that file is still the lab of "
        f"config {lab.config_sha256[:12]}), restore it, or give another --out"
    )
    try:
        identity = lab_identity(copy)
    except LabError as exc:
        raise AblationError(
            f"{copy}, the run directory's copy of lab {lab.origin or lab.name}, is refused ({exc}): it was edited or "
            f"damaged after it was copied; {fix}"
        ) from None
    if identity["config_sha256"] != lab.config_sha256:
        raise AblationError(
            f"{copy}, the run directory's copy of lab {lab.origin or lab.name}, has config "
            f"{identity['config_sha256'][:12]}, not the config {lab.config_sha256[:12]} it was copied with: it was "
            f"edited after it was copied; {fix}"
        )
    return identity


def check_lab_of_dir(store: Store, manifest: dict[str, Any] | None, identity: dict[str, str]) -> None:
    """A run directory is made for one lab: refuse one whose manifest names another (both config hashes named).

    A manifest without a lab was written before ``--lab`` existed, by a run on the default lab.
    """
    if manifest is None:
        return
    recorded = manifest.get("lab")
    if recorded is None:
        recorded = lab_identity("default")
    if recorded.get("config_sha256") != identity["config_sha256"]:
        raise AblationError(
            f"--out {store.root} was made for lab {recorded.get('name')!r} (config sha256 "
            f"{recorded.get('config_sha256')}); this run is for lab {identity['name']!r} (config sha256 "
            f"{identity['config_sha256']}): give another --out"
        )


def check_track_of_dir(store: Store, manifest: dict[str, Any] | None, track: str) -> None:
    """A run directory is made for one track (state or image): refuse one whose manifest names another. A manifest
    whose design names none was written by a state-track run."""
    if manifest is None:
        return
    recorded = (manifest.get("design") or {}).get("track", "state")
    if recorded != track:
        raise AblationError(
            f"--out {store.root} was made for the {recorded} track; this run is for the {track} track: give another "
            "--out"
        )


def preflight(design: AblationDesign, out: str | os.PathLike[str]) -> list[Task]:
    """Every check that runs before any work; returns the task graph.

    Raises:
        AblationError: a bad design, lab, output directory or dataset, named in the message.
    """
    try:
        check_design(design)
    except DesignError as exc:
        raise AblationError(str(exc)) from None
    store = Store(out)
    try:
        manifest = store.check_manifest()
    except StoreError as exc:
        raise AblationError(str(exc)) from None
    check_lab_of_dir(store, manifest, design_lab(design, out))
    check_track_of_dir(store, manifest, design.track)
    check_results_dir(Path(out))
    hashes = canonical_hashes(design)
    return design.tasks(canonical_hashes=hashes)


def import_ray() -> Any:
    """Imports ray, or raises ``AblationError`` with the install hint."""
    try:
        import ray
    except ImportError:
        raise AblationError(RAY_HINT) from None
    return ray


# ---------------------------------------------------------------------- running
def init_ray(address: str | None, workers: int | None) -> bool:
    """Starts (or joins) Ray unless it is running; returns whether this call started it.

    Locally: ``num_cpus=workers`` (default: every core), no dashboard, errors only. With ``address``: joins the
    cluster there (``"auto"`` for the one this node belongs to).

    Raises:
        AblationError: Ray is not installed, or the cluster at ``address`` cannot be joined (named, with what to do).
    """
    ray = import_ray()
    if ray.is_initialized():
        return False
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    kwargs: dict[str, Any] = {
        "include_dashboard": False,
        "logging_level": logging.ERROR,  # quiet: task failures reach the driver as exceptions anyway
        "log_to_driver": False,
        "configure_logging": True,
    }
    if address:
        _check_reachable(address)  # Ray itself retries an unreachable address for minutes
        try:
            ray.init(address=address, **kwargs)
        except (ConnectionError, RuntimeError, ValueError, TimeoutError) as e:  # Ray's kinds of "cannot connect"
            reason = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise AblationError(
                f"cannot join the Ray cluster at --address {address!r} ({type(e).__name__}: {reason}); start one "
                "with `ray start --head` on its head node, give that node's address, or drop --address to run "
                "on this machine"
            ) from None
    else:
        ray.init(num_cpus=workers or os.cpu_count() or 1, **kwargs)
    return True


#: Seconds to wait for a TCP connection to a cluster's head before giving up.
CONNECT_TIMEOUT_S = 5.0
_RAY_DEFAULT_PORT = 6379


def _check_reachable(address: str) -> None:
    """Refuse, within ``CONNECT_TIMEOUT_S``, a ``host:port`` (or ``ray://host:port``) nothing listens on;
    ``"auto"`` is left to Ray (it reads this node's running cluster and fails at once without one)."""
    import socket

    if address == "auto":
        return
    target = address.split("://", 1)[-1]
    host, _, port = target.rpartition(":") if ":" in target else (target, "", str(_RAY_DEFAULT_PORT))
    try:
        number = int(port)
    except ValueError:
        raise AblationError(
            f"--address {address!r} is not HOST:PORT (or 'auto'), e.g. 10.0.0.5:6379; or drop --address to run here"
        ) from None
    try:
        socket.create_connection((host.strip("[]"), number), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as e:
        raise AblationError(
            f"cannot reach the Ray cluster at --address {address!r} within {CONNECT_TIMEOUT_S:g} s "
            f"({e.strerror or type(e).__name__}); start one with `ray start --head` on its head node, give that "
            "node's address, or drop --address to run on this machine"
        ) from None


#: Which ready task goes first (lower first): results (mixture, evaluation) before the work that leads to them.
#: The order of ready work by kind: results first (the projection simulates the same order).
KIND_PRIORITY = {"mixture": 0, "eval": 1, "train": 2, "data": 2, "behavior": 2, "sysid": 2}


def need_ranks(tasks: list[Task]) -> dict[str, int]:
    """For every task, the position in the graph of the first training that needs it (a training's own; a dataset
    or a chain stage takes its earliest dependent training's): ready work is taken in the design's order, so the
    four-variant table of the first seed fills before anything of the next seed or the sweep, and a dataset runs
    as soon as the first policy that needs it is next (not after every training that could start without it)."""
    order = {t.key: i for i, t in enumerate(tasks)}
    rank = {t.key: order[t.key] if t.kind == "train" else len(tasks) + order[t.key] for t in tasks}
    for task in reversed(tasks):  # dependents come after what they need
        for dep in task.deps:
            if dep in rank:
                rank[dep] = min(rank[dep], rank[task.key])
    return rank


def _cluster_cpus(ray: Any) -> float:
    """CPUs of the Ray cluster now (at least 1; a cluster may grow while the sweep runs)."""
    return max(float(ray.cluster_resources().get("CPU", 1.0)), 1.0)


def run_tasks(
    tasks: list[Task],
    store: Store,
    *,
    max_retries: int,
    log: Callable[[str], None] = print,
) -> RunSummary:
    """Runs the task graph on an initialized Ray: dependencies first, finished tasks skipped, at most as many tasks
    in flight as the cluster has CPUs, and among the ready ones those nearest a result first (mixture, then
    evaluation, then the rest in the order of the first training that needs it: :func:`need_ranks`).

    Args:
        tasks: the graph (:meth:`AblationDesign.tasks`), dependencies before dependents.
        store: the output directory's store.
        max_retries: retries of a failed task (exceptions and dead workers).
        log: where progress lines go.

    Returns:
        Counts of skipped, run, failed and blocked tasks.
    """
    import ray

    start = time.perf_counter()
    summary = RunSummary(total=len(tasks), out=str(store.root))
    remote = ray.remote(execute_task)
    state: dict[str, str] = {}
    labels = {t.key: t.label for t in tasks}
    for task in tasks:
        if store.is_done(task.kind, task.key):
            state[task.key] = "done"
            summary.skipped += 1
        elif (error := store.final_failure(task.key)) is not None:  # a stage that cannot deliver with these inputs
            state[task.key] = "failed"
            summary.failed[task.key] = error
            log(f"FAILED   {task.label} (recorded by an earlier run, same inputs): {error}")
    # A record kept without its large files (checkpoints, generated data): a finished task whose output is gone
    # runs again when a task still to run needs it. Dependents first, so a training run again asks for its data.
    for task in reversed(tasks):
        if state.get(task.key) == "done" and not has_output(store, task.kind, task.key):
            waiting = [t.label for t in tasks if task.key in t.deps and state.get(t.key) != "done"]
            if waiting:
                del state[task.key]
                summary.skipped -= 1
                log(f"again    {task.label}: its output is gone and {waiting[0]} needs it")
    if summary.skipped:
        log(f"{summary.skipped} of {len(tasks)} tasks already finished (skipped)")
    order = {t.key: i for i, t in enumerate(tasks)}
    ranks = need_ranks(tasks)
    pending = [t for t in tasks if t.key not in state]
    running: dict[Any, Task] = {}
    root = str(store.root.resolve())
    while pending or running:
        still, ready_tasks = [], []
        for task in pending:
            deps = [state.get(d) for d in task.deps]
            if any(s in ("failed", "blocked") for s in deps):
                state[task.key] = "blocked"
                summary.blocked.append(task.key)
                reason = blocked_reason(task, state, summary, labels)
                summary.blocked_reasons[task.key] = reason
                log(f"skipped  {task.label}: {reason}")
            elif all(s == "done" for s in deps):
                ready_tasks.append(task)
            else:
                still.append(task)
        # Only as many tasks in flight as the cluster has CPUs, the ones nearest a result first (an evaluation
        # before another training): results arrive while the sweep runs, and a run stopped part-way leaves
        # finished rows behind, not a pile of trained policies nobody evaluated. Other work in the design's order.
        ready_tasks.sort(key=lambda t: (KIND_PRIORITY[t.kind], ranks[t.key], order[t.key]))
        free = _cluster_cpus(ray) - sum(t.num_cpus for t in running.values())
        for task in ready_tasks:
            if running and task.num_cpus > free:
                still.append(task)
                continue
            ref = remote.options(
                num_cpus=task.num_cpus,
                num_gpus=task.num_gpus,
                max_retries=max_retries,
                retry_exceptions=True,
                name=task.kind,
            ).remote(task.to_dict(), root)
            running[ref] = task
            free -= task.num_cpus
        pending = still
        if not running:
            break
        ready: list[Any] = []
        while not ready:  # short waits, so Ctrl-C reaches Python between them
            ready, _ = ray.wait(list(running), num_returns=1, timeout=1.0)
        for ref in ready:
            task = running.pop(ref)
            try:
                record = ray.get(ref)
            except Exception as exc:  # RayTaskError (the task raised) or a worker that died after its retries
                error = format_error(exc)
                state[task.key] = "failed"
                summary.failed[task.key] = error
                store.record_failure(task.to_dict(), error)
                log(f"FAILED   {task.label}: {error}")
                continue
            if record.get("stage_failed"):  # recorded by the task itself, not retried
                state[task.key] = "failed"
                summary.failed[task.key] = record["stage_failed"]
                log(f"FAILED   {task.label}: {record['stage_failed']}")
                continue
            state[task.key] = "done"
            summary.ran += 1
            log(f"done     {task.label} ({record['wall_time_s']:.0f} s)")
    summary.task_time_s = time.perf_counter() - start
    return summary


def blocked_reason(task: Task, state: dict[str, str], summary: RunSummary, labels: dict[str, str]) -> str:
    """Why ``task`` is skipped: the first task it needs that failed (with its error), or the reason of the first
    one it needs that was skipped (the failure at the root)."""
    for dep in task.deps:
        if state.get(dep) == "failed":
            return f"needs {labels.get(dep, dep)}, which failed: {summary.failed.get(dep, '?')}"
    for dep in task.deps:
        if state.get(dep) == "blocked":
            return summary.blocked_reasons.get(dep, f"needs {labels.get(dep, dep)}, which was skipped")
    return "a task it needs failed"


def export_results(design: AblationDesign, tasks: list[Task], store: Store) -> Path:
    """Copies the finished evaluation results of the design to ``DIR/results/<method>/<variant>/`` (rebuilt), and
    those of its interventions to ``DIR/interventions/<condition>/<method>/<variant>/`` (rebuilt; apart, since a
    leaderboard refuses diagnostic conditions), as plain JSON files: the bytes the evaluation wrote, from the store's
    ``result.json`` or a record's ``result.json.gz``. Returns ``DIR/results``."""
    results = store.root / RESULTS_DIR
    for folder in (results, store.root / INTERVENTIONS_DIR):
        if folder.exists():
            shutil.rmtree(folder)
    for task in tasks:
        if task.kind != "eval" or not store.is_done("eval", task.key):
            continue
        p = task.config["policy"]
        env = "lab" if task.config["env_id"] == "PickSort-Real-v0" else "sim"
        condition = task.config.get("condition")
        root = results if condition is None else store.root / INTERVENTIONS_DIR / condition
        folder = root / p["method"] / (p["variant"] or "real-only")
        folder.mkdir(parents=True, exist_ok=True)
        name = f"rf{p['real_fraction']:g}_seed{p['seed']}_{env}.json"
        (folder / name).write_bytes(read_result_bytes(store.result_file(task.key)))
    return results


def run_ablation(
    design: AblationDesign,
    out: str | os.PathLike[str],
    *,
    address: str | None = None,
    workers: int | None = None,
    log: Callable[[str], None] = print,
) -> RunSummary:
    """Runs (or resumes) an ablation and writes its results, leaderboard and report to ``out``.

    Args:
        design: the study (:func:`~r2s2r_envs.ablation.design.quick_design`, ``full_design``, ...).
        out: the output directory; a re-run skips every finished task.
        address: a Ray cluster to join (``None``: start Ray locally).
        workers: CPUs of a local Ray (default: every core); one task per CPU.
        log: where progress lines go.

    Returns:
        What the run did; ``failed`` and ``blocked`` list tasks without results.

    Raises:
        AblationError: bad input, before any work starts.
    """
    start = time.perf_counter()
    tasks = preflight(design, out)
    import_ray()
    identity = design_lab(design, out)
    store = Store(out)
    store.root.mkdir(parents=True, exist_ok=True)
    if design.lab is not None:
        install_lab(design.lab, store.root)
    store.write_manifest(design.to_dict(), __version__, lab=identity)
    on = f" on lab {identity['name']} (config {identity['config_sha256'][:12]})" if design.lab is not None else ""
    log(f"ablation {design.name}{on}: {len(tasks)} tasks -> {store.root}")
    if address and workers:
        log(f"--workers {workers} is ignored with --address: the cluster's CPUs decide how many tasks run at once")
    started = init_ray(address, workers)
    try:
        summary = run_tasks(tasks, store, max_retries=design.max_retries, log=log)
    finally:
        if started:
            import ray

            ray.shutdown()
    write_outputs(design, tasks, store, log=log)
    summary.wall_time_s = time.perf_counter() - start
    (store.root / "run_summary.json").write_text(json.dumps(summary.to_dict(), indent=2) + "\n")
    return summary


def write_outputs(
    design: AblationDesign, tasks: list[Task], store: Store, *, log: Callable[[str], None] = print
) -> None:
    """Results folder, leaderboard and report from whatever tasks have finished."""
    from r2s2r_envs.ablation.analysis import write_report
    from r2s2r_envs.evaluation.leaderboard import LeaderboardError, build_leaderboard

    results = export_results(design, tasks, store)
    if any(results.rglob("*.json")):
        try:
            on = f", lab {design.lab.name}" if design.lab is not None else ""
            build_leaderboard(results, store.root / "leaderboard", title=f"Grounding ablation ({design.name}{on})")
        except LeaderboardError as exc:
            log(f"leaderboard not built: {exc}")
    report = write_report(design, tasks, store, store.root / "report")
    log(f"report: {report}")


def variant_env_ids(design: AblationDesign) -> dict[str, str]:
    """The env id of each variant of the design."""
    return {v: env_id_of(v) for v in design.variants}


if __name__ == "__main__":  # pragma: no cover - use `r2s2r ablation`
    sys.exit("use `r2s2r ablation`")
