"""What the leaderboard page says about each row (issue 46, item 6): its seed count and a flag under the protocol's
minimum, its rank with ties where intervals overlap, its data, and plots where a 0% row and rows at the same place
stay visible.

Results are synthetic (``test_leaderboard.synthetic_result``); the page is checked in its Markdown and HTML text,
in the plots' data, and once in headless Chromium.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_leaderboard import LAB, SIM, _console_errors, _open_in_chromium, synthetic_result, write, write_dict

from r2s2r_envs.evaluation.intervals import MIN_TRAINING_SEEDS
from r2s2r_envs.evaluation.leaderboard import build_leaderboard
from r2s2r_envs.evaluation.leaderboard_pages import (
    MIN_SEEDS,
    _figures,
    data_labels,
    ranks,
    seeds_text,
    spread,
    to_html,
    to_markdown,
)
from r2s2r_envs.evaluation.stats import wilson_interval

EPISODES = 40
# The rows' methods, in the board's order (sorted by lab success).
ORDER = ["planner", "flow", "flow-cfg", "bc", "bc-real"]


@pytest.fixture
def board_dir(tmp_path: Path) -> Path:
    """Five rows, lab and sim (40 episodes a result):

    - ``planner``: a scripted policy (no training seed), lab 40/40;
    - ``flow`` and ``flow-cfg``: 3 seeds each, lab 38/40 and sim 36/40 every seed: the same point everywhere;
    - ``bc``: 2 seeds in the lab (10/40 each), 3 in the sim (20/40): under the minimum;
    - ``bc-real``: real only, 1 seed, 0/40 in the lab and in the sim.

    Lab intervals: planner [91.2, 100], flow and flow-cfg [89.5, 97.7] (tied with the planner), bc [16.8, 35.5],
    bc-real [0, 8.8]: ranks =1 =1 =1 4 5.
    """
    d = tmp_path / "results"
    for name, env_id in (("lab", LAB), ("sim", SIM)):
        write(d, f"planner/{name}.json", _result(env_id, 40, "planner", None, real_fraction=None, training_seed=None))
    for method in ("flow", "flow-cfg"):
        for seed in range(3):
            write(d, f"{method}/s{seed}_lab.json", _result(LAB, 38, method, training_seed=seed))
            write(d, f"{method}/s{seed}_sim.json", _result(SIM, 36, method, training_seed=seed))
    for seed in range(3):
        if seed < 2:
            write(d, f"bc/s{seed}_lab.json", _result(LAB, 10, "bc", training_seed=seed))
        write(d, f"bc/s{seed}_sim.json", _result(SIM, 20, "bc", training_seed=seed))
    write(d, "bc-real/lab.json", _result(LAB, 0, "bc-real", None, real_fraction=1.0))
    write(d, "bc-real/sim.json", _result(SIM, 0, "bc-real", None, real_fraction=1.0))
    return d


def _result(env_id, successes, method, variant="ungrounded", **kwargs):
    return synthetic_result(env_id, successes, EPISODES, method=method, variant=variant, **kwargs)


def _table(md: str) -> list[dict[str, str]]:
    """The first Markdown table of a page as one dict per row (no escaped pipe in these tests' texts)."""
    lines = md.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|---")) - 1
    header = [h.strip() for h in lines[start].strip("|").split("|")]
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(dict(zip(header, (v.strip() for v in line.strip("|").split("|")), strict=True)))
    return rows


def _build(directory: Path, out: Path):
    board = build_leaderboard(directory, out)
    return board, (out / "leaderboard.md").read_text(), (out / "index.html").read_text()


# ---------------------------------------------------------------------- seeds
def test_each_row_shows_its_seeds_and_rows_under_the_minimum_are_flagged(board_dir, tmp_path):
    # The minimum is the protocol's, as docs/leaderboard.md states it.
    docs = (Path(__file__).parents[1] / "docs" / "leaderboard.md").read_text()
    assert MIN_SEEDS == MIN_TRAINING_SEEDS == 3 and "three training seeds or more" in docs
    board, md, page = _build(board_dir, tmp_path / "out")
    assert [r.method for r in board.rows] == ORDER
    rows = _table(md)
    assert [r["method"] for r in rows] == ORDER
    assert [r["seeds"] for r in rows] == [
        "- (no training seed)",  # a scripted policy: no training seed, no minimum
        "3",
        "3",
        "2-3 ⚠ under 3",  # 2 seeds in the lab, 3 in the sim: the fewest decides
        "1 ⚠ under 3",
    ]
    assert rows[3][f"{LAB} (lab default, 1 object) success %"].endswith("(n=2)")  # the cells keep their own n
    assert [seeds_text(r) for r in board.rows] == [r["seeds"] for r in rows]
    assert "⚠ marks a row under the protocol's minimum of 3" in md
    # On the page: the flagged cells carry a class the style sheet paints, the others do not.
    flagged = re.findall(r'<td class="seeds under-minimum">([^<]*)</td>', page)
    assert flagged == ["2-3 ⚠ under 3", "1 ⚠ under 3"]
    assert page.count('<td class="seeds">') == 3 and "td.under-minimum{" in page


# ---------------------------------------------------------------------- ties
def test_rows_whose_intervals_overlap_are_tied_not_ranked(board_dir, tmp_path):
    board, md, page = _build(board_dir, tmp_path / "out")
    assert ranks(board) == [(1, True), (1, True), (1, True), (4, False), (5, False)]
    assert [r["rank"] for r in _table(md)] == ["=1 tied", "=1 tied", "=1 tied", "4", "5"]
    assert [r["#"] for r in _table(md)] == ["1", "2", "3", "4", "5"]  # the place in the table stays
    assert f"rank: by {LAB} (lab default, 1 object) success; rows whose Wilson 95% intervals there overlap" in md
    assert page.count('<td class="rank tied">=1 tied</td>') == 3 and page.count('<td class="rank">') == 2


def test_a_chain_of_overlapping_intervals_is_one_tie_and_a_row_without_the_column_is_unranked(tmp_path):
    # 30/40 [59.8, 85.8] overlaps 24/40 [44.6, 73.7], which overlaps 17/40 [28.5, 57.8]; the first and the last do
    # not overlap, yet nothing tells the middle row apart from either: the three are one tie.
    assert wilson_interval(30, 40)[0] > wilson_interval(17, 40)[1]
    d = tmp_path / "results"
    for method, successes in (("a", 30), ("b", 24), ("c", 17)):
        write(d, f"{method}.json", _result(LAB, successes, method))
    write(d, "sim-only.json", _result(SIM, 20, "d"))
    board, md, _ = _build(d, tmp_path / "out")
    assert [r.method for r in board.rows] == ["a", "b", "c", "d"]
    assert ranks(board) == [(1, True), (1, True), (1, True), None]
    assert [r["rank"] for r in _table(md)] == ["=1 tied", "=1 tied", "=1 tied", "-"]


def test_rows_apart_are_ranked_one_by_one(tmp_path):
    d = tmp_path / "results"
    for method, successes in (("a", 40), ("b", 20), ("c", 0)):  # [91.2, 100], [35.2, 64.8], [0, 8.8]
        write(d, f"{method}.json", _result(LAB, successes, method))
    board, md, _ = _build(d, tmp_path / "out")
    assert ranks(board) == [(1, False), (2, False), (3, False)]
    assert [r["rank"] for r in _table(md)] == ["1", "2", "3"]


# ---------------------------------------------------------------------- data labels
def test_rows_are_labelled_by_their_data(board_dir, tmp_path):
    # Two more rows of flow on the same names but other bytes (another lab-50 build), at another real_fraction:
    # names alone would not tell them from the fixture's flow row, so their labels carry the hashes.
    for seed in range(3):
        data = _result(LAB, 30, "flow", real_fraction=0.224, training_seed=seed).to_dict()
        data["method"]["datasets"][0]["sha256"] = "e" * 64
        write_dict(board_dir / f"flow-other/s{seed}.json", data)
    board, md, page = _build(board_dir, tmp_path / "out")
    labels = data_labels(board)
    rows = _table(md)
    assert [r["data"] for r in rows] == labels
    by_method = {r.method + ("@0.224" if r.real_fraction == 0.224 else ""): k for k, r in enumerate(board.rows)}
    # Every row named "lab-50 + ungrounded-1000" gets its hashes: the names are ambiguous on this board.
    assert labels[by_method["flow"]] == f"flow · lab-50 ({'a' * 12}) + ungrounded-1000 ({'b' * 12}) @ 0.5"
    assert labels[by_method["flow@0.224"]] == f"flow · lab-50 ({'e' * 12}) + ungrounded-1000 ({'b' * 12}) @ 0.224"
    assert labels[by_method["flow-cfg"]] == f"flow-cfg · lab-50 ({'a' * 12}) + ungrounded-1000 ({'b' * 12}) @ 0.5"
    assert labels[by_method["planner"]] == "planner · lab-50"  # no real_fraction recorded; one lab-50 here
    assert labels[by_method["bc-real"]] == "bc-real · lab-50 @ 1"
    assert len(set(labels)) == len(labels)
    # The plots name every row by its data too: in each marker's hover text, and in the real_fraction plot's traces.
    hovers = " ".join(t for _, _, fig in _figures(board) for trace in fig["data"] for t in trace.get("hovertext") or [])
    assert all(label in hovers for label in labels)
    names = [t["name"] for div, _, fig in _figures(board) if "real-fraction" in div for t in fig["data"]]
    assert f"flow / ungrounded · lab-50 ({'e' * 12}) + ungrounded-1000 ({'b' * 12})" in names
    assert f"flow-cfg · lab-50 ({'a' * 12}) + ungrounded-1000 ({'b' * 12}) @ 0.5" in page


def test_names_alone_label_rows_when_they_are_unambiguous(board_dir, tmp_path):
    board, md, _ = _build(board_dir, tmp_path / "out")
    assert [r["data"] for r in _table(md)] == [
        "planner · lab-50",
        "flow · lab-50 + ungrounded-1000 @ 0.5",
        "flow-cfg · lab-50 + ungrounded-1000 @ 0.5",
        "bc · lab-50 + ungrounded-1000 @ 0.5",
        "bc-real · lab-50 @ 1",
    ]


def test_rows_on_the_same_data_are_told_apart_by_their_place(tmp_path):
    # Same method, data and real_fraction, another variant name: the data label alone is the same; # tells them.
    d = tmp_path / "results"
    write(d, "a.json", _result(LAB, 30, "flow", "v1"))
    write(d, "b.json", _result(LAB, 20, "flow", "v2"))
    board, md, _ = _build(d, tmp_path / "out")
    assert data_labels(board) == [
        "flow · lab-50 + ungrounded-1000 @ 0.5 (#1)",
        "flow · lab-50 + ungrounded-1000 @ 0.5 (#2)",
    ]


# ---------------------------------------------------------------------- plots
def _trace_points(fig: dict) -> list[tuple[str, float, float]]:
    return [(t["name"], x, y) for t in fig["data"] if "markers" in t.get("mode", "") for x, y in zip(t["x"], t["y"])]


def test_a_zero_row_is_a_marker_inside_the_plot(board_dir, tmp_path):
    board, _, _ = _build(board_dir, tmp_path / "out")
    for div, _, fig in _figures(board):
        traces = [t for t in fig["data"] if t["name"] != "sim = lab"]
        assert all(t["type"] == "scatter" and "markers" in t["mode"] for t in traces), div  # no bar: 0 has a height
        assert all(t["cliponaxis"] is False for t in traces), div
        assert fig["layout"]["yaxis"]["range"][0] < 0, div  # 0 lies inside the plot, above the x axis
        zero = [y for _, _, y in _trace_points(fig) if y == 0]
        assert zero, f"{div}: the 0% row has no marker"
    variant = next(fig for div, _, fig in _figures(board) if div == "plot-lab-variant-0")
    assert len(_trace_points(variant)) == len(board.rows)  # one marker per row with a lab cell
    assert variant["layout"]["scattermode"] == "group"  # one variant's rows side by side, by trace


def test_spread_keeps_coinciding_markers_apart_and_leaves_the_others():
    offsets = spread([(0.5, 0.5), (0.5, 0.5), (0.2, 0.2), (0.505, 0.495), (0.2, 0.9)])
    assert offsets == pytest.approx([-0.012, 0.0, 0.0, 0.012, 0.0])
    assert spread([(0.1, 0.1)]) == [0.0] and spread([]) == []


def test_overlapping_markers_are_drawn_apart(board_dir, tmp_path):
    board, _, page = _build(board_dir, tmp_path / "out")
    figures = {div: fig for div, _, fig in _figures(board)}
    # flow and flow-cfg: the same point in the sim-vs-lab plot and at the same real_fraction; drawn apart.
    for div in ("plot-sim-vs-lab", "plot-lab-real-fraction-0"):
        points = [(x, y) for name, x, y in _trace_points(figures[div]) if name.startswith(("flow", "PickSort"))]
        same = [(x, y) for x, y in points if y == pytest.approx(0.95)]
        assert len(same) == 2 and abs(same[0][0] - same[1][0]) >= 0.01, div
    sim_vs_lab = figures["plot-sim-vs-lab"]
    xs = [x for _, x, _ in _trace_points(sim_vs_lab)]
    assert sorted(xs)[:1] == [0.0]  # bc-real alone at (0, 0): not moved
    hover = " ".join(sim_vs_lab["data"][0]["hovertext"])
    assert hover.count("sim 90.0%, lab 95.0%") == 2  # the hover text keeps the figures, not the drawn place
    assert to_html(board, "t") == to_html(board, "t") and to_markdown(board, "t") == to_markdown(board, "t")
    assert page == to_html(board, "Leaderboard")  # deterministic


@pytest.mark.slow
def test_the_page_draws_every_row_visibly_in_chromium(board_dir, tmp_path):
    board, _, _ = _build(board_dir, tmp_path / "out")
    dom, log, _ = _open_in_chromium(tmp_path / "out" / "index.html", tmp_path)
    assert _console_errors(log) == [], _console_errors(log)
    assert dom.count("⚠ under 3") == 2 and dom.count("=1 tied") == 3
    for div, rows in (("plot-lab-variant-0", 5), ("plot-sim-vs-lab", 5), ("plot-lab-real-fraction-0", 4)):
        match = re.search(f'<div id="{div}"[^>]*>(.*?)</div>\\s*<script', dom, re.S)
        assert match, div
        svg = match.group(1)
        # Every marker is drawn (plotly leaves a point off when it falls outside the plot), at its own place.
        points = [
            (float(x), float(y))
            for x, y in re.findall(r'class="point"[^>]*transform="translate\(([-\d.]+),\s*([-\d.]+)\)"', svg)
        ]
        assert len(points) == rows, (div, points)
        assert len({(round(x), round(y)) for x, y in points}) == rows, (div, points)
        # The plot area's height: the 0% row's marker lies above its bottom edge (the x axis), by a few pixels.
        height = float(re.search(r'class="nsewdrag drag"[^>]*height="([\d.]+)"', svg).group(1))
        assert max(y for _, y in points) < height - 5, (div, points, height)


def test_a_dataset_name_with_markup_stays_text(tmp_path):
    evil = '<a href="https://example.com/x">lab</a> | x\n| forged |'
    d = tmp_path / "results"
    for name, env_id in (("a.json", LAB), ("b.json", SIM)):
        data = _result(env_id, 20, "bc").to_dict()
        data["method"]["datasets"][0]["name"] = evil
        write_dict(d / name, data)
    board, md, page = _build(d, tmp_path / "out")
    table = re.search(r'<table id="leaderboard-table">.*?</table>', page, re.S).group(0)
    assert "<a " not in md and "<a " not in table and "&amp;lt;a href=" not in table and "&lt;a href=" in table
    assert "&lt;a href=" in md and "\\| x" in md and not any(line.startswith("| forged") for line in md.splitlines())
    texts = [t for _, _, fig in _figures(board) for trace in fig["data"] for t in trace.get("hovertext") or []]
    assert texts and all("<" not in t for t in texts) and any("&lt;a href=" in t for t in texts)
