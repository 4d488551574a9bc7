"""The ablation's time projection (r2s2r_envs.ablation.projection): costs, schedule, bounds and refusals."""

from __future__ import annotations

import json
import typing
from pathlib import Path

import pytest

from r2s2r_envs.ablation import presets
from r2s2r_envs.ablation.projection import Measured, ProjectionError, measured_records, project, signature
from r2s2r_envs.ablation.runner import KIND_PRIORITY
from r2s2r_envs.ablation.specs import Kind, Task
from r2s2r_envs.ablation.store import Store


def _train(name: str, deps: tuple[str, ...] = (), steps: int = 100, method: str = "flow") -> Task:
    config = {"name": name, "steps": steps, "batch_size": 2, "method": method, "recipe": "cpu"}
    return Task.of("train", config, deps, label=f"train {name}")


def _measured(task: Task, cpu_s: float, attempts: int = 1) -> Measured:
    return Measured(task.kind, task.key, task.config, cpu_s, attempts)


def test_every_task_kind_has_a_scheduling_priority() -> None:
    assert set(KIND_PRIORITY) == set(typing.get_args(Kind))


def test_independent_tasks_share_the_cores_and_a_chain_does_not() -> None:
    tasks = [_train(str(i)) for i in range(3)]
    measured = {t.key: _measured(t, 10.0) for t in tasks}
    p = project(tasks, measured, cores=(1, 2, 3, 8))
    assert dict(p.wall_s) == {1: 30.0, 2: 20.0, 3: 10.0, 8: 10.0}
    assert (p.measured, p.estimated, p.cpu_s, p.critical_path_s) == (3, 0, 30.0, 10.0)
    assert p.lower_bound(2) == 15.0  # the schedule (20) cannot split a task across cores
    a = _train("a")
    b = _train("b", deps=(a.key,))
    chain = project([a, b], {a.key: _measured(a, 5.0), b.key: _measured(b, 7.0)}, cores=(1, 4))
    assert dict(chain.wall_s) == {1: 12.0, 4: 12.0} and chain.critical_path_s == 12.0


def test_a_task_not_run_is_estimated_from_its_signature_scaled_by_size() -> None:
    done = [_train("0", steps=100), _train("1", steps=100), _train("adda", steps=100, method="flow-cfg-adda")]
    measured = {done[0].key: _measured(done[0], 10.0), done[1].key: _measured(done[1], 12.0)}
    measured[done[2].key] = _measured(done[2], 40.0)
    todo = _train("2", steps=300)  # three times the samples of the flow trainings measured (11 CPU-s median)
    p = project([*done, todo], measured, cores=(1,))
    assert (p.measured, p.estimated) == (3, 1)
    assert p.cpu_s == pytest.approx(10 + 12 + 40 + 33)
    assert signature("train", todo.config) == signature("train", done[0].config) != signature("train", done[2].config)
    rest = project([*done, todo], measured, cores=(1,), finished=measured)
    assert (rest.tasks, rest.cpu_s, rest.remaining) == (1, pytest.approx(33.0), True)


def test_a_resumed_dataset_measured_its_last_attempt_only() -> None:
    sets = [Task.of("data", {"name": n, "episodes": 10}, label=f"data {n}") for n in "abc"]
    measured = {sets[0].key: _measured(sets[0], 100.0), sets[1].key: _measured(sets[1], 3.0, attempts=3)}
    p = project(sets, measured, cores=(1,))
    assert (p.measured, p.estimated, p.partial) == (1, 2, 0)
    assert p.cpu_s == pytest.approx(300.0)  # both estimated at the complete one's 10 CPU-s an episode
    alone = project(sets[1:2], {sets[1].key: measured[sets[1].key]}, cores=(1,))
    assert (alone.partial, alone.cpu_s) == (1, 3.0)  # nothing complete of its kind: its part, as an undercount
    assert "undercount" in alone.to_text()
    # A training restarts from scratch, so its last attempt is its whole cost.
    t = _train("t")
    assert project([t], {t.key: _measured(t, 9.0, attempts=4)}, cores=(1,)).measured == 1


def test_refusals_name_what_is_missing() -> None:
    t = _train("t")
    with pytest.raises(ProjectionError, match=r"nothing measured a 'train' task \(task 'train t'\)"):
        project([t], {}, cores=(2,))
    for cores in ((), (0,), (2.5,), (True,)):
        with pytest.raises(ProjectionError, match="whole numbers of cores"):
            project([t], {t.key: _measured(t, 1.0)}, cores=cores)  # type: ignore[arg-type]


def test_on_one_core_a_design_takes_its_total_cost(tmp_path: Path) -> None:
    """The smoke design's real task graph, every task measured in a store written as the runner writes it."""
    tasks = presets.smoke_design().tasks()
    store = Store(tmp_path)
    for i, task in enumerate(tasks):
        done = store.task_dir(task.kind, task.key)
        done.mkdir(parents=True)
        record = {"kind": task.kind, "key": task.key, "config": task.config, "cpu_time_s": 1.0 + i % 5}
        (done / "task.json").write_text(json.dumps(record))
        store.log_attempt(task.key, {"event": "start"})
    measured = measured_records([store])
    assert set(measured) == {t.key for t in tasks}
    p = project(tasks, measured, cores=(1, 2, 64))
    total = sum(1.0 + i % 5 for i in range(len(tasks)))
    assert (p.measured, p.cpu_s, p.wall_s[1]) == (len(tasks), total, total)
    assert p.lower_bound(2) <= p.wall_s[2] <= total and p.wall_s[64] >= p.critical_path_s
    assert json.loads(json.dumps(p.to_dict()))["wall_s"]["1"] == total


def test_the_command_projects_a_run_and_plans_a_new_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from r2s2r_envs.cli import main

    design = presets.smoke_design()
    done = Store(tmp_path / "ref")
    done.write_manifest(design.to_dict(), "test")
    tasks = design.tasks()
    first = list({t.kind: t for t in reversed(tasks)}.values())  # a run stopped early: one task of each kind done
    for task in first:
        (done.task_dir(task.kind, task.key)).mkdir(parents=True)
        record = {"kind": task.kind, "key": task.key, "config": task.config, "cpu_time_s": 10.0}
        (done.task_dir(task.kind, task.key) / "task.json").write_text(json.dumps(record))
    assert main(["ablation", "--out", str(tmp_path / "ref"), "--project", "1,4"]) == 0
    out = capsys.readouterr().out
    assert f"design {design.name!r}" in out and "(the whole design)" in out and "(still to run)" in out
    assert f"{len(tasks)} tasks, {len(first)} costed by their own measurement" in out
    # A new directory: the options' design, costed from the reference run; nothing is written.
    new = tmp_path / "new"
    assert main(["ablation", "--smoke", "--out", str(new), "--project", "2", "--measured-from", str(done.root)]) == 0
    assert "(still to run)" not in capsys.readouterr().out and not new.exists()
    assert main(["ablation", "--smoke", "--out", str(new), "--project", "2"]) == 2
    assert "nothing measured a" in capsys.readouterr().err
    assert main(["ablation", "--out", str(new), "--measured-from", str(done.root)]) == 2
    assert "--measured-from goes with --project" in capsys.readouterr().err
    assert main(["ablation", "--out", str(new), "--project-json"]) == 2
    assert "--project-json goes with --project" in capsys.readouterr().err
    # The record form: the same projection as JSON.
    assert main(["ablation", "--out", str(done.root), "--project", "1,4", "--project-json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["design"] == design.name and record["measured_in"] == [str(done.root)]
    assert record["whole"]["tasks"] == len(tasks) and record["whole"]["measured"] == len(first)
    assert set(record["whole"]["wall_s"]) == {"1", "4"} and record["still_to_run"]["remaining"] is True
