"""Held-out validation (r2s2r_envs.grounding.validation) on constructed runs whose answers are known."""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pytest

from r2s2r_envs.grounding.logs import LogRun
from r2s2r_envs.grounding.validation import (
    SIGNAL_GROUPS,
    format_nrmse_table,
    format_planner_table,
    group_masks,
    nrmse,
    reduction_percent,
    residual_delay,
    timestamp_jitter,
    validate,
)
from r2s2r_envs.world import nominal
from r2s2r_envs.world.builder import scene_layout

DT = 0.05
T = 200


def _signals(t: np.ndarray) -> dict[str, np.ndarray]:
    """Smooth arm and finger motion, one object riding the belt, one lifted at the TCP."""
    layout = scene_layout()
    arm = 0.3 * np.sin(2 * np.pi * 0.4 * t[:, None] + np.arange(7)[None, :])
    hand = 0.5 + 0.4 * np.sin(2 * np.pi * 0.25 * t[:, None] + 0.3 * np.arange(16)[None, :])
    eef = np.stack([0.5 + 0.05 * np.sin(t), 0.1 * np.cos(t), 0.3 + 0.02 * t], axis=1)
    cube_rest = layout.belt_top + 0.025
    belt_obj = np.stack([np.full_like(t, layout.belt_center_x), 0.6 - 0.08 * t, np.full_like(t, cube_rest)], axis=1)
    held_obj = eef + np.array([0.0, 0.0, -0.05])
    objects = np.concatenate([belt_obj, held_obj], axis=1)
    category = np.tile(np.array([1.0, 0, 0, 1.0, 0, 0]), (len(t), 1))  # two cubes
    return {"arm_qpos": arm, "hand_qpos": hand, "eef_pos": eef, "object_pos": objects, "object_category": category}


def _run(name: str, obs: dict[str, np.ndarray], timestamps: np.ndarray | None = None) -> LogRun:
    return LogRun(
        name=name,
        protocol="constructed",
        settings={},
        split="heldout",
        seed=0,
        control_mode="task",
        setup={},
        env_kwargs={},
        actions=np.zeros((T, 22), dtype=np.float32),
        timestamps=np.arange(T + 1) * DT if timestamps is None else timestamps,
        obs=obs,
    )


def test_group_masks_classify_logged_objects():
    t = np.arange(T + 1) * DT
    masks = group_masks(_signals(t))
    assert masks["arm joints"].all() and masks["fingers"].all()
    assert masks["objects on the belt"][:, 0].all() and not masks["objects on the belt"][:, 1].any()
    assert masks["held objects"][:, 1].all() and not masks["held objects"][:, 0].any()
    parked = _signals(t)
    parked["object_pos"][:, 2] = -1.0  # a slot parked below the floor is in neither group
    masks = group_masks(parked)
    assert not masks["objects on the belt"][:, 0].any() and not masks["held objects"][:, 0].any()


def test_nrmse_definition():
    y = np.array([[0.0], [1.0], [2.0], [3.0]])
    assert nrmse([y], [y]) == 0.0
    assert nrmse([np.full_like(y, 1.5)], [y]) == pytest.approx(1.0)  # predicting the mean
    assert nrmse([y + 1.0], [y]) == pytest.approx(math.sqrt(4 / 5))
    assert nrmse([], []) is None
    # Noise of std 0.5 on each sample: its expected share (4 x 0.25) comes out of both sums.
    assert nrmse([y + 1.0], [y], noise_std=0.5) == pytest.approx(math.sqrt((4 - 1) / (5 - 1)))
    assert reduction_percent(0.5, 0.1) == pytest.approx(80.0)
    assert reduction_percent(None, 0.1) is None and reduction_percent(0.0, 0.0) is None


def test_validation_numbers_on_a_constructed_case():
    """Logs = the true signals plus known noise; the nominal world's prediction is off by a known error and the
    grounded world predicts the truth: every number of the table follows in closed form."""
    t = np.arange(T + 1) * DT
    truth = _signals(t)
    rng = np.random.default_rng(0)
    sigma = {"arm_qpos": 0.002, "hand_qpos": 0.004, "object_pos": 0.003}
    logged = {k: v + (rng.normal(0, sigma[k], v.shape) if k in sigma else 0.0) for k, v in truth.items()}
    wrong = {k: v.copy() for k, v in truth.items()}
    wrong["arm_qpos"] += 0.05
    wrong["hand_qpos"] *= 1.2
    wrong["object_pos"][:, [1, 4]] += 0.02  # both objects 2 cm off in y
    grounded = dataclasses.replace(nominal(), belt_speed=0.1, joint_pos_noise=0.002, object_pos_noise=0.003)

    def simulate(run, world):
        return truth if world == grounded else wrong

    v = validate([_run("r0", logged)], grounded, simulate=simulate)
    arm = v.nrmse["arm joints"]
    y = logged["arm_qpos"]
    sst = np.sum((y - y.mean(axis=0)) ** 2)
    assert arm["nominal"] == pytest.approx(math.sqrt(np.sum((wrong["arm_qpos"] - y) ** 2) / sst))
    assert arm["grounded"] == pytest.approx(math.sqrt(np.sum((truth["arm_qpos"] - y) ** 2) / sst))
    assert arm["reduction_percent"] == pytest.approx(100 * (1 - arm["grounded"] / arm["nominal"]))
    assert arm["samples"] == T + 1
    assert v.nrmse["held objects"]["samples"] == T + 1 and v.nrmse["objects on the belt"]["samples"] == T + 1
    for group in SIGNAL_GROUPS:
        assert v.nrmse[group]["reduction_percent"] > 70  # the grounded world leaves only the sensor noise
    # Beyond the sensor noise the grounded world models (0.002 rad, 0.003 m) almost nothing is left; the fingers'
    # 0.004 rad noise is twice what the world models, so half of it counts as error there.
    beyond = {g: v.nrmse[g]["beyond_noise"] for g in SIGNAL_GROUPS}
    assert beyond["arm joints"]["noise_std"] == 0.002 and beyond["held objects"]["noise_std"] == 0.003
    for group in ("arm joints", "objects on the belt", "held objects"):
        assert beyond[group]["grounded"] < 0.3 * v.nrmse[group]["grounded"]
        assert beyond[group]["nominal"] == pytest.approx(v.nrmse[group]["nominal"], rel=0.05)
    assert beyond["fingers"]["grounded"] > 0.5 * v.nrmse["fingers"]["grounded"]
    # The residual of the grounded world is the sensor noise: estimated within 10%, all of it modeled.
    residual = v.unmodeled["residual"]
    assert residual["arm joints"]["noise"] == pytest.approx(0.002, rel=0.1)
    assert residual["fingers"]["noise"] == pytest.approx(0.004, rel=0.1)
    assert residual["fingers"]["unmodeled_noise"] > 0.002  # the world models 0.002 rad, the logs show 0.004
    assert residual["objects on the belt"]["noise"] == pytest.approx(0.003, rel=0.1)
    assert abs(v.unmodeled["residual_delay_s"]) < 0.3 * DT
    assert v.unmodeled["timestamp_jitter_s"]["std"] == pytest.approx(0.0, abs=1e-12)
    text = v.format()
    assert "arm joints" in text and "held objects" in text and "residual delay" in text
    d = v.to_dict()
    assert d["heldout_runs"] == ["r0"] and d["planner"] is None and set(d["nrmse"]) == set(SIGNAL_GROUPS)


def test_residual_delay_and_jitter_are_measured():
    t = np.arange(T + 1) * DT
    truth = _signals(t)
    lag = 2  # the lab lags the prediction by two control steps
    logged = dict(truth)
    logged["arm_qpos"] = np.concatenate([np.repeat(truth["arm_qpos"][:1], lag, axis=0), truth["arm_qpos"][:-lag]])
    run = _run("lagging", logged)
    delay = residual_delay([run], {"lagging": truth})
    assert delay == pytest.approx(lag * DT, abs=0.2 * DT)
    jittery = np.arange(T + 1) * DT + np.random.default_rng(1).uniform(-0.002, 0.002, T + 1)
    jitter = timestamp_jitter([_run("j", truth, jittery)])
    assert 0.001 < jitter["std"] < 0.003 and jitter["max_abs"] <= 0.004 + 1e-12


def test_validation_needs_heldout_runs():
    with pytest.raises(ValueError, match="at least one held-out run"):
        validate([], nominal(), simulate=lambda run, world: {})


def test_tables_as_text():
    table = {"arm joints": {"nominal": 0.5, "grounded": 0.1, "reduction_percent": 80.0, "samples": 10}}
    assert "80%" in format_nrmse_table(table, 3) and "3 held-out runs" in format_nrmse_table(table, 3)
    row = {"success_rate": 0.5, "success_rate_ci95": [0.4, 0.6], "failure_causes": {"missed": 3, "dropped": 0}}
    planner = {
        "episodes": 100,
        "base_seed": 1,
        "rows": {"nominal": {**row, "success_rate": 0.9}, "grounded": {**row, "success_rate": 0.6}, "lab": row},
        "gap": {"nominal_points": 40.0, "grounded_points": 10.0, "closed_percent": 75.0},
    }
    text = format_planner_table(planner)
    assert "missed 3" in text and "dropped" not in text and "75% of the nominal gap closed" in text


def test_report_is_one_offline_html_page(tmp_path):
    from test_grounding_result import example_grounding

    from r2s2r_envs.grounding.report import write_report

    t = np.arange(T + 1) * DT
    truth = _signals(t)
    run = _run("heldout_arm", truth)
    g = example_grounding()
    v = validate([run], g.world, simulate=lambda r, w: truth)
    path = write_report(tmp_path / "report", g, v, [run])
    page = path.read_text()
    assert path.name == "index.html"
    assert not re.search(r"<script[^>]*\bsrc=", page) and "fonts.googleapis" not in page  # nothing fetched
    assert "Plotly" in page and len(page) > 1_000_000  # plotly.js itself is embedded
    for text in ("heldout_arm", "belt_speed", "arm_armature", "the logs do not excite", "objects on the belt"):
        assert text in page


# ---------------------------------------------------------------------- r2s2r sysid
@pytest.fixture(scope="module")
def quick_logs(tmp_path_factory):
    from r2s2r_envs.grounding.excitation import log_lab

    directory = tmp_path_factory.mktemp("logs")
    log_lab("default", directory, quick=True)
    return directory


def _stand_in_identify(monkeypatch, world):
    """Replace the fit by a stand-in returning ``world``: these tests are about the plumbing around it."""
    from r2s2r_envs.grounding import identify as identify_module

    def fake(logs, *, quick=False, workers=1):
        intervals = {"belt_speed": [world.belt_speed - 0.001, world.belt_speed + 0.001]}
        return identify_module.Identification(
            world=world,
            intervals=intervals,
            identified=["belt_speed"],
            not_identifiable={"arm_armature": "stand-in"},
            details={"belt": {"method": "stand-in"}},
            wall_time_s=0.0,
        )

    monkeypatch.setattr(identify_module, "identify", fake)


def test_sysid_command_writes_a_loadable_grounding(quick_logs, tmp_path, monkeypatch, capsys):
    from r2s2r_envs import cli
    from r2s2r_envs.grounding.logs import read_logs
    from r2s2r_envs.grounding.result import load_grounding

    world = dataclasses.replace(nominal(), belt_speed=0.09, control_latency=0.04)
    _stand_in_identify(monkeypatch, world)
    out = tmp_path / "g.json"
    argv = ["sysid", "--logs", str(quick_logs), "--out", str(out), "--report", str(tmp_path / "rep"), "--quiet"]
    assert cli.main([*argv, "--tune-episodes", "0"]) == 0
    printed = capsys.readouterr().out
    for text in ("belt_speed", "arm_armature", "stand-in", "arm joints", "held objects", "wrote"):
        assert text in printed
    g = load_grounding(out)
    logs = read_logs(quick_logs)
    assert g.world == world and g.identified == ("belt_speed",)
    assert g.provenance["lab"] == {"name": logs.lab_name, "config_sha256": logs.lab_config_sha256}
    assert g.provenance["logs"] == logs.file_sha256s
    assert g.provenance["identification"]["methods"] == {"belt": "stand-in"}
    assert set(g.validation["nrmse"]) == set(SIGNAL_GROUPS) and g.validation["planner"] is None
    assert g.validation["heldout_runs"] == [r.name for r in logs.heldout]
    assert g.demonstrator is None and g.provenance["wall_time_s"]["tuning"] == 0.0  # --tune-episodes 0
    assert (tmp_path / "rep" / "index.html").stat().st_size > 1_000_000


def test_sysid_tunes_the_demonstrator_in_the_grounded_world(quick_logs, tmp_path, monkeypatch):
    from r2s2r_envs.grounding.fit_cli import run_sysid
    from r2s2r_envs.grounding.result import load_grounding

    world = dataclasses.replace(nominal(), belt_speed=0.09, control_latency=0.04)
    _stand_in_identify(monkeypatch, world)
    out = tmp_path / "g.json"
    with pytest.raises(ValueError, match="unknown planner setting 'speed'"):
        run_sysid(out, logs=quick_logs, tune_episodes=1, tune_grid={"speed": [1.0]})
    assert not out.exists()  # refused before any work
    result = run_sysid(out, logs=quick_logs, tune_episodes=1, tune_grid={"position_gain": (0.3, 0.6)})
    g = load_grounding(out)
    assert g.world == world and result.tuning is not None
    assert g.demonstrator["settings"] == result.tuning.chosen and g.demonstrator["tuning"]["episodes"] == 1
    points = g.demonstrator["tuning"]["points"]
    assert [p["settings"] for p in points] == [{"position_gain": 0.3}, {"position_gain": 0.6}]
    assert g.provenance["wall_time_s"]["tuning"] > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.json"]  # the untuned copy it tuned in is gone


def test_sysid_usage_errors(quick_logs, tmp_path, capsys, monkeypatch):
    from r2s2r_envs import cli

    assert cli.main(["sysid", "--out", str(tmp_path / "g.json")]) == 2
    assert "give --logs DIR or --lab LAB" in capsys.readouterr().err
    assert cli.main(["sysid", "--logs", str(tmp_path / "none"), "--out", str(tmp_path / "g.json")]) == 2
    assert "is not a directory" in capsys.readouterr().err
    _stand_in_identify(monkeypatch, nominal())
    other = tmp_path / "other_lab.json"
    other.write_text('{"name": "other", "world": {"belt_speed": 0.05}, "effects": {}}')
    argv = ["sysid", "--logs", str(quick_logs), "--lab", str(other), "--planner-episodes", "1"]
    assert cli.main([*argv, "--out", str(tmp_path / "g.json")]) == 1
    assert "is not the lab the logs come from" in capsys.readouterr().err
    assert not (tmp_path / "g.json").exists()
