"""The evaluations the analysis reads: result files as ``(results, episodes)`` matrices, and a design's finished
evaluations in the store as :class:`EvalRun` objects (the tables' under ``nominal``, an intervention's under its
condition), grouped into cells (:func:`cell_matrix`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from r2s2r_envs.ablation.specs import LAB_ENV_ID, Task
from r2s2r_envs.ablation.store import Store
from r2s2r_envs.ablation.tasks import read_result


@dataclasses.dataclass(frozen=True, kw_only=True)
class EvalRun:
    """One policy's evaluation in one env (one training seed).

    Attributes:
        method: training method.
        variant: grounding variant of its sim data (``None``: real only).
        real_fraction: its real_fraction.
        seed: training seed.
        env: ``"lab"`` or ``"sim"`` (its own variant).
        success: ``(episodes,)`` 1 when every object was sorted at the end.
        sort_accuracy: ``(episodes,)`` share of objects sorted.
        failure_causes: episodes per first failure cause.
        object_sorted: ``(episodes, objects)`` 1 where the episode's i-th object (in the order the belt brings
            them) was sorted.
        condition: the condition of the episodes read: ``"nominal"`` (the tables'), or an intervention's
            (docs/ablation.md#interventions).
    """

    method: str
    variant: str | None
    real_fraction: float
    seed: int
    env: str
    success: np.ndarray
    sort_accuracy: np.ndarray
    failure_causes: Mapping[str, int]
    object_sorted: np.ndarray
    condition: str = "nominal"


def _results(results: Sequence[Any]) -> list[Any]:
    """EvaluationResults as given, result files (``str`` / ``os.PathLike``, ``*.json`` or ``*.json.gz``) read and
    checked."""
    from r2s2r_envs.evaluation import EvaluationResult
    from r2s2r_envs.evaluation.result_files import read_result_file

    return [r if isinstance(r, EvaluationResult) else read_result_file(Path(r)) for r in results]


def result_matrices(results: Sequence[Any]) -> dict[str, np.ndarray]:
    """``(results, episodes)`` matrices of episode ``success`` (1 when every object was sorted at the end) and
    ``sort_accuracy`` over the nominal episodes, one row per result in the order given: with one result per
    training seed, the cells that :func:`bootstrap_contrast` takes.

    Args:
        results: :class:`~r2s2r_envs.evaluation.EvaluationResult` objects, or paths of result files, ``*.json``
            or ``*.json.gz`` (read and checked with ``read_result_file``).

    Raises:
        ValueError: no results, or results of different numbers of episodes.
    """
    read = _results(results)
    if not read:
        raise ValueError("result_matrices needs at least one result")
    records = [nominal_records(r) for r in read]
    episodes = {len(r) for r in records}
    if len(episodes) > 1:
        raise ValueError(f"results of different numbers of episodes {sorted(episodes)} make no matrix")
    return {
        "success": np.array([[float(e.is_success) for e in r] for r in records]),
        "sort_accuracy": np.array([[float(e.sort_accuracy) for e in r] for r in records]),
    }


def nominal_records(result: Any) -> tuple[Any, ...]:
    """The episodes the tables read: a result's ``nominal`` condition (every episode of a nominal-only result)."""
    return condition_records(result, "nominal")


def condition_records(result: Any, condition: str) -> tuple[Any, ...]:
    """A result's episodes under ``condition`` (none when it did not run it): an intervention's analysis reads its
    own condition."""
    return tuple(result.condition_records().get(condition, ()))


def failure_counts(results: Sequence[Any]) -> dict[str, int]:
    """Episodes per first failure cause over every episode of ``results`` (as :func:`result_matrices` takes them),
    most frequent first; ties in the order the causes first occur; causes that never occur left out."""
    counts: dict[str, int] = {}
    for result in _results(results):
        for e in nominal_records(result):
            if e.failure_cause:
                counts[e.failure_cause] = counts.get(e.failure_cause, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def load_runs(tasks: Sequence[Task], store: Store, *, intervention: str | None = None) -> list[EvalRun]:
    """Every finished evaluation of the design the tables read (``intervention`` None: the evaluations without an
    intervention, their nominal episodes), or every finished evaluation under the intervention ``intervention``
    (docs/ablation.md#interventions)."""
    runs = []
    condition = intervention or "nominal"
    for task in tasks:
        if task.kind != "eval" or task.config.get("condition") != intervention or not store.is_done("eval", task.key):
            continue
        result = read_result(store, task.key)
        records = condition_records(result, condition)
        p = task.config["policy"]
        runs.append(
            EvalRun(
                method=p["method"],
                variant=p["variant"],
                real_fraction=float(p["real_fraction"]),
                seed=int(p["seed"]),
                env="lab" if task.config["env_id"] == LAB_ENV_ID else "sim",
                success=np.array([float(e.is_success) for e in records]),
                sort_accuracy=np.array([float(e.sort_accuracy) for e in records]),
                failure_causes=dict(result.condition_summaries[condition]["failure_causes"]),
                object_sorted=np.array([[o == "sorted" for o in r.object_outcomes] for r in records], float),
                condition=condition,
            )
        )
    return runs


def cell_matrix(runs: Sequence[EvalRun], metric: str) -> np.ndarray:
    """``(seeds, episodes)`` values of one cell's runs, ordered by seed."""
    runs = sorted(runs, key=lambda r: r.seed)
    return np.stack([getattr(r, metric) for r in runs])
