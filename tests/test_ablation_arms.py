"""The ablation's control arms (r2s2r_envs.ablation.arms, docs/ablation.md#control-arms): arms add tasks without
changing any other task's key, bad arm names are refused before any work, the generator's pace settings leave it
unchanged at their defaults, calibration meets a target pace, matched scenes are the attempts every variant solved,
and the smoke design with every arm runs end to end on Ray: each arm's data made as documented (the untuned planner
in the identified world, the slowed planner at the lab demos' pace, the generator at the planner's, the same scenes
in every matched cell, the nominal world seen through the grounding's sensing) and the report's decomposition rows
with intervals."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from r2s2r_envs.ablation.arm_data import (
    KNOBS,
    Pace,
    PaceError,
    calibrate,
    matched_attempts,
    measure_pace,
    tolerance,
)
from r2s2r_envs.ablation.arms import ARM_EFFECTS, ARM_NAMES, MATCHED_CELLS
from r2s2r_envs.ablation.design import (
    VARIANTS,
    AblationDesign,
    DesignError,
    check_design,
    control_arms_design,
    control_arms_smoke_design,
    full_design,
    quick_design,
    smoke_design,
)
from r2s2r_envs.ablation.store import Store
from r2s2r_envs.behavior.scripted import PlannerConfig
from r2s2r_envs.world.params import SENSING_FIELDS, WorldParams


# ---------------------------------------------------------------------- design
@pytest.mark.parametrize("preset", [smoke_design, quick_design, full_design])
def test_arms_add_tasks_after_the_others_and_change_no_key(preset):
    design = preset()
    before = [t.key for t in design.tasks()]
    with_arms = dataclasses.replace(design, arms=ARM_NAMES)
    check_design(with_arms)
    tasks = with_arms.tasks()
    assert [t.key for t in tasks[: len(before)]] == before  # every task of the design keeps its key, in order
    added = tasks[len(before) :]
    position = {t.key: i for i, t in enumerate(tasks)}
    assert all(position[d] < position[t.key] for t in added for d in t.deps)
    cells = {t.config["policy"]["variant"] for t in added if t.kind == "eval"}
    assert cells == {
        "untuned-planner",
        "lab-sensing",
        "slowed-planner",
        "generator-planner-pace",
        *MATCHED_CELLS.values(),
    }
    assert {t.config["env_id"] for t in added if t.kind == "eval"} == {"PickSort-Real-v0"}  # arms: lab only
    trains = [t for t in added if t.kind == "train"]
    assert len(trains) == len(design.seeds) * len(design.methods) * len(cells)
    # The manifest of a design without arms is the one it always had; with arms it round-trips.
    assert "arms" not in design.to_dict()
    assert AblationDesign.from_dict(with_arms.to_dict()) == with_arms


def test_arm_data_are_made_as_documented():
    design = dataclasses.replace(smoke_design(), arms=ARM_NAMES)
    tasks = design.tasks()
    data = {t.config["arm"]["cell"]: t for t in tasks if t.kind == "data" and t.config.get("arm")}
    real = next(t for t in tasks if t.kind == "data" and t.config["label"] == design.real.label)
    variant_data = {
        v: next(t for t in tasks if t.kind == "data" and t.config["label"] == design.sim_spec(v).label)
        for v in VARIANTS
    }
    # Identified physics, the planner named (so it gets none of WorldGrounded's re-tuned settings).
    untuned = data["untuned-planner"].config
    assert untuned["env_id"] == "PickSort-WorldGrounded-v0" and untuned["generate_kwargs"]["demonstrator"] == "scripted"
    # The nominal world seen through the sensing the WorldGrounded data's grounding identified; dynamics nominal.
    from r2s2r_envs.grounding.result import load_grounding

    sensing = data["lab-sensing"].config
    identified = load_grounding("default").world
    assert sensing["env_id"] == "PickSort-Ungrounded-v0"
    world = WorldParams.from_dict(sensing["env_kwargs"]["world"])
    assert all(getattr(world, f) == getattr(identified, f) for f in SENSING_FIELDS)
    assert {f: getattr(world, f) for f in WorldParams.field_names() if f not in SENSING_FIELDS} == {
        f: getattr(WorldParams(), f) for f in WorldParams.field_names() if f not in SENSING_FIELDS
    }
    # The slowed planner's target pace is the design's lab demos (training data), the generator's the planner's data.
    assert data["slowed-planner"].deps == (real.key,)
    assert data["slowed-planner"].config["arm"]["pace"]["target"] == {"data": "lab-smoke", "key": real.key}
    assert data["generator-planner-pace"].deps == (variant_data["Ungrounded"].key,)
    assert data["generator-planner-pace"].config["env_id"] == "PickSort-BehaviorGrounded-v0"
    # Matched cells read all four variants' data.
    for v, cell in MATCHED_CELLS.items():
        assert data[cell].deps == tuple(variant_data[u].key for u in VARIANTS)
        assert data[cell].config["arm"]["match"]["variant"] == v


@pytest.mark.parametrize(
    "change, message",
    [
        (
            {"arms": ("untuned-planner", "nope")},
            "unknown control arm(s) ['nope']; valid: ['untuned-planner', 'lab-sensing'",
        ),
        ({"arms": ("slowed-planner", "slowed-planner")}, "name an arm twice"),
        (
            {"arms": ("slowed-planner",), "variants": ("Ungrounded", "WorldGrounded")},
            "'slowed-planner' is compared with ['Ungrounded', 'BehaviorGrounded']: add ['BehaviorGrounded']",
        ),
    ],
)
def test_bad_arms_are_refused_naming_the_valid_ones(change, message):
    with pytest.raises(DesignError) as info:
        check_design(dataclasses.replace(smoke_design(), **change))
    assert message in str(info.value)


def test_cli_refuses_an_unknown_arm_before_any_work(tmp_path, capsys):
    from r2s2r_envs.cli import main

    code = main(["ablation", "--smoke", "--arms", "slowed,untuned-planner", "--out", str(tmp_path / "o")])
    assert code == 2
    err = capsys.readouterr().err
    assert "unknown control arm(s) ['slowed']" in err and all(name in err for name in ARM_NAMES)
    assert not (tmp_path / "o").exists()


def test_cli_arms_all_is_the_control_arms_preset():
    import argparse

    from r2s2r_envs.ablation.cli import add_subcommands, design_from_args

    parser = argparse.ArgumentParser()
    add_subcommands(parser.add_subparsers())
    args = parser.parse_args(["ablation", "--quick", "--arms", "all", "--out", "x"])
    design = design_from_args(args)
    assert design.arms == ARM_NAMES
    assert [t.key for t in design.tasks()] == [t.key for t in control_arms_design().tasks()]


# ---------------------------------------------------------------------- the generator's pace settings
def test_generator_pace_settings_are_a_no_op_at_their_defaults_and_checked(make_env):
    from r2s2r_envs.behavior.fit import load_model
    from r2s2r_envs.behavior.humanlike import HumanlikeGenerator, retimed

    env = make_env("PickSort-BehaviorGrounded-v0")
    default = HumanlikeGenerator(env)
    assert "pace" not in default.settings  # datasets made at the defaults keep their records
    source = load_model("default")["sources"][0]
    assert retimed(source, 1.0, 1.0) is source
    fast = retimed(source, 2.0, 0.5)
    n = len(source["approach"]["world"])
    assert len(fast["approach"]["world"]) == round((n - 1) / 2) + 1
    assert fast["approach"]["world"][-1] == source["approach"]["world"][-1]  # the path ends where it ended
    assert len(fast["transport"]["world"]) == 2 * (len(source["transport"]["world"]) - 1) + 1
    assert fast["delay_s"] == pytest.approx(source["delay_s"] / 2)
    paced = HumanlikeGenerator(env, reach_tempo=2.0, carry_tempo=0.5)
    assert paced.settings["pace"] == {"reach_tempo": 2.0, "carry_tempo": 0.5}
    with pytest.raises(ValueError, match=r"reach_tempo must be a number in \[0.25, 4\]"):
        HumanlikeGenerator(env, reach_tempo=0.0)


# ---------------------------------------------------------------------- calibration
def _planner_like(settings, _round):
    """A planner's pace as a function of its settings: flat while it reaches before the object arrives (y > 0.3),
    then 1 / belt speed per m; transport as the inverse of the carry speed."""
    y, carry = settings["reach_upstream_y"], settings["carry_speed"]
    arrival = 1.35 + max(0.0, 0.3 - y) / 0.08
    return Pace(arrival_to_closure_s=arrival, transport_s=2.55 * 0.55 / carry, grasps=24, episodes=8)


def test_calibration_meets_a_target_pace_through_a_flat_stretch():
    target = Pace(arrival_to_closure_s=5.05, transport_s=3.4, grasps=50, episodes=20)
    out = calibrate("scripted", target, _planner_like)
    assert out["meets"] and len(out["rounds"]) <= 6
    reached = _planner_like(out["settings"], 0)
    assert abs(reached.arrival_to_closure_s - 5.05) <= tolerance(5.05)
    assert abs(reached.transport_s - 3.4) <= tolerance(3.4)
    assert out["rounds"][0]["settings"] == {k.setting: k.first for k in KNOBS["scripted"]}
    assert out["rounds"][0]["settings"]["carry_speed"] == PlannerConfig().carry_speed
    with pytest.raises(PaceError, match="has no pace settings"):
        calibrate("teleoperator", target, _planner_like)


# ---------------------------------------------------------------------- matched scenes
def test_matched_scenes_are_the_attempts_every_variant_solved(tmp_path):
    from r2s2r_envs.ablation.tasks import write_subset
    from r2s2r_envs.datasets.generate import generate

    kwargs = {"num_objects": 1}
    full = tmp_path / "a.hdf5"
    generate(
        "PickSort-Ungrounded-v0",
        3,
        full,
        seed=0,
        successes_only=True,
        env_kwargs=kwargs,
        episode_steps=200,
        progress=False,
    )
    cut = tmp_path / "b.hdf5"  # a variant whose demonstrator failed attempt 1 (its demo dropped)
    write_subset(full, cut, 2, source_name="a", demos=[0, 2])
    found = matched_attempts([full, cut])
    assert found["attempts"] == [0, 2] and found["compared"] == 3 and found["solved"] == [3, 2]
    assert found["positions"] == [[0, 2], [0, 1]]
    other = tmp_path / "c.hdf5"
    generate(
        "PickSort-Ungrounded-v0",
        1,
        other,
        seed=1,
        successes_only=True,
        env_kwargs=kwargs,
        episode_steps=200,
        progress=False,
    )
    with pytest.raises(PaceError, match="one base seed"):
        matched_attempts([full, other])


# ---------------------------------------------------------------------- the pipeline on Ray
@pytest.fixture(scope="module")
def arms_run(tmp_path_factory):
    pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'r2s2r_envs[ray]')")
    import ray

    from r2s2r_envs.ablation.runner import init_ray, run_ablation

    started = init_ray(None, 2)
    out = tmp_path_factory.mktemp("arms")
    design = control_arms_smoke_design()
    try:
        summary = run_ablation(design, out, log=lambda s: None)
    finally:
        if started:
            ray.shutdown()
    return design, out, summary


def _data(design, store, cell=None, label=None):
    from r2s2r_envs.ablation.tasks import data_path

    for task in design.tasks():
        if task.kind != "data":
            continue
        if (cell is not None and (task.config.get("arm") or {}).get("cell") == cell) or task.config["label"] == label:
            return task, store.done_record("data", task.key), data_path(store, task.key)
    raise KeyError(cell or label)


@pytest.mark.slow
def test_control_arms_run_end_to_end_as_documented(arms_run):
    from r2s2r_envs.datasets.reader import open_dataset

    design, out, summary = arms_run
    assert summary.total == len(design.tasks()) and not summary.failed and not summary.blocked
    store = Store(out)

    def provenance(path):
        with open_dataset(path, verify="quick") as f:
            return f.provenance, [f.demo_attrs(k) for k in f.demo_ids]

    # Untuned planner: the identified world of the WorldGrounded data, the planner at every default setting.
    _, _, untuned = _data(design, store, cell="untuned-planner")
    _, _, world = _data(design, store, label="worldgrounded-smoke")
    p_untuned, _ = provenance(untuned)
    p_world, _ = provenance(world)
    assert p_untuned["demonstrator"]["settings"] == dataclasses.asdict(PlannerConfig())
    assert p_world["demonstrator"]["settings"]["position_gain"] != PlannerConfig().position_gain  # re-tuned there
    assert p_untuned["world"]["world_sha256"] == p_world["world"]["world_sha256"]
    # Slowed planner: the pace of its data within tolerance of the lab demos' (the design's training data).
    _, slowed, slowed_path = _data(design, store, cell="slowed-planner")
    _, _, lab = _data(design, store, label="lab-smoke")
    target = measure_pace(lab)
    assert slowed["pace"]["target"]["arrival_to_closure_s"] == target.arrival_to_closure_s
    for figure in ("arrival_to_closure_s", "transport_s"):
        goal = getattr(target, figure)
        assert abs(slowed["pace"]["achieved"][figure] - goal) <= tolerance(goal), (figure, slowed["pace"])
    settings = provenance(slowed_path)[0]["demonstrator"]["settings"]
    assert settings["reach_upstream_y"] == slowed["pace"]["calibration"]["settings"]["reach_upstream_y"]
    # The generator at the planner's pace: the Ungrounded data's pace.
    _, generator, _ = _data(design, store, cell="generator-planner-pace")
    planner = measure_pace(_data(design, store, label="ungrounded-smoke")[2])
    for figure in ("arrival_to_closure_s", "transport_s"):
        goal = getattr(planner, figure)
        assert abs(generator["pace"]["achieved"][figure] - goal) <= tolerance(goal), (figure, generator["pace"])
    # Matched: the same scenes (env seeds, attempts) in every variant's cell, each made by its own variant.
    scenes = []
    for v, cell in MATCHED_CELLS.items():
        _, record, path = _data(design, store, cell=cell)
        p, attrs = provenance(path)
        assert p["env_id"] == f"PickSort-{v}-v0"
        scenes.append([(int(a["attempt"]), int(a["seed"])) for a in attrs])
        assert record["card"]["scenes"]["kept_seeds_sha256"] is not None
    assert all(s == scenes[0] for s in scenes) and scenes[0]
    # The report: each split per method with its interval; the splits add up.
    report = json.loads((out / "report" / "report.json").read_text())
    rows = report["arms"]["effects"]["success"]
    assert set(rows) == set(ARM_EFFECTS)
    for row in rows.values():
        assert len(row["flow"]["ci95"]) == 2 and all(math.isfinite(x) for x in row["flow"]["ci95"])
    est = {name: row["flow"]["estimate"] for name, row in rows.items()}
    assert est["world, nominal behavior (W - U)"] == pytest.approx(
        est["physics (untuned-planner - U)"] + est["re-tune (W - untuned-planner)"]
    )
    assert est["behavior, nominal world (B - U)"] == pytest.approx(
        est["pace (slowed-planner - U)"] + est["style (B - slowed-planner)"]
    )
    text = (out / "report" / "report.md").read_text()
    for line in (
        "## Control arms",
        "| physics (untuned-planner - U) |",
        "| style (B - slowed-planner) |",
        "Paced arms",
    ):
        assert line in text
    assert np.isfinite(report["arms"]["cells"]["flow"]["slowed-planner"]["lab_success"]["mean"])
