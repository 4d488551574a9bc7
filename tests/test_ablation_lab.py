"""``r2s2r ablation --lab LAB`` (docs/ablation.md#any-lab): the whole Real2Sim2Real chain of one lab as tasks of the
ablation's graph. Fast: the graph (chain stages, their hashes, nothing changed without a lab), bad input before any
work (a lab field unknown or out of range, a run directory of another lab), a failing stage that skips exactly the
tasks needing it with the reason while the report is still written, and a stage's own failure checks. Slow: a lab
drawn from the documented ranges runs end to end at a tiny budget, the report is complete,
and a second run re-executes no stage."""

from __future__ import annotations

import dataclasses
import json
import sys
import types
from pathlib import Path

import pytest

from r2s2r_envs.ablation import analysis
from r2s2r_envs.ablation.chain import (
    GROUNDING_FILE,
    ChainSpec,
    LabError,
    LabRef,
    StageError,
    lab_argument,
    resolve_lab,
)
from r2s2r_envs.ablation.design import (
    LAB_CHAINS,
    LAB_ENV_ID,
    SMOKE_PROTOCOLS,
    VARIANTS,
    full_design,
    lab_design,
    quick_design,
    smoke_design,
)
from r2s2r_envs.ablation.runner import AblationError, preflight
from r2s2r_envs.ablation.store import Store
from r2s2r_envs.grounding.sysid import run_sysid

#: A lab written from docs/lab.md's format and ranges, every value changed from the default lab's.
TEST_LAB = {
    "name": "ablation-test-lab",
    "world": {
        "belt_speed": 0.08,
        "belt_speed_fluctuation": 0.03,
        "object_mass": [0.15, 0.12, 0.28],
        "object_friction": 0.75,
        "control_latency": 0.06,
        "finger_kp": 3.6,
        "object_pos_offset": [0.004, 0.006, 0.0],
        "object_pos_noise": 0.002,
    },
    "effects": {"arm_command_gain": [0.95, 0.95, 0.97, 0.97, 0.93, 0.93, 0.93], "object_mass_variation": 0.05},
    "operator": {"reaction_time": 0.25, "variability": 0.3, "practice_episodes": 2},
}


def write_lab(folder: Path, lab: dict, name: str = "lab.json") -> Path:
    path = folder / name
    path.write_text(json.dumps(lab))
    return path


@pytest.fixture
def lab_file(tmp_path) -> Path:
    return write_lab(tmp_path, TEST_LAB)


def tiny_lab_design(lab: LabRef):
    """The smoke design on a lab's chain, one method, one seed, no sweep: the end-to-end test's design."""
    return dataclasses.replace(
        lab_design(lab, "smoke"),
        methods=("flow",),
        mixture_methods=("flow",),
        sweep_methods=("flow",),
        seeds=(0,),
        sweep_variant=None,
    )


# ---------------------------------------------------------------------- the graph
def test_without_a_lab_the_graph_is_unchanged():
    for design in (full_design(), quick_design(), smoke_design()):
        tasks = design.tasks({})
        assert {t.kind for t in tasks} <= {"data", "train", "eval", "mixture"}
        for task in tasks:
            assert "lab" not in task.config and "inputs" not in task.config
            if task.kind == "data":
                assert task.deps == ()


def test_the_chain_is_tasks_of_the_graph_keyed_by_their_inputs(lab_file, tmp_path):
    lab = resolve_lab(lab_file)
    assert lab.name == "ablation-test-lab" and lab.file == f"lab/{lab.config_sha256[:16]}.json"
    design = tiny_lab_design(lab)
    tasks = design.tasks()
    by_label = {t.label: t for t in tasks}
    sysid = by_label["sysid lab ablation-test-lab"]
    real = by_label[f"data {design.real.label}"]
    fit = by_label[f"behavior fit to {design.real.label}"]
    assert sysid.deps == () and fit.deps == (real.key,)
    # Every dataset of a chain records the estimator's visibility, read by the task features.
    assert all("object_visible" in t.config["env_kwargs"]["sensors"] for t in tasks if t.kind == "data")
    assert sysid.config["lab"] == lab.to_config() == real.config["lab"]
    assert sysid.config["quick"] and "object_friction" in sysid.config["require_identified"]
    assert "arm_kp" not in sysid.config["require_identified"]  # kept at its datasheet value by design
    stage = {"grounding": sysid.key, "behavior": fit.key}
    for variant in VARIANTS:
        data = by_label[f"data {design.sim_spec(variant).label}"]
        wanted = {"WorldGrounded": ["grounding"], "BehaviorGrounded": ["behavior"]}.get(variant, [])
        wanted = ["grounding", "behavior"] if variant == "FullyGrounded" else wanted
        assert sorted(data.config["inputs"]) == sorted(wanted)
        assert set(data.deps) == {stage[w] for w in wanted}
    evals = [t for t in tasks if t.kind == "eval"]
    assert all(t.config["lab"] == lab.to_config() for t in evals if t.config["env_id"] == LAB_ENV_ID)
    fully = next(t for t in evals if t.config["env_id"] == "PickSort-FullyGrounded-v0")
    assert set(fully.deps[1:]) == {sysid.key, fit.key}  # its own variant: this lab's grounding and model
    assert all(t.config["lab"] == lab.to_config() for t in tasks if t.kind == "mixture")
    # Another lab: every task that sees the lab, directly or through the chain, has another key; the ungrounded
    # data (nominal world, scripted planner) does not depend on the lab.
    other = resolve_lab(write_lab(tmp_path, {**TEST_LAB, "name": "other"}, "other.json"))
    other_keys = {t.label: t.key for t in tiny_lab_design(other).tasks()}
    changed = {label for label, key in other_keys.items() if by_label.get(label) and by_label[label].key != key}
    assert f"data {design.sim_spec('Ungrounded').label}" not in changed
    assert len(changed) == len(tasks) - 2  # all but the ungrounded data and the sysid, whose label names the lab
    assert other_keys["sysid lab other"] != sysid.key


def test_a_chain_logging_some_protocols_requires_only_what_they_expose(lab_file):
    lab = resolve_lab(lab_file)
    smoke = next(t for t in tiny_lab_design(lab).tasks() if t.kind == "sysid").config
    assert smoke["protocols"] == sorted(SMOKE_PROTOCOLS) and "arm_steps" not in smoke["protocols"]
    assert "object_friction" in smoke["require_identified"] and "arm_damping" not in smoke["require_identified"]
    quick = next(t for t in lab_design(lab, "quick").tasks() if t.kind == "sysid").config
    assert "protocols" not in quick and "arm_damping" in quick["require_identified"]  # every protocol: key as before
    assert ChainSpec.from_dict(LAB_CHAINS["smoke"].to_dict()) == LAB_CHAINS["smoke"]
    for bad, refusal in (
        (("arm_stepz",), r"unknown protocol\(s\) \['arm_stepz'\]; valid: \['sensing_rest', "),
        ((), r"no protocol given; valid \(at least one\): \['sensing_rest', "),
        ("lift", r"unknown protocol\(s\) 'lift' given as a string"),
    ):
        with pytest.raises(ValueError, match="sysid_protocols: " + refusal):
            ChainSpec(sysid_protocols=bad).check()  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="with --lab, not with existing --logs"):
        run_sysid(lab_file.parent / "g.json", logs=lab_file.parent, protocols=("latency",))
    with pytest.raises(ValueError, match=r"unknown protocol\(s\) \['nope'\]"):
        run_sysid(lab_file.parent / "g.json", lab=str(lab_file), protocols=("nope",))
    assert not (lab_file.parent / "g.json").exists()


def test_a_chain_stage_runs_only_when_a_variant_of_the_design_needs_it(lab_file):
    lab = resolve_lab(lab_file)

    def kinds(variants):
        design = dataclasses.replace(tiny_lab_design(lab), variants=variants)
        return sorted(t.kind for t in design.tasks() if t.kind in ("sysid", "behavior"))

    assert kinds(("Ungrounded",)) == []
    assert kinds(("Ungrounded", "WorldGrounded")) == ["sysid"]
    assert kinds(("BehaviorGrounded",)) == ["behavior"]
    assert kinds(("FullyGrounded",)) == ["behavior", "sysid"]


# ---------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "change, named",
    [
        ({"world": {"belt_sped": 0.1}}, "unknown WorldParams field(s) ['belt_sped']"),
        ({"world": {"belt_speed": 0.9}}, "WorldParams.belt_speed must be a number, finite and >= 0 and <= 0.5"),
        ({"operator": {"speed": 9}}, "lab operator.speed must be a number"),
        ({"effects": {"object_mass_variation": -1}}, "object_mass_variation"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_a_bad_lab_file_is_refused_before_any_work_naming_the_field(tmp_path, capsys, change, named):
    from r2s2r_envs.cli import main

    path = write_lab(tmp_path, {**TEST_LAB, **change})
    out = tmp_path / "run"
    assert main(["ablation", "--smoke", "--lab", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert named in err and str(path) in err and "\n" not in err.strip()
    assert not out.exists()


def test_a_run_directory_of_another_lab_is_refused_naming_both_hashes(lab_file, tmp_path, capsys):
    from r2s2r_envs.cli import main

    lab = resolve_lab(lab_file)
    default = resolve_lab("default")
    out = tmp_path / "run"
    Store(out).write_manifest({}, "0", lab={"name": "default", "config_sha256": default.config_sha256})
    with pytest.raises(AblationError) as info:
        preflight(tiny_lab_design(lab), out)
    assert lab.config_sha256 in str(info.value) and default.config_sha256 in str(info.value)
    # A manifest written before --lab existed is the default lab's; the other way round is refused as well.
    manifest = json.loads((out / "ablation.json").read_text())
    del manifest["lab"]
    (out / "ablation.json").write_text(json.dumps(manifest))
    assert main(["ablation", "--smoke", "--lab", str(lab_file), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert lab.config_sha256 in err and default.config_sha256 in err
    Store(out).write_manifest({}, "0", lab={"name": lab.name, "config_sha256": lab.config_sha256})
    with pytest.raises(AblationError, match=lab.config_sha256):
        preflight(smoke_design(), out)
    assert sorted(p.name for p in out.iterdir()) == ["ablation.json"]  # nothing written by the refusals


def test_a_lab_file_changed_after_the_design_was_made_is_refused(lab_file, tmp_path):
    lab = resolve_lab(lab_file)
    write_lab(lab_file.parent, {**TEST_LAB, "world": {**TEST_LAB["world"], "belt_speed": 0.07}})
    with pytest.raises(AblationError, match="the design was made for"):
        preflight(tiny_lab_design(lab), tmp_path / "run")


def test_an_edited_lab_copy_in_the_run_directory_is_named(lab_file, tmp_path, capsys):
    """The copy of the lab inside --out was edited: the message names the copy, not the lab the user gave, and says
    how to get past it; deleting the copy (as it says) lets the run go on (issue 50)."""
    from r2s2r_envs.ablation.chain import install_lab

    lab = resolve_lab(lab_file)
    out = tmp_path / "run"
    install_lab(lab, out)
    copy = out / str(lab.file)
    write_lab(copy.parent, {**TEST_LAB, "world": {**TEST_LAB["world"], "belt_speed": 0.07}}, name=copy.name)
    with pytest.raises(AblationError) as info:
        preflight(tiny_lab_design(lab), out)
    message = str(info.value)
    assert message.startswith(f"{copy}, the run directory's copy of lab {lab_file}, has config ")
    assert f"not the config {lab.config_sha256[:12]} it was copied with" in message
    assert f"delete {copy} to have it copied again from {lab_file}" in message
    copy.write_text('{"name": 3}')
    with pytest.raises(AblationError, match=r"the run directory's copy of lab .* is refused \("):
        preflight(tiny_lab_design(lab), out)
    copy.unlink()
    assert preflight(tiny_lab_design(lab), out)  # copied again from the lab the user gave


@pytest.mark.parametrize(
    ("lab", "named"),
    [
        ('"default"', "field 'lab' is 'default'; it must be an object"),
        ("[1]", "field 'lab' is '[1]'"),
        ('{"name": "x", "config_sha256": "abc"}', "field 'lab'"),
        ("NaN", "NaN"),
        ("[" * 5000 + "]" * 5000, "nested 5001 levels deep; at most 64"),
    ],
)
def test_a_damaged_manifest_is_refused_naming_the_field(tmp_path, capsys, lab, named):
    from r2s2r_envs.cli import main

    out = tmp_path / "run"
    Store(out).write_manifest({}, "0")
    text = (out / "ablation.json").read_text()
    (out / "ablation.json").write_text(text.rstrip().rstrip("}") + f', "lab": {lab}}}')
    assert main(["ablation", "--smoke", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "ablation.json" in err and named in err and "Traceback" not in err
    assert sorted(p.name for p in out.iterdir()) == ["ablation.json"]


# ---------------------------------------------------------------------- a failing stage
@pytest.fixture
def inline_ray(monkeypatch):
    """A stand-in for ray that runs each task at once, in this process, with ``fake`` (task dict, root) -> record."""
    calls: list[str] = []

    class Ref:
        def __init__(self, record: dict) -> None:
            self.record = record

    def install(fake):
        class Remote:
            def options(self, **kwargs):
                return self

            def remote(self, task, root):
                calls.append(task["label"])
                return Ref(fake(task, root))

        module = types.SimpleNamespace(
            remote=lambda fn: Remote(),
            wait=lambda refs, num_returns, timeout: (refs[:1], []),
            get=lambda ref: ref.record,
            cluster_resources=lambda: {"CPU": 2.0},
        )
        monkeypatch.setitem(sys.modules, "ray", module)
        return calls

    return install


def test_a_failing_stage_skips_exactly_what_needs_it_with_the_reason_and_the_report_is_written(
    lab_file, tmp_path, inline_ray
):
    from r2s2r_envs.ablation.runner import run_tasks, write_outputs

    design = tiny_lab_design(resolve_lab(lab_file))
    tasks = design.tasks()
    store = Store(tmp_path / "run")
    reason = "StageError: sysid of lab ablation-test-lab could not identify ['object_friction']"

    def fake(task, root):
        if task["kind"] == "sysid":
            store.record_failure(task, reason, final=True)
            return {"stage_failed": reason}
        return {"wall_time_s": 0.0}  # the rest "runs" without a result: only the scheduling is under test

    calls = inline_ray(fake)
    summary = run_tasks(tasks, store, max_retries=2, log=lambda _: None)
    sysid = next(t for t in tasks if t.kind == "sysid")
    needs = {sysid.key}
    for task in tasks:
        if set(task.deps) & needs:
            needs.add(task.key)
    needs.discard(sysid.key)
    assert summary.failed == {sysid.key: reason}
    assert set(summary.blocked) == needs and needs
    assert all(sysid.label in summary.blocked_reasons[k] and reason in summary.blocked_reasons[k] for k in needs)
    labels = {t.key: t.label for t in tasks}
    assert {labels[k] for k in needs} >= {
        f"data {design.sim_spec('WorldGrounded').label}",
        f"data {design.sim_spec('FullyGrounded').label}",
    }
    assert summary.ran == len(tasks) - 1 - len(needs)  # the rest went on: real-only, Ungrounded, BehaviorGrounded
    # The report is written from the store alone: the failure and every skipped task with its reason.
    write_outputs(design, tasks, store, log=lambda _: None)
    report = json.loads((store.root / "report" / "report.json").read_text())
    assert report["lab"] == {"name": "ablation-test-lab", "config_sha256": design.lab.config_sha256}
    assert report["tasks"]["failed"] == [{"label": sysid.label, "error": reason}]
    skipped = {s["label"]: s["reason"] for s in report["tasks"]["skipped"]}
    assert set(skipped) == {labels[k] for k in needs}
    assert all(reason in why for why in skipped.values())
    text = (store.root / "report" / "report.md").read_text()
    assert "## The lab's chain" in text and f"skipped: data {design.sim_spec('WorldGrounded').label}" in text
    # A second run reuses the recorded failure: the stage is not run again with the same inputs.
    calls.clear()
    again = run_tasks(tasks, store, max_retries=2, log=lambda _: None)
    assert sysid.label not in calls and again.failed == {sysid.key: reason} and set(again.blocked) == needs


def _sysid_task(design) -> dict:
    return next(t for t in design.tasks() if t.kind == "sysid").to_dict()


def test_sysid_that_cannot_identify_a_required_field_fails_as_a_stage_without_retries(lab_file, tmp_path, monkeypatch):
    from r2s2r_envs.ablation import chain
    from r2s2r_envs.ablation import tasks as tasks_module
    from r2s2r_envs.world.params import nominal

    design = tiny_lab_design(resolve_lab(lab_file))
    seen = {}
    fluctuation = {"value": 0.0}

    def fake_run_sysid(out, **kwargs):
        seen.update(kwargs, out=out)
        grounding = types.SimpleNamespace(
            not_identifiable={
                "object_friction": "the push cost is smallest at the edge of the grid",
                "arm_kp": "x",
                "belt_fluctuation_time": "no belt speed fluctuation distinguishable from measurement noise",
            },
            world=dataclasses.replace(nominal(), belt_speed_fluctuation=fluctuation["value"]),
            identified=(),
            validation={},
            demonstrator=None,
            provenance={},
        )
        return types.SimpleNamespace(grounding=grounding)

    monkeypatch.setattr(chain, "sysid_entry", lambda: fake_run_sysid)
    task = _sysid_task(design)
    # A fluctuating belt needs its time constant; a steady one (fluctuation 0) has none to identify.
    fluctuation["value"] = 0.03
    record = tasks_module.execute_task(task, str(tmp_path / "fluctuating"))
    assert "could not identify ['belt_fluctuation_time', 'object_friction']" in record["stage_failed"]
    fluctuation["value"] = 0.0
    root = tmp_path / "run"
    record = tasks_module.execute_task(task, str(root))
    assert "could not identify ['object_friction']" in record["stage_failed"]
    assert "edge of the grid" in record["stage_failed"] and "arm_kp" not in record["stage_failed"].split("(")[0]
    # It ran through sysid's public entry point, on the run directory's copy of the lab, with the design's budget.
    assert seen["lab"] == str((root / design.lab.file).resolve()) and seen["quick"] is True
    assert seen["tune_episodes"] == 1 and seen["out"] == Store(root).task_dir("sysid", task["key"]) / GROUNDING_FILE
    store = Store(root)
    assert store.final_failure(task["key"]) == record["stage_failed"] and not store.is_done("sysid", task["key"])


def test_a_behavior_fit_with_too_few_demos_fails_as_a_stage(lab_file, tmp_path):
    from r2s2r_envs.ablation.chain import run_behavior_task
    from r2s2r_envs.datasets.generate import generate

    demos = tmp_path / "lab-1.hdf5"
    result = generate(
        LAB_ENV_ID,
        1,
        demos,
        seed=7,
        successes_only=True,
        env_kwargs={"num_objects": 1, "lab": str(lab_file)},
        episode_steps=200,
        progress=False,
        handle_signals=False,
    )
    assert result.complete
    design = dataclasses.replace(tiny_lab_design(resolve_lab(lab_file)), chain=lab_design(resolve_lab(lab_file)).chain)
    task = next(t for t in design.tasks() if t.kind == "behavior").to_dict()
    assert task["config"]["min_grasps"] == 3
    with pytest.raises(StageError, match="too few usable grasps"):
        run_behavior_task(task, str(demos), tmp_path / "out")


def test_report_of_a_lab_names_it_by_name_and_hash_only(lab_file, tmp_path):
    design = tiny_lab_design(resolve_lab(lab_file))
    tasks = design.tasks()
    store = Store(tmp_path / "run")
    report = analysis.analyze(design, tasks, store)
    assert report["lab"] == {"name": "ablation-test-lab", "config_sha256": design.lab.config_sha256}
    assert [e["status"] for e in report["chain"]] == ["not run"] * len(report["chain"])
    text = analysis.to_markdown(design, report)
    assert design.lab.config_sha256 in text and str(lab_file) not in text


def test_a_drawn_lab_is_made_by_its_name_and_never_copied(tmp_path):
    lab = resolve_lab("draw:7")
    assert (lab.name, lab.draw, lab.file) == ("drawn-7", 7, None)
    design = tiny_lab_design(lab)
    sysid = next(t for t in design.tasks() if t.kind == "sysid")
    assert sysid.config["lab"] == {"name": "drawn-7", "config_sha256": lab.config_sha256, "file": None, "draw": 7}
    assert lab_argument(sysid.config["lab"], tmp_path) == "draw:7"  # what each task's gym.make gets
    other = tiny_lab_design(resolve_lab("draw:8"))  # another lab: every task that makes the lab is another task
    assert {t.key for t in other.tasks() if "lab" in t.config}.isdisjoint(t.key for t in design.tasks())
    with pytest.raises(LabError, match=r"'draw:SEED' with SEED an integer >= 0"):
        resolve_lab("draw:seven")


# ---------------------------------------------------------------------- end to end (slow)
@pytest.mark.slow
def test_a_new_lab_runs_the_chain_end_to_end_and_a_second_run_reuses_every_stage(tmp_path):
    """A lab drawn from the documented ranges that nobody tuned for (a lab file goes through the same chain once
    ``resolve_lab`` has read it: the fast tests above cover reading, checking and keying files)."""
    pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'r2s2r_envs[ray]')")
    from r2s2r_envs.ablation.runner import run_ablation
    from r2s2r_envs.datasets.reader import open_dataset

    design = tiny_lab_design(resolve_lab("draw:3"))
    name = design.lab.name
    tasks = design.tasks()
    out = tmp_path / "run"
    summary = run_ablation(design, out, workers=2, log=print)
    assert not summary.failed and not summary.blocked, summary.failed
    assert summary.ran == summary.total == len(tasks)
    store = Store(out)
    report = json.loads((out / "report" / "report.json").read_text())
    assert report["tasks"]["finished"] == len(tasks) and not report["tasks"]["missing"]
    assert report["lab"] == {"name": name, "config_sha256": design.lab.config_sha256}
    assert [e["status"] for e in report["chain"]] == ["done"] * 7  # sysid, lab demos, behavior fit, 4 variants
    rows = report["tables"]["flow"]
    assert [r["variant"] for r in rows] == ["real-only", *VARIANTS]
    assert all(r["lab_sort_accuracy"] is not None for r in rows)
    assert all(r["sim_sort_accuracy"] is not None for r in rows[1:])
    assert len(report["mixture"]) == 1
    text = (out / "report" / "report.md").read_text()
    assert design.lab.config_sha256 in text and "## The lab's chain" in text
    # The chain's outputs are what the variants' data and the lab demos were made with.
    by_kind = {t.kind: t for t in tasks if t.kind in ("sysid", "behavior")}
    grounding = store.done_record("sysid", by_kind["sysid"].key)
    assert grounding["lab"] == {"name": name, "config_sha256": design.lab.config_sha256}
    real = next(t for t in tasks if t.kind == "data" and t.config.get("lab"))
    with open_dataset(store.done_record("data", real.key)["dataset"], verify="quick") as f:
        assert f.provenance["world"]["lab"] == report["lab"]
    model = store.done_record("behavior", by_kind["behavior"].key)
    for variant in ("WorldGrounded", "FullyGrounded"):
        data = next(t for t in tasks if t.label == f"data {design.sim_spec(variant).label}")
        with open_dataset(store.done_record("data", data.key)["dataset"], verify="quick") as f:
            # The chain's files are recorded by value, named by their hashes (docs/datasets.md#env-arguments).
            files = f.generation["env_kwarg_files"]
            assert files["grounding"]["sha256"] == grounding["sha256"]
            assert f.provenance["world"]["grounding"]["source"] == "inline"
            assert f.provenance["world"]["grounding"]["lab"] == report["lab"]
            if variant == "FullyGrounded":
                assert files["behavior"]["sha256"] == model["sha256"]
    # A second run re-executes nothing: every stage, dataset, policy and evaluation is reused by its key.
    starts = {t.key: store.attempts(t.key) for t in tasks}
    again = run_ablation(design, out, workers=2, log=print)
    assert again.ran == 0 and again.skipped == len(tasks) and not again.failed
    assert {t.key: store.attempts(t.key) for t in tasks} == starts


def test_a_version_2_drawn_lab_is_made_by_its_name_in_every_task():
    from r2s2r_envs.ablation.chain import lab_argument

    two, one = resolve_lab("draw2:5"), resolve_lab("draw:5")
    assert (two.draw, two.draw_version, two.name) == (5, 2, "drawn2-5") and one.draw_version == 1
    assert lab_argument(two.to_config(), ".") == "draw2:5" and lab_argument(one.to_config(), ".") == "draw:5"
    assert "draw_version" not in one.to_config()  # version-1 labs keep their task keys
    assert two.config_sha256 != one.config_sha256
