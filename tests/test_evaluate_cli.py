"""``r2s2r evaluate`` and the benchmark result format (schema version 2).

Policies that emit NaN, a wrong shape or no numbers must give a valid result with policy failures, not a crash;
results carry the method section; malformed results are refused naming the field; version-1 files are still
read.  Episodes are short (one object, a 30-step limit) so the file runs in seconds.
"""

from __future__ import annotations

import copy
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from r2s2r_envs.cli import main
from r2s2r_envs.envs import FAILURE_CAUSES
from r2s2r_envs.evaluation.protocol import (
    POLICY_FAILURE,
    RESULT_SCHEMA_VERSION,
    EvaluationResult,
    ResultSchemaError,
    action_problem,
    evaluate,
    evaluation_seeds,
    method_record,
)
from r2s2r_envs.evaluation.schema import result_schema, validate_result

SIM = "PickSort-Ungrounded-v0"
LAB = "PickSort-Real-v0"
FAST = {"num_objects": 1, "episode_steps": 30}
FAST_ARGS = ["--num-objects", "1", "--episode-steps", "30", "--no-progress"]
METADATA = {
    "method": "bc",
    "policy_class": "r2s2r_envs.policies.models.MLPPolicy",
    "real_fraction": 0.25,
    "variant": "ungrounded",
    "datasets": [
        {"name": "lab-50", "sha256": "1" * 64, "domain": "real", "episodes": 50},
        {"name": "ungrounded-1000", "sha256": "2" * 64, "domain": "sim", "episodes": 1000},
    ],
    "training_seed": 3,
    "n_real_demos": 50,
    "n_sim_demos": 1000,
}


# Module-level policies: importable as `test_evaluate_cli:<name>` by --policy and picklable for workers.
class ZeroPolicy:
    """Holds still; carries the metadata a trained policy has."""

    metadata = METADATA

    def reset(self, seed: int | None) -> None:
        pass

    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        return np.zeros(22, dtype=np.float32)


class NaNPolicy(ZeroPolicy):
    """Emits NaN from its third action of each episode on."""

    def reset(self, seed: int | None) -> None:
        self.t = 0

    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        self.t += 1
        return np.full(22, np.nan if self.t >= 3 else 0.0, dtype=np.float32)


class WrongShapePolicy(ZeroPolicy):
    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        return np.zeros(7, dtype=np.float32)


class TextPolicy(ZeroPolicy):
    def act(self, obs: dict[str, np.ndarray]) -> str:
        return "left"


class RaisingPolicy(ZeroPolicy):
    """Raises from its second action of each episode on (a bug in the user's code)."""

    def reset(self, seed: int | None) -> None:
        self.t = 0

    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        self.t += 1
        if self.t >= 2:
            raise KeyError("object_pos")
        return np.zeros(22, dtype=np.float32)


class ComplexPolicy(ZeroPolicy):
    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        return np.zeros(22, dtype=np.complex128) + 1j


class ResetRaisingPolicy(ZeroPolicy):
    def reset(self, seed: int | None) -> None:
        raise RuntimeError("CUDA out of memory")


def make_zero(env) -> ZeroPolicy:
    return ZeroPolicy()


def make_nan(env) -> NaNPolicy:
    return NaNPolicy()


def make_raising(env) -> ZeroPolicy:
    raise RuntimeError("no GPU here")


def make_nothing(env) -> None:
    return None


NOT_CALLABLE = 3


class NeedsConfig:
    def __init__(self, env) -> None:
        raise ValueError("config.yaml is missing")


class KilledInWorkers(ZeroPolicy):
    """Kills its own process on the first action in a worker process (as the out-of-memory killer would)."""

    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        import multiprocessing
        import os
        import signal

        if multiprocessing.current_process().name != "MainProcess":
            os.kill(os.getpid(), signal.SIGKILL)
        return super().act(obs)


# ---------------------------------------------------------------------- policy failures
@pytest.mark.parametrize(
    "policy, steps, message",
    [
        (NaNPolicy(), 2, r"step 2: the action has NaN/inf at indices \[0, 1, 2"),
        (WrongShapePolicy(), 0, r"step 0: the action has shape \(7,\); the env takes shape \(22,\)"),
        (TextPolicy(), 0, "step 0: the action is not an array of numbers"),
        (RaisingPolicy(), 1, r"step 1: the policy raised KeyError: 'object_pos'$"),
        (ComplexPolicy(), 0, r"step 0: the action holds complex numbers; the env takes real numbers$"),
        (ResetRaisingPolicy(), 0, r"reset: the policy raised RuntimeError: CUDA out of memory$"),
    ],
)
def test_unusable_actions_are_policy_failures_not_crashes(policy, steps, message):
    result = evaluate(SIM, policy, episodes=2, env_kwargs=FAST, progress=False)
    for record in result.records:
        assert record.policy_error is not None and re.match(message, record.policy_error), record.policy_error
        assert record.failure_cause == POLICY_FAILURE and record.object_outcomes == (POLICY_FAILURE,)
        assert record.steps == steps and not record.is_success and record.truncated and not record.terminated
    s = result.summary
    assert s["policy_failures"] == 2 and s["failure_causes"][POLICY_FAILURE] == 2 and s["success_rate"] == 0.0
    back = EvaluationResult.from_json(result.to_json())  # a valid result
    assert back.records == result.records and back.summary["policy_failures"] == 2


def test_cli_writes_the_result_of_a_policy_that_raises(tmp_path, capsys):
    """A policy whose act() raises: every episode is its failure, the run goes on, the result file is written."""
    out = tmp_path / "raising.json"
    policy = f"{Path(__file__).resolve()}:RaisingPolicy"
    argv = ["evaluate", "--policy", policy, "--env", SIM, "--episodes", "2", "--out", str(out), *FAST_ARGS]
    assert main(argv) == 0
    assert "Traceback" not in capsys.readouterr().err
    result = EvaluationResult.from_json(out.read_text())
    assert result.summary["policy_failures"] == 2
    assert all(r.policy_error == "step 1: the policy raised KeyError: 'object_pos'" for r in result.records)


def test_a_usable_policy_has_no_policy_failures():
    result = evaluate(SIM, ZeroPolicy(), episodes=2, env_kwargs=FAST, progress=False)
    assert result.summary["policy_failures"] == 0 and POLICY_FAILURE not in result.summary["failure_causes"]
    assert all(r.policy_error is None for r in result.records)
    assert set(FAILURE_CAUSES) <= set(result.summary["failure_causes"])  # every env cause listed, zeros included


def test_action_problem():
    assert action_problem(np.zeros(22), (22,)) is None
    assert action_problem([0.0] * 22, (22,)) is None  # any array-like of numbers
    assert "shape (2, 11)" in action_problem(np.zeros((2, 11)), (22,))
    assert "NaN/inf at indices [21]" in action_problem(np.r_[np.zeros(21), np.inf], (22,))
    assert "not an array of numbers" in action_problem({"a": 1}, (22,))


# ---------------------------------------------------------------------- the method section
def test_result_carries_the_method_section():
    result = evaluate(SIM, ZeroPolicy(), episodes=1, env_kwargs=FAST, progress=False)
    data = json.loads(result.to_json())
    assert data["schema_version"] == RESULT_SCHEMA_VERSION == 3
    assert data["method"] == METADATA
    assert data["env_id"] == SIM and {"r2s2r_envs", "mujoco"} <= set(data["versions"])
    overridden = evaluate(SIM, ZeroPolicy(), episodes=1, env_kwargs=FAST, progress=False, method={"method": "mine"})
    assert overridden.method["method"] == "mine" and overridden.method["real_fraction"] == 0.25


def test_method_defaults_without_metadata():
    class Bare:
        def reset(self, seed):
            pass

        def act(self, obs):
            return np.zeros(22)

    record = method_record(Bare())
    assert record["method"] == "Bare" and record["policy_class"].endswith("Bare")
    assert record["datasets"] == [] and record["real_fraction"] is None and record["training_seed"] is None


def test_bad_metadata_fails_before_any_episode():
    class Bad(ZeroPolicy):
        metadata = {**METADATA, "real_fraction": 1.5}

    with pytest.raises(ResultSchemaError, match=r"result\.method\.real_fraction: expected <= 1, got 1\.5"):
        evaluate(SIM, Bad(), episodes=1, env_kwargs=FAST, progress=False)


# ---------------------------------------------------------------------- schema
@pytest.fixture(scope="module")
def result() -> EvaluationResult:
    return evaluate(SIM, NaNPolicy(), episodes=2, env_kwargs=FAST, progress=False)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d.pop("method"), r"result: missing key\(s\) \['method'\]"),
        (lambda d: d["method"].pop("training_seed"), r"result\.method: missing key\(s\) \['training_seed'\]"),
        (lambda d: d["method"].update(real_fraction="half"), r"result\.method\.real_fraction: expected number or null"),
        (lambda d: d["method"]["datasets"][0].update(sha256="abc"), r"result\.method\.datasets\[0\]\.sha256"),
        (lambda d: d["method"].update(n_real_demos=2.0), r"result\.method\.n_real_demos: expected integer or null"),
        (lambda d: d["records"][0].update(policy_error=3), r"result\.records\[0\]\.policy_error: expected string"),
        (lambda d: d["records"][1].pop("policy_error"), r"result\.records\[1\]: missing key\(s\) \['policy_error'\]"),
        (lambda d: d["summary"].update(policy_failures=-1), r"result\.summary\.policy_failures: expected >= 0"),
        (lambda d: d.update(provenance={"domain": "real"}), r"result\.provenance: missing key\(s\) \['lab'\]"),
        (lambda d: d.update(env_id="CartPole-v1"), r"result\.env_id: .*PickSort-"),
        (lambda d: d["summary"].update(sort_accuracy=float("nan")), r"result\.summary\.sort_accuracy: expected number"),
        (lambda d: d["summary"].update(policy_failures=1), "does not match its records"),
    ],
)
def test_malformed_results_are_refused_naming_the_field(result, edit, message):
    data = copy.deepcopy(result.to_dict())
    data["method"] = copy.deepcopy(METADATA)
    EvaluationResult.from_dict(data)  # the unedited copy is valid
    edit(data)
    with pytest.raises(ResultSchemaError, match=message):
        EvaluationResult.from_dict(data)


def test_schema_is_valid_json_schema_and_describes_the_result(result):
    import jsonschema

    schema = result_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator.check_schema(result_schema(1))
    assert set(schema["required"]) == set(result.to_dict())
    assert set(schema["$defs"]["record"]["required"]) == set(result.records[0].to_dict())
    assert set(schema["$defs"]["summary"]["required"]) <= set(result.summary)
    jsonschema.validate(json.loads(result.to_json()), schema)  # any JSON Schema tool accepts our files


def _as_version_1(data: dict) -> dict:
    """What r2s2r_envs 0.2 wrote before schema version 2 (no method, no policy failures)."""
    old = copy.deepcopy(data)
    old["schema_version"] = 1
    for key in ("split", "conditions_version", "conditions", "shifted"):  # schema version 3's
        del old[key]
    del old["method"]
    del old["summary"]["policy_failures"]
    for r in old["records"]:
        del r["policy_error"]
    return old


def test_version_1_results_are_read_and_upgraded():
    result = evaluate(SIM, ZeroPolicy(), episodes=2, env_kwargs=FAST, progress=False)
    old = _as_version_1(result.to_dict())
    assert validate_result(old) == 1
    back = EvaluationResult.from_dict(old)
    assert back.schema_version == 3 and back.records == result.records
    assert back.method["method"] == "ZeroPolicy" and back.method["real_fraction"] is None  # v1 had no metadata
    assert back.summary == result.summary
    EvaluationResult.from_json(back.to_json())
    old["schema_version"] = 4
    with pytest.raises(ResultSchemaError, match="reads schema_version 1 and 2 and 3"):
        EvaluationResult.from_dict(old)


# ---------------------------------------------------------------------- the command
def test_cli_evaluates_a_module_factory(tmp_path, capsys):
    out = tmp_path / "results" / "nan.json"
    code = main(
        ["evaluate", "--policy", "test_evaluate_cli:make_nan", "--env", SIM, "--episodes", "2", "--out", str(out)]
        + FAST_ARGS
    )
    assert code == 0
    text = capsys.readouterr().out
    assert "policy failures:  2" in text and "policy_failure: 2" in text and str(out) in text
    data = json.loads(out.read_text())
    validate_result(data)
    assert data["method"] == METADATA and data["summary"]["policy_failures"] == 2
    assert [(r["env_seed"], r["policy_seed"]) for r in data["records"]] == evaluation_seeds(2)


@pytest.mark.slow  # worker processes are spawned: ~10 s
def test_cli_json_in_the_lab_with_workers(tmp_path, capsys):
    code = main(
        ["evaluate", "--policy", "test_evaluate_cli:ZeroPolicy", "--env", LAB, "--lab", "default", "--episodes", "3"]
        + ["--workers", "2", "--json"]
        + FAST_ARGS
    )
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert data["provenance"]["domain"] == "real" and data["provenance"]["lab"]["name"] == "default"
    assert data["env_kwargs"]["lab"] == "default" and data["episodes"] == 3
    one = evaluate(LAB, ZeroPolicy(), episodes=3, env_kwargs={**FAST, "lab": "default"}, progress=False)
    assert [r["steps"] for r in data["records"]] == [r.steps for r in one.records]  # workers change nothing


@pytest.mark.slow  # worker processes are spawned: ~10 s
def test_cli_evaluates_a_policy_file_in_worker_processes(tmp_path, monkeypatch, capsys):
    # path/to/file.py:factory: the file's folder goes on sys.path, so the spawned workers import it too.
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    (folder / "still_policy.py").write_text(
        "import numpy as np\n\n\nclass Still:\n    def reset(self, seed):\n        pass\n\n"
        "    def act(self, obs):\n        return np.zeros(22)\n"
    )
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "still_policy", raising=False)
    argv = ["evaluate", "--policy", f"{folder / 'still_policy.py'}:Still", "--env", SIM, "--episodes", "3"]
    assert main([*argv, "--workers", "2", "--json", *FAST_ARGS]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["method"]["method"] == "Still" and data["policy"]["class"] == "still_policy.Still"
    assert main(["evaluate", "--policy", "nope.py:Still", "--env", SIM, "--episodes", "1", *FAST_ARGS]) == 2
    assert "no such file 'nope.py'" in capsys.readouterr().err
    monkeypatch.delitem(sys.modules, "still_policy", raising=False)


def _write_checkpoint(directory: Path) -> Path:
    """A tiny checkpoint in the ``r2s2r train --out DIR`` layout: config.json (with metadata) and policy.pt."""
    import torch

    directory.mkdir(parents=True)
    (directory / "config.json").write_text(json.dumps({"metadata": METADATA, "hidden": 8}))
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 22), torch.nn.Tanh())
    torch.save(net.state_dict(), directory / "policy.pt")
    (directory / "train_log.json").write_text(json.dumps({"loss": [1.0, 0.5], "training_time_s": 1.0}))
    return directory


class TinyCheckpointPolicy:
    """An MLP from eef_pos to actions, loaded from a checkpoint written by ``_write_checkpoint``."""

    def __init__(self, path: str) -> None:
        import torch

        config = json.loads((Path(path) / "config.json").read_text())
        self.metadata = config["metadata"]
        hidden = config["hidden"]
        self.net = torch.nn.Sequential(
            torch.nn.Linear(3, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, 22), torch.nn.Tanh()
        )
        self.net.load_state_dict(torch.load(Path(path) / "policy.pt", weights_only=True))

    def reset(self, seed: int | None) -> None:
        pass

    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        import torch

        with torch.no_grad():
            return self.net(torch.as_tensor(obs["eef_pos"], dtype=torch.float32)).numpy()


def test_cli_evaluates_a_policy_directory(tmp_path, monkeypatch, capsys):
    import r2s2r_envs.policies

    # The directory is loaded through r2s2r_envs.policies.load_policy (r2s2r train's loader); a stand-in here
    # keeps this test about the command, not about training.
    monkeypatch.setattr(r2s2r_envs.policies, "load_policy", TinyCheckpointPolicy, raising=False)
    ckpt = _write_checkpoint(tmp_path / "bc_seed3")
    out = tmp_path / "r.json"
    assert (
        main(["evaluate", "--policy", str(ckpt), "--env", SIM, "--episodes", "2", "--out", str(out)] + FAST_ARGS) == 0
    )
    data = json.loads(out.read_text())
    assert data["method"] == METADATA and data["policy"]["class"].endswith("TinyCheckpointPolicy")
    assert data["summary"]["policy_failures"] == 0
    assert (
        "bc (r2s2r_envs.policies.models.MLPPolicy), variant=ungrounded, real_fraction=0.25" in capsys.readouterr().out
    )


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--policy", "no_such_module:f"], "cannot import module 'no_such_module'"),
        (["--policy", "test_evaluate_cli:nothing"], "has no 'nothing'"),
        (["--policy", "just-a-word"], "neither a policy directory"),
        (["--policy", "test_evaluate_cli:make_zero", "--lab", "default"], "--lab applies to the envs that take a lab"),
        (["--policy", "test_evaluate_cli:make_zero", "--env", "PickSort-Nope-v0"], "registered PickSort ids"),
    ],
)
def test_cli_usage_errors_are_one_line(argv, message, capsys):
    if "--env" not in argv:
        argv = [*argv, "--env", SIM]
    assert main(["evaluate", *argv, "--episodes", "1", *FAST_ARGS]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and err.startswith("r2s2r evaluate: error:") and len(err.splitlines()) == 1


@pytest.mark.parametrize(
    "policy, message",
    [
        (
            "test_evaluate_cli:make_raising",
            "the policy factory test_evaluate_cli.make_raising raised RuntimeError: no GPU",
        ),
        ("test_evaluate_cli:make_nothing", "make_nothing returned a NoneType, which is not a Policy: it needs methods"),
        ("test_evaluate_cli:NOT_CALLABLE", "names a int; it must name a factory f(env) -> Policy, a policy class or"),
        ("test_evaluate_cli:NeedsConfig", "the policy factory test_evaluate_cli.NeedsConfig raised ValueError: config"),
    ],
)
def test_cli_policy_errors_are_one_line(policy, message, capsys):
    assert main(["evaluate", "--policy", policy, "--env", SIM, "--episodes", "1", *FAST_ARGS]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("r2s2r evaluate: error:") and message in err and len(err.splitlines()) == 1


@pytest.mark.parametrize(
    "option, path, message",
    [
        ("--out", "{tmp}", "the file must end in .json"),
        ("--out", "{tmp}/folder.json", "is a folder; give a file name"),
        ("--out", "{tmp}/a-file/result.json", "a-file is a file, so nothing can be written below it"),
        ("--out", "{tmp}/result.txt", "the file must end in .json"),
        ("--video", "{tmp}/first.gif", "the file must end in .mp4"),
        ("--video", "{tmp}/a-file/first.mp4", "a-file is a file, so nothing can be written below it"),
        # Nothing can be made in /proc, even by root (whom os.access lets write anywhere).
        ("--out", "/proc/r2s2r-test/result.json", "not writable (a file cannot be made in /proc"),
        ("--video", "/proc/r2s2r-test/first.mp4", "not writable (a file cannot be made in /proc"),
    ],
)
def test_cli_outputs_are_checked_before_any_episode(tmp_path, capsys, monkeypatch, option, path, message):
    (tmp_path / "folder.json").mkdir()
    (tmp_path / "a-file").write_text("")
    ran = []
    monkeypatch.setattr("r2s2r_envs.evaluation_cli.evaluate", lambda *a, **k: ran.append(1))
    argv = ["evaluate", "--policy", "test_evaluate_cli:make_zero", "--env", SIM, "--episodes", "1", *FAST_ARGS]
    assert main([*argv, option, path.format(tmp=tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"r2s2r evaluate: error: {option} ") and message in err and len(err.splitlines()) == 1
    assert not ran


def test_a_killed_worker_is_reported_as_killed(capsys):
    argv = ["evaluate", "--policy", "test_evaluate_cli:KilledInWorkers", "--env", SIM, "--episodes", "3"]
    assert main([*argv, "--workers", "2", *FAST_ARGS]) == 1
    err = capsys.readouterr().err.strip()
    assert "killed by SIGKILL (exit code -9)" in err and "__main__" not in err and len(err.splitlines()) == 1


@pytest.mark.parametrize(
    "exitcode, done, main_file, expected, absent",
    [
        (-9, 0, "script.py", "killed by SIGKILL (exit code -9) after 0 result(s)", "__main__"),
        (-15, 4, "script.py", "killed by SIGTERM", "__main__"),
        (1, 0, "script.py", "guard the call with `if __name__ == '__main__':`", "killed"),
        (1, 3, "script.py", "died (exit code 1) without reporting an error, after 3 result(s)", "__main__"),
        (1, 0, "r2s2r", "died (exit code 1)", "__main__"),
    ],
)
def test_worker_death_says_what_the_exit_code_tells(monkeypatch, exitcode, done, main_file, expected, absent):
    from r2s2r_envs.workers import worker_death

    monkeypatch.setattr(sys.modules["__main__"], "__file__", main_file, raising=False)
    message = worker_death(exitcode, done=done, call="generate()")
    assert expected in message and absent not in message


def test_cli_missing_policy_directory(tmp_path, capsys):
    ckpt = tmp_path / "empty_ckpt"
    ckpt.mkdir()
    assert main(["evaluate", "--policy", str(ckpt), "--env", SIM, "--episodes", "1", *FAST_ARGS]) == 2
    assert f"cannot load the policy directory {ckpt}" in capsys.readouterr().err


# ---------------------------------------------------------------------- docs/byo_method.md
def byo_example() -> str:
    """The example policy of docs/byo_method.md: the python block after the byo-example marker."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "byo_method.md").read_text()
    match = re.search(r"<!-- byo-example:[^>]*-->\s*```python\n(.*?)```", page, re.S)
    assert match, "docs/byo_method.md lost its byo-example block"
    return match.group(1)


def test_the_byo_example_is_evaluated_and_ranked(tmp_path, monkeypatch, capsys):
    code = byo_example()
    assert len(code.splitlines()) <= 50  # the page promises a short example
    (tmp_path / "byo_policy.py").write_text(code)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "byo_policy", raising=False)
    # The page's commands, on two short episodes each.
    for env_id, name in ((LAB, "lab"), (SIM, "sim")):
        argv = ["evaluate", "--policy", "byo_policy:make_policy", "--env", env_id, "--episodes", "2"]
        assert main([*argv, "--out", f"results/chase/{name}.json", "--episode-steps", "120", "--no-progress"]) == 0
    assert main(["leaderboard", "results/", "--out", "leaderboard/"]) == 0
    capsys.readouterr()
    data = json.loads((tmp_path / "results" / "chase" / "lab.json").read_text())
    assert data["method"]["method"] == "chase-p-controller" and data["policy"]["settings"] == {"gain": 25.0}
    assert data["summary"]["policy_failures"] == 0
    board = json.loads((tmp_path / "leaderboard" / "leaderboard.json").read_text())
    assert [r["method"] for r in board["rows"]] == ["chase-p-controller"] and len(board["envs"]) == 2
    assert (tmp_path / "leaderboard" / "index.html").is_file()
    monkeypatch.delitem(sys.modules, "byo_policy", raising=False)


@pytest.mark.slow
def test_a_policy_trained_with_r2s2r_train_is_evaluated(tmp_path, capsys):
    # The whole path a baseline takes: tiny real and sim datasets, a few BC steps, r2s2r evaluate --policy DIR.
    for env_id, name in ((LAB, "real"), (SIM, "sim")):
        argv = ["generate", env_id, "--episodes", "2", "--out", str(tmp_path / f"{name}.hdf5"), "--no-progress"]
        assert main([*argv, "--env-kwargs", '{"num_objects": 1}', "--episode-steps", "150"]) == 0
    ckpt = tmp_path / "bc_seed1"
    argv = ["train", "--method", "bc", "--real", str(tmp_path / "real.hdf5"), "--sim", str(tmp_path / "sim.hdf5")]
    argv += ["--real-fraction", "0.5", "--seed", "1", "--out", str(ckpt), "--steps", "5", "--no-progress"]
    assert main(argv) == 0
    out = tmp_path / "results" / "bc_lab.json"
    argv = ["evaluate", "--policy", str(ckpt), "--env", LAB, "--episodes", "2", "--workers", "2", "--out", str(out)]
    assert main([*argv, *FAST_ARGS]) == 0
    capsys.readouterr()
    result = EvaluationResult.from_json(out.read_text())
    m = result.method
    assert m["method"] == "bc" and m["real_fraction"] == 0.5 and m["training_seed"] == 1
    assert (m["n_real_demos"], m["n_sim_demos"]) == (2, 2) and m["variant"] == "Ungrounded"
    assert sorted(d["domain"] for d in m["datasets"]) == ["real", "sim"]
    assert all(re.fullmatch("[0-9a-f]{64}", d["sha256"]) for d in m["datasets"])
    assert result.summary["episodes"] == 2
