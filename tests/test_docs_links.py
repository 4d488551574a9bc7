"""Links between the project's pages stay valid: every relative Markdown link in the user docs, the README, the
changelog, the contributing guide, the course, the record READMEs under benchmarks/results/ and experiments/ names
a file that exists and, when it names an anchor of a Markdown page, a heading (or an ``<a id>``) that page has; every
``docs/<page>.md#<anchor>`` cited in the package, the tests, the benchmarks, the experiments, the baselines or those
pages names an anchor of that page.

Anchors are GitHub's heading slugs: lower case, punctuation other than ``-`` and ``_`` dropped, spaces as ``-``,
``-1``, ``-2`` ... for repeated headings. Fenced code blocks are not read.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Pages whose relative links are checked.
PAGES = sorted(
    [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "CONTRIBUTING.md"]
    + list((ROOT / "docs").glob("*.md"))
    + list((ROOT / "course").glob("*.md"))
    + list((ROOT / "benchmarks" / "results").glob("*/README.md"))
    + list((ROOT / "experiments").glob("README.md"))
    + list((ROOT / "experiments").glob("*/README.md"))
)
#: Source folders whose ``docs/<page>.md#<anchor>`` citations are checked.
SOURCE_DIRS = ("r2s2r_envs", "tests", "benchmarks", "experiments", "baselines")

FENCE = re.compile(r"^```.*?^```", re.S | re.M)
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*$", re.M)
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")
# A citation whose anchor runs to the end of a line may be wrapped there: only whole ones are checked.
CITATION = re.compile(r"docs/([\w-]+\.md)#([\w-]*[\w])(?![\w-])")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading's text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps its text
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


@cache
def anchors(page: Path) -> frozenset[str]:
    """The anchors a Markdown page defines."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    found = set(HTML_ANCHOR.findall(text))
    for heading in HEADING.findall(text):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return frozenset(found)


def broken_links(page: Path) -> list[str]:
    """The relative links of ``page`` whose file or anchor does not exist."""
    bad = []
    for link in LINK.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", link):  # http:, https:, mailto: ...
            continue
        target, _, anchor = link.partition("#")
        path = (page.parent / target).resolve() if target else page
        if not path.exists():
            bad.append(f"{link}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            bad.append(f"{link}: no such anchor in {path.relative_to(ROOT)}")
    return bad


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path):
    bad = broken_links(page)
    assert not bad, f"{page.relative_to(ROOT)}: " + "; ".join(bad)


def test_cited_doc_anchors_exist():
    sources = [path for folder in SOURCE_DIRS for path in sorted((ROOT / folder).rglob("*.py"))] + PAGES
    bad = []
    for source in sources:
        for page, anchor in CITATION.findall(source.read_text(encoding="utf-8")):
            doc = ROOT / "docs" / page
            if not doc.exists():
                bad.append(f"{source.relative_to(ROOT)}: docs/{page} does not exist")
            elif anchor not in anchors(doc):
                bad.append(f"{source.relative_to(ROOT)}: docs/{page}#{anchor} is no anchor of that page")
    assert not bad, "\n".join(bad)


def test_slug_follows_github():
    assert slug("The four variants at 30,000 steps (`flow`)") == "the-four-variants-at-30000-steps-flow"
    assert slug("What the generator's data is, and what its policies do") == (
        "what-the-generators-data-is-and-what-its-policies-do"
    )
    assert slug("make_vec") == "make_vec"
