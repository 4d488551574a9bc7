"""Lab logs are checked completely before identification fits anything (docs/lab_logs.md#checks): every problem a
stage would meet is reported within seconds, naming the run, the signal or setting and the stage, and
``read_logs`` refuses manifests and run files it cannot trust."""

from __future__ import annotations

import dataclasses
import json
import time

import h5py
import numpy as np
import pytest

from r2s2r_envs.envs.pick_sort import PickSortEnv
from r2s2r_envs.grounding import excitation
from r2s2r_envs.grounding.fit_cli import run_sysid
from r2s2r_envs.grounding.identify import identify
from r2s2r_envs.grounding.log_checks import check_logs
from r2s2r_envs.grounding.logs import LogError, LogSet, file_sha256, read_logs


def test_smoke_runs_are_quick_runs_of_the_protocols():
    quick = {p.name: p.protocol for p in excitation.plan_runs(quick=True)}
    assert set(excitation.SMOKE_RUNS) <= set(quick)
    assert set(excitation.PROTOCOLS) - {quick[name] for name in excitation.SMOKE_RUNS} == {"finger_steps", "arm_chirp"}


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    plans = [p for p in excitation.plan_runs(quick=True) if p.name in excitation.SMOKE_RUNS]
    out = tmp_path_factory.mktemp("logs")
    excitation.log_env(lambda kw: PickSortEnv(**{**kw, "sensors": tuple(kw["sensors"])}), out, seed=1, plans=plans)
    return out


@pytest.fixture(scope="module")
def logs(logdir) -> LogSet:
    return read_logs(logdir)


def _with(logs: LogSet, name: str, **change) -> LogSet:
    runs = [dataclasses.replace(r, **change) if r.name == name else r for r in logs.runs]
    return dataclasses.replace(logs, runs=runs)


def _obs(logs: LogSet, name: str, key: str, fn) -> LogSet:
    run = next(r for r in logs.runs if r.name == name)
    value = np.array(run.obs[key], dtype=np.float32 if key != "object_category" else run.obs[key].dtype)
    return _with(logs, name, obs={**run.obs, key: fn(value)})


def _set(a: np.ndarray, index, value) -> np.ndarray:
    a[index] = value
    return a


def _settings(logs: LogSet, name: str, **change) -> LogSet:
    run = next(r for r in logs.runs if r.name == name)
    return _with(logs, name, settings={**run.settings, **change})


# Each: a corruption of the log set -> what the message must say (the run, the signal or setting, what is accepted).
PROBLEMS = {
    "one NaN joint angle": (
        lambda L: _obs(L, "arm_steps_j1", "arm_qpos", lambda a: _set(a, (40, 2), np.nan)),
        r"run 'arm_steps_j1': obs/arm_qpos holds 1 non-finite value.*row 40.*must be finite",
    ),
    "inf object position": (
        lambda L: _obs(L, "belt_ride_0", "object_pos", lambda a: _set(a, (3, 0), np.inf)),
        r"run 'belt_ride_0': obs/object_pos holds 1 non-finite",
    ),
    "NaN command": (
        lambda L: _with(L, "latency_0", actions=_set(L.runs[3].actions.copy(), (0, 0), np.nan)),
        r"run 'latency_0': actions holds 1 non-finite",
    ),
    "a joint angle of 1e30 rad": (
        lambda L: _obs(L, "arm_steps_j1", "arm_qpos", lambda a: _set(a, (40, 2), 1e30)),
        r"run 'arm_steps_j1': obs/arm_qpos holds 1 value\(s\) beyond \+-1000 rad, or degrees, first in row 40 "
        r"\(1e\+30\); a logged value must be physically possible",
    ),
    "an object 1e6 m away": (
        lambda L: _obs(L, "belt_ride_0", "object_pos", lambda a: _set(a, (3, 1), -1e6)),
        r"run 'belt_ride_0': obs/object_pos holds 1 value\(s\) beyond \+-100 m, first in row 3 \(-1e\+06\)",
    ),
    "a command of 1e30": (
        lambda L: _with(L, "latency_0", actions=_set(L.runs[3].actions.copy(), (0, 0), 1e30)),
        r"run 'latency_0': actions holds 1 value\(s\) beyond \+-10 command units",
    ),
    "signal of the wrong width": (
        lambda L: _obs(L, "latency_0", "arm_qpos", lambda a: a[:, :5]),
        r"run 'latency_0': obs/arm_qpos has rows of shape \(5,\).*gives \(7,\)",
    ),
    "commands of the wrong width": (
        lambda L: _with(L, "arm_steps_j1", actions=L.runs[4].actions[:, :7]),
        r"run 'arm_steps_j1': actions have 7 columns; control_mode 'joint' takes 23",
    ),
    "unknown signal": (
        lambda L: _with(L, "latency_0", obs={**L.runs[3].obs, "voltage": np.zeros((L.runs[3].steps + 1, 2))}),
        r"run 'latency_0': obs/voltage is not an observation of the env",
    ),
    "missing signal of a stage": (
        lambda L: _with(L, "latency_0", obs={k: v for k, v in L.runs[3].obs.items() if k != "finger_current"}),
        r"run 'latency_0' \(latency, stage latency_and_fingers\): lacks the signal\(s\) \['finger_current'\]",
    ),
    "another control period": (
        lambda L: _with(L, "sensing_rest_0", timestamps=L.runs[0].timestamps * 2),
        r"run 'sensing_rest_0': timestamps step by 0.1 s.*control period is 0.05 s",
    ),
    "timestamps going back": (
        lambda L: _with(L, "sensing_rest_0", timestamps=_set(L.runs[0].timestamps.copy(), 5, 0.0)),
        r"run 'sensing_rest_0': timestamps must increase strictly",
    ),
    "task-mode run in a joint-mode stage": (
        lambda L: _with(L, "latency_0", control_mode="task"),
        r"run 'latency_0'.*is replayed in joint mode",
    ),
    "env kwargs naming a file": (
        lambda L: _with(L, "latency_0", env_kwargs={**L.runs[3].env_kwargs, "world": "/etc/passwd"}),
        r"run 'latency_0': unknown env_kwargs key\(s\) \['world'\]; valid: \['control_mode', .*\] \(a log",
    ),
    "env kwargs the env refuses": (
        lambda L: _with(L, "latency_0", env_kwargs={**L.runs[3].env_kwargs, "num_objects": 99}),
        r"run 'latency_0': env_kwargs .* are refused by the env: num_objects must be an integer in \[1, ",
    ),
    "set-up the env refuses": (
        lambda L: _with(L, "sensing_rest_0", setup={**L.runs[0].setup, "tilt": 3}),
        r"run 'sensing_rest_0': the operator set-up is not one the env accepts: unknown setup key",
    ),
    "unknown protocol": (
        lambda L: _with(L, "latency_0", protocol="wiggle"),
        r"run 'latency_0': unknown protocol 'wiggle'; valid: \['arm_chirp', ",
    ),
    "arm run without its joint": (
        lambda L: _settings(L, "arm_steps_j1", joint=9),
        r"run 'arm_steps_j1' \(arm_steps, stage arm\): settings 'joint' must be .* integer in 1..7, got 9",
    ),
    "lift without its reference": (
        lambda L: _settings(L, "lift_cube_0", reference="lift_cube_7_empty"),
        r"run 'lift_cube_0' \(lift, stage mass\): settings 'reference' must name a fitting lift_empty run, got "
        r"'lift_cube_7_empty'",
    ),
    "lift of an unknown category": (
        lambda L: _settings(L, "lift_cube_0", category="pyramid"),
        r"stage mass\): settings 'category' must be one of \['cube', 'ball', 'bar'\], got 'pyramid'",
    ),
    "reference of another length": (
        lambda L: _with(
            L,
            "push_0_empty",
            actions=L.runs[8].actions[:-1],
            timestamps=L.runs[8].timestamps[:-1],
            obs={k: v[:-1] for k, v in L.runs[8].obs.items()},
        ),
        r"run 'push_0' \(push, stage friction\): its reference 'push_0_empty' has 129 steps, the run 130",
    ),
    "step window outside the run": (
        lambda L: _settings(L, "push_0", push_steps=[40, 900]),
        r"(?s)^1 problem.*run 'push_0' \(push, stage friction\): settings 'push_steps' must be \[t0, t1\], .*<= 131",
    ),
    "belt ride without a sliding object": (
        lambda L: _with(
            L,
            "belt_ride_0",
            setup={**L.runs[2].setup, "objects": [{**o, "category": "ball"} for o in L.runs[2].setup["objects"]]},
        ),
        r"run 'belt_ride_0' \(belt_ride, stage belt\): needs a cube or a bar riding the belt",
    ),
    "no held-out runs": (
        lambda L: dataclasses.replace(L, runs=[r for r in L.runs if r.split == "fit"]),
        r"no held-out runs \(split 'heldout'\), which validation needs",
    ),
    "no fitting runs": (
        lambda L: dataclasses.replace(L, runs=[r for r in L.runs if r.split == "heldout"]),
        r"no fitting runs \(split 'fit'\)",
    ),
}


def test_shipped_protocols_pass(logs):
    check_logs(logs)


@pytest.mark.parametrize("problem", list(PROBLEMS))
def test_log_problems_are_named_before_fitting(logs, problem):
    corrupt, message = PROBLEMS[problem]
    start = time.perf_counter()
    with pytest.raises(LogError, match=message) as info:
        check_logs(corrupt(logs))
    assert time.perf_counter() - start < 5.0
    assert "found before fitting" in str(info.value)


def test_identify_checks_before_fitting(logs):
    bad = PROBLEMS["one NaN joint angle"][0](logs)
    start = time.perf_counter()
    with pytest.raises(LogError, match="arm_steps_j1.*non-finite"):
        identify(bad, quick=True)
    assert time.perf_counter() - start < 5.0


def test_every_problem_is_listed_at_once(logs):
    bad = PROBLEMS["unknown protocol"][0](PROBLEMS["one NaN joint angle"][0](logs))
    with pytest.raises(LogError, match=r"^2 problem\(s\).*\n.*wiggle.*\n.*non-finite") as info:
        check_logs(bad)
    assert str(info.value).count("\n  - ") == 2


def _rewrite(directory, name, fn) -> None:
    """Change a run file in place and update its hash in the manifest (a consistent, corrupted log)."""
    path = directory / name
    with h5py.File(path, "r+") as f:
        fn(f)
    manifest = json.loads((directory / "manifest.json").read_text())
    for entry in manifest["runs"]:
        if entry["file"] == name:
            entry["sha256"] = file_sha256(path)
    (directory / "manifest.json").write_text(json.dumps(manifest))


def _copy(logdir, tmp_path):
    import shutil

    return shutil.copytree(logdir, tmp_path / "logs")


def test_sysid_refuses_a_rehashed_nan_log_within_seconds(logdir, tmp_path):
    logs = _copy(logdir, tmp_path)

    def nan_angle(f):
        data = f["obs/arm_qpos"][()]
        data[10, 3] = np.nan
        del f["obs/arm_qpos"]
        f["obs"].create_dataset("arm_qpos", data=data)

    _rewrite(logs, "latency_0.hdf5", nan_angle)
    start = time.perf_counter()
    with pytest.raises(LogError, match="run 'latency_0': obs/arm_qpos holds 1 non-finite value"):
        run_sysid(tmp_path / "g.json", logs=logs, tune_episodes=0, quick=True)
    assert time.perf_counter() - start < 5.0
    assert not (tmp_path / "g.json").exists()


def _manifest(directory, fn) -> None:
    path = directory / "manifest.json"
    manifest = json.loads(path.read_text())
    fn(manifest)
    path.write_text(json.dumps(manifest))


def _attr(name, value):
    return lambda d: _rewrite(d, "sensing_rest_0.hdf5", lambda f: f.attrs.__setitem__(name, value))


# Each: a change to the files on disk -> what read_logs must say.
FILES = {
    "lab as a string": (
        lambda d: _manifest(d, lambda m: m.__setitem__("lab", "default")),
        r"'lab' must be an object with string 'name' and 'config_sha256', got 'default'",
    ),
    "run file outside the folder": (
        lambda d: _manifest(d, lambda m: m["runs"][0].__setitem__("file", "../outside.hdf5")),
        r"run file '../outside.hdf5' must be a plain '<run>.hdf5' name inside the log directory",
    ),
    "absolute run file": (
        lambda d: _manifest(d, lambda m: m["runs"][0].__setitem__("file", "/etc/passwd")),
        r"run file '/etc/passwd' must be a plain '<run>.hdf5' name",
    ),
    "runs not a list": (
        lambda d: _manifest(d, lambda m: m.__setitem__("runs", {"a": 1})),
        r"'runs' must be a list of run entries, got dict",
    ),
    "seed not an integer": (
        lambda d: _manifest(d, lambda m: m.__setitem__("seed", "zero")),
        r"'seed' must be an integer, got 'zero'",
    ),
    # The manifest's copies of a run's protocol and split: a renamed key or another value was ignored before.
    "unknown manifest key": (
        lambda d: _manifest(d, lambda m: m.__setitem__("note", 1)),
        r"unknown manifest key\(s\) \['note'\]; valid: \['schema_version', 'lab', 'seed', 'versions', 'runs'\]",
    ),
    "run entry key renamed": (
        lambda d: _manifest(d, lambda m: m["runs"][0].__setitem__("sqlit", m["runs"][0].pop("split"))),
        r"unknown run entry key\(s\) \['sqlit'\]; valid: \['file', 'protocol', 'split', 'sha256'\]",
    ),
    "split unlike the run file's": (
        lambda d: _manifest(d, lambda m: m["runs"][0].__setitem__("split", "heldout")),
        r"has split 'heldout', but its run file says 'fit'; the manifest was changed after logging",
    ),
    # A hash that differs only in its last digit: both are shown whole (12-digit prefixes read as equal).
    "run hash changed in its last digit": (
        lambda d: _manifest(d, lambda m: m["runs"][0].__setitem__("sha256", m["runs"][0]["sha256"][:-1] + "x")),
        r"SHA-256 [0-9a-f]{64} differs from the manifest's [0-9a-f]{63}x: the file was truncated or changed",
    ),
    "lab name unlike the run files'": (
        lambda d: _manifest(d, lambda m: m["lab"].__setitem__("name", "other")),
        r"'lab' has name 'other', but the run file \w+\.hdf5 says '[^']+'; the manifest was changed after logging",
    ),
    "lab config hash unlike the run files'": (
        lambda d: _manifest(d, lambda m: m["lab"].__setitem__("config_sha256", "0" * 64)),
        r"'lab' has config_sha256 '0{64}', but the run file \w+\.hdf5 says '[0-9a-f]*'",
    ),
    "deeply nested manifest": (
        lambda d: (d / "manifest.json").write_text("[" * 100_000 + "]" * 100_000),
        r"manifest.json: nested 100000 levels deep; at most 64 levels are accepted",
    ),
    "NaN control period": (
        _attr("control_dt", np.nan),
        r"attribute 'control_dt' must be a finite period > 0 s, got nan",
    ),
    "settings not JSON": (_attr("settings", "{oops"), r"sensing_rest_0.hdf5: attribute 'settings': not valid JSON"),
    "setup not an object": (_attr("setup", "[1, 2]"), r"attribute 'setup' must be a JSON object, got list"),
    "seed attribute not an integer": (
        _attr("seed", "seven"),
        r"sensing_rest_0.hdf5: attribute 'seed' must be an integer, got 'seven' \(str\)",
    ),
    "schema version a float": (
        _attr("schema_version", 1.5),
        r"sensing_rest_0.hdf5: attribute 'schema_version' must be an integer, got '1.5' \(float",
    ),
}


@pytest.mark.parametrize("problem", list(FILES))
def test_untrusted_log_files_are_refused(logdir, tmp_path, problem):
    change, message = FILES[problem]
    logs = _copy(logdir, tmp_path)
    change(logs)
    with pytest.raises(LogError, match=message):
        read_logs(logs)
