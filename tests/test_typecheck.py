"""The type check's baseline logic (.ci/typecheck.py): new errors fail, fixed ones let the baseline shrink."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _load():
    spec = importlib.util.spec_from_file_location("typecheck", REPO / ".ci" / "typecheck.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _mypy_says(monkeypatch, module, lines: list[str]) -> None:
    def fake_run(*args, **kwargs):
        return subprocess.CompletedProcess(args, 1 if lines else 0, stdout="\n".join(lines) + "\n", stderr="")

    monkeypatch.setattr(module.subprocess, "run", fake_run)


A = "r2s2r_envs/a.py:10: error: Item None has no attribute x  [union-attr]"
A_MOVED = "r2s2r_envs/a.py:42:5: error: Item None has no attribute x  [union-attr]"
B = "r2s2r_envs/b.py:3: error: Name y already defined on line 1  [no-redef]"


def test_new_errors_fail_and_fixed_ones_shrink_the_baseline(tmp_path, monkeypatch, capsys):
    tc = _load()
    monkeypatch.setattr(tc, "BASELINE", tmp_path / "baseline.txt")
    _mypy_says(monkeypatch, tc, [A, B, "r2s2r_envs/a.py:11: note: a note is not an error"])
    assert tc.main(["--update"]) == 0  # no baseline yet: the first one is written
    assert (tmp_path / "baseline.txt").read_text().splitlines()[1:] == [
        "r2s2r_envs/a.py: [union-attr] Item None has no attribute x",
        "r2s2r_envs/b.py: [no-redef] Name y already defined",
    ]
    # The same errors on other lines are the same baseline entries.
    _mypy_says(monkeypatch, tc, [A_MOVED, B])
    assert tc.main([]) == 0 and "2 known error(s), none new" in capsys.readouterr().out
    # One more of a kind is new, and so fails, and --update will not take it in.
    _mypy_says(monkeypatch, tc, [A, A_MOVED, B])
    assert tc.main([]) == 1 and tc.main(["--update"]) == 1
    assert "1 type error(s) not in" in capsys.readouterr().err
    # A fixed error is reported; --update drops it.
    _mypy_says(monkeypatch, tc, [A])
    assert tc.main([]) == 0 and "1 fixed: run" in capsys.readouterr().out
    assert tc.main(["--update"]) == 0
    assert len((tmp_path / "baseline.txt").read_text().splitlines()) == 2


def test_output_it_cannot_read_stops_the_check(tmp_path, monkeypatch):
    tc = _load()
    monkeypatch.setattr(tc, "BASELINE", tmp_path / "baseline.txt")
    _mypy_says(monkeypatch, tc, ["mypy: can't read file 'x': No such file or directory"])
    with pytest.raises(SystemExit, match="mypy did not run as expected"):
        tc.main([])
