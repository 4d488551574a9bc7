"""Tuning the scripted demonstrator in a simulated world (r2s2r_envs.grounding.tuning, `r2s2r tune-planner`)."""

from __future__ import annotations

import json

import pytest

from r2s2r_envs.cli import main
from r2s2r_envs.evaluation.protocol import EVALUATION_BASE_SEED, evaluate
from r2s2r_envs.grounding.tuning import (
    DEFAULT_GRID,
    FORMAT,
    GridPoint,
    TuningError,
    check_grid,
    choose,
    parse_grid,
    planner_factory,
    tune_grounding,
    tune_planner,
)

ONE_OBJECT = {"num_objects": 1}


def point(success: float, sort: float, **settings: float) -> GridPoint:
    return GridPoint(settings=settings, success=success, sort_accuracy=sort, failure_causes={})


def test_grid_parsing_and_checks():
    assert parse_grid("lead_time=0.05,0.1; position_gain=0.3") == {"lead_time": (0.05, 0.1), "position_gain": (0.3,)}
    assert check_grid(DEFAULT_GRID) == DEFAULT_GRID
    assert check_grid({"position_gain": [0.3, 0.3, 0.6]}) == {"position_gain": (0.3, 0.6)}  # duplicates once
    for text, match in [
        ("nope=1", "unknown planner setting 'nope'.*position_gain"),
        ("position_gain=", "at least one finite value"),
        ("position_gain=a", "must be numbers"),
        ("position_gain=nan", "finite"),
        ("position_gain", "expected NAME=V1,V2"),
        ("", "the grid is empty"),
        ("position_gain=-5", r"grid.position_gain must be a number, finite and > 0 and <= 1, got -5"),
        ("lead_time=-100", r"grid.lead_time must be a number, finite and >= 0 and <= 2, got -100"),
    ]:
        with pytest.raises(TuningError, match=match):
            parse_grid(text)


def test_every_planner_setting_has_a_range_holding_its_default():
    import dataclasses

    from r2s2r_envs.behavior.scripted import PlannerConfig
    from r2s2r_envs.grounding.tuning import PLANNER_BOUNDS, check_planner_setting

    fields = {f.name: f.default for f in dataclasses.fields(PlannerConfig)}
    assert set(PLANNER_BOUNDS) == set(fields)
    for name, default in fields.items():
        assert check_planner_setting("PlannerConfig", name, default) == default


def test_choice_is_by_success_then_sort_accuracy_then_nearest_the_default():
    default = {"lead_time": 0.05, "position_gain": 0.6}
    better = [point(0.9, 0.95, lead_time=0.05, position_gain=0.3), point(0.8, 0.99, lead_time=0.05, position_gain=0.6)]
    assert choose(better, default) == {"lead_time": 0.05, "position_gain": 0.3}
    by_sort = [point(0.9, 0.95, lead_time=0.05, position_gain=0.3), point(0.9, 0.97, lead_time=0.1, position_gain=0.2)]
    assert choose(by_sort, default) == {"lead_time": 0.1, "position_gain": 0.2}
    # A tie: the settings nearest the default win, wherever they sit in the grid.
    tie = [
        point(0.975, 0.99, lead_time=0.05, position_gain=0.2),
        point(0.975, 0.99, lead_time=0.1, position_gain=0.6),
        point(0.975, 0.99, lead_time=0.05, position_gain=0.6),
        point(0.975, 0.99, lead_time=0.05, position_gain=0.45),
    ]
    assert choose(tie, default) == default


def test_the_lab_and_the_protocol_seeds_are_refused_before_any_episode():
    with pytest.raises(TuningError, match="real env.*simulated world only"):
        tune_planner("PickSort-Real-v0", episodes=1)
    with pytest.raises(TuningError, match="evaluation protocol's"):
        tune_planner("PickSort-Ungrounded-v0", episodes=1, base_seed=EVALUATION_BASE_SEED)
    with pytest.raises(TuningError, match="unknown env 'PickSort-Nope-v0'.*PickSort-WorldGrounded-v0"):
        tune_planner("PickSort-Nope-v0")
    with pytest.raises(TuningError, match="episodes must be >= 1"):
        tune_planner("PickSort-Ungrounded-v0", episodes=0)
    with pytest.raises(TuningError, match="refused its arguments"):
        tune_planner("PickSort-WorldGrounded-v0", env_kwargs={"grounding": "no-such-grounding.json"})


def test_tuning_runs_every_grid_point_on_the_same_episodes():
    grid = {"position_gain": (0.3, 0.6)}
    lines: list[str] = []
    tuning = tune_planner("PickSort-Ungrounded-v0", grid=grid, episodes=2, env_kwargs=ONE_OBJECT, log=lines.append)
    assert [p.settings for p in tuning.points] == [{"position_gain": 0.3}, {"position_gain": 0.6}]
    assert len(lines) == 2 and "position_gain" in lines[0]
    assert tuning.default == {"position_gain": 0.6} and tuning.chosen in [p.settings for p in tuning.points]
    # Each point is what the protocol gives for those settings on the tuning seeds.
    for p in tuning.points:
        direct = evaluate(
            "PickSort-Ungrounded-v0",
            planner_factory(**p.settings),
            episodes=2,
            base_seed=tuning.base_seed,
            env_kwargs=ONE_OBJECT,
            progress=False,
        )
        assert (p.success, p.sort_accuracy) == (direct.summary["success_rate"], direct.summary["sort_accuracy"])
    d = json.loads(json.dumps(tuning.to_dict()))
    assert d["format"] == FORMAT and d["chosen"] == tuning.chosen and d["grid"] == {"position_gain": [0.3, 0.6]}
    assert "<- chosen" in tuning.table()


def test_cli_writes_the_tuning_and_refuses_bad_input(tmp_path, capsys):
    out = tmp_path / "tuned.json"
    argv = ["tune-planner", "--env", "PickSort-Ungrounded-v0", "--grid", "position_gain=0.6", "--episodes", "1"]
    assert main([*argv, "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["format"] == FORMAT and record["chosen"] == {"position_gain": 0.6} and record["episodes"] == 1
    assert "chosen" in capsys.readouterr().out
    assert main(["tune-planner", "--env", "PickSort-Real-v0", "--out", str(tmp_path / "lab.json")]) == 2
    assert "simulated world only" in capsys.readouterr().err
    assert not (tmp_path / "lab.json").exists()
    assert main(["tune-planner", "--grid", "speed=1"]) == 2
    assert "unknown planner setting 'speed'" in capsys.readouterr().err


def test_the_choice_is_stored_in_the_grounding_file_and_the_env_demonstrates_with_it(tmp_path):
    import gymnasium as gym
    from test_grounding_result import write_example

    from r2s2r_envs.behavior import make_demonstrator
    from r2s2r_envs.grounding.result import load_grounding

    path = write_example(tmp_path)
    before = load_grounding(path)
    grid = {"position_gain": (0.3, 0.6)}
    grounding, tuning = tune_grounding(path, grid=grid, episodes=1)
    assert grounding == load_grounding(path)
    assert grounding.demonstrator["settings"] == tuning.chosen == choose(tuning.points, tuning.default)
    record = grounding.demonstrator["tuning"]
    assert record["episodes"] == 1 and record["grid"] == {"position_gain": [0.3, 0.6]} and len(record["points"]) == 2
    assert "env_kwargs" not in record  # the world is the file's own
    # Every other section is unchanged.
    for key in ("world", "intervals", "identified", "not_identifiable", "validation", "provenance"):
        assert getattr(grounding, key) == getattr(before, key)
    env = gym.make("PickSort-WorldGrounded-v0", grounding=str(path))
    assert make_demonstrator(env).settings["position_gain"] == tuning.chosen["position_gain"]
    # Retuning starts from the planner's defaults, not from the stored settings.
    _, again = tune_grounding(path, grid={"lead_time": (0.05,)}, episodes=1)
    assert again.points[0].settings == {"lead_time": 0.05} and again.default == {"lead_time": 0.05}
    assert load_grounding(path).demonstrator_settings() == {"lead_time": 0.05}


def test_update_grounding_refuses_shipped_names_and_missing_files(tmp_path, capsys):
    with pytest.raises(TuningError, match="not a file.*copy it first"):
        tune_grounding("default", episodes=1)
    with pytest.raises(TuningError, match="not a file"):
        tune_grounding(tmp_path / "none.json", episodes=1)
    assert main(["tune-planner", "--update-grounding"]) == 2
    assert "--update-grounding needs --grounding FILE" in capsys.readouterr().err
    argv = ["tune-planner", "--env", "PickSort-Ungrounded-v0", "--grounding", "g.json", "--update-grounding"]
    assert main(argv) == 2
    assert "--env PickSort-WorldGrounded-v0" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert main(["tune-planner", "--grounding", str(bad), "--update-grounding", "--episodes", "1"]) == 2
    assert "has no schema_version" in capsys.readouterr().err
    assert bad.read_text() == "{}"  # nothing written


def test_cli_update_grounding(tmp_path, capsys):
    from test_grounding_result import write_example

    from r2s2r_envs.grounding.result import load_grounding

    path = write_example(tmp_path)
    argv = ["tune-planner", "--grounding", str(path), "--grid", "position_gain=0.45", "--episodes", "1"]
    assert main([*argv, "--update-grounding"]) == 0
    assert "stored {'position_gain': 0.45}" in capsys.readouterr().out
    assert load_grounding(path).demonstrator_settings() == {"position_gain": 0.45}
