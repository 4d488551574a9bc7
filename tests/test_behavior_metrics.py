"""Behavior metrics on hand-made demonstrations whose answer is known.

Demonstrations are synthesized as arrays (a minimum-jerk or a two-bump reach to an object riding the belt, a
grasp, a lift and a release) and written with the dataset writer, so the metrics read them exactly as they read
generated files.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from r2s2r_envs.behavior import metrics
from r2s2r_envs.behavior.segments import DT, BehaviorDataError, find_grasps, load_demos, trace_from_arrays
from r2s2r_envs.cli import main as cli_main
from r2s2r_envs.datasets import DatasetWriter, Episode
from r2s2r_envs.world import constants as C
from r2s2r_envs.world.builder import scene_layout

N_OBJ = 1
STEPS = 120


def _minjerk(x: np.ndarray) -> np.ndarray:
    x = np.clip(x, 0.0, 1.0)
    return x**3 * (10 - 15 * x + 6 * x * x)


def synth_episode(rng: np.random.Generator, style: str) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """One demo: obs (T+1 rows) and actions (T rows) of a reach, grasp, lift and release.

    ``style="smooth"``: one minimum-jerk reach, synchronous finger closure, release at 0.22 m.
    ``style="corrective"``: a reach with a corrective second sub-movement, thumb first, release at 0.15 m.
    """
    lay = scene_layout()
    t = np.arange(STEPS + 1) * DT
    obj = np.zeros((STEPS + 1, 3))
    obj[:, 0] = lay.belt_center_x + rng.uniform(-0.02, 0.02)
    obj[:, 1] = 0.45 - 0.08 * t
    obj[:, 2] = lay.belt_top + 0.025
    start = np.array([0.42, 0.0, 0.33])
    reach0, close = 10 + int(rng.integers(0, 4)), 50 + int(rng.integers(0, 4))
    lift, release = close + 8, close + 40
    eef = np.tile(start, (STEPS + 1, 1))
    goal = obj[close] + np.array([0.0, 0.0, 0.02])
    s = (np.arange(STEPS + 1) - reach0) / (close - reach0)
    if style == "smooth":
        profile = _minjerk(s)
    else:
        profile = 0.8 * _minjerk(s / 0.6) + 0.2 * _minjerk((s - 0.65) / 0.35)
    eef = start + profile[:, None] * (goal - start)
    eef[close:lift] = goal + np.outer(np.arange(lift - close), [0.0, -0.08 * DT, 0.0])
    carry = _minjerk((np.arange(STEPS + 1) - lift) / 25.0)[:, None]
    height = 0.22 if style == "smooth" else 0.15
    bin_pos = np.array([0.25, 0.0, height])
    arc = np.outer(np.sin(np.pi * carry[lift:, 0]), [0.0, 0.0, 0.12])  # up, over, down to the release height
    eef[lift:] = eef[lift - 1] + carry[lift:] * (bin_pos - eef[lift - 1]) + arc
    eef += rng.normal(0.0, 0.0005, eef.shape)
    obj[lift:release] = eef[lift:release] - np.array([0.0, 0.0, 0.02])
    obj[release:] = np.array([0.25, 0.0, 0.05])
    fingers = np.full((STEPS, len(C.HAND_JOINTS)), -0.9)
    joint = {n.removeprefix(C.HAND_PREFIX): k for k, n in enumerate(C.HAND_JOINTS)}
    lag = {"if": 0, "mf": 0, "rf": 0, "th": 0} if style == "smooth" else {"if": 4, "mf": 5, "rf": 6, "th": 0}
    for digit, delay in lag.items():
        ramp = _minjerk((np.arange(STEPS) - close - delay) / 6.0)
        ramp[release:] = 0.0
        for j in ("mcp", "pip", "dip") if digit != "th" else ("mcp", "ipl"):
            fingers[:, joint[f"{digit}_{j}"]] = -0.9 + 0.6 * ramp
    actions = np.zeros((STEPS, 6 + len(C.HAND_JOINTS)), dtype=np.float32)
    actions[:, :3] = np.clip(np.diff(eef, axis=0) / 0.02, -1, 1)
    actions[:, 6:] = fingers
    one_hot = np.zeros(3 * N_OBJ, dtype=np.float32)
    one_hot[0] = 1.0
    obs = {
        "eef_pos": eef.astype(np.float32),
        "eef_quat": np.tile([0.0, 1.0, 0.0, 0.0], (STEPS + 1, 1)).astype(np.float32),
        "object_pos": obj.astype(np.float32),
        "object_quat": np.tile([1.0, 0.0, 0.0, 0.0], (STEPS + 1, 1)).astype(np.float32),
        "object_vel": np.zeros((STEPS + 1, 6), dtype=np.float32),
        "object_category": np.tile(one_hot, (STEPS + 1, 1)),
    }
    return obs, actions


def write_set(path, style: str, n: int, seed: int, env_id: str = "PickSort-Real-v0", domain: str = "real") -> None:
    """Writes ``n`` synthetic demos of ``style`` as a dataset of ``env_id``."""
    rng = np.random.default_rng(seed)
    provenance = {"env_id": env_id, "domain": domain, "world": {"domain": domain, "lab": {"name": "synthetic"}}}
    env_args = {"env_name": env_id, "type": 4, "env_kwargs": {}}
    with DatasetWriter.create(path, provenance=provenance, env_args=env_args) as w:
        for k in range(n):
            obs, actions = synth_episode(rng, style)
            w.append(
                Episode(
                    observations=obs,
                    actions=actions,
                    rewards=np.zeros(STEPS, dtype=np.float32),
                    states=None if domain == "real" else np.zeros((STEPS, 4)),
                    terminated=True,
                    truncated=False,
                    seed=k,
                    demonstrator_seed=k,
                    attempt=k,
                    success=True,
                    success_any_step=True,
                    failure_cause=None,
                    time_to_sort=5.0,
                    unstable=False,
                    object_outcomes=["sorted"],
                )
            )


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    d = tmp_path_factory.mktemp("behavior_sets")
    paths = {
        "smooth_a": d / "smooth_a.hdf5",
        "smooth_b": d / "smooth_b.hdf5",
        "corrective": d / "corrective.hdf5",
    }
    write_set(paths["smooth_a"], "smooth", 20, seed=1)
    write_set(paths["smooth_b"], "smooth", 20, seed=2)
    write_set(paths["corrective"], "corrective", 20, seed=3)
    return paths


def test_segmentation_finds_the_known_events(sets):
    demos = load_demos(sets["corrective"])
    assert len(demos.traces) == 20
    for trace in demos.traces:
        assert len(trace.grasps) == 1
        g = trace.grasps[0]
        assert g.category == "cube" and g.sorted
        assert g.digit_onsets["th"] < g.digit_onsets["if"] < g.digit_onsets["rf"]
        assert 45 <= g.close <= 58 and g.release is not None and g.release > g.lift > g.close
        assert g.arrival == int(np.ceil((0.45 - 0.3) / (0.08 * DT))) or abs(g.arrival - 37) <= 2


def test_identical_sets_are_indistinguishable(sets):
    result = metrics.compare(sets["smooth_a"], sets["smooth_a"])
    assert result.dtw["distance"] == 0.0
    assert result.auc == pytest.approx(0.5, abs=0.05)
    assert all(t.effect_size == 0.0 or math.isnan(t.effect_size) for t in result.traits)


def test_same_style_sets_are_hard_to_tell_apart(sets):
    result = metrics.compare(sets["smooth_a"], sets["smooth_b"])
    assert result.auc < 0.8
    assert result.dtw["distance"] < 2.0 * max(result.dtw["within_a"], result.dtw["within_b"])


def test_different_styles_are_told_apart_trait_by_trait(sets):
    result = metrics.compare(sets["smooth_a"], sets["corrective"])
    assert result.auc > 0.95
    traits = {t.trait: t for t in result.traits}
    assert traits["submovements"].mean_b > traits["submovements"].mean_a
    assert traits["release_height"].mean_a == pytest.approx(0.22, abs=0.01)
    assert traits["release_height"].mean_b == pytest.approx(0.15, abs=0.01)
    assert traits["thumb_lead"].mean_b == pytest.approx(5 * DT, abs=0.06)
    assert traits["closure_spread"].mean_a == pytest.approx(0.0, abs=1e-9)
    assert traits["closure_spread"].mean_b == pytest.approx(6 * DT, abs=0.06)
    same = metrics.compare(sets["smooth_a"], sets["smooth_b"])
    assert result.dtw["distance"] > same.dtw["distance"]


def test_peak_time_of_a_minimum_jerk_reach_is_half():
    obs, actions = synth_episode(np.random.default_rng(0), "smooth")
    trace = trace_from_arrays(0, obs, actions, {"success": True, "object_outcomes": ["sorted"]})
    traits = metrics.grasp_traits(trace, trace.grasps[0])
    assert traits["peak_time"] == pytest.approx(0.5, abs=0.12)
    assert traits["submovements"] == 1.0
    assert find_grasps(trace, ["sorted"])[0].close == trace.grasps[0].close


def test_cli_json_and_plots(sets, tmp_path, capsys):
    a, b = str(sets["smooth_a"]), str(sets["corrective"])
    rc = cli_main(["compare-behavior", a, b, "--json", "--plot", str(tmp_path)])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["auc"] > 0.95 and {t["trait"] for t in out["traits"]} == set(metrics.TRAITS)
    for name in ("speed_profiles.png", "paths.png"):
        assert (tmp_path / name).stat().st_size > 1000
    rc = cli_main(["compare-behavior", str(sets["smooth_a"]), str(sets["corrective"])])
    assert rc == 0 and "classifier two-sample AUC" in capsys.readouterr().out


def test_another_task_and_missing_files_are_refused(tmp_path, capsys):
    other = tmp_path / "other.hdf5"
    write_set(other, "smooth", 6, seed=0, env_id="CartPole-v1")
    with pytest.raises(BehaviorDataError, match="another task"):
        load_demos(other)
    assert cli_main(["compare-behavior", str(other), str(other)]) == 1
    assert "another task" in capsys.readouterr().err
    assert cli_main(["compare-behavior", str(tmp_path / "none.hdf5"), str(other)]) == 1
    assert "no such dataset file" in capsys.readouterr().err


def test_too_few_episodes_for_the_classifier(tmp_path):
    small = tmp_path / "small.hdf5"
    write_set(small, "smooth", 3, seed=0)
    with pytest.raises(ValueError, match="at least 5 episodes"):
        metrics.compare(small, small)
