"""The method API (``r2s2r_envs.policies.method``): the example method of docs/byo_method.md trains end to end with
``r2s2r train --method module:Class`` on tiny data, its checkpoint is loaded by the evaluation's policy resolution
and runs an episode in the lab, and bad method classes are refused with clear errors."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import torch

from r2s2r_envs.cli import main
from r2s2r_envs.datasets.toy import write_synthetic_dataset
from r2s2r_envs.policies import CheckpointError, load_policy
from r2s2r_envs.policies.checkpoint import CONFIG_FILE, WEIGHTS_FILE
from r2s2r_envs.policies.config import ConfigError, TrainConfig
from r2s2r_envs.policies.method import Method, MethodError, import_method
from r2s2r_envs.policies.policy_spec import PolicySpecError, resolve_policy_spec
from r2s2r_envs.policies.train import train

LAB = "PickSort-Real-v0"
TINY = ["--steps", "6", "--batch-size", "16", "--hidden-dim", "32", "--layers", "2", "--action-chunk", "4"]
TINY += ["--execute-steps", "2", "--no-progress"]


def byo_method() -> str:
    """The example method of docs/byo_method.md: the python block after the byo-method marker."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "byo_method.md").read_text()
    match = re.search(r"<!-- byo-method:[^>]*-->\s*```python\n(.*?)```", page, re.S)
    assert match, "docs/byo_method.md lost its byo-method block"
    return match.group(1)


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder holding tiny real and sim datasets (one object, as the lab below), the current directory, whose
    modules are importable (as where a user runs the commands); forgets the modules written there afterwards."""
    write_synthetic_dataset(tmp_path / "real.hdf5", [12, 9, 15, 10], domain="real", seed=1, num_objects=1)
    write_synthetic_dataset(tmp_path / "sim.hdf5", [14, 8, 11, 13, 10, 9], domain="sim", seed=2, num_objects=1)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    names = ("byo_bc", "bad_methods")
    for name in names:
        monkeypatch.delitem(sys.modules, name, raising=False)
    yield tmp_path
    for name in names:
        sys.modules.pop(name, None)


def _train_argv(method: str, out: str, *extra: str) -> list[str]:
    argv = ["train", "--method", method, "--real", "real.hdf5", "--sim", "sim.hdf5", "--real-fraction", "0.5"]
    return [*argv, "--out", out, *TINY, *extra]


def test_the_docs_method_trains_loads_and_is_evaluated(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = byo_method()
    assert len(code.splitlines()) <= 100  # the page promises a method in one short file
    (workdir / "byo_bc.py").write_text(code)
    # The page's train command at a tiny budget; twice with one seed: the same weights.
    for out in ("runs/dw-bc-s0", "runs/again"):
        assert main(_train_argv("byo_bc:DomainWeightedBC", out, "--seed", "0")) == 0, capsys.readouterr().err
    a, b = (torch.load(workdir / out / WEIGHTS_FILE, weights_only=True) for out in ("runs/dw-bc-s0", "runs/again"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    config = json.loads((workdir / "runs/dw-bc-s0" / CONFIG_FILE).read_text())
    assert config["model"]["method_class"] == "byo_bc:DomainWeightedBC"
    meta = config["metadata"]
    assert meta["method"] == "dw-bc" and meta["method_class"] == "byo_bc:DomainWeightedBC"
    assert re.fullmatch("[0-9a-f]{64}", meta["method_source_sha256"])
    assert (meta["n_real_demos"], meta["n_sim_demos"], meta["real_fraction"]) == (3, 5, 0.5)
    log = json.loads((workdir / "runs/dw-bc-s0" / "train_log.json").read_text())
    assert len(log["history"]["loss"]) == 6 and log["validation"]  # a checkpoint chosen on held-out demos

    # Loaded as `r2s2r evaluate --policy DIR` loads it, acting in an episode of the lab.
    import gymnasium as gym

    env = gym.make(LAB, num_objects=1, episode_steps=10)
    policy = resolve_policy_spec("runs/dw-bc-s0")(env)
    assert type(policy.model).__name__ == "DomainWeightedBC" and policy.metadata["method"] == "dw-bc"
    obs, _ = env.reset(seed=0)
    policy.reset(0)
    action = policy.act(obs)
    assert action.shape == env.action_space.shape and torch.isfinite(torch.from_numpy(action)).all()
    env.close()
    # The page's evaluate and leaderboard commands, on one short episode.
    argv = ["evaluate", "--policy", "runs/dw-bc-s0", "--env", LAB, "--episodes", "1", "--num-objects", "1"]
    assert main([*argv, "--episode-steps", "20", "--no-progress", "--out", "results/dw-bc/lab.json"]) == 0
    result = json.loads((workdir / "results/dw-bc/lab.json").read_text())
    assert result["method"]["method"] == "dw-bc" and result["summary"]["policy_failures"] == 0
    assert main(["leaderboard", "results/", "--out", "leaderboard/"]) == 0
    board = json.loads((workdir / "leaderboard" / "leaderboard.json").read_text())
    assert [r["method"] for r in board["rows"]] == ["dw-bc"]
    capsys.readouterr()


BAD_METHODS = """
import torch
from torch import nn

from r2s2r_envs.policies.method import Method


class NoPredict(Method):
    def __init__(self, spec):
        super().__init__(spec)
        self.net = nn.Linear(spec.state_dim, spec.chunk_dim)

    def loss(self, batch):
        return self.net(batch.state).pow(2).mean()


class VectorLoss(NoPredict):
    def loss(self, batch):
        return self.net(batch.state).pow(2).mean(1)  # not a scalar

    def predict(self, batch):
        return self.net(batch.state)


class NotAMethod:
    pass
"""


@pytest.mark.parametrize(
    "method,match",
    [
        ("no_such_module:Policy", "cannot import the method class no_such_module:Policy.*NotFound.*PYTHONPATH"),
        ("bad_methods:Missing", "module bad_methods .* has no class Missing"),
        ("bad_methods:NotAMethod", "not a subclass of r2s2r_envs.policies.method.Method"),
        ("bad_methods:NoPredict", "does not define predict"),
        ("bad_methods", "(unknown method|invalid choice:) 'bad_methods'.*module:Class"),
    ],
)
def test_unusable_method_classes_are_refused_before_any_data_is_read(
    workdir: Path, capsys: pytest.CaptureFixture[str], method: str, match: str
) -> None:
    (workdir / "bad_methods.py").write_text(BAD_METHODS)
    config = TrainConfig(method=method, real=("missing.hdf5",), real_fraction=1.0, out="never", progress=False)
    with pytest.raises(ConfigError, match=match):
        train(config)  # refused before the missing dataset is looked at
    try:
        rc = main(_train_argv(method, "never"))
    except SystemExit as exc:  # argparse refuses what is neither a method's name nor module:Class
        rc = exc.code
    assert rc == 2 and re.search(match, capsys.readouterr().err)
    assert not (workdir / "never").exists()


def test_a_loss_that_is_not_a_scalar_is_named(workdir: Path) -> None:
    (workdir / "bad_methods.py").write_text(BAD_METHODS)
    with pytest.raises(ConfigError, match=r"bad_methods:VectorLoss.loss returned Tensor: return a scalar tensor"):
        train(
            TrainConfig(
                method="bad_methods:VectorLoss",
                real=("real.hdf5",),
                real_fraction=1.0,
                out="never",
                progress=False,
                steps=2,
                batch_size=8,
            )
        )


def test_import_method_checks_the_class() -> None:
    with pytest.raises(MethodError, match="not of the form module:Class"):
        import_method("not a path")
    with pytest.raises(MethodError, match="does not define loss and predict"):
        import_method("r2s2r_envs.policies.method:Method")
    assert issubclass(Method, torch.nn.Module)


def test_a_checkpoint_whose_method_cannot_be_imported_is_refused_clearly(
    workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (workdir / "byo_bc.py").write_text(byo_method())
    assert main(_train_argv("byo_bc:DomainWeightedBC", "runs/x")) == 0
    (workdir / "byo_bc.py").unlink()  # the module is gone where the policy is loaded
    monkeypatch.delitem(sys.modules, "byo_bc", raising=False)
    with pytest.raises(CheckpointError, match="trained with the method class byo_bc:DomainWeightedBC, which cannot"):
        load_policy("runs/x")
    with pytest.raises(PolicySpecError, match="cannot import the method class byo_bc:DomainWeightedBC"):
        resolve_policy_spec("runs/x")(None)
    argv = ["evaluate", "--policy", "runs/x", "--env", LAB, "--episodes", "1", "--num-objects", "1", "--no-progress"]
    assert main(argv) == 2
    assert "cannot load the policy directory runs/x" in capsys.readouterr().err
    # The module back, edited: it loads, with a warning that its code changed since training.
    (workdir / "byo_bc.py").write_text(byo_method() + "\n# edited\n")
    with pytest.warns(UserWarning, match="not the file it was trained with"):
        load_policy("runs/x")
