"""experiments/small_data.py: bad input refused before any work; the summary keeps configurations apart."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments"))
import small_data  # noqa: E402

RECORD = ROOT / "experiments" / "small-data"


def test_unknown_configuration_is_refused_with_the_choices(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exc:
        small_data.main(["--out", str(tmp_path / "out"), "--configs", "base,no-such"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "no-such" in err and "steps-4k-stack-4" in err
    assert not (tmp_path / "out").exists()  # nothing made before the check


def test_configurations_with_a_common_prefix_are_summarized_apart(tmp_path: Path) -> None:
    """``steps-4k`` must not pick up ``steps-4k-stack-4``'s results (their files share the prefix)."""
    names = ["base", "steps-4k", "steps-4k-stack-4"]
    for name in names:
        (tmp_path / "results").mkdir(exist_ok=True)
        shutil.copy(RECORD / "results" / f"{name}-s0.json", tmp_path / "results" / f"{name}-s0.json")
        shutil.copytree(RECORD / "train" / f"{name}-s0", tmp_path / "train" / f"{name}-s0")
    summary = small_data.summarize(tmp_path, names, replicates=200)
    assert {n: len(summary["rows"][n]["seeds"]) for n in names} == dict.fromkeys(names, 1)
    recorded = json.loads((RECORD / "summary.json").read_text())
    for name in names:
        assert summary["rows"][name]["success"]["estimate"] == recorded["rows"][name]["success"]["estimate"]
        assert list(summary["rows"][name]["failures"].items()) == list(recorded["rows"][name]["failures"].items())
    assert set(summary["versus_base"]) == {"steps-4k", "steps-4k-stack-4"}
