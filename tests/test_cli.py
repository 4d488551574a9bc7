"""The ``r2s2r`` command and the statistics it reports."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import gymnasium as gym
import pytest
from conftest import ENV_IDS, REPO_ROOT, lab_file

from r2s2r_envs import cli
from r2s2r_envs.evaluation.protocol import EVALUATION_BASE_SEED, EvaluationResult, evaluation_seeds
from r2s2r_envs.evaluation.stats import summarize_episodes, wilson_interval


# ---------------------------------------------------------------------- Wilson interval
@pytest.mark.parametrize(
    "k, n, expected",
    [
        # Reference values: Wilson score interval, z = 1.959964 (e.g. statsmodels proportion_confint(method="wilson")).
        (0, 10, (0.0, 0.2775328)),
        (5, 10, (0.2365931, 0.7634069)),
        (10, 10, (0.7224672, 1.0)),
        (90, 100, (0.8256343, 0.9447708)),
    ],
)
def test_wilson_interval_reference_values(k, n, expected):
    low, high = wilson_interval(k, n)
    assert low == pytest.approx(expected[0], abs=1e-6)
    assert high == pytest.approx(expected[1], abs=1e-6)


def test_wilson_interval_properties():
    assert wilson_interval(0, 0) == (0.0, 1.0)
    low99, high99 = wilson_interval(7, 20, confidence=0.99)
    low95, high95 = wilson_interval(7, 20)
    assert low99 < low95 < 7 / 20 < high95 < high99
    for bad in [(-1, 5), (6, 5), (1, -1)]:
        with pytest.raises(ValueError):
            wilson_interval(*bad)
    with pytest.raises(ValueError, match="confidence"):
        wilson_interval(1, 2, confidence=1.0)


def test_summarize_episodes():
    episodes = [
        {"is_success": True, "sort_accuracy": 1.0, "failure_cause": None, "time_to_sort": 10.0},
        {"is_success": True, "sort_accuracy": 1.0, "failure_cause": None, "time_to_sort": 12.0},
        {"is_success": False, "sort_accuracy": 1 / 3, "failure_cause": "dropped", "time_to_sort": None},
        {"is_success": False, "sort_accuracy": 0.0, "failure_cause": "missed", "time_to_sort": None},
    ]
    s = summarize_episodes(episodes, failure_causes=("missed", "dropped", "timeout"))
    assert s["episodes"] == 4
    assert s["success_rate"] == 0.5
    assert s["success_rate_ci95"] == pytest.approx(list(wilson_interval(2, 4)))
    assert s["sort_accuracy"] == pytest.approx((2 + 1 / 3) / 4)
    assert s["mean_time_to_sort"] == pytest.approx(11.0)
    assert s["failure_causes"] == {"missed": 1, "dropped": 1, "timeout": 0}
    assert "success_rate_any_step" not in s  # not reported unless every episode says
    for e, any_step in zip(episodes, [True, True, True, False]):
        e["success_any_step"] = any_step
    s = summarize_episodes(episodes)
    assert s["success_rate_any_step"] == 0.75
    assert s["success_rate_any_step_ci95"] == pytest.approx(list(wilson_interval(3, 4)))


# ---------------------------------------------------------------------- commands
FAST = ["--num-objects", "1", "--episode-steps", "40", "--no-progress"]


def test_envs_lists_registered_ids(capsys):
    assert cli.main(["envs"]) == 0
    out = capsys.readouterr().out
    for env_id in ENV_IDS:
        assert env_id in out
    assert "episode_steps=500" in out
    assert cli.main(["envs", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in rows] == cli.registered_env_ids()
    assert {r["id"] for r in rows} >= set(ENV_IDS)
    for r in rows:
        assert r["episode_steps"] == 500 and r["demonstrator"] == gym.spec(r["id"]).kwargs["demonstrator"]
        assert "max_episode_steps" not in r


def test_demo_unknown_env_is_a_clear_error(capsys):
    assert cli.main(["demo", "--env", "PickSort-Nope-v0", "--episodes", "1"]) == 2
    captured = capsys.readouterr()
    assert "PickSort-Nope-v0" in captured.err
    for env_id in ENV_IDS:
        assert env_id in captured.err
    assert "Traceback" not in captured.err and captured.out == ""


def test_demo_non_picksort_id_is_rejected(capsys):
    assert cli.main(["demo", "--env", "CartPole-v1", "--episodes", "1"]) == 2
    assert "registered PickSort ids" in capsys.readouterr().err


def test_demo_bad_env_argument_is_a_clear_error(capsys):
    assert cli.main(["demo", "--env", ENV_IDS[0], "--episodes", "1", "--num-objects", "99"]) == 2
    assert "num_objects" in capsys.readouterr().err


def _subcommands() -> dict:
    sub = next(a for a in cli.build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    return dict(sub.choices)


def test_an_env_id_option_reads_the_same_in_every_command():
    """``--env ID`` wherever a command takes an env id (issue 50: ``dagger`` showed ``ENV``, ``tune-planner`` none)."""
    metavars = {
        name: action.metavar
        for name, parser in _subcommands().items()
        for action in parser._actions
        if "--env" in action.option_strings
    }
    assert {"demo", "evaluate", "dagger", "tune-planner"} <= set(metavars)
    assert set(metavars.values()) == {"ID"}, metavars


def test_the_guide_names_the_commands_that_take_lab_and_grounding():
    """docs/guide.md lists the commands taking both --lab and --grounding; each of them does, no other does."""
    both = sorted(
        name
        for name, parser in _subcommands().items()
        if {"--lab", "--grounding"} <= {o for a in parser._actions for o in a.option_strings}
    )
    make = _subcommands()["datasets"]._actions[-1].choices["make"]  # datasets make: a sub-subcommand
    assert {"--lab", "--grounding"} <= {o for a in make._actions for o in a.option_strings}
    guide = (REPO_ROOT / "docs" / "guide.md").read_text()
    assert "`demo`, `generate`, `evaluate`, `datasets make` take `--lab`,\n`--grounding`" in guide
    assert both == ["demo", "evaluate", "generate"]


def test_bad_arguments_exit_2(capsys):
    for bad in (["--episodes", "0"], ["--episode-steps", "0"], ["--seed", "-1"], ["--workers", "0"]):
        with pytest.raises(SystemExit) as err:
            cli.main(["demo", "--env", ENV_IDS[0], *bad])
        assert err.value.code == 2
    assert cli.main([]) == 2  # no subcommand: help on stderr


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_demo_json(capsys, env_id):
    assert cli.main(["demo", "--env", env_id, "--episodes", "2", "--seed", "7", *FAST, "--json"]) == 0
    out = capsys.readouterr().out
    result = EvaluationResult.from_json(out)  # exactly one JSON object on stdout, a valid result
    assert result.env_id == env_id
    assert result.base_seed == 7
    assert [(r.env_seed, r.policy_seed) for r in result.records] == evaluation_seeds(2, base_seed=7)
    assert result.env_kwargs == {"num_objects": 1, "episode_steps": 40}
    assert result.provenance["num_objects"] == 1
    assert result.policy["name"] == gym.spec(env_id).kwargs["demonstrator"]  # the env's own demonstrator
    assert all(r.steps <= 40 for r in result.records)
    s = json.loads(out)["summary"]
    assert s["episodes"] == 2
    low, high = s["success_rate_ci95"]
    assert 0.0 <= low <= s["success_rate"] <= high <= 1.0
    assert set(s["failure_causes"]) == {"missed", "dropped", "wrong_bin", "fell_off_belt", "timeout", "unstable"}
    assert sum(s["failure_causes"].values()) == sum(not r.is_success for r in result.records)
    if s["mean_time_to_sort"] is not None:
        assert math.isfinite(s["mean_time_to_sort"])


def test_demo_default_seed_is_the_protocols(capsys):
    assert cli.main(["demo", "--env", ENV_IDS[0], "--episodes", "1", *FAST, "--json"]) == 0
    result = EvaluationResult.from_json(capsys.readouterr().out)
    assert result.base_seed == EVALUATION_BASE_SEED
    assert (result.records[0].env_seed, result.records[0].policy_seed) == evaluation_seeds(1)[0]


def test_demo_is_reproducible(capsys):
    runs = []
    for _ in range(2):
        assert cli.main(["demo", "--env", ENV_IDS[0], "--episodes", "2", "--seed", "3", *FAST, "--json"]) == 0
        runs.append(EvaluationResult.from_json(capsys.readouterr().out))
    assert runs[0].records == runs[1].records


def test_demo_lab_from_a_json_file(capsys, tmp_path):
    path = lab_file(tmp_path, "cli_lab")
    assert cli.main(["demo", "--env", "PickSort-Real-v0", "--lab", path, "--episodes", "1", *FAST, "--json"]) == 0
    result = EvaluationResult.from_json(capsys.readouterr().out)
    lab = result.provenance["lab"]
    assert (lab["name"] if isinstance(lab, dict) else lab) == "cli_lab"
    assert result.env_kwargs["lab"] == path
    assert "world_params" not in result.provenance
    assert cli.main(["demo", "--env", "PickSort-Real-v0", "--lab", path, "--episodes", "1", *FAST]) == 0
    assert "lab: cli_lab" in capsys.readouterr().out


def test_demo_lab_on_a_sim_env_is_an_error(capsys):
    assert cli.main(["demo", "--env", "PickSort-Ungrounded-v0", "--lab", "default", "--episodes", "1"]) == 2
    captured = capsys.readouterr()
    assert "--lab" in captured.err and "PickSort-Real-v0" in captured.err
    assert captured.out == "" and "Traceback" not in captured.err


def test_demo_unknown_lab_lists_the_shipped_ones(capsys):
    assert cli.main(["demo", "--env", "PickSort-Real-v0", "--lab", "no-such-lab", "--episodes", "1"]) == 2
    err = capsys.readouterr().err
    assert "no-such-lab" in err and "default" in err


def test_demo_text_output(capsys):
    assert cli.main(["demo", "--env", ENV_IDS[0], "--episodes", "1", *FAST]) == 0
    out = capsys.readouterr().out
    for label in (
        "success rate",
        "Wilson",
        "at any step",
        "sort accuracy",
        "time to sort",
        "failure causes",
        f"base seed {EVALUATION_BASE_SEED}",
    ):
        assert label in out


def test_demo_progress_bar_goes_to_stderr(capsys):
    assert (
        cli.main(
            ["demo", "--env", ENV_IDS[0], "--episodes", "1", "--num-objects", "1", "--episode-steps", "40", "--json"]
        )
        == 0
    )
    captured = capsys.readouterr()
    json.loads(captured.out)
    assert "1/1" in captured.err


@pytest.mark.slow
def test_demo_video(tmp_path, capsys):
    import imageio.v2 as imageio  # a dependency: never skipped

    path = tmp_path / "demo.mp4"
    assert (
        cli.main(
            [
                "demo",
                "--env",
                ENV_IDS[0],
                "--episodes",
                "2",
                "--num-objects",
                "1",
                "--video",
                str(path),
                "--json",
                "--no-progress",
            ]
        )
        == 0
    )
    result = EvaluationResult.from_json(capsys.readouterr().out)
    assert result.video == str(path)
    assert path.is_file() and path.stat().st_size > 10_000
    reader = imageio.get_reader(str(path))
    try:
        n_frames = sum(1 for _ in reader)
    finally:
        reader.close()
    assert n_frames == result.records[0].steps + 1  # the first episode only, reset frame included
    # Filming does not change the episode.
    assert (
        cli.main(["demo", "--env", ENV_IDS[0], "--episodes", "2", "--num-objects", "1", "--json", "--no-progress"]) == 0
    )
    assert EvaluationResult.from_json(capsys.readouterr().out).records == result.records


def test_module_entry_point_no_traceback():
    # `python -m r2s2r_envs.cli` behaves like the installed `r2s2r` script.
    result = subprocess.run(
        [sys.executable, "-m", "r2s2r_envs.cli", "demo", "--env", "Nope-v0", "--episodes", "1"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=120,
    )
    assert result.returncode == 2
    assert "registered PickSort ids" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "argv, message",
    [
        (["demo", "--env", "PickSort-Ungrounded-v0", "--episodes", "1", "--video", "{tmp}"], "--video {tmp}: the file"),
        (["demo", "--env", "PickSort-Ungrounded-v0", "--episodes", "1", "--video", "{tmp}/a.gif"], "must end in .mp4"),
        (["sysid", "--logs", "{tmp}", "--out", "{tmp}"], "--out {tmp}: the file must end in .json"),
        (["sysid", "--logs", "{tmp}", "--out", "{tmp}/f/g.json"], "{tmp}/f is a file, so nothing can be written"),
        (["sysid", "--logs", "{tmp}", "--out", "{tmp}/g.json", "--report", "{tmp}/f"], "--report {tmp}/f is a file"),
    ],
)
def test_outputs_are_checked_before_the_run(tmp_path, capsys, argv, message):
    (tmp_path / "f").write_text("")
    assert cli.main([a.format(tmp=tmp_path) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message.format(tmp=tmp_path) in err and len(err.splitlines()) == 1


@pytest.mark.parametrize(
    "error, message",
    [
        (
            ValueError("tolerance must be > 0"),
            "r2s2r envs: error: ValueError: tolerance must be > 0 (set R2S2R_TRACEBACK",
        ),
        (KeyError("episodes"), "r2s2r envs: error: KeyError: episodes (set"),
        (FileNotFoundError(2, "No such file or directory", "x.json"), "error: FileNotFoundError: x.json: No such file"),
    ],
)
def test_an_unreported_error_is_one_line_not_a_traceback(monkeypatch, capsys, error, message):
    def fail(args):
        raise error

    monkeypatch.setattr(cli, "_cmd_envs", fail)
    monkeypatch.delenv(cli.TRACEBACK_ENV, raising=False)
    assert cli.main(["envs"]) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    monkeypatch.setenv(cli.TRACEBACK_ENV, "1")
    with pytest.raises(type(error)):
        cli.main(["envs"])


def test_dataset_subcommands_present():
    help_text = cli.build_parser().format_help()
    for command in ("generate", "replay", "datasets"):
        assert command in help_text


def test_demo_all_shows_every_variant_and_the_lab_side_by_side(capsys):
    args = ["demo", "--env", "all", "--episodes", "1", "--num-objects", "1", "--episode-steps", "150"]
    assert cli.main([*args, "--json", "--no-progress"]) == 0
    results = [EvaluationResult.from_dict(d) for d in json.loads(capsys.readouterr().out)]
    assert [r.env_id for r in results] == [i for i in cli.SHOWCASE_ORDER if i in ENV_IDS]
    assert {r.env_id for r in results} == set(ENV_IDS)
    demonstrators = {r.env_id: r.policy["name"] for r in results}
    assert demonstrators["PickSort-Real-v0"] == "teleoperator"
    assert demonstrators["PickSort-Ungrounded-v0"] == "scripted"
    assert all(r.summary["episodes"] == 1 for r in results)
    assert cli.main([*args, "--no-progress"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:2] == ["env", "demonstrator"]
    assert [line.split()[0] for line in table[2:]] == [r.env_id for r in results]


def test_demo_all_refuses_single_env_options(capsys):
    assert cli.main(["demo", "--env", "all", "--lab", "default", "--episodes", "1"]) == 2
    err = capsys.readouterr().err
    assert "--lab" in err and "--env all" in err


# ---------------------------------------------------------------------- --lab and --grounding: one helper
def test_env_source_kwargs_accepts_what_the_envs_take(tmp_path):
    from r2s2r_envs.env_cli import env_source_kwargs

    lab = lab_file(tmp_path, "helper_lab")
    for value in ("default", lab, "draw:3"):
        assert env_source_kwargs("PickSort-Real-v0", {"num_objects": 1}, lab=value) == {"num_objects": 1, "lab": value}
    assert env_source_kwargs("PickSort-WorldGrounded-v0", grounding="default") == {"grounding": "default"}
    assert env_source_kwargs("PickSort-Ungrounded-v0", {"num_objects": 2}) == {"num_objects": 2}


@pytest.mark.parametrize(
    "env_id, options, message",
    [
        ("PickSort-Ungrounded-v0", {"lab": "default"}, "--lab applies to the envs that take a lab ['PickSort-Real-"),
        ("PickSort-Real-v0", {"grounding": "default"}, "; PickSort-Real-v0 does not take one"),
        ("PickSort-Real-v0", {"lab": "no-such-lab"}, "--lab 'no-such-lab': no such lab; expected a shipped lab name"),
        ("PickSort-Real-v0", {"lab": "draw:x"}, "--lab 'draw:x': "),
        ("PickSort-WorldGrounded-v0", {"grounding": "nope.json"}, "no such grounding; expected a shipped grounding"),
    ],
)
def test_env_source_kwargs_names_what_was_wrong_and_what_is_accepted(env_id, options, message):
    from r2s2r_envs.argtypes import UsageError
    from r2s2r_envs.env_cli import env_source_kwargs

    with pytest.raises(UsageError) as err:
        env_source_kwargs(env_id, **options)
    assert message in str(err.value)


def test_env_source_kwargs_refuses_an_option_set_twice():
    from r2s2r_envs.argtypes import UsageError
    from r2s2r_envs.env_cli import env_source_kwargs

    with pytest.raises(UsageError, match="--lab and --env-kwargs both set 'lab': give it once"):
        env_source_kwargs("PickSort-Real-v0", {"lab": "default"}, lab="default")


@pytest.mark.parametrize(
    "argv",
    [
        ["demo", "--env", "PickSort-Real-v0", "--lab", "no-such-lab"],
        ["evaluate", "--policy", "r2s2r_envs.behavior:make_demonstrator", "--env", "PickSort-Real-v0", "--lab", "nope"],
        ["evaluate", "--policy", "x:y", "--env", "PickSort-Ungrounded-v0", "--grounding", "default"],
        ["generate", "PickSort-Real-v0", "--episodes", "1", "--out", "{tmp}/x.hdf5", "--lab", "no-such-lab"],
        ["generate", "PickSort-Ungrounded-v0", "--episodes", "1", "--out", "{tmp}/x.hdf5", "--lab", "default"],
        ["tune-planner", "--env", "PickSort-Ungrounded-v0", "--grounding", "default", "--episodes", "1"],
    ],
)
def test_every_command_reports_a_bad_lab_or_grounding_alike(argv, tmp_path, capsys):
    assert cli.main([a.format(tmp=tmp_path) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"r2s2r {argv[0]}: error: --") and err.count("\n") == 1
    assert "--lab" in err or "--grounding" in err
    assert not (tmp_path / "x.hdf5").exists()


def test_an_unreported_usage_error_exits_2(monkeypatch, capsys):
    from r2s2r_envs.argtypes import UsageError

    def fail(args):
        raise UsageError("--x 'y': no such thing; expected a z")

    monkeypatch.setattr(cli, "_cmd_envs", fail)
    assert cli.main(["envs"]) == 2
    assert capsys.readouterr().err == "r2s2r envs: error: --x 'y': no such thing; expected a z\n"


# ---------------------------------------------------------------------- options shared by the commands
def _options_of(parser):
    return {o: a for a in parser._actions for o in a.option_strings}


def test_workers_and_seed_mean_the_same_in_every_command():
    from r2s2r_envs.argtypes import non_negative_int, positive_int

    commands = dict(_subcommands())
    commands["datasets make"] = commands["datasets"]._actions[-1].choices["make"]
    workers = {n: _options_of(p)["--workers"] for n, p in commands.items() if "--workers" in _options_of(p)}
    seeds = {n: _options_of(p)["--seed"] for n, p in commands.items() if "--seed" in _options_of(p)}
    assert {"demo", "evaluate", "generate", "datasets make", "tune-planner", "sysid", "dagger"} <= set(workers)
    assert {"demo", "evaluate", "generate", "log-lab", "tune-planner", "fit-behavior", "dagger"} <= set(seeds)
    ray_cpus = workers.pop("ablation")  # the CPUs of a local Ray, default all: another option of the same name
    seeds.pop("train")  # train's options are TrainConfig's fields, checked by check_config
    assert ray_cpus.default is None
    assert all(a.type is positive_int and a.default == 1 and a.metavar == "W" for a in workers.values()), workers
    assert all(a.type is non_negative_int and a.metavar == "S" for a in seeds.values()), seeds


@pytest.mark.parametrize(
    "argv, message",
    [
        (["log-lab", "--out", "{tmp}/f"], "r2s2r log-lab: error: --out {tmp}/f exists and is not a directory"),
        (["tune-planner", "--out", "{tmp}"], "r2s2r tune-planner: error: --out {tmp} is a directory"),
        (["compare-behavior", "a.hdf5", "b.hdf5", "--traits", "nope"], "r2s2r compare-behavior: error: unknown trait"),
        (["fit-behavior", "--demos", "a.hdf5", "--out", "m.json", "--max-sources", "0"], "r2s2r fit-behavior: error: "),
    ],
)
def test_every_command_reports_usage_errors_in_one_shape(argv, message, tmp_path, capsys):
    (tmp_path / "f").write_text("")
    assert cli.main([a.format(tmp=tmp_path) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message.format(tmp=tmp_path)) and err.count("\n") == 1
