"""Fitting the human-like generator (``r2s2r_envs.behavior.fit``): fitting, bad input and the model file."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
from test_behavior_metrics import write_set

import r2s2r_envs  # noqa: F401  (registers the envs and demonstrators)
from r2s2r_envs.behavior.fit import (
    MODEL_FORMAT,
    MODEL_SCHEMA_VERSION,
    BehaviorModelError,
    FitSettings,
    fit_behavior,
    load_model,
    model_sha256,
    save_model,
)
from r2s2r_envs.behavior.segments import BehaviorDataError
from r2s2r_envs.cli import main as cli_main
from r2s2r_envs.datasets import DatasetWriter, EmptyDatasetError
from r2s2r_envs.datasets.writer import Episode
from r2s2r_envs.safe_json import CONTENT_HASH_FIELD, with_content_hash


@pytest.fixture(scope="module")
def real_set(tmp_path_factory):
    path = tmp_path_factory.mktemp("gen") / "real.hdf5"
    write_set(path, "smooth", 8, seed=4)
    return path


@pytest.fixture(scope="module")
def fitted(real_set, tmp_path_factory):
    out = tmp_path_factory.mktemp("gen") / "model.json"
    save_model(fit_behavior(real_set), out)
    return out


def test_fit_records_provenance_and_settings(real_set, fitted):
    model = load_model(fitted)
    assert model["format"] == MODEL_FORMAT
    prov = model["provenance"]
    assert prov["demos"]["domain"] == "real" and prov["demos"]["episodes"] == 8
    assert len(prov["demos"]["content_sha256"]) == 64
    assert prov["fit_settings"] == {"max_sources": 90, "seed": 0, "require_real": True, "min_grasps_per_category": 3}
    assert prov["demos"]["usable_grasps_per_category"] == {"cube": 8}
    assert len(model["sources"]) == 8 and {s["category"] for s in model["sources"]} == {"cube"}
    small = fit_behavior(real_set, settings=FitSettings(max_sources=3))
    assert len(small["sources"]) == 3


def test_fitting_is_deterministic(real_set, fitted):
    # The same demos give the same model, byte for byte in what it does (its hash leaves out software versions).
    assert model_sha256(fit_behavior(real_set)) == model_sha256(load_model(fitted))


def test_fit_refuses_too_few_grasps_of_a_category(real_set):
    with pytest.raises(BehaviorDataError, match=r"too few usable grasps of category cube: 8 \(at least 9"):
        fit_behavior(real_set, settings=FitSettings(min_grasps_per_category=9))
    with pytest.raises(ValueError, match="min_grasps_per_category"):
        FitSettings(min_grasps_per_category=0)


def test_fit_cli(real_set, tmp_path, capsys):
    out = tmp_path / "m.json"
    assert cli_main(["fit-behavior", "--demos", str(real_set), "--out", str(out)]) == 0
    assert "source grasps" in capsys.readouterr().out
    assert load_model(out)["provenance"]["demos"]["file"] == real_set.name
    assert cli_main(["fit-behavior", "--demos", str(real_set), "--out", str(out), "--max-sources", "0"]) == 2
    assert "max_sources" in capsys.readouterr().err
    assert cli_main(["fit-behavior", "--demos", str(real_set), "--out", str(out), "--min-grasps", "20"]) == 1
    assert "too few usable grasps of category cube: 8" in capsys.readouterr().err


def test_fit_refuses_an_empty_dataset(tmp_path):
    path = tmp_path / "empty.hdf5"
    with DatasetWriter.create(path, provenance={"env_id": "PickSort-Real-v0", "domain": "real"}, env_args={}):
        pass
    with pytest.raises(EmptyDatasetError, match="no demonstrations"):
        fit_behavior(path)


def test_fit_refuses_a_dataset_without_successes(tmp_path):
    path = tmp_path / "failed.hdf5"
    write_set(path, "smooth", 3, seed=0)
    # Rewrite as failures: the same arrays, success False.
    failed = tmp_path / "all_failed.hdf5"
    from r2s2r_envs.datasets import open_dataset

    with open_dataset(path) as f, DatasetWriter.create(failed, provenance=f.provenance, env_args=f.env_args) as w:
        for demo in f.demos(states=False):
            obs = {k: np.concatenate([v, demo.next_obs[k][-1:]]) for k, v in demo.obs.items()}
            w.append(Episode(observations=obs, actions=demo.actions, rewards=demo.rewards, success=False))
    with pytest.raises(BehaviorDataError, match="no successful episode"):
        fit_behavior(failed)
    assert cli_main(["fit-behavior", "--demos", str(failed), "--out", str(tmp_path / "m.json")]) == 1


def test_fit_refuses_simulated_data_and_other_tasks(tmp_path):
    sim = tmp_path / "sim.hdf5"
    write_set(sim, "smooth", 3, seed=0, env_id="PickSort-Ungrounded-v0", domain="sim")
    with pytest.raises(BehaviorDataError, match="simulated dataset"):
        fit_behavior(sim)
    assert fit_behavior(sim, settings=FitSettings(require_real=False))["provenance"]["demos"]["domain"] == "sim"
    other = tmp_path / "other.hdf5"
    write_set(other, "smooth", 3, seed=0, env_id="CartPole-v1")
    with pytest.raises(BehaviorDataError, match="another task"):
        fit_behavior(other)
    with pytest.raises(FileNotFoundError):
        fit_behavior(tmp_path / "missing.hdf5")


def test_malformed_models_fail_at_make(tmp_path, fitted):
    model = json.loads(fitted.read_text())
    cases = {
        "not json": "{",
        "other format": json.dumps({"format": "something"}),
        "other version": json.dumps({**model, "schema_version": 99}),
        "no sources": json.dumps({**model, "sources": []}),
        "nan": json.dumps({**model, "sources": [{**model["sources"][0], "delay_s": float("nan")}]}),
        "bad shape": json.dumps(
            {**model, "sources": [{**model["sources"][0], "close": {**model["sources"][0]["close"], "fingers": [[0]]}}]}
        ),
    }
    for name, text in cases.items():
        path = tmp_path / f"{name.replace(' ', '_')}.json"
        path.write_text(text)
        with pytest.raises(BehaviorModelError):
            gym.make("PickSort-BehaviorGrounded-v0", behavior=str(path))
    with pytest.raises(BehaviorModelError, match="not a shipped model"):
        gym.make("PickSort-BehaviorGrounded-v0", behavior="no_such_model")


@pytest.mark.parametrize(
    "text, message",
    [
        ("[" * 100_000 + "]" * 100_000, "nested 100000 levels deep"),  # a raw RecursionError before
        ('{"format": 1, "format": 2}', "key 'format' appears twice"),
        ('{"delay_s": NaN}', "NaN is not a JSON value"),
    ],
)
def test_a_model_file_is_read_as_strict_bounded_json(tmp_path, text, message):
    path = tmp_path / "model.json"
    path.write_text(text)
    with pytest.raises(BehaviorModelError, match=message) as info:
        load_model(path)
    assert str(path) in str(info.value)


def _refused(tmp_path, model, match):
    path = tmp_path / "m.json"
    # re-hashed: these check what lies behind the content hash (a mismatch is refused first, test_content_hash.py)
    path.write_text(json.dumps(with_content_hash(model) if CONTENT_HASH_FIELD in model else model))
    with pytest.raises(BehaviorModelError, match=match):
        load_model(path)


def test_an_old_schema_model_is_refused_with_the_refit_command(tmp_path, fitted):
    model = json.loads(fitted.read_text())
    assert model["schema_version"] == MODEL_SCHEMA_VERSION == 3
    _refused(
        tmp_path, {**model, "schema_version": 2}, r"older generator.*r2s2r fit-behavior --demos LAB_DEMOS.hdf5 --out"
    )


def test_unknown_keys_are_refused_with_the_field_named(tmp_path, fitted):
    model = json.loads(fitted.read_text())
    src = model["sources"][0]
    _refused(tmp_path, {**model, "extra": 1}, r"the model: unknown key\(s\) \['extra'\]; valid: \[")
    _refused(tmp_path, {**model, "limits": {**model["limits"], "speed": 2}}, r"'limits': unknown key\(s\) \['speed'\]")
    _refused(tmp_path, {**model, "sources": [{**src, "style": "fast"}]}, r"source 0: unknown key\(s\) \['style'\]")
    bad_seg = {**src, "close": {**src["close"], "force": [1.0]}}
    _refused(tmp_path, {**model, "sources": [bad_seg]}, r"source 0 'close': unknown key\(s\) \['force'\]")
    no_delay = {k: v for k, v in src.items() if k != "delay_s"}
    _refused(tmp_path, {**model, "sources": [no_delay]}, r"source 0: missing key\(s\) \['delay_s'\]")


def test_physically_absurd_values_are_refused_with_the_field_named(tmp_path, fitted):
    model = json.loads(fitted.read_text())
    src = model["sources"][0]

    def with_source(**changes):
        return {**model, "sources": [{**src, **changes}]}

    jump = [list(p) for p in src["approach"]["world"]]
    jump[3] = [jump[3][0], jump[3][1] + 0.5, jump[3][2]]
    _refused(tmp_path, with_source(approach={**src["approach"], "world": jump}), r"approach.world step 2 moves 0.5")
    far = [[5.0, 0.0, 0.3] for _ in src["transport"]["world"]]
    _refused(tmp_path, with_source(transport={**src["transport"], "world": far}), r"transport.world step 0 .* outside")
    fingers = [[3.0] * 16 for _ in src["close"]["fingers"]]
    _refused(tmp_path, with_source(close={**src["close"], "fingers": fingers}), r"close.fingers .* outside \[-1, 1\]")
    _refused(tmp_path, with_source(delay_s=1e4), r"delay_s 10000.0 s is outside")
    _refused(tmp_path, with_source(object_y_close=7.0), r"object_y_close 7.0 m is off the belt")
    limits = {"reach_limit_y": 0.5, "reach_upstream_y": 0.2}
    _refused(tmp_path, {**model, "limits": limits}, r"reach_limit_y.*must lie downstream")
    _refused(tmp_path, {**model, "calibration": {"grasp_offset_xy": [0.3, 0.0]}}, r"grasp_offset_xy.*beyond 0.05 m")
    with pytest.raises(TypeError, match="behavior must be"):
        gym.make("PickSort-BehaviorGrounded-v0", behavior=3)


def test_a_model_missing_a_category_the_demos_held_is_refused(tmp_path):
    """The loader applies fit-behavior's rule (issue 50): a model left with one category's sources, re-hashed, would
    carry every object of the other categories to that category's bin."""
    from r2s2r_envs.behavior.fit import resolve_model_path
    from r2s2r_envs.safe_json import read_json

    model = read_json(resolve_model_path("default"))  # shipped gzip-compressed
    cubes = [s for s in model["sources"] if s["category"] == "cube"]
    _refused(
        tmp_path,
        {**model, "sources": cubes},
        r"'sources' must hold grasps of exactly the categories the fitted demos held \(\['ball', 'bar', 'cube'\].*"
        r"it lacks \['ball', 'bar'\]",
    )
    demos = model["provenance"]["demos"]
    few = {**demos, "usable_grasps_per_category": {**demos["usable_grasps_per_category"], "bar": 1}}
    _refused(
        tmp_path,
        {**model, "provenance": {**model["provenance"], "demos": few}},
        r"usable_grasps_per_category' gives too few usable grasps of \{'bar': 1\} \(fit-behavior needs at least 3",
    )
    odd = {**demos, "usable_grasps_per_category": {"cube": 49, "cone": 5}}
    _refused(tmp_path, {**model, "provenance": {**model["provenance"], "demos": odd}}, r"must map each category")


def test_fill_hidden_rides_on_then_goes_with_the_closed_hand():
    from r2s2r_envs.behavior.segments import DT, fill_hidden

    steps = 20
    objects = np.zeros((steps, 1, 3))
    objects[:, 0, 1] = 0.5 - 0.1 * DT * np.arange(steps)  # riding the belt at 0.1 m/s
    eef = np.zeros((steps, 3))
    eef[:, 2] = 0.05  # the TCP just above the object
    eef[12:, 2] = 0.05 + 0.01 * np.arange(steps - 12)  # the hand lifts from step 12
    eef[:, 1] = objects[:, 0, 1]
    closure = np.where(np.arange(steps) >= 10, 1.0, -1.0)  # the fingers close at step 10
    visible = np.ones((steps, 1), dtype=bool)
    visible[6:, 0] = False  # the hand hides it from step 6 on
    held = objects.copy()
    held[6:, 0] = held[5, 0]  # the estimator holds its last estimate
    filled = fill_hidden(held, visible, eef, closure)
    np.testing.assert_array_equal(filled[:6], held[:6])  # what was seen stays
    np.testing.assert_allclose(filled[6:11, 0, 1], objects[6:11, 0, 1], atol=1e-9)  # rides on at the seen pace
    offset = filled[10, 0] - eef[10]
    np.testing.assert_allclose(filled[11:, 0], eef[11:] + offset, atol=1e-9)  # then goes with the hand
    assert filled[-1, 0, 2] > filled[10, 0, 2] + 0.05  # so the lift shows
    # Without an estimator's gaps nothing changes.
    np.testing.assert_array_equal(fill_hidden(objects, np.ones((steps, 1), dtype=bool), eef, closure), objects)


def test_fill_hidden_averages_a_cameras_noise_and_keeps_the_object_on_the_belt():
    from r2s2r_envs.behavior.segments import DT, GLIMPSES, fill_hidden

    steps, lost = 60, 40
    truth = np.zeros((steps, 1, 3))
    truth[:, 0, 1] = 0.8 - 0.08 * DT * np.arange(steps)  # riding the belt at 0.08 m/s
    truth[:, 0, 2] = 0.125
    seen = truth + np.random.default_rng(0).normal(0.0, 0.005, truth.shape)  # a camera's 5 mm noise
    visible = np.ones((steps, 1), dtype=bool)
    visible[lost:, 0] = False
    held = seen.copy()
    held[lost:, 0] = held[lost - 1, 0]
    eef = np.full((steps, 3), 0.5)  # the hand far away: nothing is grasped
    filled = fill_hidden(held, visible, eef, np.full(steps, -1.0))
    # A second after it was lost the guess is within a centimetre: the pace of a line through GLIMPSES sightings,
    # not of two noisy ones (those would be off by ~5 mm / (GLIMPSES * DT) per second, more for fewer).
    assert GLIMPSES * DT >= 0.5
    np.testing.assert_allclose(filled[lost:, 0, :2], truth[lost:, 0, :2], atol=0.01)
    # It neither sinks into the belt nor rises from it.
    assert np.ptp(filled[lost:, 0, 2]) == 0.0
    assert abs(filled[-1, 0, 2] - 0.125) < 0.004
