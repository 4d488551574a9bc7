"""The leaderboard's pages: Markdown tables and a self-contained HTML page with plotly plots.

Rendering only: :mod:`r2s2r_envs.evaluation.leaderboard` reads and groups the results into a ``Leaderboard``;
this module turns one into ``leaderboard.md`` (:func:`to_markdown`) and ``index.html`` (:func:`to_html`, plotly.js
inline so the page opens offline and without a server).  Every text that comes from a result file is escaped.
docs/leaderboard.md describes the tables and plots.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import Any, cast

from r2s2r_envs.evaluation.intervals import column_mdd
from r2s2r_envs.evaluation.leaderboard import NO_VARIANT, Cell, Leaderboard, PanelFigures, split_mark


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def _cell_text(cell: Cell | None) -> str:
    if cell is None:
        return "-"
    spread = "" if cell.seed_std is None else f" ± {_pct(cell.seed_std)}"
    low, high = cell.ci95
    return f"{_pct(cell.mean)}{spread} [{_pct(low)}, {_pct(high)}] (n={len(cell.seeds)})"


def _panel_text(panel: PanelFigures, k: int) -> str:
    mean, ci = panel.means[k], panel.ci95[k]
    if mean is None or ci is None:
        return "-"
    return f"{_pct(mean)} [{_pct(ci[0])}, {_pct(ci[1])}] (labs={len(panel.labs)})"


def _tau(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _fmt(value: Any) -> str:
    return "-" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def _same(text: str) -> str:
    return text


def panel_notes(board: Leaderboard, untrusted: Callable[[str], str] = _same) -> list[str]:
    """Per panel: which rows have no panel figure and why (the labs they lack), then the rank agreement between
    the labs: Kendall tau of each pair over the rows covering the panel, and its mean."""
    lines = []
    for p in board.panels:
        labs = ", ".join(untrusted(lab) for lab in p.labs)
        head = f"{untrusted(p.label)}: mean over the labs {labs} [t-interval 95% over the labs]."
        lacking = [
            f"#{k + 1} lacks {', '.join(untrusted(lab) for lab in missing)}"
            for k, missing in enumerate(p.missing)
            if missing
        ]
        if lacking:
            head += " No panel figure for a row not evaluated on every lab: " + "; ".join(lacking) + "."
        lines.append(head)
        taus = "; ".join(f"{untrusted(a)}/{untrusted(b)} {_tau(t)}" for a, b, t in p.tau)
        covering = sum(m is not None for m in p.means)
        lines.append(
            f"Rank agreement between labs (Kendall tau over the {covering} rows covering the panel): mean "
            f"{_tau(p.mean_tau)}; {taus}."
        )
    return lines


def _table(board: Leaderboard, untrusted: Callable[[str], str] = _same) -> tuple[list[str], list[list[str]]]:
    """The rows table; ``untrusted`` is applied to every text that comes from a result file (method, variant, env
    labels with lab and grounding names, dataset hashes, numbers that are not numbers)."""
    header = ["#", "method", "variant", "real_fraction", "demos real/sim"]
    header += [f"{untrusted(c.label)} success %" for c in board.envs]
    header += [f"{untrusted(p.label)} success %" for p in board.panels] + ["datasets (sha256)"]
    body = []
    for i, r in enumerate(board.rows, 1):
        line = [str(i), untrusted(str(r.method)) + split_mark(r.split), untrusted(str(r.variant or NO_VARIANT))]
        line.append(untrusted(_fmt(r.real_fraction)))
        line.append(untrusted(f"{_fmt(r.n_real_demos)}/{_fmt(r.n_sim_demos)}"))
        line += [_cell_text(r.cells.get(c.label)) for c in board.envs]
        line += [_panel_text(p, i - 1) for p in board.panels]
        line.append(untrusted(", ".join(str(h)[:12] for h in r.datasets) or "-"))
        body.append(line)
    return header, body


def _condition_table(board: Leaderboard, untrusted: Callable[[str], str] = _same) -> tuple[list[str], list[list[str]]]:
    """Per condition and "all shifted", when the results hold several conditions (docs/protocol.md#conditions): each
    row's mean success over its seeds with the Wilson 95% interval of its pooled episodes, per env; else empty."""
    first = next(iter(board.rows[0].cells.values()), None) if board.rows else None
    names = list(first.conditions) if first is not None else []
    if len(names) < 2:
        return [], []
    header = ["#", "method", "variant"] + [f"{untrusted(c.label)} {untrusted(n)} %" for c in board.envs for n in names]
    body = []
    for i, r in enumerate(board.rows, 1):
        line = [str(i), untrusted(str(r.method)) + split_mark(r.split), untrusted(str(r.variant or NO_VARIANT))]
        for c in board.envs:
            cell = r.cells.get(c.label)
            for name in names:
                f = cell.conditions.get(name) if cell is not None else None
                line.append("-" if f is None else f"{_pct(f['mean'])} [{_pct(f['ci95'][0])}, {_pct(f['ci95'][1])}]")
        body.append(line)
    return header, body


def _ranking_table(board: Leaderboard, untrusted: Callable[[str], str] = _same) -> tuple[list[str], list[list[str]]]:
    header = ["simulated env", "lab", "rows", "Pearson", "MMRV"]
    body = [
        [
            untrusted(a.sim_env),
            untrusted(a.lab_env),
            str(len(a.rows)),
            "n/a" if a.pearson is None else f"{a.pearson:.3f}",
            f"{a.mmrv:.3f}",
        ]
        for a in board.ranking
    ]
    return header, body


NOTES = (
    "Success % per env: mean over training seeds ± standard deviation over seeds, [Wilson 95% interval of all "
    "episodes pooled], (n = training seeds). Rows: method, grounding variant of the sim data, real_fraction, "
    "numbers of demos and dataset hashes. Ranking: Pearson correlation (1 is best; n/a when one side is constant) "
    "and mean maximum rank violation MMRV(sim, lab) (0 is best, in success-rate fractions) over the rows evaluated "
    "in both envs."
)

NO_RANKING = "Sim-vs-lab ranking: needs at least two rows evaluated both in a simulated env and in the lab."


# Markdown's own syntax (emphasis, code, links and images, tables, strikethrough) and its escape character.
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")


def _md_escape(text: str) -> str:
    """Text from a result file as inert Markdown: HTML as entities (no tag survives), Markdown syntax escaped,
    line breaks and control characters as one space."""
    return _MD_SPECIAL.sub(r"\\\1", html.escape(_CONTROL.sub(" ", str(text)), quote=False))


def mdd_note(board: Leaderboard, untrusted: Callable[[str], str] = _same) -> str:
    """Each column's minimum detectable difference between two rows (``intervals.column_mdd``: from the spread of
    the rows' per-seed success rates, at their typical seed count; from episode noise alone when no row has two
    seeds), as a line under the rows table; rows closer than it are not told apart."""
    parts = []
    for env in board.envs:
        cells = [r.cells[env.label] for r in board.rows if env.label in r.cells]
        if not cells:
            continue
        episodes = max(1, round(sum(c.episodes / len(c.seeds) for c in cells) / len(cells)))
        mdd = column_mdd([c.success_rates for c in cells], episodes=episodes)
        if mdd is not None:
            parts.append(f"{untrusted(env.label)} {_pct(mdd)}")
    if not parts:
        return ""
    return "Minimum detectable difference between two rows, points (80% power, two-sided 5%): " + "; ".join(parts)


def to_markdown(board: Leaderboard, title: str) -> str:
    """The leaderboard as Markdown: the rows table with each column's minimum detectable difference, the ranking
    table, notes and skipped files."""
    lines = [f"# {_md_escape(title)}", "", NOTES, ""]
    tables = (_table(board, _md_escape), _condition_table(board, _md_escape), _ranking_table(board, _md_escape))
    for i, (header, body) in enumerate(tables):
        if body:
            lines.append("| " + " | ".join(header) + " |")
            lines.append("|" + "---|" * len(header))
            lines += ["| " + " | ".join(row) + " |" for row in body]
            lines.append("")
            note = mdd_note(board, _md_escape) if i == 0 else ""
            if note:
                lines += [note, ""]
            if i == 0:
                lines += [line for note in panel_notes(board, _md_escape) for line in (note, "")]
    if not board.ranking:
        lines += [NO_RANKING, ""]
    lines.append(f"{len(board.results)} result files.")
    for path, why in board.skipped:
        lines.append(f"- skipped {_md_escape(path)}: {_md_escape(why)}")
    return "\n".join(lines) + "\n"


def _html_table(table_id: str, header: list[str], body: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row) + "</tr>" for row in body)
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'


def _chart_escape(text: str) -> str:
    """Text as plotly shows it literally: plotly renders a subset of HTML in every text it draws (``<a href>``,
    ``<b>``, ``<br>``, ...) and decodes entities after it has found the tags, so entities make tags inert."""
    return html.escape(_CONTROL.sub(" ", text), quote=False)


def _inert(value: Any) -> Any:
    """A figure's data or layout with every string escaped for plotly (:func:`_chart_escape`), at any depth."""
    if isinstance(value, str):
        return _chart_escape(value)
    if isinstance(value, dict):
        return {k: _inert(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_inert(v) for v in value]
    return value


def _inert_figure(fig: Any) -> dict[str, Any]:
    """A plotly figure as a dict whose every text (trace names, category labels, hover texts, titles) is escaped:
    the one place where text reaches a chart, so no result can put a tag or a link into one. The theme's template
    is ours and kept as it is."""
    spec = fig.to_dict()
    layout = dict(spec.get("layout", {}))
    template = layout.pop("template", None)
    inert = {"data": _inert(spec.get("data", [])), "layout": _inert(layout)}
    if template is not None:
        inert["layout"]["template"] = template
    return inert


def _figures(board: Leaderboard) -> list[tuple[str, str, Any]]:
    """(div id, caption, plotly figure as an inert dict, see :func:`_inert_figure`) of each plot; lab plots only when
    there are lab results."""
    import plotly.graph_objects as go

    figures = []
    labs = [c for c in board.envs if c.is_lab]
    for k, lab in enumerate(labs):
        rows = [r for r in board.rows if lab.label in r.cells]
        fig = go.Figure()
        for method_rf in sorted({(r.method, _fmt(r.real_fraction)) for r in rows}):
            mine = [r for r in rows if (r.method, _fmt(r.real_fraction)) == method_rf]
            cells = [r.cells[lab.label] for r in mine]
            fig.add_trace(
                go.Bar(
                    name=f"{method_rf[0]} (real_fraction {method_rf[1]})",
                    x=[r.variant or NO_VARIANT for r in mine],
                    y=[c.mean for c in cells],
                    error_y=_interval_bars(cells),
                )
            )
        fig.update_layout(
            barmode="group",
            title=f"Lab success per variant: {lab.label}",
            xaxis_title="grounding variant of the sim data",
            yaxis={"title": "success rate (mean over seeds, Wilson 95%)", "range": [0, 1.05]},
        )
        figures.append((f"plot-lab-variant-{k}", "Lab success per grounding variant", fig))

        fig = go.Figure()
        with_rf = [r for r in rows if r.real_fraction is not None]
        for method, variant in sorted({(r.method, r.variant or NO_VARIANT) for r in with_rf}):
            mine = sorted(
                (r for r in with_rf if (r.method, r.variant or NO_VARIANT) == (method, variant)),
                key=lambda r: cast(float, r.real_fraction),  # with_rf: rows with a real_fraction
            )
            cells = [r.cells[lab.label] for r in mine]
            fig.add_trace(
                go.Scatter(
                    name=f"{method} / {variant}",
                    mode="lines+markers",
                    x=[r.real_fraction for r in mine],
                    y=[c.mean for c in cells],
                    error_y=_interval_bars(cells),
                )
            )
        fig.update_layout(
            title=f"Lab success against real_fraction: {lab.label}",
            xaxis={"title": "real_fraction (expected share of real samples per batch)", "range": [-0.05, 1.05]},
            yaxis={"title": "success rate (mean over seeds, Wilson 95%)", "range": [0, 1.05]},
        )
        figures.append((f"plot-lab-real-fraction-{k}", "Lab success against real_fraction", fig))
    if board.ranking:
        fig = go.Figure()
        for a in board.ranking:
            label = f"{a.sim_env} (Pearson {'n/a' if a.pearson is None else f'{a.pearson:.2f}'}, MMRV {a.mmrv:.3f})"
            fig.add_trace(go.Scatter(name=label, mode="markers", x=list(a.sim), y=list(a.lab), text=list(a.rows)))
        fig.add_trace(go.Scatter(name="sim = lab", mode="lines", x=[0, 1], y=[0, 1], line={"dash": "dot"}))
        fig.update_layout(
            title="Sim against lab success, one point per row",
            xaxis={"title": "success in the simulated env", "range": [-0.02, 1.02]},
            yaxis={"title": "success in the lab", "range": [-0.02, 1.02]},
        )
        figures.append(("plot-sim-vs-lab", "Sim against lab success", fig))
    return [(div_id, caption, _inert_figure(fig)) for div_id, caption, fig in figures]


def to_html(board: Leaderboard, title: str) -> str:
    """A self-contained HTML page: tables and plotly plots, with plotly.js inline (no network, no server)."""
    import plotly.io as pio
    from plotly.offline import get_plotlyjs

    header, body = _table(board)
    parts = [f"<h1>{html.escape(title)}</h1>", f"<p>{html.escape(NOTES)}</p>"]
    parts.append(_html_table("leaderboard-table", header, body))
    note = mdd_note(board)
    if note:
        parts.append(f'<p id="mdd-note">{html.escape(note)}</p>')
    parts += [f'<p class="panel-note">{html.escape(note)}</p>' for note in panel_notes(board)]
    header, body = _condition_table(board)
    if body:
        parts.append("<h2>Per condition</h2>")
        parts.append(_html_table("condition-table", header, body))
    if board.ranking:
        parts.append("<h2>Does the simulator rank policies as the lab does?</h2>")
        parts.append(_html_table("ranking-table", *_ranking_table(board)))
    else:
        parts.append(f"<p>{html.escape(NO_RANKING)}</p>")
    figures = _figures(board)
    if not any(c.is_lab for c in board.envs):
        parts.append("<p>No lab results yet: the lab plots appear once a result of PickSort-Real-v0 is added.</p>")
    for div_id, caption, fig in figures:
        parts.append(f"<h2>{html.escape(caption)}</h2>")
        parts.append(
            pio.to_html(
                fig,
                full_html=False,
                include_plotlyjs=False,
                div_id=div_id,
                config={"displaylogo": False},
                validate=False,  # built and validated as a go.Figure in _figures, then only its texts escaped
            )
        )
    skipped = "".join(f"<li>{html.escape(p)}: {html.escape(w)}</li>" for p, w in board.skipped)
    parts.append(f"<p>{len(board.results)} result files.</p>" + (f"<ul>{skipped}</ul>" if skipped else ""))
    style = (
        "body{font-family:sans-serif;margin:2em;max-width:1400px}table{border-collapse:collapse;margin:1em 0}"
        "td,th{border:1px solid #bbb;padding:4px 8px;font-size:90%;text-align:left}th{background:#eee}"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{style}</style>"
        f'<script type="text/javascript">{get_plotlyjs()}</script></head>'
        f"<body>{''.join(parts)}</body></html>\n"
    )


__all__ = ["NOTES", "panel_notes", "to_html", "to_markdown"]


def _interval_bars(cells: list[Any]) -> dict[str, Any]:
    """Plotly asymmetric error bars from each cell's mean to the ends of its 95% interval."""
    return {
        "type": "data",
        "symmetric": False,
        "array": [c.ci95[1] - c.mean for c in cells],
        "arrayminus": [c.mean - c.ci95[0] for c in cells],
    }
