"""The user docs stay within the sizes a newcomer can read: the README at most 200 lines, with what the project is,
its two commands and its headline result in the first 60; docs/ at most 120,000 bytes. Experiment write-ups live
beside their records (experiments/, benchmarks/results/), outside this budget."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README_LINES = 200
DOCS_BYTES = 120_000


def test_readme_is_short_and_opens_with_the_essentials():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_LINES, f"README.md has {len(lines)} lines; at most {README_LINES}"
    first = "\n".join(lines[:60])
    for must in ("make demo", "make test", "gym.make(", "## Headline result"):
        assert must in first, f"{must!r} is not in the README's first 60 lines"


def test_docs_within_budget():
    sizes = {p.relative_to(ROOT).as_posix(): p.stat().st_size for p in (ROOT / "docs").rglob("*") if p.is_file()}
    total = sum(sizes.values())
    largest = sorted(sizes.items(), key=lambda kv: -kv[1])[:3]
    assert total <= DOCS_BYTES, f"docs/ holds {total:,} bytes, at most {DOCS_BYTES:,}; largest pages: {largest}"
