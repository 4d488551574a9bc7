"""Lab panels (``r2s2r_envs.evaluation.panels``): the standard panel's labs, ``r2s2r evaluate --panel`` end to end, the
leaderboard's panel column and Kendall tau between labs, and the refusals (bad names, a simulator, two panels).

The end-to-end run is one episode of one object per lab with a zero-action policy; the panel statistics are checked
on synthetic results (records made by hand with the protocol's seeds) against scipy.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from r2s2r_envs.cli import main
from r2s2r_envs.evaluation.leaderboard import LeaderboardError, build_leaderboard, group_results, load_results
from r2s2r_envs.evaluation.panels import (
    PANEL_VERSION,
    PANELS,
    PanelError,
    evaluate_panel,
    get_panel,
    lab_agreement,
    panel_mean,
)
from r2s2r_envs.evaluation.protocol import EpisodeRecord, EvaluationResult, ResultSchemaError, evaluation_seeds

LAB = "PickSort-Real-v0"
SIM = "PickSort-Ungrounded-v0"
STANDARD_LABS = ("default", "draw:0", "draw:1", "draw:2", "draw:3")
# Fake identities of the five labs (the statistics need no lab).
IDENTITY = {
    lab: {"name": lab.replace("draw:", "drawn-"), "config_sha256": f"{k:x}" * 64} for k, lab in enumerate(STANDARD_LABS)
}


class ZeroPolicy:
    """Commands no motion: the cheapest policy that runs on every lab."""

    name = "zero"

    def __init__(self, env) -> None:
        self.shape = env.action_space.shape

    def reset(self, seed: int | None) -> None:
        pass

    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        return np.zeros(self.shape)


# ---------------------------------------------------------------------- definitions
def test_the_standard_panel_is_the_default_lab_and_the_first_four_draws():
    panel = get_panel("standard")
    assert panel.labs == STANDARD_LABS
    assert panel.version == PANEL_VERSION
    assert set(PANELS) >= {"standard"}


def test_an_unknown_panel_is_refused_listing_the_panels(capsys):
    with pytest.raises(PanelError, match=r"unknown lab panel 'nope'; panels: \['standard'\]"):
        get_panel("nope")
    assert main(["evaluate", "--policy", "tests/test_panels.py:ZeroPolicy", "--env", LAB, "--panel", "nope"]) == 2
    assert "unknown lab panel 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--env", SIM, "--panel"], f"runs on the labs of {LAB}; {SIM} is a simulator"),
        (["--env", LAB, "--panel", "--lab", "draw:9"], "--panel names its own labs; --lab draw:9 was given too"),
        (["--env", LAB, "--panel", "--video", "x.mp4"], "film one lab with a separate evaluation"),
    ],
)
def test_a_panel_with_a_simulator_a_lab_or_a_video_is_refused(extra, message, capsys):
    assert main(["evaluate", "--policy", "tests/test_panels.py:ZeroPolicy", *extra]) == 2
    assert message in capsys.readouterr().err


def test_evaluate_panel_refuses_a_lab_beside_the_panel():
    with pytest.raises(PanelError, match="give either a panel or a lab"):
        evaluate_panel(ZeroPolicy, env_kwargs={"lab": "default"}, episodes=1)
    with pytest.raises(PanelError, match="is a simulator"):
        evaluate_panel(ZeroPolicy, env_id=SIM, episodes=1)


# ---------------------------------------------------------------------- end to end
def test_evaluate_panel_writes_one_result_per_lab_that_the_leaderboard_reads(tmp_path, capsys):
    out = tmp_path / "panel"
    argv = ["evaluate", "--policy", "tests/test_panels.py:ZeroPolicy", "--env", LAB, "--panel", "--split", "dev"]
    argv += ["--conditions", "nominal=1", "--num-objects", "1", "--episode-steps", "20", "--no-progress"]
    assert main([*argv, "--out", str(out)]) == 0
    files = sorted(out.glob("*.json"))
    assert [f.name for f in files] == [f"standard-{lab.replace(':', '-')}.json" for lab in sorted(STANDARD_LABS)]
    results = {f.name: EvaluationResult.from_json(f.read_text()) for f in files}
    labs = []
    for name, result in results.items():
        assert result.panel is not None and result.panel["name"] == "standard"
        assert result.panel["version"] == PANEL_VERSION
        assert [e["lab"] for e in result.panel["labs"]] == list(STANDARD_LABS)
        entry = next(e for e in result.panel["labs"] if e["lab"] == result.panel["lab"])
        assert result.provenance["lab"] == {"name": entry["name"], "config_sha256": entry["config_sha256"]}
        assert name == f"standard-{result.panel['lab'].replace(':', '-')}.json"
        labs.append(result.provenance["lab"]["config_sha256"])
    assert len(set(labs)) == 5  # five different labs

    board = build_leaderboard(out, tmp_path / "board")
    (panel,) = board.panels
    (row,) = board.rows
    assert panel.labs == STANDARD_LABS and panel.missing == ((),)
    lab_means = [row.cells[c.label].mean for c in board.envs]
    assert len(lab_means) == 5 and panel.means[0] == pytest.approx(np.mean(lab_means))
    page = (tmp_path / "board" / "leaderboard.md").read_text()
    assert "panel standard v1 (5 labs, 1 object, 20 steps) success %" in page
    assert "Rank agreement between labs" in page
    assert "panel standard v1 (5 labs, 1 object, 20 steps) success %" in (tmp_path / "board" / "index.html").read_text()

    # A second run into the same folder overwrites nothing, and says which file is in the way.
    before = {f: f.read_bytes() for f in files}
    assert main([*argv, "--out", str(out)]) == 2
    assert "standard-default.json exists; a panel run never overwrites a result" in capsys.readouterr().err
    assert {f: f.read_bytes() for f in files} == before


# ---------------------------------------------------------------------- statistics (synthetic results)
def panel_result(
    lab: str, successes: int, *, method: str, episodes: int = 10, version: int = PANEL_VERSION, identity=None
):
    """A lab result of ``successes`` out of ``episodes`` of the standard panel's ``lab``."""
    identity = identity or IDENTITY
    records = [
        EpisodeRecord(
            index=i,
            env_seed=env_seed,
            policy_seed=policy_seed,
            is_success=i < successes,
            success_any_step=i < successes,
            sort_accuracy=1.0 if i < successes else 0.0,
            time_to_sort=4.0 if i < successes else None,
            failure_cause=None if i < successes else "missed",
            object_outcomes=("sorted",) if i < successes else ("missed",),
            steps=80,
            episode_return=1.0,
            terminated=True,
            truncated=False,
            unstable=False,
        )
        for i, (env_seed, policy_seed) in enumerate(evaluation_seeds(episodes))
    ]
    return EvaluationResult(
        env_id=LAB,
        env_kwargs={"num_objects": 1, "lab": lab},
        provenance={"domain": "real", "num_objects": 1, "episode_steps": 500, "lab": identity[lab]},
        policy={"name": method, "class": "tests.Policy", "settings": None},
        base_seed=271828,
        records=tuple(records),
        versions={"r2s2r_envs": "0.3.0", "mujoco": "3", "gymnasium": "1", "numpy": "2", "python": "3.11"},
        wall_time_s=1.0,
        panel={
            "name": "standard",
            "version": version,
            "lab": lab,
            "labs": [{"lab": spec, **identity[spec]} for spec in STANDARD_LABS],
        },
    )


# Successes out of 10 per row and lab (default, draw:0 .. draw:3): the labs disagree on some pairs.
SUCCESSES = {"a": [9, 7, 8, 6, 9], "b": [5, 8, 3, 6, 2], "c": [2, 3, 4, 1, 5], "d": [7, 1, 6, 6, 8]}


def write_panel(folder: Path, successes=SUCCESSES, **kwargs) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for method, counts in successes.items():
        for lab, n in zip(STANDARD_LABS, counts):
            result = panel_result(lab, n, method=method, **kwargs)
            (folder / f"{method}-{lab.replace(':', '-')}.json").write_text(result.to_json())


def test_the_panel_column_and_kendall_tau_match_scipy(tmp_path):
    write_panel(tmp_path / "r")
    board = group_results(*load_results(tmp_path / "r"))
    (panel,) = board.panels
    for k, row in enumerate(board.rows):
        rates = np.array(SUCCESSES[row.method]) / 10
        low, high = stats.t.interval(0.95, len(rates) - 1, loc=rates.mean(), scale=stats.sem(rates))
        assert panel.means[k] == pytest.approx(rates.mean())
        assert panel.ci95[k] == pytest.approx((max(0.0, low), min(1.0, high)))
    methods = [r.method for r in board.rows]
    expected = []
    for (i, a), (j, b) in itertools.combinations(enumerate(STANDARD_LABS), 2):
        tau = stats.kendalltau([SUCCESSES[m][i] for m in methods], [SUCCESSES[m][j] for m in methods]).statistic
        expected.append((a, b, pytest.approx(tau)))
    assert list(panel.tau) == expected
    assert panel.mean_tau == pytest.approx(np.mean([t for _, _, t in panel.tau]))
    assert panel.mean_tau < 1  # the labs do not agree on every pair


def test_lab_agreement_is_one_for_labs_that_rank_alike_and_undefined_when_constant():
    pairs, mean = lab_agreement({"x": [0.1, 0.5, 0.9], "y": [0.2, 0.3, 0.4], "z": [0.3, 0.2, 0.1]})
    assert [t for _, _, t in pairs] == pytest.approx([1.0, -1.0, -1.0]) and mean == pytest.approx(-1 / 3)
    assert lab_agreement({"x": [0.5, 0.5], "y": [0.1, 0.2]}) == ((("x", "y", None),), None)
    with pytest.raises(ValueError, match="at least two labs"):
        panel_mean([0.5])


def test_a_row_not_covering_the_panel_gets_no_figure_and_the_page_says_why(tmp_path):
    write_panel(tmp_path / "r")
    (tmp_path / "r" / "d-draw-3.json").unlink()
    (tmp_path / "r" / "d-draw-1.json").unlink()
    board = build_leaderboard(tmp_path / "r", tmp_path / "board")
    (panel,) = board.panels
    k = [r.method for r in board.rows].index("d")
    assert panel.means[k] is None and panel.missing[k] == ("draw:1", "draw:3")
    assert all(m is not None for i, m in enumerate(panel.means) if i != k)
    page = (tmp_path / "board" / "leaderboard.md").read_text()
    assert f"#{k + 1} lacks draw:1, draw:3" in page
    assert "over the 3 rows covering the panel" in page
    assert json.loads((tmp_path / "board" / "leaderboard.json").read_text())["panels"][0]["means"][k] is None


def test_two_panel_versions_or_a_changed_lab_are_never_ranked_together(tmp_path):
    write_panel(tmp_path / "r", {"a": SUCCESSES["a"]})
    write_panel(tmp_path / "r", {"b": SUCCESSES["b"]}, version=PANEL_VERSION + 1)
    with pytest.raises(
        LeaderboardError, match=rf"panel 'standard' version {PANEL_VERSION + 1}, .* version {PANEL_VERSION}"
    ):
        group_results(*load_results(tmp_path / "r"))
    changed = {**IDENTITY, "draw:2": {"name": "drawn-2", "config_sha256": "e" * 64}}
    write_panel(tmp_path / "s", {"a": SUCCESSES["a"]})
    write_panel(tmp_path / "s", {"b": SUCCESSES["b"]}, identity=changed)
    with pytest.raises(LeaderboardError, match="a lab changed without a new panel version"):
        group_results(*load_results(tmp_path / "s"))


def test_a_panel_section_that_disagrees_with_the_provenance_is_refused():
    data = panel_result("draw:1", 3, method="a").to_dict()
    data["panel"]["lab"] = "draw:2"
    with pytest.raises(ResultSchemaError, match="result.panel says lab 'draw:2' is"):
        EvaluationResult.from_dict(data)
    data["panel"]["lab"] = "draw:7"
    with pytest.raises(ResultSchemaError, match=r"'draw:7' is not one of the panel's labs"):
        EvaluationResult.from_dict(data)
    plain = dataclasses.replace(panel_result("default", 3, method="a"), panel=None).to_dict()
    assert "panel" not in plain and EvaluationResult.from_dict(plain).panel is None
