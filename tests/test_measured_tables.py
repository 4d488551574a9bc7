"""docs/measured.md's tables and the README's headline are what the committed JSON records give
(``benchmarks/measured_tables.py --check``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "measured_tables.py"
DOC = ROOT / "docs" / "measured.md"
README = ROOT / "README.md"


def check(doc: Path, readme: Path = README) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--check", "--doc", str(doc), "--readme", str(readme)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )


def test_measured_tables_match_records():
    run = check(DOC)
    assert run.returncode == 0, run.stdout + run.stderr


def test_check_fails_on_a_stale_table(tmp_path):
    """A figure edited by hand is caught, and the page is left as it was."""
    doc = DOC.read_text(encoding="utf-8")
    stale = doc.replace("| >= 8,000 | ", "| >= 8,000 | 1", 1)
    assert stale != doc
    page = tmp_path / "measured.md"
    page.write_text(stale, encoding="utf-8")
    run = check(page)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "differs from its records" in run.stderr
    assert page.read_text(encoding="utf-8") == stale


def test_check_fails_on_a_stale_readme_headline(tmp_path):
    text = README.read_text(encoding="utf-8")
    begin = text.index("<!-- BEGIN generated: headline -->")
    row = text.index("| 50 lab + 1,000 FullyGrounded demos |", begin)
    stale = text[:row] + text[row:].replace("] |", "] | 99.9", 1)
    assert stale != text
    readme = tmp_path / "README.md"
    readme.write_text(stale, encoding="utf-8")
    run = check(DOC, readme)
    assert run.returncode == 1, run.stdout + run.stderr
    assert f"{readme} differs from its records" in run.stderr
    assert readme.read_text(encoding="utf-8") == stale


def test_rows_without_a_record_state_no_figure():
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if "| no committed record |" in line:
            source = line.rsplit("|", 2)[1]
            assert "benchmarks/results/" in source or "experiments/" in source, line
