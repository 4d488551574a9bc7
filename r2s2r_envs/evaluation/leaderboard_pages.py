"""The leaderboard's pages: Markdown tables and a self-contained HTML page with plotly plots.

Rendering only: :mod:`r2s2r_envs.evaluation.leaderboard` reads and groups the results into a ``Leaderboard``;
this module turns one into ``leaderboard.md`` (:func:`to_markdown`) and ``index.html`` (:func:`to_html`, plotly.js
inline so the page opens offline and without a server).  Every text that comes from a result file is escaped.
docs/leaderboard.md describes the tables and plots.  Beside the builder's figures, the pages compute per row its
rank with ties (:func:`ranks`: rows whose intervals overlap share one), its seed count flagged under the protocol's
minimum (:func:`seeds_text`, :data:`MIN_SEEDS`) and its data label (:func:`data_labels`); the plots draw every row as
a marker inside the axes (a 0% row too) and draw coinciding markers side by side (:func:`spread`).
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

from r2s2r_envs.evaluation.intervals import MIN_TRAINING_SEEDS, column_mdd
from r2s2r_envs.evaluation.leaderboard_data import (
    NO_VARIANT,
    Cell,
    EnvColumn,
    Leaderboard,
    PanelFigures,
    Row,
    split_mark,
)
from r2s2r_envs.extras import require

#: The protocol's minimum of training seeds per row (``intervals.MIN_TRAINING_SEEDS``): rows under it are flagged on
#: the pages, not refused.
MIN_SEEDS = MIN_TRAINING_SEEDS
#: Markers closer than this in both coordinates (success-rate fractions) are drawn side by side.
_OVERLAP = 0.01
#: How far apart, along x, such markers are drawn (axis units: about two marker widths on the page).
_SPREAD_STEP = 0.012


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


# ---------------------------------------------------------------------- per-row figures the pages add
def row_seeds(row: Row) -> tuple[int, int] | None:
    """The fewest and most training seeds of the row's cells, or None for a policy without a training seed (a
    scripted one: the minimum of seeds does not apply to it)."""
    counts = [len(c.seeds) for c in row.cells.values() if any(s is not None for s in c.seeds)]
    return (min(counts), max(counts)) if counts else None


def under_minimum(row: Row) -> bool:
    """Whether a cell of the row has fewer training seeds than the protocol's minimum (:data:`MIN_SEEDS`)."""
    seeds = row_seeds(row)
    return seeds is not None and seeds[0] < MIN_SEEDS


def seeds_text(row: Row) -> str:
    """The row's seed count (``3``, or ``2-3`` when its cells differ), flagged ``⚠ under 3`` below the minimum."""
    seeds = row_seeds(row)
    if seeds is None:
        return "- (no training seed)"
    low, high = seeds
    text = str(low) if low == high else f"{low}-{high}"
    return text + (f" ⚠ under {MIN_SEEDS}" if low < MIN_SEEDS else "")


def rank_column(board: Leaderboard) -> EnvColumn | None:
    """The column rows are ranked by: the first lab column (the one they are sorted by), else the first column."""
    return next((c for c in board.envs if c.is_lab), board.envs[0] if board.envs else None)


def ranks(board: Leaderboard) -> list[tuple[int, bool] | None]:
    """Per row: its rank in :func:`rank_column` and whether it is tied, or None without a cell there.

    Rows whose 95% intervals overlap, directly or through rows between them, form one group and share its best rank
    (tied, not ranked); a group ranks below every row of the groups above it (competition ranking: ``1, 1, 3``).
    """
    column = rank_column(board)
    if column is None:
        return [None] * len(board.rows)
    found = sorted(
        ((r.cells[column.label].ci95, k) for k, r in enumerate(board.rows) if column.label in r.cells),
        key=lambda item: (-item[0][1], -item[0][0], item[1]),
    )
    groups: list[list[int]] = []
    floor = None  # the lowest low end of the current group: a row whose high end reaches it overlaps a member
    for (low, high), k in found:
        if floor is not None and high >= floor:
            groups[-1].append(k)
            floor = min(floor, low)
        else:
            groups.append([k])
            floor = low
    out: list[tuple[int, bool] | None] = [None] * len(board.rows)
    above = 0
    for group in groups:
        for k in group:
            out[k] = (above + 1, len(group) > 1)
        above += len(group)
    return out


def _rank_text(rank: tuple[int, bool] | None) -> str:
    if rank is None:
        return "-"
    return f"={rank[0]} tied" if rank[1] else str(rank[0])


def _dataset_name(entry: dict[str, Any]) -> str:
    name = entry.get("name")
    if name:
        return str(name)
    path = entry.get("path")
    return Path(str(path)).stem if path else str(entry.get("sha256", "?"))[:12]


def data_names(board: Leaderboard) -> list[str]:
    """Per row, its datasets by name, ``lab-50 + worldgrounded-1000`` (from the results' ``method.datasets``; a
    dataset without a name by its file's stem or its hash). Rows whose datasets share names but not bytes get each
    dataset's hash too (12 hex digits, as in the datasets column): ``lab-50 (48cafb01ad89) + ...``."""
    by_path = dict(board.results)
    entries = []
    for row in board.rows:
        cell = next(iter(row.cells.values()))
        result = by_path.get(cell.files[0])
        datasets = result.method.get("datasets") if result is not None else None
        entries.append([d for d in datasets or () if isinstance(d, dict)])
    names = [" + ".join(_dataset_name(d) for d in found) for found in entries]
    hashes: dict[str, set[tuple[str, ...]]] = {}
    for text, row in zip(names, board.rows, strict=True):
        hashes.setdefault(text, set()).add(row.datasets)
    return [
        " + ".join(f"{_dataset_name(d)} ({str(d.get('sha256', ''))[:12]})" for d in found)
        if len(hashes[text]) > 1
        else text or "no datasets"
        for text, found in zip(names, entries, strict=True)
    ]


def data_labels(board: Leaderboard) -> list[str]:
    """Per row, what it was trained on: ``flow · lab-50 + worldgrounded-1000 @ 0.224`` (method, :func:`data_names`,
    real_fraction, ``[dev]``); rows still alike (another variant or demo count on the same data) get their ``#``."""
    labels = []
    for row, data in zip(board.rows, data_names(board), strict=True):
        rf = "" if row.real_fraction is None else f" @ {_fmt(row.real_fraction)}"
        labels.append(f"{row.method} · {data}{rf}{split_mark(row.split)}")
    return [label + (f" (#{k + 1})" if labels.count(label) > 1 else "") for k, label in enumerate(labels)]


def rows_note(board: Leaderboard, untrusted: Callable[[str], str] = _same) -> str:
    """What the rank, seeds and data columns say."""
    column = rank_column(board)
    if column is None:
        return ""
    return (
        f"rank: by {untrusted(column.label)} success; rows whose Wilson 95% intervals there overlap (directly or "
        "through the rows between them) share a rank marked = and tied: they are not told apart. # is the row's "
        f"place in the table. seeds: training seeds of the row's cells; ⚠ marks a row under the protocol's minimum of "
        f"{MIN_SEEDS}. data: the method, its datasets by name and its real_fraction."
    )


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
    header = ["rank", "#", "method", "variant", "real_fraction", "demos real/sim"]
    header += [f"{untrusted(c.label)} success %" for c in board.envs]
    header += [f"{untrusted(p.label)} success %" for p in board.panels]
    header += ["seeds", "data", "datasets (sha256)"]
    body = []
    for i, (r, rank, data) in enumerate(zip(board.rows, ranks(board), data_labels(board), strict=True), 1):
        line = [_rank_text(rank), str(i), untrusted(str(r.method)) + split_mark(r.split)]
        line.append(untrusted(str(r.variant or NO_VARIANT)))
        line.append(untrusted(_fmt(r.real_fraction)))
        line.append(untrusted(f"{_fmt(r.n_real_demos)}/{_fmt(r.n_sim_demos)}"))
        line += [_cell_text(r.cells.get(c.label)) for c in board.envs]
        line += [_panel_text(p, i - 1) for p in board.panels]
        line += [seeds_text(r), untrusted(data)]
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
            notes = [rows_note(board, _md_escape), mdd_note(board, _md_escape)] if i == 0 else []
            lines += [line for note in notes if note for line in (note, "")]
            if i == 0:
                lines += [line for note in panel_notes(board, _md_escape) for line in (note, "")]
    if not board.ranking:
        lines += [NO_RANKING, ""]
    lines.append(f"{len(board.results)} result files.")
    for path, why in board.skipped:
        lines.append(f"- skipped {_md_escape(path)}: {_md_escape(why)}")
    return "\n".join(lines) + "\n"


def _html_table(
    table_id: str, header: list[str], body: list[list[str]], classes: Sequence[Sequence[str]] | None = None
) -> str:
    """A table; ``classes``: per row, the class of each cell ("" for none; our names, not a result's text)."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    rows = []
    for k, row in enumerate(body):
        names = classes[k] if classes is not None else [""] * len(row)
        cells = "".join(
            f'<td class="{name}">{html.escape(v)}</td>' if name else f"<td>{html.escape(v)}</td>"
            for v, name in zip(row, names, strict=True)
        )
        rows.append(f"<tr>{cells}</tr>")
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _row_classes(board: Leaderboard, header: list[str]) -> list[list[str]]:
    """Per row of :func:`_table`: ``tied`` on a tied rank, ``under-minimum`` on a seed count under the minimum."""
    rank_at, seeds_at = header.index("rank"), header.index("seeds")
    out = []
    for row, rank in zip(board.rows, ranks(board), strict=True):
        names = [""] * len(header)
        names[rank_at] = "rank tied" if rank is not None and rank[1] else "rank"
        names[seeds_at] = "seeds under-minimum" if under_minimum(row) else "seeds"
        out.append(names)
    return out


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


def spread(points: Sequence[tuple[float, float]], tol: float = _OVERLAP, step: float = _SPREAD_STEP) -> list[float]:
    """x offsets that keep coinciding markers apart: points within ``tol`` of a group's first point in both
    coordinates are drawn side by side, ``step`` apart and centred on it, in their order (deterministic); a point
    alone keeps its place. The hover text gives every point's own figures."""
    groups: list[list[int]] = []
    for i, (x, y) in enumerate(points):
        group = next((g for g in groups if abs(points[g[0]][0] - x) <= tol and abs(points[g[0]][1] - y) <= tol), None)
        if group is None:
            groups.append([i])
        else:
            group.append(i)
    offsets = [0.0] * len(points)
    for group in groups:
        for k, i in enumerate(group):
            offsets[i] = (k - (len(group) - 1) / 2) * step
    return offsets


def _hover(label: str, cell: Cell) -> str:
    low, high = cell.ci95
    return f"{label}: {_pct(cell.mean)}% [{_pct(low)}, {_pct(high)}], n={len(cell.seeds)}"


#: Markers with an outline (seen over another trace's line and over the axis), drawn over the axes' edges.
_MARKER = {"size": 9, "line": {"width": 1, "color": "#222"}}
#: A success-rate axis with room under 0 and over 1: a 0% or 100% marker sits inside the plot, not on its edge.
_RATE_RANGE = [-0.06, 1.06]


def _figures(board: Leaderboard) -> list[tuple[str, str, Any]]:
    """(div id, caption, plotly figure as an inert dict, see :func:`_inert_figure`) of each plot; lab plots only when
    there are lab results. Every row is a marker (a 0% row too: the axes start under 0), labelled by its data
    (:func:`data_labels`); markers at the same place are drawn side by side (:func:`spread`)."""
    import plotly.graph_objects as go

    figures = []
    labels = dict(zip((id(r) for r in board.rows), data_labels(board), strict=True))
    labs = [c for c in board.envs if c.is_lab]
    for k, lab in enumerate(labs):
        rows = [r for r in board.rows if lab.label in r.cells]
        fig = go.Figure()
        for method_rf in sorted({(r.method, _fmt(r.real_fraction)) for r in rows}):
            mine = [r for r in rows if (r.method, _fmt(r.real_fraction)) == method_rf]
            cells = [r.cells[lab.label] for r in mine]
            variants = [r.variant or NO_VARIANT for r in mine]
            # Two rows of one trace with one variant (other datasets) get a category each, named by their data.
            x = [v if variants.count(v) == 1 else f"{v} ({labels[id(r)]})" for v, r in zip(variants, mine, strict=True)]
            fig.add_trace(
                go.Scatter(
                    name=f"{method_rf[0]} (real_fraction {method_rf[1]})",
                    mode="markers",
                    x=x,
                    y=[c.mean for c in cells],
                    error_y=_interval_bars(cells),
                    marker=_MARKER,
                    cliponaxis=False,
                    offsetgroup=f"{method_rf[0]} {method_rf[1]}",
                    hovertext=[_hover(labels[id(r)], c) for r, c in zip(mine, cells, strict=True)],
                    hoverinfo="text",
                )
            )
        fig.update_layout(
            scattermode="group",
            title=f"Lab success per variant: {lab.label}",
            xaxis_title="grounding variant of the sim data",
            yaxis={"title": "success rate (mean over seeds, Wilson 95%)", "range": _RATE_RANGE},
        )
        figures.append((f"plot-lab-variant-{k}", "Lab success per grounding variant", fig))

        fig = go.Figure()
        with_rf = [r for r in rows if r.real_fraction is not None]
        traces = []
        names = dict(zip((id(r) for r in board.rows), data_names(board), strict=True))
        for method, variant, datasets in sorted({(r.method, r.variant or NO_VARIANT, r.datasets) for r in with_rf}):
            mine = sorted(
                (r for r in with_rf if (r.method, r.variant or NO_VARIANT, r.datasets) == (method, variant, datasets)),
                key=lambda r: cast(float, r.real_fraction),  # with_rf: rows with a real_fraction
            )
            traces.append((method, variant, mine))
        points = [(cast(float, r.real_fraction), r.cells[lab.label].mean) for _, _, mine in traces for r in mine]
        offsets = iter(spread(points))
        for method, variant, mine in traces:
            cells = [r.cells[lab.label] for r in mine]
            fig.add_trace(
                go.Scatter(
                    name=f"{method} / {variant} · {names[id(mine[0])]}",
                    mode="lines+markers",
                    x=[cast(float, r.real_fraction) + next(offsets) for r in mine],
                    y=[c.mean for c in cells],
                    error_y=_interval_bars(cells),
                    marker=_MARKER,
                    cliponaxis=False,
                    hovertext=[_hover(labels[id(r)], c) for r, c in zip(mine, cells, strict=True)],
                    hoverinfo="text",
                )
            )
        fig.update_layout(
            title=f"Lab success against real_fraction: {lab.label}",
            xaxis={"title": "real_fraction (expected share of real samples per batch)", "range": [-0.06, 1.06]},
            yaxis={"title": "success rate (mean over seeds, Wilson 95%)", "range": _RATE_RANGE},
        )
        figures.append((f"plot-lab-real-fraction-{k}", "Lab success against real_fraction", fig))
    if board.ranking:
        fig = go.Figure()
        agreements = [(a, _agreement_labels(board, a, labels)) for a in board.ranking]
        offsets = iter(spread([(s, lab) for a, _ in agreements for s, lab in zip(a.sim, a.lab, strict=True)]))
        for a, texts in agreements:
            label = f"{a.sim_env} (Pearson {'n/a' if a.pearson is None else f'{a.pearson:.2f}'}, MMRV {a.mmrv:.3f})"
            fig.add_trace(
                go.Scatter(
                    name=label,
                    mode="markers",
                    x=[s + next(offsets) for s in a.sim],
                    y=list(a.lab),
                    marker=_MARKER,
                    cliponaxis=False,
                    hovertext=[
                        f"{t}: sim {_pct(s)}%, lab {_pct(v)}%" for t, s, v in zip(texts, a.sim, a.lab, strict=True)
                    ],
                    hoverinfo="text",
                )
            )
        fig.add_trace(go.Scatter(name="sim = lab", mode="lines", x=[0, 1], y=[0, 1], line={"dash": "dot"}))
        fig.update_layout(
            title="Sim against lab success, one point per row",
            xaxis={"title": "success in the simulated env", "range": _RATE_RANGE},
            yaxis={"title": "success in the lab", "range": _RATE_RANGE},
        )
        figures.append(("plot-sim-vs-lab", "Sim against lab success", fig))
    return [(div_id, caption, _inert_figure(fig)) for div_id, caption, fig in figures]


def _agreement_labels(board: Leaderboard, agreement: Any, labels: dict[int, str]) -> list[str]:
    """The data labels of an agreement's rows (the rows with a cell in both of its envs, in the board's order; a
    per-condition agreement names its envs ``LABEL [condition]``), or its own row labels when they do not match."""
    envs = {c.label for c in board.envs}

    def base(label: str) -> str:
        return label if label in envs else label.rsplit(" [", 1)[0]

    sim, lab = base(agreement.sim_env), base(agreement.lab_env)
    both = [r for r in board.rows if sim in r.cells and lab in r.cells]
    if [r.label for r in both] != list(agreement.rows):
        return list(agreement.rows)
    return [labels[id(r)] for r in both]


def to_html(board: Leaderboard, title: str) -> str:
    """A self-contained HTML page: tables and plotly plots, with plotly.js inline (no network, no server)."""
    require("plotly", what="the leaderboard page (index.html)")
    import plotly.io as pio
    from plotly.offline import get_plotlyjs

    header, body = _table(board)
    parts = [f"<h1>{html.escape(title)}</h1>", f"<p>{html.escape(NOTES)}</p>"]
    parts.append(_html_table("leaderboard-table", header, body, _row_classes(board, header)))
    note = rows_note(board)
    if note:
        parts.append(f'<p id="rows-note">{html.escape(note)}</p>')
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
        "td.tied{font-style:italic;color:#555}td.under-minimum{background:#fde2c8;color:#8a3b00;font-weight:bold}"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{style}</style>"
        f'<script type="text/javascript">{get_plotlyjs()}</script></head>'
        f"<body>{''.join(parts)}</body></html>\n"
    )


__all__ = [
    "MIN_SEEDS",
    "NOTES",
    "data_labels",
    "data_names",
    "panel_notes",
    "rank_column",
    "ranks",
    "row_seeds",
    "rows_note",
    "seeds_text",
    "spread",
    "to_html",
    "to_markdown",
    "under_minimum",
]


def _interval_bars(cells: list[Any]) -> dict[str, Any]:
    """Plotly asymmetric error bars from each cell's mean to the ends of its 95% interval."""
    return {
        "type": "data",
        "symmetric": False,
        "array": [c.ci95[1] - c.mean for c in cells],
        "arrayminus": [c.mean - c.ci95[0] for c in cells],
    }
