"""Plotting and analysis are extras: the core dependencies leave them out, and code that needs one says which extra
to install (``r2s2r_envs.extras``), as a one-line error from ``r2s2r``."""

from __future__ import annotations

import importlib.util
import tomllib

import pytest
from conftest import REPO_ROOT
from packaging.requirements import Requirement

from r2s2r_envs import cli, extras
from r2s2r_envs.behavior import metrics
from r2s2r_envs.evaluation import leaderboard_pages

PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
#: The distribution of each module of an extra (its import name differs from the distribution's for two).
DISTRIBUTION = {"sklearn": "scikit-learn", "stable_baselines3": "stable-baselines3"}


def _names(requirements: list[str]) -> set[str]:
    return {Requirement(r).name.lower() for r in requirements}


def test_the_core_leaves_plotting_and_analysis_to_extras():
    core = _names(PYPROJECT["dependencies"])
    extras_declared = PYPROJECT["optional-dependencies"]
    for module, extra in extras.EXTRA_OF_MODULE.items():
        distribution = DISTRIBUTION.get(module, module)
        assert distribution not in core, f"{distribution} is a core dependency; it belongs to the {extra} extra"
        assert extra in extras_declared, f"no extra {extra!r} in pyproject.toml"
        assert any(distribution == n or n.startswith("r2s2r_envs[") for n in _names(extras_declared[extra]))
    everything = extras_declared["all"][0]
    assert set(Requirement(everything).extras) == set(extras_declared) - {"all"}


@pytest.fixture
def without(monkeypatch: pytest.MonkeyPatch):
    """Makes ``importlib.util.find_spec`` report the given top-level modules as not installed."""
    missing: set[str] = set()
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in missing else real(name, *a))
    return missing


def test_require_names_the_extra_and_its_install_command(without):
    without.add("plotly")
    with pytest.raises(extras.MissingExtraError, match=r"the page needs plotly; install the plots extra: pip install "):
        extras.require("plotly", what="the page")
    extras.require("matplotlib", what="a plot")  # installed: no error
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'r2s2r_envs\[plots\]'"):
        leaderboard_pages.to_html(None, "title")  # type: ignore[arg-type]  # refused before the board is read
    without.add("sklearn")
    with pytest.raises(extras.MissingExtraError, match=r"needs sklearn; install the analysis extra"):
        metrics.compare("a.hdf5", "b.hdf5")


def test_the_cli_reports_a_missing_extra_in_one_line(monkeypatch, capsys):
    def needs_plotly(args):
        raise ModuleNotFoundError("No module named 'plotly'", name="plotly")

    monkeypatch.setattr(cli, "_cmd_envs", needs_plotly)
    assert cli.main(["envs"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'r2s2r_envs[plots]'" in err and "No module named 'plotly'" in err

    def needs_other(args):
        raise ModuleNotFoundError("No module named 'nope'", name="nope")

    monkeypatch.setattr(cli, "_cmd_envs", needs_other)
    with pytest.raises(ModuleNotFoundError):  # not an extra's module: a real bug, shown with its traceback
        cli.main(["envs"])
