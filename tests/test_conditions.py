"""Evaluation conditions and seed splits (docs/protocol.md#conditions, #dev-and-test-splits): the shifts reach the
simulators and the lab alike, a nominal env is the env it was, splits have their own fresh seeds, results record
per-condition figures, and one ranking refuses results of another split, mix or condition version."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import r2s2r_envs  # noqa: F401  (registers the ids)
from r2s2r_envs.envs.conditions import (
    CONDITIONS,
    CONDITIONS_VERSION,
    STANDARD_MIX,
    FastBelt,
    NovelObjects,
    apply_condition,
    condition_record,
    get_condition,
)
from r2s2r_envs.envs.seeding import episode_seeds
from r2s2r_envs.evaluation import EvaluationResult, evaluate
from r2s2r_envs.evaluation.leaderboard import LeaderboardError, group_results
from r2s2r_envs.evaluation.protocol import ResultSchemaError
from r2s2r_envs.evaluation.splits import LEGACY_BASE_SEED, SPLITS, condition_base_seed, plan_conditions
from r2s2r_envs.world.params import WorldParams, nominal

SIM, LAB = "PickSort-Ungrounded-v0", "PickSort-Real-v0"
FAST = {"num_objects": 1, "episode_steps": 20}


class Still:
    """Holds still (the arm stays, the hand stays open)."""

    name = "still"

    def reset(self, seed: int | None) -> None:
        pass

    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        return np.zeros(22)


# ---------------------------------------------------------------------- the conditions
def test_registry_names_the_conditions_and_refuses_others():
    assert list(CONDITIONS) == [
        "nominal", "fast-belt", "novel-objects", "lighting", "no-latency", "nominal-belt", "nominal-timing",
    ]  # fmt: skip
    assert [c.shifted for c in CONDITIONS.values()] == [False, True, True, True, False, False, False]
    assert STANDARD_MIX == {"nominal": 50, "fast-belt": 25, "novel-objects": 25}  # half nominal, half shifted
    assert CONDITIONS_VERSION == 1  # lighting and the diagnostic ones, outside the standard mix, changed no definition
    with pytest.raises(ValueError, match=r"unknown condition 'dim-light'; valid: \['nominal', 'fast-belt'"):
        get_condition("dim-light")
    record = condition_record("fast-belt")
    assert record["version"] == CONDITIONS_VERSION and record["definition"] == {"belt_speed_factor": 1.3}
    json.dumps(condition_record("novel-objects"))


def test_conditions_change_any_world_by_the_same_rule():
    world = WorldParams.from_dict({"belt_speed": 0.1, "object_mass": [0.2, 0.3, 0.4]})
    fast = get_condition("fast-belt").apply_world(world)
    assert fast.belt_speed == pytest.approx(0.1 * FastBelt().belt_speed_factor)
    assert dataclasses.replace(fast, belt_speed=0.1) == world  # nothing else changes
    novel = get_condition("novel-objects").apply_world(world)
    assert novel.object_mass == pytest.approx(tuple(m * NovelObjects().object_mass_factor for m in (0.2, 0.3, 0.4)))
    assert get_condition("nominal").apply_world(world) is world
    assert apply_condition("fast-belt", world) == fast and apply_condition(NovelObjects(), world) == novel
    with pytest.raises(ValueError, match="unknown condition 'slow-belt'; valid"):
        apply_condition("slow-belt", world)


def test_a_nominal_env_is_the_env_without_the_argument():
    plain, named = gym.make(SIM), gym.make(SIM, condition="nominal")
    a, _ = plain.reset(seed=3)
    b, _ = named.reset(seed=3)
    rng = np.random.default_rng(0)
    for _ in range(5):
        action = rng.uniform(-1, 1, 22)
        a = plain.step(action)[0]
        b = named.step(action)[0]
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert plain.unwrapped.provenance() == named.unwrapped.provenance()  # "condition" only when shifted
    assert "condition" not in plain.unwrapped.provenance()


def test_shifted_sim_worlds_and_objects():
    env = gym.make(SIM, condition="fast-belt").unwrapped
    assert env.world_params.belt_speed == pytest.approx(nominal().belt_speed * 1.3)
    assert env.provenance()["condition"] == "fast-belt"
    env.set_world({"belt_speed": 0.05})  # the condition applies to a new world too
    assert env.world_params.belt_speed == pytest.approx(0.05 * 1.3)
    novel = gym.make(SIM, condition="novel-objects").unwrapped
    plain = gym.make(SIM).unwrapped
    geoms = novel.scene.object_geoms[0]
    shape = np.asarray(NovelObjects().object_shape)
    assert np.allclose(novel.model.geom_size[geoms], plain.model.geom_size[geoms] * shape)
    assert novel.world_params.object_mass == pytest.approx(tuple(1.8 * m for m in nominal().object_mass))
    with pytest.raises(ValueError, match="unknown condition 'fast'; valid"):
        gym.make(SIM, condition="fast")


def test_the_lab_gets_the_same_shift_and_keeps_its_world_hidden():
    # Seen from outside, as grounding code sees it: the first object's perceived velocity at reset is the belt's.
    # Same seed, same sensor noise: the difference is the shift alone, 30% of the lab's (hidden) belt speed.
    def belt_velocity(condition: str) -> float:
        env = gym.make(LAB, condition=condition)
        obs, _ = env.reset(seed=11)
        return float(obs["object_vel"][1])

    nominal_v, fast_v = belt_velocity("nominal"), belt_velocity("fast-belt")
    assert -0.035 < fast_v - nominal_v < -0.02  # 0.3 x a belt of 0.07-0.12 m/s, the sensor noise cancelled
    lab = gym.make(LAB, condition="fast-belt").unwrapped
    assert lab.provenance()["condition"] == "fast-belt" and "world_params" not in lab.provenance()


# ---------------------------------------------------------------------- the splits
def test_split_seeds_are_derived_as_documented_and_fresh():
    for split in ("dev", "test"):
        for name in CONDITIONS:
            digest = hashlib.sha256(f"r2s2r_envs/protocol/{split}/{name}".encode()).digest()
            assert condition_base_seed(split, name) == int.from_bytes(digest[:4], "big") >> 1
        assert condition_base_seed("legacy", "fast-belt") == LEGACY_BASE_SEED == 271828
    seeds = {(s, c): condition_base_seed(s, c) for s in ("dev", "test") for c in CONDITIONS}
    assert len(set(seeds.values())) == len(seeds) and LEGACY_BASE_SEED not in seeds.values()

    # No episode of a test seed set is an episode of the dev sets or of the legacy seeds (standard counts, and
    # the 100 legacy episodes every earlier lab evaluation ran).
    def envs(split: str) -> set[int]:
        return {episode_seeds(condition_base_seed(split, c), i)[0] for c, n in STANDARD_MIX.items() for i in range(n)}

    legacy = {episode_seeds(LEGACY_BASE_SEED, i)[0] for i in range(1000)}
    assert not envs("test") & envs("dev") and not envs("test") & legacy and not envs("dev") & legacy


def test_plans_name_what_is_valid():
    assert [(r.condition, r.episodes) for r in plan_conditions(None, "test")] == list(STANDARD_MIX.items())
    assert [r.episodes for r in plan_conditions("standard", "dev", episodes=4)] == [4, 4, 4]
    assert [(r.condition, r.episodes, r.shifted) for r in plan_conditions({"fast-belt": 3}, "dev")] == [
        ("fast-belt", 3, True)
    ]
    with pytest.raises(ValueError, match=r"unknown split 'val'; valid: \['dev', 'test', 'legacy'\]"):
        plan_conditions(None, "val")
    with pytest.raises(ValueError, match="unknown condition 'windy'; valid"):
        plan_conditions(["nominal", "windy"], "test")
    with pytest.raises(ValueError, match="named twice"):
        plan_conditions(["nominal", "nominal"], "test")
    with pytest.raises(ValueError, match="integer >= 1"):
        plan_conditions({"nominal": 0}, "test")
    assert SPLITS == ("dev", "test", "legacy")


# ---------------------------------------------------------------------- results
@pytest.fixture(scope="module")
def mixed() -> EvaluationResult:
    return evaluate(
        SIM, Still(), conditions={"nominal": 2, "fast-belt": 1, "novel-objects": 1}, split="dev", env_kwargs=FAST,
        progress=False,
    )  # fmt: skip


def test_a_mixed_result_records_each_condition_and_all_shifted(mixed):
    data = json.loads(mixed.to_json())
    assert data["schema_version"] == 3 and data["split"] == "dev" and data["conditions_version"] == CONDITIONS_VERSION
    assert [(c["name"], c["episodes"], c["shifted"]) for c in data["conditions"]] == [
        ("nominal", 2, False), ("fast-belt", 1, True), ("novel-objects", 1, True),
    ]  # fmt: skip
    seeds = [(r["env_seed"], r["policy_seed"]) for r in data["records"]]
    dev = {c: condition_base_seed("dev", c) for c in CONDITIONS}
    assert seeds == [
        episode_seeds(dev["nominal"], 0), episode_seeds(dev["nominal"], 1), episode_seeds(dev["fast-belt"], 0),
        episode_seeds(dev["novel-objects"], 0),
    ]  # fmt: skip
    assert [r["index"] for r in data["records"]] == [0, 1, 2, 3]
    assert data["shifted"]["episodes"] == 2 and data["conditions"][0]["summary"]["episodes"] == 2
    assert len(data["conditions"][1]["summary"]["success_rate_ci95"]) == 2
    assert EvaluationResult.from_json(mixed.to_json()) == mixed


def test_a_shifted_episode_differs_from_the_nominal_one():
    # The same seed under fast-belt: the object reaches the end of its time limit further downstream.
    runs = {
        c: evaluate(SIM, Still(), conditions=[c], split="dev", episodes=1, env_kwargs=FAST, progress=False)
        for c in ("nominal", "fast-belt")
    }
    assert runs["nominal"].records[0].env_seed != runs["fast-belt"].records[0].env_seed  # own seed sets
    nominal_seed = runs["nominal"].records[0].env_seed
    outcomes = {}
    for condition in ("nominal", "fast-belt"):
        env = gym.make(SIM, condition=condition, **FAST)
        obs, _ = env.reset(seed=nominal_seed)
        for _ in range(15):
            obs = env.step(np.zeros(22))[0]
        outcomes[condition] = float(obs["object_pos"][1])
    assert outcomes["fast-belt"] < outcomes["nominal"] - 0.01


def test_tampered_conditions_are_refused(mixed):
    data = copy.deepcopy(mixed.to_dict())
    data["conditions"][1]["summary"]["success_rate"] = 1.0
    data["conditions"][1]["summary"]["success_rate_ci95"] = [0.2, 1.0]
    with pytest.raises(ResultSchemaError, match=r"conditions\[1\].summary does not match"):
        EvaluationResult.from_dict(data)
    data = copy.deepcopy(mixed.to_dict())
    data["split"] = "test"  # dev seeds claimed as test seeds
    with pytest.raises(ResultSchemaError, match="'test' split's seed of 'nominal'"):
        EvaluationResult.from_dict(data)
    data = copy.deepcopy(mixed.to_dict())
    data["conditions"][2]["name"] = "windy"
    with pytest.raises(ResultSchemaError, match="unknown condition 'windy'"):
        EvaluationResult.from_dict(data)


def test_version_2_results_read_as_legacy_nominal():
    result = evaluate(SIM, Still(), episodes=2, env_kwargs=FAST, progress=False)
    assert result.split == "legacy" and result.base_seed == 271828
    old = copy.deepcopy(result.to_dict())
    old["schema_version"] = 2
    for key in ("split", "conditions_version", "conditions", "shifted"):
        del old[key]
    back = EvaluationResult.from_dict(old)
    assert back == result and back.conditions[0].condition == "nominal" and back.shifted_summary is None
    custom = evaluate(SIM, Still(), episodes=1, base_seed=5, env_kwargs=FAST, progress=False)
    assert custom.split == "custom"


def test_evaluate_refuses_what_it_cannot_do():
    with pytest.raises(ValueError, match="unknown split 'validation'"):
        evaluate(SIM, Still(), split="validation", progress=False)
    with pytest.raises(ValueError, match="cannot be combined with conditions= or split="):
        evaluate(SIM, Still(), split="dev", base_seed=3, episodes=1, progress=False)
    with pytest.raises(ValueError, match="give conditions= instead"):
        evaluate(SIM, Still(), episodes=1, env_kwargs={"condition": "fast-belt"}, progress=False)


# ---------------------------------------------------------------------- the leaderboard
def _run(split: str | None, conditions=None, training_seed: int = 0, episodes: int = 1) -> EvaluationResult:
    if split is None:
        result = evaluate(SIM, Still(), episodes=episodes, env_kwargs=FAST, progress=False)
    else:
        result = evaluate(
            SIM, Still(), conditions=conditions or ["nominal"], split=split, episodes=episodes, env_kwargs=FAST,
            progress=False,
        )  # fmt: skip
    return dataclasses.replace(result, method={**result.method, "training_seed": training_seed})


def test_one_ranking_never_mixes_splits_mixes_or_versions():
    dev = _run("dev")
    with pytest.raises(LeaderboardError, match=r"b\.json is on the 'test' split, a\.json on the 'dev' split"):
        group_results([("a.json", dev), ("b.json", _run("test", training_seed=1))])
    mix = _run("dev", conditions=["nominal", "fast-belt"], training_seed=1)
    with pytest.raises(LeaderboardError, match=r"nominal 50%, fast-belt 50%, a\.json under nominal 100%"):
        group_results([("a.json", dev), ("b.json", mix)])
    other = dataclasses.replace(_run("dev", training_seed=1), conditions_version=CONDITIONS_VERSION + 1)
    with pytest.raises(
        LeaderboardError, match=f"protocol version {CONDITIONS_VERSION + 1}.*version {CONDITIONS_VERSION}"
    ):
        group_results([("a.json", dev), ("b.json", other)])


def test_dev_rows_are_marked_and_carry_condition_figures(tmp_path: Path):
    board = group_results(
        [("a.json", _run("dev", ["nominal", "fast-belt"])), ("b.json", _run("dev", ["nominal", "fast-belt"], 1))]
    )
    (row,) = board.rows
    assert row.label.endswith("[dev]") and row.split == "dev"
    (cell,) = row.cells.values()
    assert set(cell.conditions) == {"nominal", "fast-belt", "all shifted"}
    assert cell.conditions["fast-belt"]["episodes"] == 2 and len(cell.conditions["all shifted"]["ci95"]) == 2
    legacy = group_results([("a.json", _run(None)), ("b.json", _run(None, training_seed=1))])
    assert not legacy.rows[0].label.endswith("]")


# ---------------------------------------------------------------------- the command
def test_cli_takes_conditions_and_splits(tmp_path: Path, capsys):
    from r2s2r_envs.cli import main

    out = tmp_path / "mix.json"
    argv = ["evaluate", "--policy", "test_conditions:Still", "--env", LAB, "--num-objects", "1"]
    argv += ["--episode-steps", "20", "--no-progress"]
    assert main([*argv, "--conditions", "nominal=2,novel-objects=1", "--split", "dev", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "split dev" in text and "novel-objects:" in text and "all shifted:" in text
    result = EvaluationResult.from_json(out.read_text())
    assert [(c.condition, c.episodes) for c in result.conditions] == [("nominal", 2), ("novel-objects", 1)]
    assert result.split == "dev" and result.provenance["lab"]["name"] == "default"
    assert main([*argv, "--split", "validation"]) == 2
    assert "unknown split 'validation'; valid: ['dev', 'test', 'legacy']" in capsys.readouterr().err
    assert main([*argv, "--conditions", "nominal,windy"]) == 2
    assert "unknown condition 'windy'; valid" in capsys.readouterr().err


def test_sim_vs_lab_ranking_per_condition():
    def run(env_id: str, method: str) -> EvaluationResult:
        result = evaluate(
            env_id, Still(), conditions=["nominal", "fast-belt"], split="dev", episodes=1, env_kwargs=FAST,
            progress=False,
        )  # fmt: skip
        return dataclasses.replace(result, method={**result.method, "method": method, "training_seed": 0})

    results = [(f"{m}_{e}.json", run(e, m)) for m in ("a", "b") for e in (SIM, LAB)]
    board = group_results(results)
    pairs = {(a.sim_env.rpartition(" [")[2], len(a.rows)) for a in board.ranking}
    assert pairs == {(f"{SIM} (1 object, 20 steps)", 2), ("nominal]", 2), ("fast-belt]", 2), ("all shifted]", 2)}
    (fast,) = [a for a in board.ranking if a.sim_env.endswith("[fast-belt]")]
    assert fast.lab_env.endswith("[fast-belt]")
    assert fast.sim == tuple(
        r.cells[f"{SIM} (1 object, 20 steps)"].conditions["fast-belt"]["mean"]
        for r in board.rows
        if r.label in fast.rows
    )


@pytest.mark.parametrize("condition", ["fast-belt", "novel-objects"])
def test_every_id_takes_every_condition(env_id, condition):
    env = gym.make(env_id, condition=condition, **FAST)
    env.reset(seed=0)
    env.step(np.zeros(env.action_space.shape))
    assert env.unwrapped.provenance()["condition"] == condition
    assert env.unwrapped.condition is get_condition(condition)


def test_pages_show_each_condition_and_all_shifted(tmp_path: Path):
    from r2s2r_envs.evaluation.leaderboard_pages import to_html, to_markdown

    board = group_results([("a.json", _run("dev", ["nominal", "novel-objects"]))])
    text = to_markdown(board, "t")
    header = next(line for line in text.splitlines() if "novel-objects %" in line)
    assert f"{SIM} (1 object, 20 steps) all shifted %" in header and "nominal %" in header
    (cell,) = board.rows[0].cells.values()
    low, high = cell.conditions["novel-objects"]["ci95"]
    assert f"[{100 * low:.1f}, {100 * high:.1f}]" in text and "still [dev]" in text
    assert 'id="condition-table"' in to_html(board, "t")
    legacy = group_results([("a.json", _run(None))])
    assert "nominal %" not in to_markdown(legacy, "t")  # one condition: the rows table says it all
