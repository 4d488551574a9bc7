"""How long a design takes on N cores, projected from the CPU time its tasks measured
(docs/ablation.md#tasks-and-re-runs).

Every finished task records ``cpu_time_s``: its process's and finished children's CPU time, which the machine's
load hardly changes (unlike its wall time on a shared machine). :func:`project` takes a design's tasks and the
finished records of one or more run directories (the run itself, or a reference run of the same kinds of task) and:

1. **costs every task**: a task finished in one attempt, or of a kind that starts again from scratch when
   interrupted (training, evaluation, mixture analysis, behavior fit), costs what it measured. A resumable task
   (a dataset, sysid) that took several attempts measured its last attempt only, so it is *estimated*, as is a task
   not run yet: the median cost per unit of size (episodes of an evaluation, mixture analysis or dataset; samples
   of a training) of measured tasks of its kind with the same cost signature (:func:`signature`), else of its kind
   (with nothing of its kind measured in full, from last attempts: counted apart, as an undercount);
2. **schedules them as the runner does** (``runner.run_tasks``: ready work by kind priority, then need rank, then
   the design's order; a task takes its declared ``num_cpus``, and starts when they are free or nothing runs) on
   ``cores`` identical cores, a task of ``num_cpus`` k running ``cost / k`` seconds;
3. **bounds it**: the total cost over the cores and the longest dependency chain, neither of which any schedule
   beats.

A projection is not a measurement: the report says how many costs were measured and how many estimated, and a task
kind without a single measurement is refused (nothing to estimate it from), naming the kinds.

Example::

    from r2s2r_envs.ablation.projection import project, measured_records
    from r2s2r_envs.ablation.store import Store

    p = project(design.tasks(), measured_records([Store("runs/lab-v3-chain")]), cores=(2, 16))
    print(p.to_text())
"""

from __future__ import annotations

import dataclasses
import heapq
import statistics
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from r2s2r_envs.ablation.runner import KIND_PRIORITY, need_ranks
from r2s2r_envs.ablation.specs import Task
from r2s2r_envs.ablation.store import DONE_FILE, Store

#: Kinds whose interrupted attempt resumes from what it wrote (its last attempt's CPU time is part of its cost);
#: every other kind starts again from scratch.
RESUMABLE_KINDS = ("data", "sysid")
#: The config keys that set a task's cost per unit of size, per kind (other keys, a seed or a variant, change
#: the work only by chance).
SIGNATURE_KEYS: dict[str, tuple[str, ...]] = {
    "train": ("method", "recipe", "encoder", "image_encoder", "architecture", "hidden_dim", "layers", "device"),
    "eval": ("env_id", "lab", "env_kwargs"),
    "mixture": ("neighbors",),
    "data": ("domain", "env_id", "generate_kwargs", "env_kwargs"),
    "sysid": ("quick", "tune_episodes", "tune_grid"),
    "behavior": (),
}


class ProjectionError(ValueError):
    """A projection that cannot be made (a task kind nothing measured, no cores); the message names it."""


def size(task_kind: str, config: Mapping[str, Any]) -> float:
    """A task's size, what its cost scales with: episodes (evaluation, mixture analysis, dataset), training samples
    (steps x batch size), 1 for the chain's stages."""
    if task_kind == "train":
        return float(config.get("steps") or 1) * float(config.get("batch_size") or 1)
    if task_kind in ("eval", "mixture", "data"):
        return float(config.get("episodes") or 1)
    return 1.0


def signature(task_kind: str, config: Mapping[str, Any]) -> str:
    """The part of a task's config its cost per unit of size depends on, as a string (:data:`SIGNATURE_KEYS`); an
    evaluation's lab counts by name (``{"name": "v3", ...}``), not by the hash of its file."""
    parts = []
    for name in SIGNATURE_KEYS.get(task_kind, ()):
        value = config.get(name)
        if name == "lab" and isinstance(value, Mapping):
            value = value.get("name") or value.get("config_sha256")
        parts.append(f"{name}={value!r}")
    return f"{task_kind}:" + ",".join(parts)


@dataclasses.dataclass(frozen=True)
class Measured:
    """A finished task's measured cost.

    Attributes:
        kind, key, config: the task's.
        cpu_s: its recorded ``cpu_time_s``.
        attempts: the attempts its log holds (at least 1).
    """

    kind: str
    key: str
    config: Mapping[str, Any]
    cpu_s: float
    attempts: int

    @property
    def complete(self) -> bool:
        """Whether ``cpu_s`` is the whole cost: one attempt, or a kind that starts again from scratch."""
        return self.attempts <= 1 or self.kind not in RESUMABLE_KINDS


def measured_records(stores: Iterable[Store]) -> dict[str, Measured]:
    """Every finished task's measured cost in ``stores``, by key (a key in several stores: the first one's)."""
    out: dict[str, Measured] = {}
    for store in stores:
        for path in sorted((store.root / "store").glob(f"*/*/{DONE_FILE}")):
            record = store.done_record(path.parent.parent.name, path.parent.name)
            key, cpu = record.get("key", path.parent.name), record.get("cpu_time_s")
            if key in out or not isinstance(cpu, (int, float)):
                continue
            kind = record.get("kind", path.parent.parent.name)
            config = record.get("config") or {}
            out[key] = Measured(kind, key, config, float(cpu), max(1, store.attempts(key)))
    return out


@dataclasses.dataclass(frozen=True)
class Projection:
    """What :func:`project` found.

    Attributes:
        tasks: tasks of the design.
        measured: of them, costed by their own complete measurement.
        estimated: costed from other tasks' (not run yet, or a resumable task measured in part).
        partial: a task with nothing of its kind measured in full: costed by its own last attempt's CPU time or, not
            run yet, by resumed tasks' last attempts, which undercounts it.
        cpu_s: total cost, CPU-s.
        cpu_s_by_kind: total cost per task kind, CPU-s.
        critical_path_s: the longest chain of dependent tasks, s (a lower bound at any core count).
        wall_s: per core count, the runner's schedule's wall time, s.
        remaining: whether finished tasks were left out (the time still to run) or counted (the whole design).
    """

    tasks: int
    measured: int
    estimated: int
    partial: int
    cpu_s: float
    cpu_s_by_kind: Mapping[str, float]
    critical_path_s: float
    wall_s: Mapping[int, float]
    remaining: bool

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["wall_s"] = {str(k): round(v, 1) for k, v in self.wall_s.items()}
        out["lower_bound_s"] = {str(k): round(self.lower_bound(k), 1) for k in self.wall_s}
        out["cpu_s_by_kind"] = {k: round(v, 1) for k, v in self.cpu_s_by_kind.items()}
        out["cpu_s"], out["critical_path_s"] = round(self.cpu_s, 1), round(self.critical_path_s, 1)
        return out

    def lower_bound(self, cores: int) -> float:
        """No schedule on ``cores`` beats this: the total cost over the cores, or the critical path."""
        return max(self.cpu_s / cores, self.critical_path_s)

    def to_text(self) -> str:
        what = "still to run" if self.remaining else "the whole design"
        lines = [
            f"projection ({what}): {self.tasks} tasks, {self.measured} costed by their own measurement, "
            f"{self.estimated} estimated from others'"
            + (f", {self.partial} by a part (an undercount)" if self.partial else "")
            + f"; {self.cpu_s / 3600:.1f} CPU-hours "
            f"({', '.join(f'{k} {v / 3600:.1f}' for k, v in self.cpu_s_by_kind.items())}); "
            f"longest chain {self.critical_path_s / 3600:.2f} h"
        ]
        for cores, wall in self.wall_s.items():
            lines.append(
                f"  {cores:>3} cores: {wall / 3600:.2f} h (no schedule beats {self.lower_bound(cores) / 3600:.2f} h)"
            )
        return "\n".join(lines)


def project(
    tasks: Sequence[Task],
    measured: Mapping[str, Measured],
    *,
    cores: Sequence[int] = (2, 16),
    finished: Collection[str] = (),
) -> Projection:
    """Projects the wall time of ``tasks`` on each of ``cores`` from ``measured`` costs (see the module's text).

    Args:
        tasks: the design's tasks, in its order (``AblationDesign.tasks()``).
        measured: finished tasks' costs by key (:func:`measured_records`), of this run or of reference runs.
        cores: the core counts to project.
        finished: keys of tasks to leave out (a run's finished tasks: the projection is then what is still to run).

    Raises:
        ProjectionError: a core count below 1, or a kind of task to estimate that nothing measured (named).
    """
    bad = [c for c in cores if not isinstance(c, int) or isinstance(c, bool) or c < 1]
    if bad or not cores:
        raise ProjectionError(f"cores {list(cores)!r}: give whole numbers of cores, each 1 or more")
    costs: dict[str, float] = {}
    partial: set[str] = set()
    rates = _rates(m for m in measured.values() if m.complete)
    parts = _rates(m for m in measured.values() if not m.complete)
    for task in tasks:
        own = measured.get(task.key)
        full, part = _rate(task, rates), _rate(task, parts)
        if own is not None and own.complete:
            costs[task.key] = own.cpu_s
        elif full is not None:
            costs[task.key] = full * size(task.kind, task.config)
        elif own is not None or part is not None:  # last attempts only: all there is, an undercount
            costs[task.key] = own.cpu_s if own is not None else (part or 0.0) * size(task.kind, task.config)
            partial.add(task.key)
        else:
            known = sorted({m.kind for m in measured.values()})
            raise ProjectionError(
                f"nothing measured a {task.kind!r} task (task {task.label!r}), so its cost cannot be estimated; the "
                f"measured runs hold {known or 'no finished task'}: add a run directory that finished one"
            )
    if finished:
        tasks = [t for t in tasks if t.key not in finished]
    whole = {t.key for t in tasks if t.key in measured and measured[t.key].complete}
    partial &= {t.key for t in tasks}
    by_kind: dict[str, float] = {}
    for task in tasks:
        by_kind[task.kind] = by_kind.get(task.kind, 0.0) + costs[task.key]
    return Projection(
        tasks=len(tasks),
        measured=len(whole),
        estimated=len(tasks) - len(whole) - len(partial),
        partial=len(partial),
        cpu_s=sum(costs[t.key] for t in tasks),
        cpu_s_by_kind=by_kind,
        critical_path_s=_critical_path(tasks, costs),
        wall_s={c: _schedule(tasks, costs, c) for c in cores},
        remaining=bool(finished),
    )


def _rates(records: Iterable[Measured]) -> dict[str, list[float]]:
    """CPU-s per unit of size of ``records``, by signature and by kind."""
    rates: dict[str, list[float]] = {}
    for m in records:
        rate = m.cpu_s / size(m.kind, m.config)
        rates.setdefault(signature(m.kind, m.config), []).append(rate)
        rates.setdefault(m.kind, []).append(rate)
    return rates


def _rate(task: Task, rates: Mapping[str, list[float]]) -> float | None:
    """The median rate of ``task``'s signature, else of its kind; None if neither was measured."""
    found = rates.get(signature(task.kind, task.config)) or rates.get(task.kind)
    return statistics.median(found) if found else None


def _critical_path(tasks: Sequence[Task], costs: Mapping[str, float]) -> float:
    """The longest chain of dependent tasks (each task's cost over its cores), s."""
    keys = {t.key for t in tasks}
    finish: dict[str, float] = {}
    for task in tasks:  # dependencies come before their dependents in a design's order
        start = max((finish.get(d, 0.0) for d in task.deps if d in keys), default=0.0)
        finish[task.key] = start + costs[task.key] / max(task.num_cpus, 1.0)
    return max(finish.values(), default=0.0)


def _schedule(tasks: Sequence[Task], costs: Mapping[str, float], cores: int) -> float:
    """Wall time of the runner's scheduling policy on ``cores`` identical cores, s (dependencies outside ``tasks``
    count as finished)."""
    keys = {t.key for t in tasks}
    order = {t.key: i for i, t in enumerate(tasks)}
    ranks = need_ranks(list(tasks))
    waiting = {t.key: {d for d in t.deps if d in keys} for t in tasks}
    dependents: dict[str, list[str]] = {}
    for task in tasks:
        for dep in waiting[task.key]:
            dependents.setdefault(dep, []).append(task.key)
    by_key = {t.key: t for t in tasks}
    ready = [t for t in tasks if not waiting[t.key]]
    running: list[tuple[float, int, str]] = []  # (finish time, order, key)
    now, free = 0.0, float(cores)
    while ready or running:
        ready.sort(key=lambda t: (KIND_PRIORITY[t.kind], ranks[t.key], order[t.key]))
        still = []
        for task in ready:
            if running and task.num_cpus > free:
                still.append(task)
                continue
            heapq.heappush(running, (now + costs[task.key] / max(task.num_cpus, 1.0), order[task.key], task.key))
            free -= task.num_cpus
        ready = still
        if not running:
            break
        now, _, key = heapq.heappop(running)
        free += by_key[key].num_cpus
        for child in dependents.get(key, ()):
            waiting[child].discard(key)
            if not waiting[child]:
                ready.append(by_key[child])
    return now
