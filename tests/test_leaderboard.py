"""The leaderboard (``r2s2r_envs.evaluation.leaderboard``) and the sim-vs-lab ranking metrics.

Results are synthetic (records made by hand with the protocol's seeds), so grouping and statistics are checked
against hand-computed numbers without running an env.  The page is opened in a real headless Chromium: it must
load without console errors and show the tables and the plots.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from r2s2r_envs.cli import main
from r2s2r_envs.evaluation.leaderboard import LeaderboardError, build_leaderboard, group_results, load_results
from r2s2r_envs.evaluation.protocol import EpisodeRecord, EvaluationResult, evaluation_seeds
from r2s2r_envs.evaluation.ranking import mmrv, pearson
from r2s2r_envs.evaluation.stats import wilson_interval

LAB = "PickSort-Real-v0"
SIM = "PickSort-Ungrounded-v0"
HASH_REAL = "a" * 64
HASH_SIM = "b" * 64
CHROMIUM_INSTALL = "apt-get install -y chromium"


def synthetic_result(
    env_id: str,
    successes: int,
    episodes: int = 10,
    *,
    method: str = "bc",
    variant: str | None = "ungrounded",
    real_fraction: float | None = 0.5,
    training_seed: int | None = 0,
    policy_failures: int = 0,
) -> EvaluationResult:
    """A result with ``successes`` successful episodes out of ``episodes`` (one object each)."""
    records = []
    for i, (env_seed, policy_seed) in enumerate(evaluation_seeds(episodes)):
        ok = i < successes
        failed_policy = not ok and i >= episodes - policy_failures
        records.append(
            EpisodeRecord(
                index=i,
                env_seed=env_seed,
                policy_seed=policy_seed,
                is_success=ok,
                success_any_step=ok,
                sort_accuracy=1.0 if ok else 0.0,
                time_to_sort=4.0 if ok else None,
                failure_cause=None if ok else "policy_failure" if failed_policy else "missed",
                object_outcomes=("sorted",) if ok else ("policy_failure",) if failed_policy else ("missed",),
                steps=80,
                episode_return=1.0,
                terminated=ok or not failed_policy,
                truncated=failed_policy,
                unstable=False,
                policy_error="step 3: the action has NaN/inf at indices [0]" if failed_policy else None,
            )
        )
    domain = "real" if env_id == LAB else "sim"
    provenance = {"domain": domain, "num_objects": 1, "episode_steps": 500}
    if domain == "real":
        provenance["lab"] = {"name": "default", "config_sha256": "c" * 64}
    datasets = [{"name": "lab-50", "sha256": HASH_REAL, "domain": "real", "episodes": 50}]
    if variant is not None:
        datasets.append({"name": "ungrounded-1000", "sha256": HASH_SIM, "domain": "sim", "episodes": 1000})
    return EvaluationResult(
        env_id=env_id,
        env_kwargs={"num_objects": 1},
        provenance=provenance,
        policy={"name": method, "class": "r2s2r_envs.policies.Policy", "settings": None},
        method={
            "method": method,
            "policy_class": "r2s2r_envs.policies.Policy",
            "real_fraction": real_fraction,
            "variant": variant,
            "datasets": datasets,
            "training_seed": training_seed,
            "n_real_demos": 50,
            "n_sim_demos": 1000 if variant is not None else 0,
        },
        base_seed=271828,
        records=tuple(records),
        versions={"r2s2r_envs": "0.2.0", "mujoco": "4.0.0", "gymnasium": "1.4.0", "numpy": "2", "python": "3.11"},
        wall_time_s=1.0,
    )


def write(directory: Path, name: str, result: EvaluationResult) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(result.to_json(indent=2))
    return path


@pytest.fixture
def results_dir(tmp_path: Path) -> Path:
    """Three methods: bc (3 seeds, 2 envs), flow (2 seeds, 2 envs), cfg (1 seed, lab only) plus a non-result."""
    d = tmp_path / "results"
    # bc, lab: 6/10, 7/10, 8/10 -> mean 0.7, std 0.1, pooled 21/30.  sim: 9, 9, 9 -> 0.9.
    for seed, (lab, sim) in enumerate([(6, 9), (7, 9), (8, 9)]):
        write(d, f"bc/seed{seed}_lab.json", synthetic_result(LAB, lab, training_seed=seed))
        write(d, f"bc/seed{seed}_sim.json", synthetic_result(SIM, sim, training_seed=seed))
    # flow, lab: 3/10, 5/10 -> 0.4.  sim: 10, 10 -> 1.0.
    for seed, (lab, sim) in enumerate([(3, 10), (5, 10)]):
        write(d, f"flow/seed{seed}_lab.json", synthetic_result(LAB, lab, method="flow", training_seed=seed))
        write(d, f"flow/seed{seed}_sim.json", synthetic_result(SIM, sim, method="flow", training_seed=seed))
    # real-only bc, lab 2/10 (with two policy failures), sim 1/10.
    write(d, "bc_real/lab.json", synthetic_result(LAB, 2, variant=None, real_fraction=1.0, policy_failures=2))
    write(d, "bc_real/sim.json", synthetic_result(SIM, 1, variant=None, real_fraction=1.0))
    (d / "bc" / "config.json").write_text(json.dumps({"lr": 1e-3}))
    return d


# ---------------------------------------------------------------------- metrics
def test_wilson_interval_hand_computed():
    # 50/100: p = 0.5, z = 1.95996; centre 0.5, half-width z*sqrt(0.25/100 + z^2/40000)/(1 + z^2/100) = 0.0960.
    low, high = wilson_interval(50, 100)
    assert low == pytest.approx(0.40383, abs=1e-5) and high == pytest.approx(0.59617, abs=1e-5)
    # 0/10: low is exactly 0, high = z^2/n / (1 + z^2/n) = 0.27753.
    assert wilson_interval(0, 10) == (0.0, pytest.approx(0.27753, abs=1e-5))
    assert wilson_interval(10, 10) == (pytest.approx(0.72247, abs=1e-5), 1.0)


def test_pearson_and_mmrv_worked_example():
    sim, real = [0.8, 0.5, 0.6], [0.9, 0.45, 0.3]
    assert mmrv(sim, real) == pytest.approx(0.100, abs=1e-12)
    assert mmrv(real, sim) == pytest.approx(0.2 / 3, abs=1e-12)  # asymmetric: magnitudes from the second list
    assert pearson(sim, real) == pytest.approx(0.8386, abs=1e-4)
    assert pearson(real, sim) == pytest.approx(0.8386, abs=1e-4)


def test_ranking_metrics_edge_cases():
    assert mmrv([0.1, 0.5, 0.9], [0.2, 0.4, 0.8]) == 0.0  # same order: no violation
    assert pearson([0.1, 0.5, 0.9], [0.2, 0.6, 1.0]) == 1.0  # identical centred lists
    assert pearson([0.1, 0.2], [0.2, 0.1]) == pytest.approx(-1.0)
    # A tie in sim that the lab orders counts (strict >) for the policy the lab puts higher: (0 + 0.4) / 2.
    assert mmrv([0.5, 0.5], [0.2, 0.6]) == pytest.approx(0.2)
    assert pearson([0.5, 0.5], [0.2, 0.6]) is None  # sim constant: no ranking to agree with
    assert pearson([0.3], [0.4]) is None and mmrv([], []) == 0.0
    with pytest.raises(ValueError, match="same policies"):
        mmrv([0.1], [0.1, 0.2])
    with pytest.raises(ValueError, match="finite"):
        pearson([0.1, float("nan")], [0.1, 0.2])


# ---------------------------------------------------------------------- grouping
def test_rows_are_grouped_with_means_over_seeds(results_dir):
    results, skipped = load_results(results_dir)
    assert len(results) == 12 and [Path(p).name for p, _ in skipped] == ["config.json"]
    board = group_results(results, skipped)
    lab, sim = "PickSort-Real-v0 (lab default, 1 object)", "PickSort-Ungrounded-v0 (1 object)"
    assert [c.label for c in board.envs] == [lab, sim]  # the lab first
    assert [r.label for r in board.rows] == [  # sorted by lab success
        "bc / ungrounded @ real_fraction 0.5",
        "flow / ungrounded @ real_fraction 0.5",
        "bc / none (real only) @ real_fraction 1",
    ]
    bc, flow, real_only = board.rows
    cell = bc.cells[lab]
    assert cell.seeds == (0, 1, 2) and cell.success_rates == (0.6, 0.7, 0.8)
    assert cell.mean == pytest.approx(0.7) and cell.seed_std == pytest.approx(0.1)
    assert (cell.successes, cell.episodes) == (21, 30) and cell.ci95 == wilson_interval(21, 30)
    assert cell.sort_accuracy == pytest.approx(0.7) and cell.time_to_sort == pytest.approx(4.0)
    assert bc.cells[sim].mean == pytest.approx(0.9) and bc.cells[sim].seed_std == pytest.approx(0.0)
    assert flow.cells[lab].mean == pytest.approx(0.4) and flow.cells[sim].mean == pytest.approx(1.0)
    assert real_only.cells[lab].seed_std is None and real_only.cells[lab].policy_failures == 2
    assert bc.datasets == (HASH_REAL, HASH_SIM) and real_only.datasets == (HASH_REAL,)
    (agreement,) = board.ranking
    assert agreement.sim_env == sim and agreement.lab_env == lab
    assert agreement.sim == pytest.approx((0.9, 1.0, 0.1)) and agreement.lab == pytest.approx((0.7, 0.4, 0.2))
    assert agreement.mmrv == pytest.approx(mmrv([0.9, 1.0, 0.1], [0.7, 0.4, 0.2]))
    assert agreement.mmrv == pytest.approx((0.3 + 0.3 + 0.0) / 3)  # bc and flow are swapped by 0.3
    assert agreement.pearson == pytest.approx(pearson([0.9, 1.0, 0.1], [0.7, 0.4, 0.2]))


def test_duplicate_and_invalid_results_are_clear_errors(results_dir):
    write(results_dir, "again/bc_seed0_lab.json", synthetic_result(LAB, 1, training_seed=0))
    with pytest.raises(LeaderboardError, match="two results for the same policy.*keep one"):
        group_results(load_results(results_dir)[0])
    (results_dir / "again" / "bc_seed0_lab.json").unlink()
    data = synthetic_result(LAB, 1, training_seed=5).to_dict()
    data["method"]["real_fraction"] = 2.0
    (results_dir / "broken.json").write_text(json.dumps(data))
    with pytest.raises(LeaderboardError, match=r"broken\.json: result\.method\.real_fraction: expected <= 1"):
        load_results(results_dir)
    with pytest.raises(LeaderboardError, match="does not exist"):
        load_results(results_dir / "nope")
    with pytest.raises(LeaderboardError, match="no evaluation results"):
        group_results([])


def test_cli_writes_markdown_html_and_json(results_dir, tmp_path, capsys):
    out = tmp_path / "board"
    assert main(["leaderboard", str(results_dir), "--out", str(out)]) == 0
    assert "12 results, 3 rows" in capsys.readouterr().out
    md = (out / "leaderboard.md").read_text()
    assert "| 1 | bc | ungrounded | 0.5 | 50/1000 | 70.0 ± 10.0 [52.1, 83.3] (n=3) |" in md
    assert "| PickSort-Ungrounded-v0 (1 object) | PickSort-Real-v0 (lab default, 1 object) | 3 |" in md
    assert "aaaaaaaaaaaa, bbbbbbbbbbbb" in md and "skipped" in md
    data = json.loads((out / "leaderboard.json").read_text())
    assert data["rows"][0]["cells"]["PickSort-Real-v0 (lab default, 1 object)"]["mean"] == pytest.approx(0.7)
    page = (out / "index.html").read_text()
    assert 'id="leaderboard-table"' in page and 'id="ranking-table"' in page
    from plotly.offline import get_plotlyjs

    assert "<script src=" not in page and get_plotlyjs()[:2000] in page  # plotly.js inline: works offline
    assert main(["leaderboard", str(tmp_path / "missing"), "--out", str(out)]) == 2  # bad input, before any work


def test_markdown_gives_each_column_its_minimum_detectable_difference(results_dir, tmp_path):
    from scipy import stats

    out = tmp_path / "board"
    assert main(["leaderboard", str(results_dir), "--out", str(out)]) == 0
    md = (out / "leaderboard.md").read_text()
    # Lab column: bc seeds 0.6/0.7/0.8 and flow 0.3/0.5 pool a seed variance of (0.01 * 2 + 0.02) / 3 on 3 degrees
    # of freedom; the real-only row has one seed. Two rows of the median 2 seeds differ detectably from:
    se = (2 * (0.01 * 2 + 0.02) / 3 / 2) ** 0.5
    lab = (stats.t.ppf(0.975, 3) + stats.t.ppf(0.8, 3)) * se
    assert f"PickSort-Real-v0 (lab default, 1 object) {100 * lab:.1f}" in md
    assert md.index("Minimum detectable difference between two rows") < md.index("| simulated env |")
    page = (out / "index.html").read_text()
    assert '<p id="mdd-note">Minimum detectable difference between two rows' in page
    assert f"PickSort-Real-v0 (lab default, 1 object) {100 * lab:.1f}" in page


EVIL = [
    "</script><script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "[click](javascript:alert(1))",
    "![pixel](http://tracker.example/p.png)",
    "a | b\n| forged | row |",
]


@pytest.mark.parametrize("evil", EVIL)
@pytest.mark.parametrize("where", ["method", "lab name", "variant"])
def test_untrusted_text_is_escaped_in_every_output(tmp_path, evil, where):
    d = tmp_path / "results"
    for name, env_id in (("a.json", LAB), ("b.json", SIM)):
        result = synthetic_result(env_id, 3, method=evil if where == "method" else "bc")
        data = result.to_dict()
        if where == "lab name" and env_id == LAB:
            data["provenance"]["lab"]["name"] = evil
        if where == "variant":
            data["method"]["variant"] = evil
        (d / name).parent.mkdir(parents=True, exist_ok=True)
        (d / name).write_text(json.dumps(data))
    board = build_leaderboard(d, tmp_path / "out")
    page = (tmp_path / "out" / "index.html").read_text()
    md = (tmp_path / "out" / "leaderboard.md").read_text()
    assert len(board.rows) == 1
    assert "<" not in evil or evil not in page  # HTML escaped in the page (Markdown syntax is inert there)
    assert "<" not in md.replace("&lt;", "")  # no tag of any kind
    assert "](" not in md.replace("\\](", "")  # no link or image
    lines = md.splitlines()
    columns = lines[lines.index(next(x for x in lines if x.startswith("|---"))) - 1]
    width = len(re.findall(r"(?<!\\)\|", columns))
    rows = [x for x in lines if x.startswith("|") and not x.startswith("|---")]
    assert all(len(re.findall(r"(?<!\\)\|", x)) == width for x in rows[:2])  # no cell split, no forged row
    assert not any(x.startswith("| forged") for x in lines)


LINK = '<a href="https://example.com/x">link</a>'


def _markup_board(tmp_path: Path, markup: str = LINK):
    """Two rows (lab and sim) whose method, variant and lab name carry markup."""
    d = tmp_path / "results"
    for seed in (0, 1):
        for name, env_id in ((f"lab{seed}.json", LAB), (f"sim{seed}.json", SIM)):
            data = synthetic_result(env_id, 3 + seed, method=markup, training_seed=0).to_dict()
            data["method"]["variant"] = f"<b>{seed}</b>"
            if env_id == LAB:
                data["provenance"]["lab"]["name"] = "<i>lab</i>"
            write_dict(d / name, data)
    return build_leaderboard(d, tmp_path / "out")


def write_dict(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def _strings(value, where=""):
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, f"{where}.{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _strings(v, f"{where}[{i}]")


def test_no_text_reaches_a_chart_as_markup(tmp_path):
    """Plotly renders <a href>, <b>, <i>, <br> in trace names, category labels, hover texts and titles (issue 50)."""
    from r2s2r_envs.evaluation.leaderboard_pages import _figures

    board = _markup_board(tmp_path)
    figures = _figures(board)
    assert [div for div, _, _ in figures] == ["plot-lab-variant-0", "plot-lab-real-fraction-0", "plot-sim-vs-lab"]
    texts = []
    for _, _, fig in figures:
        layout = {k: v for k, v in fig["layout"].items() if k != "template"}
        texts += list(_strings(fig["data"], "data")) + list(_strings(layout, "layout"))
    assert [(w, t) for w, t in texts if "<" in t or ">" in t] == []
    joined = " ".join(t for _, t in texts)
    assert '&lt;a href="https://example.com/x"&gt;link&lt;/a&gt;' in joined  # shown, as text
    assert "&lt;b&gt;0&lt;/b&gt;" in joined and "&lt;i&gt;lab&lt;/i&gt;" in joined


@pytest.mark.slow
def test_no_link_or_tag_is_drawn_in_the_browser(tmp_path):
    _markup_board(tmp_path)
    dom, log, _ = _open_in_chromium(tmp_path / "out" / "index.html", tmp_path)
    assert _console_errors(log) == [], _console_errors(log)
    plots = re.findall(r'<div id="plot-[^"]*"[^>]*>(.*?)</div>\s*<script', dom, re.S)
    assert len(plots) == 3 and all("main-svg" in p for p in plots)
    svg = "".join(plots)
    assert not re.search(r"<a[\s>]", svg)  # no link element
    assert not re.search(r"font-weight: ?bold|font-style: ?italic", svg)  # no <b> or <i> drawn as such
    assert '>&lt;a href="https://example.com/x"&gt;link&lt;/a&gt;' in svg  # the method name is drawn, as text


def test_odd_files_in_the_results_folder_are_skipped_with_the_reason(results_dir, tmp_path):
    (results_dir / "folder.json").mkdir()
    (results_dir / "dangling.json").symlink_to(tmp_path / "nowhere.json")
    (results_dir / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    results, skipped = load_results(results_dir)
    reasons = {Path(p).name: why for p, why in skipped}
    assert len(results) == 12
    assert reasons["folder.json"] == "a folder, not a result file"
    assert reasons["dangling.json"] == "a link to nothing, not a result file"
    assert "nested 100000 levels deep; at most 64" in reasons["deep.json"]


def _flip(path: Path, offset: int, mask: int = 0x01) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= mask
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["invalid JSON", "format value", "format key"])
def test_a_damaged_result_file_fails_the_build_unless_skipped(results_dir, tmp_path, capsys, damage):
    """A flipped byte that makes a result unreadable or changes its format must not silently drop it (issue 50)."""
    path = results_dir / "flow" / "seed1_lab.json"
    text = path.read_text()
    if damage == "invalid JSON":
        _flip(path, text.index('"records"') - 1, 0x40)  # the whitespace before a key: no longer JSON
    elif damage == "format value":
        _flip(path, text.index("evaluation_result"))
    else:
        _flip(path, text.index('"format"') + 2)
    with pytest.raises(LeaderboardError, match=r"1 file\(s\) under .* look like damaged evaluation results"):
        load_results(results_dir)
    out = tmp_path / "board"
    assert main(["leaderboard", str(results_dir), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "seed1_lab.json" in err and "--skip-damaged" in err and "Traceback" not in err
    assert not out.exists()
    assert main(["leaderboard", str(results_dir), "--out", str(out), "--skip-damaged"]) == 0
    assert "skipped" in capsys.readouterr().err and "seed1_lab.json" in (out / "leaderboard.json").read_text()
    results, skipped = load_results(results_dir, skip_damaged=True)
    assert len(results) == 11 and sorted(Path(p).name for p, _ in skipped) == ["config.json", "seed1_lab.json"]


def test_other_json_files_are_not_taken_for_damaged_results(results_dir):
    (results_dir / "log.json").write_text('{"format": "training_log", "loss": [1, 2]}')
    (results_dir / "notes.json").write_text("not json at all, mentions episodes and records without quotes")
    (results_dir / "hashed.json").write_text(json.dumps({"weights_sha256": "0" * 64, "content_sha256": "1" * 64}))
    results, skipped = load_results(results_dir)
    assert len(results) == 12 and len(skipped) == 4


@pytest.mark.parametrize("out", ["a-file", "a-file/below"])
def test_an_output_that_is_a_file_is_one_line_error(results_dir, tmp_path, capsys, out):
    (tmp_path / "a-file").write_text("")
    assert main(["leaderboard", str(results_dir), "--out", str(tmp_path / out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("r2s2r leaderboard: error:") and err.count("\n") == 1 and "a-file" in err


# ---------------------------------------------------------------------- the page in a real browser
def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail(f"Chromium is needed to check the leaderboard page in a real browser: {CHROMIUM_INSTALL}")


def _open_in_chromium(page: Path, tmp_path: Path) -> tuple[str, str, Path]:
    """(DOM after the scripts ran, Chromium's log with console messages, screenshot path)."""
    chromium = _chromium()
    common = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--enable-logging=stderr",
        "--v=0",
        "--window-size=1400,3000",
        "--virtual-time-budget=5000",
    ]
    dom = subprocess.run([*common, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    shot = tmp_path / "page.png"
    run = subprocess.run([*common, f"--screenshot={shot}", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and shot.is_file(), run.stderr[-2000:]
    return dom.stdout, dom.stderr + run.stderr, shot


def _console_errors(log: str) -> list[str]:
    return [line for line in log.splitlines() if "CONSOLE" in line and re.search(r"error|uncaught", line, re.I)]


@pytest.mark.slow
def test_page_loads_in_headless_chromium(results_dir, tmp_path):
    build_leaderboard(results_dir, tmp_path / "board")
    dom, log, shot = _open_in_chromium(tmp_path / "board" / "index.html", tmp_path)
    assert _console_errors(log) == [], _console_errors(log)
    # The tables and every plot: plotly draws an SVG (class main-svg) into each plot's div when its script runs.
    assert 'id="leaderboard-table"' in dom and 'id="ranking-table"' in dom and "70.0 ± 10.0" in dom
    for div in ("plot-lab-variant-0", "plot-lab-real-fraction-0", "plot-sim-vs-lab"):
        match = re.search(f'<div id="{div}"[^>]*>(.*?)</div>\\s*<script', dom, re.S)
        assert match and "main-svg" in match.group(1), f"plot {div} was not drawn"
    from PIL import Image

    image = Image.open(shot).convert("L")
    assert image.size == (1400, 3000) and len(np.unique(np.asarray(image))) > 20  # not a blank page


@pytest.mark.slow
def test_the_browser_check_catches_a_broken_page(tmp_path):
    # The check above would pass vacuously if console errors never reached the log: prove they do.
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><html><body><p>x</p><script>undefinedFunction();</script></body></html>")
    _, log, _ = _open_in_chromium(page, tmp_path)
    assert any("undefinedFunction" in line for line in _console_errors(log)), log[-2000:]
