"""The diagnostic conditions and the ablation's interventions (r2s2r_envs.envs.conditions, r2s2r_envs.ablation.
interventions, docs/ablation.md#interventions): each condition changes the world as stated (the lab's hidden one and
its loop effects included), tracks and leaderboards refuse them, ``r2s2r evaluate`` runs them; a design without
interventions keeps its tasks and keys, one with them adds exactly one lab evaluation per table policy and
condition on the trained policy, a run directory reuses its finished tasks; the report's section from hand-made
results; and a small design with ``nominal-timing`` runs end to end (its tasks executed in process)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from conftest import hand_made_result

import r2s2r_envs  # noqa: F401  (registers the ids)
from r2s2r_envs.ablation import analysis
from r2s2r_envs.ablation.design import (
    INTERVENTIONS,
    LAB_ENV_ID,
    REAL_ONLY,
    AblationDesign,
    DesignError,
    check_design,
    control_arms_design,
    full_design,
    quick_design,
    smoke_design,
)
from r2s2r_envs.ablation.interventions_report import SIM_ONLY
from r2s2r_envs.ablation.store import Store
from r2s2r_envs.envs.conditions import (
    CONDITIONS,
    CONDITIONS_VERSION,
    DIAGNOSTIC_CONDITIONS,
    STANDARD_MIX,
    LoopEffects,
    NoLatency,
    condition_record,
    get_condition,
)
from r2s2r_envs.evaluation import EvaluationResult, evaluate
from r2s2r_envs.evaluation.leaderboard import LeaderboardError, group_results
from r2s2r_envs.evaluation.splits import ConditionRun
from r2s2r_envs.evaluation.tracks import TRACKS, Track, check_track, evaluation_arguments
from r2s2r_envs.lab.config import load_lab
from r2s2r_envs.world.params import WorldParams, nominal

SIM, LAB = "PickSort-Ungrounded-v0", "PickSort-Real-v0"
FAST = {"num_objects": 1, "episode_steps": 20}
TIMING = ("control_latency", "perception_delay")
BELT = ("belt_speed", "belt_speed_fluctuation", "belt_fluctuation_time")


class Still:
    """Holds still (the arm stays, the hand stays open)."""

    name = "still"

    def reset(self, seed: int | None) -> None:
        pass

    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        return np.zeros(22)


# ---------------------------------------------------------------------- the conditions
def test_the_diagnostic_conditions_are_registered_outside_the_mix():
    assert DIAGNOSTIC_CONDITIONS == INTERVENTIONS == ("no-latency", "nominal-belt", "nominal-timing")
    for name in DIAGNOSTIC_CONDITIONS:
        c = get_condition(name)
        assert c.diagnostic and not c.shifted and not c.standard and c.episodes == 50 and c.__doc__
        json.dumps(condition_record(name))
    assert not any(c.diagnostic for n, c in CONDITIONS.items() if n not in DIAGNOSTIC_CONDITIONS)
    assert STANDARD_MIX == {"nominal": 50, "fast-belt": 25, "novel-objects": 25} and CONDITIONS_VERSION == 1
    assert condition_record("nominal-belt")["definition"] == {
        "belt_speed": nominal().belt_speed,
        "belt_speed_fluctuation": 0.0,
        "belt_fluctuation_time": nominal().belt_fluctuation_time,
    }


def test_each_condition_changes_a_world_as_stated():
    world = WorldParams.from_dict(
        {"belt_speed": 0.1, "belt_speed_fluctuation": 0.06, "belt_fluctuation_time": 1.5, "control_latency": 0.04,
         "perception_delay": 0.08, "object_mass": [0.2, 0.3, 0.4]}
    )  # fmt: skip
    spec = nominal()
    changed = {
        "no-latency": {"control_latency": 0.0, "perception_delay": 0.0},
        "nominal-belt": {k: getattr(spec, k) for k in BELT},
        "nominal-timing": {"control_latency": 0.0, "perception_delay": 0.0, **{k: getattr(spec, k) for k in BELT}},
    }
    for name, fields in changed.items():
        assert get_condition(name).apply_world(world) == dataclasses.replace(world, **fields)  # nothing else
    effects = LoopEffects(late_command_probability=0.05, delay_jitter=0.015)
    assert get_condition("no-latency").apply_effects(effects) == get_condition("nominal-timing").apply_effects(
        effects
    ) == LoopEffects()  # fmt: skip
    for name in ("nominal", "fast-belt", "nominal-belt"):
        assert get_condition(name).apply_effects(effects) is effects  # the lab's loop as it is


def test_a_simulator_gets_the_same_change():
    env = gym.make(SIM, condition="nominal-timing", **FAST).unwrapped
    env.set_world({"belt_speed": 0.1, "control_latency": 0.04, "perception_delay": 0.05})
    w = env.world_params
    assert (w.belt_speed, w.control_latency, w.perception_delay) == (nominal().belt_speed, 0.0, 0.0)
    assert env.provenance()["condition"] == "nominal-timing"


def _rollout(**kwargs) -> list[dict[str, np.ndarray]]:
    env = gym.make(LAB, **FAST, **kwargs)
    obs, _ = env.reset(seed=4)
    rng = np.random.default_rng(0)
    out = [obs]
    for _ in range(15):
        out.append(env.step(rng.uniform(-1, 1, 22))[0])
    env.close()
    return out


def _same(a: list[dict[str, np.ndarray]], b: list[dict[str, np.ndarray]]) -> bool:
    return all(np.array_equal(x[k], y[k]) for x, y in zip(a, b, strict=True) for k in x)


def test_the_lab_under_a_condition_is_the_lab_with_those_values():
    # Seen from outside: the lab under a diagnostic condition steps exactly as a lab config with the stated values
    # (lab v3: latency, a perception delay with jitter and late commands; the default lab: latency, a wandering
    # belt), and differs from the lab as it is. Lab tests may read its config; nothing else may.
    for name in ("v3", "default"):
        d = load_lab(name).to_dict()
        world = {**d["world"], "control_latency": 0.0, "perception_delay": 0.0}
        no_delays = {**d, "world": world, "effects": {**d["effects"], "late_command_probability": 0.0}}
        if "perception" in d:
            no_delays["perception"] = {**d["perception"], "delay_jitter": 0.0}
        belt = {k: getattr(nominal(), k) for k in BELT}
        as_is = _rollout(lab=name)
        for condition, config in (
            ("no-latency", no_delays),
            ("nominal-belt", {**d, "world": {**d["world"], **belt}}),
            ("nominal-timing", {**no_delays, "world": {**world, **belt}}),
        ):
            under = _rollout(lab=name, condition=condition)
            assert _same(under, _rollout(lab=config)), (name, condition)
            assert not _same(under, as_is), (name, condition)
    # Without its late commands and jitter off, the world's delays alone removed is another lab (v3 has both).
    v3 = load_lab("v3").to_dict()
    world_only = {**v3, "world": {**v3["world"], "control_latency": 0.0, "perception_delay": 0.0}}
    assert not _same(_rollout(lab="v3", condition="no-latency"), _rollout(lab=world_only))
    lab = gym.make(LAB, condition="no-latency").unwrapped
    assert lab.provenance()["condition"] == "no-latency" and "world_params" not in lab.provenance()
    assert NoLatency().late_command_probability == 0.0


# ---------------------------------------------------------------------- never a benchmark score
def test_tracks_and_leaderboards_refuse_diagnostic_conditions():
    state = TRACKS["state"]
    with pytest.raises(ValueError, match=r"condition\(s\) \['no-latency'\] are diagnostic .* not a benchmark score"):
        evaluation_arguments(state, conditions={"nominal": 50, "no-latency": 50})
    with pytest.raises(ValueError, match=r"track 'x': condition\(s\) \['nominal-timing'\] are diagnostic"):
        dataclasses.replace(state, name="x", conditions={"nominal": 50, "nominal-timing": 50})
    check = check_track(
        state, method={}, training_samples=1, split="test", conditions=[("nominal-belt", 50)],
        conditions_version=CONDITIONS_VERSION, panel=None,
    )  # fmt: skip
    assert not check.on_track and any("diagnostic condition(s) ['nominal-belt']" in r for r in check.reasons)
    assert isinstance(state, Track)
    result = evaluate(SIM, Still(), conditions={"no-latency": 1}, split="dev", env_kwargs=FAST, progress=False)
    assert result.shifted_summary is None and [c.condition for c in result.conditions] == ["no-latency"]
    with pytest.raises(LeaderboardError, match=r"a\.json cannot be ranked: condition\(s\) \['no-latency'\]"):
        group_results([("a.json", result)])


def test_cli_evaluate_runs_a_diagnostic_condition_and_a_track_refuses_it(tmp_path: Path, capsys):
    from r2s2r_envs.cli import main

    out = tmp_path / "nl.json"
    argv = ["evaluate", "--policy", "test_interventions:Still", "--env", LAB, "--num-objects", "1"]
    argv += ["--episode-steps", "20", "--no-progress", "--split", "dev"]
    assert main([*argv, "--conditions", "no-latency=2", "--out", str(out)]) == 0
    assert "no-latency:" in capsys.readouterr().out
    result = EvaluationResult.from_json(out.read_text())
    assert [(c.condition, c.episodes, c.shifted) for c in result.conditions] == [("no-latency", 2, False)]
    assert main([*argv[:-2], "--track", "state", "--conditions", "no-latency", "--out", str(tmp_path / "t.json")]) == 2
    assert "are diagnostic" in capsys.readouterr().err


# ---------------------------------------------------------------------- the design
@pytest.mark.parametrize("preset", [smoke_design, quick_design, full_design, control_arms_design])
def test_interventions_add_one_lab_evaluation_per_policy_and_change_no_key(preset):
    design = preset()
    before = design.tasks()
    assert "interventions" not in design.to_dict()
    assert [t.key for t in dataclasses.replace(design, interventions=()).tasks()] == [t.key for t in before]
    chosen = ("nominal-timing", "no-latency")
    extended = dataclasses.replace(design, interventions=chosen)
    check_design(extended)
    assert AblationDesign.from_dict(extended.to_dict()) == extended
    tasks = extended.tasks()
    assert [t.key for t in tasks[: len(before)]] == [t.key for t in before]  # every task keeps its key, in order
    added = tasks[len(before) :]
    policies = extended.intervention_policies()
    assert len(added) == len(chosen) * len(policies) and {t.kind for t in added} == {"eval"}
    assert [t.config["condition"] for t in added] == [c for c in chosen for _ in policies]
    nominal_lab = {
        json.dumps(t.config["policy"], sort_keys=True): t
        for t in before
        if t.kind == "eval" and t.config["env_id"] == LAB_ENV_ID
    }
    for task in added:
        twin = nominal_lab[json.dumps(task.config["policy"], sort_keys=True)]  # the policy's nominal lab evaluation
        assert task.deps == twin.deps  # the same trained policy, nothing else
        assert task.config == {**twin.config, "condition": task.config["condition"]}
    cells = {(p.method, p.variant, p.real_fraction) for p in policies}
    rf = {v: design.rule_fraction(v) for v in design.variants}
    expected = {(m, v, rf[v]) for m in design.methods for v in design.variants} | {("flow", None, 1.0)}
    if 0.0 in design.sweep_values():
        expected.add(("flow", design.sweep_variant, 0.0))  # the sim-only policies
    assert cells == expected
    assert {p.seed for p in policies} == set(design.seeds) | set(design.sweep_seed_list())


def test_an_intervention_runs_the_nominal_episodes_under_its_condition():
    from r2s2r_envs.ablation.tasks import _episodes_of

    split = dataclasses.replace(quick_design(), eval_split="test", lab_episodes=100, sim_episodes=100)
    (task,) = [t for t in dataclasses.replace(split, interventions=("no-latency",)).tasks()[-1:]]
    assert task.config["split"] == "test" and task.config["episodes"] == 50  # the nominal share of 100
    assert _episodes_of(task.config) == {"split": "test", "conditions": {"no-latency": 50}}
    # Without a split: the legacy seeds, so the nominal evaluation's very episodes.
    assert _episodes_of({"episodes": 20, "condition": "nominal-belt"}) == {
        "split": "legacy",
        "conditions": {"nominal-belt": 20},
    }


@pytest.mark.parametrize(
    ("interventions", "message"),
    [
        (
            ("fast-belt",),
            "unknown intervention(s) ['fast-belt']; valid: ['no-latency', 'nominal-belt', 'nominal-timing']",
        ),
        (("no-latency", "no-latency"), "name an intervention twice"),
        ("no-latency", "must be a sequence of names"),
    ],
)
def test_bad_interventions_are_refused_naming_the_valid_ones(interventions, message):
    with pytest.raises(DesignError) as info:
        check_design(dataclasses.replace(smoke_design(), interventions=interventions))
    assert message in str(info.value)


def test_cli_interventions(tmp_path: Path, capsys):
    import argparse

    from r2s2r_envs.ablation.cli import add_subcommands, design_from_args
    from r2s2r_envs.cli import main

    parser = argparse.ArgumentParser()
    add_subcommands(parser.add_subparsers())
    args = parser.parse_args(["ablation", "--quick", "--interventions", "all", "--out", "x"])
    assert design_from_args(args).interventions == INTERVENTIONS
    args = parser.parse_args(["ablation", "--quick", "--interventions", "nominal-timing", "--out", "x"])
    assert design_from_args(args) == dataclasses.replace(quick_design(), interventions=("nominal-timing",))
    out = tmp_path / "o"
    assert main(["ablation", "--smoke", "--interventions", "timing", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "unknown intervention(s) ['timing']" in err and all(name in err for name in INTERVENTIONS)
    assert not out.exists()  # refused before any work
    code = main(["ablation", "--smoke", "--interventions", "no-latency", "--export-record", "y", "--out", str(out)])
    assert code == 2 and "--export-record runs nothing: drop --interventions" in capsys.readouterr().err


def test_a_run_directory_adds_interventions_reusing_every_finished_task(tmp_path: Path):
    from r2s2r_envs._version import __version__
    from r2s2r_envs.ablation.runner import preflight

    design = smoke_design()
    store = Store(tmp_path)
    store.write_manifest(design.to_dict(), __version__)
    old = design.tasks()
    for task in old:  # a finished run of the design without interventions
        store.start(task.kind, task.key)
        store.finish(task.kind, task.key, {"kind": task.kind})
    tasks = preflight(dataclasses.replace(design, interventions=("nominal-timing",)), tmp_path)  # not refused
    done = [store.is_done(t.kind, t.key) for t in tasks]
    assert done == [True] * len(old) + [False] * (len(tasks) - len(old))  # only the interventions are left to run


# ---------------------------------------------------------------------- the report
# Success (every object sorted: 3 of 3) per seed and episode, under nominal and under nominal-timing.
NOMINAL = {
    "Ungrounded": [[0, 0, 0, 0], [0, 0, 0, 0]],
    "WorldGrounded": [[3, 0, 3, 0], [3, 3, 0, 0]],
    "BehaviorGrounded": [[0, 0, 0, 0], [0, 0, 0, 0]],
    "FullyGrounded": [[3, 3, 3, 0], [3, 3, 0, 3]],
    None: [[0, 0, 0, 3], [0, 0, 0, 0]],
}
TIMED = {
    **NOMINAL,
    "Ungrounded": [[3, 3, 0, 0], [3, 0, 3, 0]],
    "BehaviorGrounded": [[3, 3, 3, 3], [3, 3, 3, 3]],
    "FullyGrounded": [[3, 3, 3, 3], [3, 3, 3, 3]],
}
# Cells U, W, B, F: nominal 0, 0.5, 0, 0.75; nominal-timing 0.5, 0.5, 1, 1. Effects nominal / timed / difference:
EXPECTED = {
    "behavior, nominal world (B - U)": (0.0, 0.5, 0.5),
    "world, nominal behavior (W - U)": (0.5, 0.0, -0.5),
    "both axes (F - U)": (0.75, 0.5, -0.25),
    "behavior, grounded world (F - W)": (0.25, 0.5, 0.25),
    "world, grounded behavior (F - B)": (0.75, 0.0, -0.75),
}


def _under(condition: str, text: str) -> str:
    """A hand-made result's text with its episodes run under ``condition`` (the legacy seeds)."""
    result = EvaluationResult.from_json(text)
    run = ConditionRun(condition, result.base_seed, len(result.records), False)
    return dataclasses.replace(result, conditions=(run,)).to_json()


def test_the_report_sets_each_effect_under_nominal_beside_the_interventions(tmp_path: Path):
    design = dataclasses.replace(
        smoke_design(), methods=("flow",), mixture_methods=("flow",), sweep_variant=None,
        interventions=("nominal-timing", "no-latency"),
    )  # fmt: skip
    tasks = design.tasks()
    store = Store(tmp_path)
    for task in tasks:
        if task.kind != "eval" or task.config["env_id"] != LAB_ENV_ID:
            continue
        p = task.config["policy"]
        condition = task.config.get("condition")
        counts = (TIMED if condition == "nominal-timing" else NOMINAL)[p["variant"]][p["seed"]]
        method = {
            "method": p["method"], "policy_class": "tests.HandMade", "real_fraction": p["real_fraction"],
            "variant": p["variant"], "datasets": [{"sha256": "0" * 64}], "training_seed": p["seed"],
            "n_real_demos": 2, "n_sim_demos": 2,
        }  # fmt: skip
        text = hand_made_result(LAB_ENV_ID, counts, method)
        out = store.start("eval", task.key)
        (out / "result.json").write_text(text if condition is None else _under(condition, text))
        store.finish("eval", task.key, {"kind": "eval"})
    report = analysis.analyze(design, tasks, store)
    found = report["interventions"]
    assert found["conditions"] == ["nominal-timing", "no-latency"] and found["paired_episodes"]
    rows = {row["cell"]: row for row in found["cells"]}
    assert list(rows) == [REAL_ONLY, *design.variants]  # no sweep: no sim-only row
    behavior = rows["BehaviorGrounded"]
    assert behavior["nominal"]["mean"] == 0.0 and behavior["nominal-timing"]["mean"] == 1.0
    change = behavior["nominal-timing - nominal"]
    assert change["estimate"] == 1.0 and change["ci95"] == [1.0, 1.0]  # every episode sorted once the timing is
    assert rows["WorldGrounded"]["no-latency - nominal"]["estimate"] == 0.0
    for name, (under_nominal, timed, difference) in EXPECTED.items():
        columns = found["effects"][name]
        assert list(columns) == ["nominal", "nominal-timing", "no-latency", "nominal-timing - nominal",
                                 "no-latency - nominal"]  # fmt: skip
        assert columns["nominal"]["flow"]["estimate"] == pytest.approx(under_nominal)
        assert columns["nominal-timing"]["flow"]["estimate"] == pytest.approx(timed)
        assert columns["nominal-timing - nominal"]["flow"]["estimate"] == pytest.approx(difference)
        assert columns["no-latency - nominal"]["flow"]["estimate"] == pytest.approx(0.0)
        low, high = columns["nominal-timing - nominal"]["flow"]["ci95"]
        assert low <= difference <= high
        if name in report["effects"]["success"]:  # the same contrast as the report's own effect
            assert columns["nominal"]["flow"] == report["effects"]["success"][name]["flow"]
    text = analysis.to_markdown(design, report)
    assert "## Interventions: the lab with part of its gap taken away" in text
    assert "| flow | BehaviorGrounded | 0.0 [" in text and "| +100.0 [+100.0, +100.0] (excludes 0) |" in text
    assert "| both axes (F - U) | nominal-timing - nominal | -25.0 [" in text
    assert "interventions" not in analysis.analyze(dataclasses.replace(design, interventions=()), tasks, store)


# ---------------------------------------------------------------------- end to end
@pytest.mark.slow
def test_a_small_design_with_nominal_timing_runs_end_to_end(tmp_path: Path):
    """The smoke design cut to one method (with its sim-only policies), with ``nominal-timing``: every task executed
    in process in graph order, then the outputs as a run writes them."""
    from r2s2r_envs.ablation.runner import write_outputs
    from r2s2r_envs.ablation.tasks import execute_task

    design = dataclasses.replace(
        smoke_design(), methods=("flow",), sweep_fractions=(0.0,), mixture_methods=(),
        interventions=("nominal-timing",),
    )  # fmt: skip
    check_design(design)
    tasks = design.tasks()
    store = Store(tmp_path)
    for task in tasks:
        execute_task(task.to_dict(), str(tmp_path))
    assert all(store.is_done(t.kind, t.key) for t in tasks)
    write_outputs(design, tasks, store, log=lambda s: None)
    timed = sorted((tmp_path / "interventions" / "nominal-timing").rglob("*.json"))
    assert len(timed) == len(design.intervention_policies()) == 2 * 6  # real-only, 4 variants, sim-only; 2 seeds
    for path in timed:
        result = EvaluationResult.from_json(path.read_text())
        assert [(c.condition, c.episodes) for c in result.conditions] == [("nominal-timing", design.lab_episodes)]
        assert result.split == "legacy" and result.provenance["domain"] == "real"
    assert not any("nominal-timing" in p.read_text() for p in (tmp_path / "results").rglob("*.json"))
    assert (tmp_path / "leaderboard" / "leaderboard.md").is_file()  # the nominal results alone, ranked
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    cells = {(r["method"], r["cell"]) for r in report["interventions"]["cells"]}
    assert cells == {("flow", c) for c in (REAL_ONLY, SIM_ONLY, *design.variants)}
    assert all(r["nominal-timing"]["episodes"] == design.lab_episodes for r in report["interventions"]["cells"])
    assert "## Interventions" in (tmp_path / "report" / "report.md").read_text()
