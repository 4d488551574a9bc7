"""Tracks (``r2s2r_envs.evaluation.tracks``, docs/leaderboard.md#tracks): the registry, the on-/off-track check of a
result from what it carries, ``evaluate(..., track=)`` / ``r2s2r evaluate --track``, and the leaderboard ranking one
track's rows and listing the others apart.

Results of the ``state`` track are made by hand (the standard mix's 100 records on the test split's seeds, as
tests/test_leaderboard.py makes its results); the evaluation path runs a tiny track (two episodes of 20 steps).
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import pytest

import r2s2r_envs  # noqa: F401  (registers the ids)
from r2s2r_envs.datasets.canonical import load_spec
from r2s2r_envs.envs.conditions import CONDITIONS, CONDITIONS_VERSION, STANDARD_MIX
from r2s2r_envs.envs.seeding import episode_seeds
from r2s2r_envs.evaluation.leaderboard import LeaderboardError, build_leaderboard, group_results
from r2s2r_envs.evaluation.protocol import EpisodeRecord, EvaluationResult, ResultSchemaError, evaluate
from r2s2r_envs.evaluation.splits import ConditionRun, condition_base_seed
from r2s2r_envs.evaluation.tracks import (
    TRACKS,
    UnknownTrackError,
    check_result,
    check_track,
    evaluation_arguments,
    get_track,
    training_samples,
)
from r2s2r_envs.policies.config import RECIPES

LAB, SIM = "PickSort-Real-v0", "PickSort-Ungrounded-v0"
STATE = TRACKS["state"]
# Known builds (canonical.json) of lab-50 and worldgrounded-1000 on the 2-core AMD EPYC machine, and of
# fullygrounded-1000 on an Intel Xeon: a row may mix machines, each build is recorded.
LAB_50 = "3150beed7ecc8e5ab838b946bdb0b1d407cba79fe19f565b2563feb30efc2363"
WORLD_1000 = "79b94a4876e71a4c512b24e2477baea9c63d19bc8b06d62fca125a9d5bd1b9c3"
FULLY_1000 = "92a807ba0ac46be8c4c1710d623a3efd75196dcdbd5b52798dc6ddd866ae1004"
CPU_SAMPLES = RECIPES["cpu"]["steps"] * RECIPES["cpu"]["batch_size"]


def method_section(
    method: str = "flow",
    *,
    datasets: tuple[tuple[str | None, str, str], ...] = (
        ("lab-50", LAB_50, "real"),
        ("worldgrounded-1000", WORLD_1000, "sim"),
    ),
    steps: int | None = RECIPES["cpu"]["steps"],
    batch_size: int | None = RECIPES["cpu"]["batch_size"],
    training_seed: int = 0,
) -> dict:
    """A result's method section as r2s2r train's metadata gives it (plus ``batch_size``, which a checkpoint's config
    holds)."""
    section = {
        "method": method,
        "policy_class": "r2s2r_envs.policies.Policy",
        "real_fraction": 0.224 if len(datasets) > 1 else 1.0,
        "variant": "WorldGrounded" if len(datasets) > 1 else None,
        "datasets": [{"name": n, "sha256": h, "domain": d, "episodes": 50} for n, h, d in datasets],
        "training_seed": training_seed,
        "n_real_demos": 50,
        "n_sim_demos": 1000 if len(datasets) > 1 else 0,
        "recipe": "cpu",
    }
    if steps is not None:
        section["steps"] = steps
    if batch_size is not None:
        section["batch_size"] = batch_size
    return section


def state_result(
    successes: int, method: dict, *, env_id: str = LAB, track: str | None = "state", split: str = "test"
) -> EvaluationResult:
    """A result of the standard mix on ``split``'s seeds, ``successes`` successes per condition, with the track
    section ``evaluate(..., track=track)`` would record for ``method`` (checked with the track's own check)."""
    runs = tuple(
        ConditionRun(name, condition_base_seed(split, name), n, CONDITIONS[name].shifted)
        for name, n in STANDARD_MIX.items()
    )
    records, index = [], 0
    for run in runs:
        for k in range(run.episodes):
            env_seed, policy_seed = episode_seeds(run.base_seed, k)
            ok = k < successes
            records.append(
                EpisodeRecord(
                    index=index,
                    env_seed=env_seed,
                    policy_seed=policy_seed,
                    is_success=ok,
                    success_any_step=ok,
                    sort_accuracy=1.0 if ok else 0.0,
                    time_to_sort=4.0 if ok else None,
                    failure_cause=None if ok else "missed",
                    object_outcomes=("sorted",) if ok else ("missed",),
                    steps=80,
                    episode_return=1.0,
                    terminated=True,
                    truncated=False,
                    unstable=False,
                    policy_error=None,
                )
            )
            index += 1
    provenance = {"domain": "real" if env_id == LAB else "sim", "num_objects": 1, "episode_steps": 500}
    if env_id == LAB:
        provenance["lab"] = {"name": "default", "config_sha256": "c" * 64}
    record = None
    if track is not None:
        record = check_track(
            get_track(track),
            method=method,
            training_samples=training_samples(method),
            split=split,
            conditions=[(r.condition, r.episodes) for r in runs],
            conditions_version=CONDITIONS_VERSION,
            panel=None,
        ).to_record()
    return EvaluationResult(
        env_id=env_id,
        env_kwargs={"num_objects": 1},
        provenance=provenance,
        policy={"name": method["method"], "class": "r2s2r_envs.policies.Policy", "settings": None},
        method=method,
        base_seed=runs[0].base_seed,
        records=tuple(records),
        versions={"r2s2r_envs": "0.3.0", "mujoco": "4.0.0", "gymnasium": "1.4.0", "numpy": "2", "python": "3.11"},
        wall_time_s=1.0,
        split=split,
        conditions=runs,
        track=record,
    )


# ---------------------------------------------------------------------- the registry
def test_the_state_track_is_the_canonical_data_the_standard_mix_and_the_cpu_budget():
    assert [d.name for d in STATE.datasets] == [
        "lab-50",
        "ungrounded-1000",
        "worldgrounded-1000",
        "behaviorgrounded-1000",
        "fullygrounded-1000",
    ]
    # Each dataset's accepted hashes are exactly the canonical spec's known builds (pinned and other builds).
    spec = {e.name: e for e in load_spec()}
    for dataset in STATE.datasets:
        entry = spec[dataset.name]
        known = {h for h in (entry.sha256, *entry.other_builds) if h}
        assert set(dataset.builds) == known, f"{dataset.name}: the track's builds are not canonical.json's"
        assert all(dataset.builds[h] in entry.other_builds.get(h, "the reference machine") for h in known)
        assert dataset.domain == ("real" if entry.env_id == LAB else "sim")
    assert dict(STATE.conditions) == STANDARD_MIX and STATE.conditions_version == CONDITIONS_VERSION
    assert STATE.split == "test" and STATE.panel is None and STATE.version == 1
    assert STATE.budget_recipe == "cpu" and STATE.budget_samples == CPU_SAMPLES
    # A change of the cpu recipe's budget changes the track: bump its version (this pins the number of version 1).
    assert STATE.budget_samples == 20_000 * 256
    record = STATE.to_dict()
    assert record["budget"] == {"recipe": "cpu", "samples": CPU_SAMPLES} and json.loads(json.dumps(record)) == record


def test_the_image_track_is_the_camera_sets_the_mix_with_red_light_and_the_cpu_image_budget():
    image = TRACKS["image"]
    spec = {e.name: e for e in load_spec()}
    assert [d.name for d in image.datasets] == [
        "lab-v3-50-rgb64",
        "ungrounded-v1-1000-rgb64",
        "worldgrounded-v1-1000-rgb64",
        "behaviorgrounded-v1-1000-rgb64",
        "fullygrounded-v1-1000-rgb64",
    ]
    for dataset in image.datasets:
        entry = spec[dataset.name]
        assert entry.obs_mode == "state+rgb" and entry.env_kwargs == {"image_size": 64}
        known = {h for h in (entry.sha256, *entry.other_builds) if h}
        assert set(dataset.builds) == known, f"{dataset.name}: the track's builds are not canonical.json's"
        assert dataset.domain == ("real" if entry.env_id == "PickSort-Real-v1" else "sim")
    assert image.conditions == {**STANDARD_MIX, "lighting": 25} and CONDITIONS["lighting"].images_only
    assert image.budget_recipe == "cpu-image"
    assert image.budget_samples == RECIPES["cpu-image"]["steps"] * RECIPES["cpu-image"]["batch_size"] == 20_000 * 64
    assert evaluation_arguments(image) == ({**STANDARD_MIX, "lighting": 25}, "test")
    # A state policy cannot be evaluated on it: the red light needs cameras, refused before any episode.
    with pytest.raises(ValueError, match="lighting"):
        evaluate(SIM, Still(), track="image", progress=False)


def test_an_unknown_track_is_refused_listing_the_valid_ones():
    with pytest.raises(UnknownTrackError, match=r"unknown track 'video'; valid: \['image', 'state'\]"):
        get_track("video")
    with pytest.raises(ValueError, match=r"unknown track None; valid: \['image', 'state'\]"):
        get_track(None)
    # Before any env is made: evaluate() refuses it at once.
    with pytest.raises(ValueError, match=r"unknown track 'stat'; valid: \['image', 'state'\]"):
        evaluate(SIM, Still(), track="stat", progress=False)


def test_a_track_fixes_the_evaluation_and_refuses_another_naming_both():
    assert evaluation_arguments(STATE) == (STANDARD_MIX, "test")
    assert evaluation_arguments(STATE, conditions="standard", split="test") == (STANDARD_MIX, "test")
    assert evaluation_arguments(STATE, conditions=dict(STANDARD_MIX)) == (STANDARD_MIX, "test")
    with pytest.raises(ValueError, match=r"track 'state' evaluates on the 'test' split; split 'dev' was given"):
        evaluation_arguments(STATE, split="dev")
    with pytest.raises(ValueError, match=r"under nominal 50, fast-belt 25, novel-objects 25; conditions nominal 50 "):
        evaluation_arguments(STATE, conditions=["nominal"])
    with pytest.raises(ValueError, match=r"fixes the evaluation .*episodes=3 was given too"):
        evaluation_arguments(STATE, episodes=3)


def test_training_samples_come_from_what_the_policy_records():
    assert training_samples({"training_samples": 1000, "steps": 5, "batch_size": 5}) == 1000  # declared wins
    assert training_samples({"steps": 20, "batch_size": 8}) == 160
    assert training_samples({"steps": 20}, {"steps": 20, "batch_size": 4}) == 80  # a checkpoint's config
    assert training_samples({"steps": 20}) is None and training_samples({"steps": True, "batch_size": 2}) is None


# ---------------------------------------------------------------------- on and off the track
def test_a_result_on_canonical_known_builds_within_the_budget_is_on_the_track():
    on = state_result(40, method_section())
    check = check_result(on)
    assert check is not None and check.on_track and check.reasons == ()
    assert check.training_samples == CPU_SAMPLES and check.budget_samples == CPU_SAMPLES
    assert check.builds == {
        "lab-50": "2-core AMD EPYC (x86-64), Python 3.11, mujoco 4.0.0",
        "worldgrounded-1000": "2-core AMD EPYC (x86-64), Python 3.11, mujoco 4.0.0",
    }
    # Builds of two machines in one row, and a dataset given by path (no name) whose bytes are a known build.
    mixed = method_section(datasets=(("lab-50", LAB_50, "real"), (None, FULLY_1000, "sim")))
    assert check_result(state_result(40, mixed)).on_track
    # The result file carries it, and reads back.
    back = EvaluationResult.from_json(on.to_json())
    assert back.track == on.track and back.track["on_track"] is True
    assert "track" not in state_result(40, method_section(), track=None).to_dict()  # absent when it names none


@pytest.mark.parametrize(
    ("method", "reason"),
    [
        (
            method_section(datasets=(("lab-50", "d" * 64, "real"),)),
            r"dataset 'lab-50' has content hash dddddddddddddddd\.\.\., not a known build of it \(known: 3150beed",
        ),
        (
            method_section(datasets=(("lab-50", LAB_50, "real"), ("my-sim-5000", "e" * 64, "sim"))),
            r"dataset 'my-sim-5000' \(content hash eeee.*\) is not one of track 'state''s datasets",
        ),
        (method_section(datasets=()), r"the policy records no datasets"),
        (method_section(steps=40_000), r"trained on 10,240,000 samples .* over the track's budget of 5,120,000"),
        (method_section(batch_size=None), r"the training samples are not recorded"),
    ],
    ids=["unknown-build", "foreign-dataset", "no-datasets", "over-budget", "no-samples"],
)
def test_a_result_off_the_track_says_why(method, reason):
    result = state_result(40, method)
    assert result.track["on_track"] is False and len(result.track["reasons"]) == 1
    check = check_result(result)
    assert not check.on_track
    assert any(re.search(reason, why) for why in check.reasons), check.reasons
    assert EvaluationResult.from_json(result.to_json()).track == result.track


def test_another_evaluation_or_version_is_off_the_track():
    dev = state_result(40, method_section(), split="dev")
    assert check_result(dev).reasons == ("evaluated on the 'dev' split; the track's is 'test'",)
    on = state_result(40, method_section())
    other = dataclasses.replace(on, track={**on.track, "version": 2})
    (why,) = check_result(other).reasons
    assert "track 'state' version 2; this package defines version 1" in why
    gone = dataclasses.replace(other, track={**other.track, "name": "video"})
    assert (
        "names track 'video' version 2, which this package does not define (valid: ['image', 'state'])"
        in (check_result(gone).reasons[0])
    )
    assert check_result(state_result(40, method_section(), track=None)) is None


def test_a_track_section_must_agree_with_itself():
    data = state_result(40, method_section()).to_dict()
    data["track"]["on_track"] = False  # says off-track but gives no reason
    with pytest.raises(ResultSchemaError, match="a result is on its track exactly when it has none"):
        EvaluationResult.from_dict(data)
    data["track"]["extra"] = 1
    with pytest.raises(ResultSchemaError, match=r"result\.track: unknown key\(s\) \['extra'\]; valid: \[.*'on_track'"):
        EvaluationResult.from_dict(data)


def test_schema_3_results_without_a_track_still_read():
    committed = sorted(Path(__file__).parents[1].glob("experiments/zoo-protocol-v2/results/*.json"))
    assert committed, "the committed schema-3 results are missing"
    for path in committed[:2]:
        result = EvaluationResult.from_json(path.read_text())
        assert result.schema_version == 3 and result.track is None


# ---------------------------------------------------------------------- the leaderboard
def _write(directory: Path, name: str, result: EvaluationResult) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text(result.to_json(indent=2))


def test_the_leaderboard_ranks_one_track_and_lists_off_track_rows_apart(tmp_path: Path):
    d = tmp_path / "results"
    # On the track: flow on lab-50 + worldgrounded-1000, seeds 0 and 1 (lab 40 and 30 of each condition's episodes).
    for seed, successes in enumerate([40, 30]):
        _write(d, f"flow-s{seed}.json", state_result(successes, method_section(training_seed=seed)))
    _write(d, "bc-s0.json", state_result(10, method_section("bc")))
    # Off it: a better-looking row over the budget, one on an unknown build, and one that names no track.
    _write(d, "big-s0.json", state_result(50, method_section("big", steps=100_000)))
    unknown = method_section("flow", datasets=(("lab-50", "d" * 64, "real"),))
    _write(d, "flow-other-build.json", state_result(25, unknown))
    _write(d, "untracked.json", state_result(45, method_section("mine"), track=None))
    board = build_leaderboard(d, tmp_path / "board", title="Board")
    assert [r.method for r in board.rows] == ["flow", "bc"]  # big's 50 never outranks them
    assert all(r.track == "state" and r.off_track == () for r in board.rows)
    assert board.rows[0].cells[next(iter(board.rows[0].cells))].seeds == (0, 1)
    off = {r.method: r for r in board.off_track_rows}
    assert set(off) == {"big", "flow", "mine"}
    assert "over the track's budget" in off["big"].off_track[0] and off["big"].label.endswith("[off-track]")
    assert "not a known build" in off["flow"].off_track[0]
    assert off["mine"].off_track == ("names no track (r2s2r evaluate --track state records one)",)
    assert board.track["name"] == "state" and len(board.results) == 6
    # The pages: the ranked table is the track's; the off-track rows are a section of their own.
    md = (tmp_path / "board" / "leaderboard.md").read_text()
    assert md.startswith("# Board: track state v1")
    head, _, tail = md.partition("## Off-track rows (not ranked on track state v1)")
    assert "big" not in head and "mine" not in head and "big" in tail and "over the track" in tail
    html = (tmp_path / "board" / "index.html").read_text()
    assert 'id="off-track-table"' in html and html.index("off-track-table") < html.index("</body>")
    data = json.loads((tmp_path / "board" / "leaderboard.json").read_text())
    assert data["track"]["name"] == "state" and data["track"]["budget"]["samples"] == CPU_SAMPLES
    assert [r["method"] for r in data["rows"]] == ["flow", "bc"]
    assert {r["method"] for r in data["off_track_rows"]} == {"big", "flow", "mine"}


def test_a_board_without_track_results_is_as_before():
    a = state_result(40, method_section(), track=None)
    b = state_result(20, method_section("bc"), track=None)
    board = group_results([("a.json", a), ("b.json", b)])
    assert board.track is None and board.off_track_rows == () and [r.method for r in board.rows] == ["flow", "bc"]
    # Off-track results alone: no track ranking, but their rows still say why.
    off = state_result(30, method_section("big", steps=100_000))
    board = group_results([("a.json", a), ("c.json", off)])
    assert board.track is None and [r.off_track != () for r in board.rows] == [False, True]


def test_two_tracks_in_one_ranking_are_refused_naming_both(monkeypatch):
    monkeypatch.setitem(TRACKS, "state-b", dataclasses.replace(STATE, name="state-b"))
    a = state_result(40, method_section())
    b = state_result(30, method_section("bc"), track="state-b")
    assert check_result(b).on_track
    with pytest.raises(LeaderboardError, match=r"b\.json is on track 'state-b' version 1, a\.json on track 'state' "):
        group_results([("a.json", a), ("b.json", b)])
    # Off-track for the other track: listed apart, not refused.
    c = state_result(30, method_section("bc", steps=10**6), track="state-b")
    board = group_results([("a.json", a), ("c.json", c)])
    (row,) = board.off_track_rows
    assert row.off_track[0] == "evaluated for track 'state-b', not 'state'"


# ---------------------------------------------------------------------- evaluate --track
class Still:
    """Holds still; its metadata names canonical known builds (settable per test)."""

    name = "still"
    metadata: dict = {}

    def reset(self, seed: int | None) -> None:
        pass

    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        return np.zeros(22)


class OnTrack(Still):
    metadata = {k: v for k, v in method_section("still").items() if k not in ("policy_class",)}


class OverBudget(Still):
    metadata = {k: v for k, v in method_section("still", steps=10**6).items() if k not in ("policy_class",)}


@pytest.fixture
def tiny_track(monkeypatch):
    """The state track's datasets and budget, evaluated on two episodes (one nominal, one fast-belt)."""
    tiny = dataclasses.replace(STATE, name="tiny", conditions={"nominal": 1, "fast-belt": 1})
    monkeypatch.setitem(TRACKS, "tiny", tiny)
    return tiny


FAST = {"num_objects": 1, "episode_steps": 20}


def test_evaluate_on_a_track_records_it(tiny_track):
    result = evaluate(SIM, OnTrack(), track="tiny", env_kwargs=FAST, progress=False)
    assert [(c.condition, c.episodes) for c in result.conditions] == [("nominal", 1), ("fast-belt", 1)]
    assert result.split == "test" and result.track["name"] == "tiny" and result.track["on_track"] is True
    assert result.track["training_samples"] == CPU_SAMPLES
    back = EvaluationResult.from_json(result.to_json())
    assert back.track == result.track and check_result(back).on_track
    with pytest.warns(UserWarning, match=r"off track 'tiny' \(v1\): trained on 256,000,000 samples"):
        off = evaluate(SIM, OverBudget(), track="tiny", env_kwargs=FAST, progress=False)
    assert off.track["on_track"] is False and "over the track's budget" in off.track["reasons"][0]
    with pytest.raises(ValueError, match=r"track 'tiny' evaluates on the 'test' split; split 'dev' was given too"):
        evaluate(SIM, OnTrack(), track="tiny", split="dev", env_kwargs=FAST, progress=False)


def test_cli_track_option(tiny_track, tmp_path: Path, capsys):
    from r2s2r_envs.cli import main

    out = tmp_path / "r.json"
    argv = ["evaluate", "--policy", "test_tracks:OnTrack", "--env", SIM, "--num-objects", "1", "--episode-steps", "20"]
    argv += ["--no-progress"]
    assert main([*argv, "--track", "tiny", "--out", str(out)]) == 0
    assert "track:            tiny v1: on the track" in capsys.readouterr().out
    assert EvaluationResult.from_json(out.read_text()).track["on_track"] is True
    assert main([*argv, "--track", "nope"]) == 2
    assert "unknown track 'nope'; valid: ['image', 'state', 'tiny']" in capsys.readouterr().err
    assert main([*argv, "--track", "tiny", "--split", "dev"]) == 2
    assert "track 'tiny' evaluates on the 'test' split; split 'dev' was given too" in capsys.readouterr().err
    assert main([*argv, "--track", "tiny", "--conditions", "nominal"]) == 2
    assert "conditions nominal 50 were given too" in capsys.readouterr().err
    assert main([*argv, "--track", "tiny", "--episodes", "3"]) == 2
    assert "--episodes 3 was given too" in capsys.readouterr().err
    assert main([*argv, "--track", "tiny", "--panel"]) == 2
    assert "evaluates on one lab; --panel standard was given too" in capsys.readouterr().err
    off = argv.copy()
    off[off.index("test_tracks:OnTrack")] = "test_tracks:OverBudget"
    with pytest.warns(UserWarning, match="off track 'tiny'"):
        assert main([*off, "--track", "tiny"]) == 0
    assert "tiny v1: OFF-TRACK" in capsys.readouterr().out
