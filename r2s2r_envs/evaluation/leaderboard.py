"""The leaderboard: evaluation results grouped into rows, as Markdown, a static HTML page and JSON.

:func:`build_leaderboard` reads every evaluation result under a folder (``r2s2r evaluate --out``, the baselines),
checks each against the result schema, and groups them (docs/leaderboard.md):

- a **row** is a way of training a policy: method, grounding variant of its sim data, ``real_fraction``, numbers
  of real and sim demos and the content hashes of its datasets.  Its training seeds are averaged.
- a **column** is an evaluation env: the id, the lab's name for ``PickSort-Real-v0``, a grounding file, and the
  task settings (objects, time limit) when they are not the defaults.
- a **cell** is the mean success rate over the row's training seeds in that env, the standard deviation over
  seeds, and the Wilson 95% interval of all its episodes pooled (``stats.wilson_interval``).

With results evaluated for a track (``r2s2r evaluate --track``, :mod:`r2s2r_envs.evaluation.tracks`), the board
ranks the rows on one track only: each result's claim is checked again (``tracks.check_result``), results of two
tracks on one board are refused, and the rows of every other result (off-track, or naming no track) are listed
apart (``Leaderboard.off_track_rows``, with their reasons), never ranked with the track's.

The board's data types live in :mod:`r2s2r_envs.evaluation.leaderboard_data`, the reading of the result files
and the checks that they can be ranked together in :mod:`r2s2r_envs.evaluation.leaderboard_results`; this module
groups them into rows and writes the pages.  Every name of the three is importable from here.

Across rows evaluated both in a simulated env and in the lab with the same task settings, ``ranking.pearson``
and ``ranking.mmrv`` say how well the simulator ranks the rows the way the lab does.  The pages are rendered by
:mod:`r2s2r_envs.evaluation.leaderboard_pages` (the HTML embeds plotly.js: it opens offline, without a server).
"""

from __future__ import annotations

import dataclasses
import html
import inspect
import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from r2s2r_envs.envs import PickSortEnv
from r2s2r_envs.evaluation.leaderboard_data import (
    NO_VARIANT,
    Cell,
    EnvColumn,
    Leaderboard,
    LeaderboardError,
    PanelFigures,
    RankAgreement,
    Row,
    split_mark,
)
from r2s2r_envs.evaluation.leaderboard_pages import _md_escape, to_html, to_markdown
from r2s2r_envs.evaluation.leaderboard_results import (
    check_one_panel,
    check_one_protocol,
    check_one_track,
    condition_mix,
    damaged_result_reason,
    load_results,
    track_checks,
)
from r2s2r_envs.evaluation.panels import lab_agreement, panel_mean
from r2s2r_envs.evaluation.protocol import EvaluationResult
from r2s2r_envs.evaluation.ranking import mmrv, pearson
from r2s2r_envs.evaluation.stats import wilson_interval
from r2s2r_envs.evaluation.tracks import TRACKS, TrackCheck


def _defaults() -> dict[str, Any]:
    params = inspect.signature(PickSortEnv).parameters
    return {k: params[k].default for k in ("num_objects", "episode_steps")}


def env_column(result: EvaluationResult) -> EnvColumn:
    """The column a result belongs to: env id, lab name, grounding file and non-default task settings."""
    prov, defaults = result.provenance, _defaults()
    is_lab = prov.get("domain") == "real"
    parts = []
    lab = prov.get("lab")
    if is_lab:
        parts.append(f"lab {lab.get('name') if isinstance(lab, dict) else lab}")
    grounding = result.env_kwargs.get("grounding")
    if isinstance(grounding, str):
        parts.append(f"grounding {Path(grounding).name}")
    settings = tuple((k, prov.get(k, result.env_kwargs.get(k, defaults[k]))) for k in defaults)
    parts += [_setting_text(key, value) for key, value in settings if value != defaults[key]]
    label = result.env_id + (f" ({', '.join(parts)})" if parts else "")
    return EnvColumn(label=label, env_id=result.env_id, is_lab=is_lab, settings=settings)


def _setting_text(key: str, value: Any) -> str:
    """A task setting as a column label shows it: ``1 object``, ``300 steps``."""
    return f"{value} object{'s' if value != 1 else ''}" if key == "num_objects" else f"{value} steps"


def _row_key(result: EvaluationResult) -> tuple:
    m = result.method
    hashes = tuple(sorted({d["sha256"] for d in m["datasets"]}))
    return (m["method"], m["variant"], m["real_fraction"], m["n_real_demos"], m["n_sim_demos"], hashes)


def _cell(entries: Sequence[tuple[str, EvaluationResult]]) -> Cell:
    entries = sorted(entries, key=lambda e: (e[1].method["training_seed"] is None, e[1].method["training_seed"] or 0))
    rates = [r.summary["success_rate"] for _, r in entries]
    successes = sum(sum(rec.is_success for rec in r.records) for _, r in entries)
    episodes = sum(r.episodes for _, r in entries)
    times = [rec.time_to_sort for _, r in entries for rec in r.records if rec.is_success and rec.time_to_sort]
    mean = sum(rates) / len(rates)
    std = math.sqrt(sum((v - mean) ** 2 for v in rates) / (len(rates) - 1)) if len(rates) > 1 else None
    return Cell(
        seeds=tuple(r.method["training_seed"] for _, r in entries),
        success_rates=tuple(rates),
        mean=mean,
        seed_std=std,
        successes=successes,
        episodes=episodes,
        ci95=wilson_interval(successes, episodes),
        sort_accuracy=sum(r.summary["sort_accuracy"] for _, r in entries) / len(entries),
        time_to_sort=sum(times) / len(times) if times else None,
        policy_failures=sum(r.summary["policy_failures"] for _, r in entries),
        files=tuple(path for path, _ in entries),
        conditions=_condition_figures([r for _, r in entries]),
    )


def _condition_figures(results: Sequence[EvaluationResult]) -> dict[str, dict[str, Any]]:
    """Per condition and for "all shifted" (when the results hold a shifted condition): the mean success rate over
    the seeds, and the successes, episodes and Wilson 95% interval of all their episodes pooled."""
    groups: dict[str, list[tuple[EvaluationResult, tuple[Any, ...]]]] = {}
    for result in results:
        by_name = result.condition_records()
        for run in result.conditions:
            groups.setdefault(run.condition, []).append((result, by_name[run.condition]))
        shifted = tuple(rec for run in result.conditions if run.shifted for rec in by_name[run.condition])
        if shifted:
            groups.setdefault("all shifted", []).append((result, shifted))
    out = {}
    for name, entries in groups.items():
        rates = [sum(rec.is_success for rec in records) / len(records) for _, records in entries]
        successes = sum(sum(rec.is_success for rec in records) for _, records in entries)
        episodes = sum(len(records) for _, records in entries)
        out[name] = {
            "mean": sum(rates) / len(rates),
            "successes": successes,
            "episodes": episodes,
            "ci95": wilson_interval(successes, episodes),
        }
    return out


def _off_track_reasons(check: TrackCheck | None, track: str) -> tuple[str, ...]:
    if check is None:
        return (f"names no track (r2s2r evaluate --track {track} records one)",)
    if check.name != track:
        return (f"evaluated for track {check.name!r}, not {track!r}", *check.reasons)
    return check.reasons


def group_results(results: Sequence[tuple[str, EvaluationResult]], skipped: Sequence = ()) -> Leaderboard:
    """Group checked results into rows, columns and cells, and compute the sim-vs-lab ranking agreement.

    When a result is on a track (``check_one_track``), the board ranks that track's results only; every other
    result's rows go to ``off_track_rows`` with their reasons (unranked, their cells computed apart).

    Raises:
        LeaderboardError: no results, two results of the same row, env and training seed (the message names
            both files: keep one), results of two splits, condition mixes or condition versions
            (``check_one_protocol``), or on two tracks (``check_one_track``).
    """
    if not results:
        raise LeaderboardError("no evaluation results found (r2s2r evaluate --out FILE writes one)")
    check_one_protocol(results)
    checks = track_checks(results)
    track = check_one_track(results, checks)
    if track is None:  # no result on a track: one board as before; a result off a track still says why
        return _group(results, skipped, reasons={p: c.reasons for p, c in checks.items() if c is not None})
    name = track[0]
    ranked = [(p, r) for p, r in results if (c := checks[p]) is not None and c.on_track]
    others = [(p, r) for p, r in results if (c := checks[p]) is None or not c.on_track]
    board = _group(ranked, skipped, track=name)
    off = _group(others, (), reasons={p: _off_track_reasons(checks[p], name) for p, _ in others}) if others else None
    return dataclasses.replace(
        board,
        results=tuple(results),
        track=TRACKS[name].to_dict(),
        off_track_rows=() if off is None else off.rows,
        off_track_envs=() if off is None else off.envs,
        off_track_results=tuple(others),
    )


def _group(
    results: Sequence[tuple[str, EvaluationResult]],
    skipped: Sequence,
    *,
    track: str | None = None,
    reasons: dict[str, tuple[str, ...]] | None = None,
) -> Leaderboard:
    """Rows, columns, cells, sim-vs-lab ranking and panel figures of ``results`` (``reasons``: off-track rows'
    reasons by file; ``track``: the track the rows are ranked on)."""
    split = results[0][1].split
    columns: dict[str, EnvColumn] = {}
    groups: dict[tuple, dict[str, list[tuple[str, EvaluationResult]]]] = {}
    seen: dict[tuple, str] = {}
    for path, result in results:
        column = env_column(result)
        columns.setdefault(column.label, column)
        key = _row_key(result)
        ident = (key, column.label, result.method["training_seed"])
        if ident in seen:
            raise LeaderboardError(
                f"two results for the same policy (method {key[0]!r}, training seed "
                f"{result.method['training_seed']}) in {column.label}: {seen[ident]} and {path}; keep one"
            )
        seen[ident] = path
        groups.setdefault(key, {}).setdefault(column.label, []).append((path, result))
    envs = tuple(sorted(columns.values(), key=lambda c: (not c.is_lab, c.label)))
    rows = []
    for key, by_env in groups.items():
        method, variant, rf, n_real, n_sim, hashes = key
        cells = {label: _cell(entries) for label, entries in by_env.items()}
        why = [] if reasons is None else [reasons.get(p, ()) for entries in by_env.values() for p, _ in entries]
        rows.append(
            Row(
                method=method,
                variant=variant,
                real_fraction=rf,
                n_real_demos=n_real,
                n_sim_demos=n_sim,
                datasets=hashes,
                cells=cells,
                split=split,
                track=track,
                off_track=tuple(dict.fromkeys(r for rs in why for r in rs)),
            )
        )
    first_lab = next((c.label for c in envs if c.is_lab), None)
    rows.sort(key=lambda r: (-(r.cells[first_lab].mean if first_lab in r.cells else -1.0), r.label))
    return Leaderboard(
        results=tuple(results),
        envs=envs,
        rows=tuple(rows),
        ranking=tuple(_ranking(envs, rows)),
        skipped=tuple(skipped),
        panels=tuple(_panel_figures(results, envs, rows)),
    )


def _panel_figures(
    results: Sequence[tuple[str, EvaluationResult]], envs: Sequence[EnvColumn], rows: Sequence[Row]
) -> list[PanelFigures]:
    """The panel recorded by the results (``check_one_panel``: one at most), per set of task settings of the lab
    columns: a row covers the panel when, for each of its labs, it has a lab cell whose every result is of that
    lab's identity (whatever the run that made it: a result of ``--lab draw:0`` of the same config counts)."""
    panel = next((r.panel for _, r in results if r.panel is not None), None)
    if panel is None:
        return []
    by_path = dict(results)
    labs = [e["lab"] for e in panel["labs"]]
    identity = {e["lab"]: {"name": e["name"], "config_sha256": e["config_sha256"]} for e in panel["labs"]}
    out = []
    for settings in dict.fromkeys(c.settings for c in envs if c.is_lab):
        columns = [c for c in envs if c.is_lab and c.settings == settings]
        per_row: list[dict[str, float]] = []
        for row in rows:
            found: dict[str, float] = {}
            for cell in (row.cells[c.label] for c in columns if c.label in row.cells):
                for lab in labs:
                    if all(by_path[f].provenance.get("lab") == identity[lab] for f in cell.files):
                        found[lab] = cell.mean
            per_row.append(found)
        if not any(per_row):
            continue
        covering = [found for found in per_row if len(found) == len(labs)]
        figures = [panel_mean([found[lab] for lab in labs]) if len(found) == len(labs) else None for found in per_row]
        tau, mean_tau = lab_agreement({lab: [found[lab] for found in covering] for lab in labs})
        shown = [_setting_text(k, v) for k, v in settings if v != _defaults()[k]]
        out.append(
            PanelFigures(
                label=f"panel {panel['name']} v{panel['version']} ({', '.join([f'{len(labs)} labs', *shown])})",
                name=panel["name"],
                version=panel["version"],
                labs=tuple(labs),
                settings=settings,
                means=tuple(None if f is None else f[0] for f in figures),
                ci95=tuple(None if f is None else f[1] for f in figures),
                missing=tuple(tuple(lab for lab in labs if lab not in found) for found in per_row),
                tau=tau,
                mean_tau=mean_tau,
            )
        )
    return out


OFF_TRACK_NOTE = (
    "Not ranked with the track's rows: each row was evaluated for another track, for none, or is off this one for "
    "the reasons given (datasets other than the track's builds, training samples over its budget, another "
    "evaluation). Success %: mean over training seeds [Wilson 95% interval of the pooled episodes] (n = seeds)."
)


def _off_track_table(board: Leaderboard) -> tuple[list[str], list[list[str]]]:
    """The off-track rows as plain text (not yet escaped): label, each off-track column's cell, the reasons."""
    header = ["row", *(f"{c.label} success %" for c in board.off_track_envs), "why off-track"]
    body = []
    for row in board.off_track_rows:
        cells = []
        for column in board.off_track_envs:
            cell = row.cells.get(column.label)
            cells.append(
                "-"
                if cell is None
                else f"{100 * cell.mean:.1f} [{100 * cell.ci95[0]:.1f}, {100 * cell.ci95[1]:.1f}] (n={len(cell.seeds)})"
            )
        body.append([row.label, *cells, "; ".join(row.off_track)])
    return header, body


def off_track_markdown(board: Leaderboard) -> str:
    """The section listing the off-track rows under ``leaderboard.md``'s ranking ("" without one)."""
    if not board.off_track_rows or board.track is None:
        return ""
    header, body = _off_track_table(board)
    track = f"{board.track['name']} v{board.track['version']}"
    lines = ["", f"## Off-track rows (not ranked on track {track})", "", OFF_TRACK_NOTE, ""]
    lines.append("| " + " | ".join(_md_escape(h) for h in header) + " |")
    lines.append("|" + "---|" * len(header))
    lines += ["| " + " | ".join(_md_escape(v) for v in line) + " |" for line in body]
    return "\n".join(lines) + "\n"


def off_track_html(board: Leaderboard) -> str:
    """The same section for ``index.html`` ("" without one); every text escaped."""
    if not board.off_track_rows or board.track is None:
        return ""
    header, body = _off_track_table(board)
    track = html.escape(f"{board.track['name']} v{board.track['version']}")
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in line) + "</tr>" for line in body)
    return (
        f'<h2 id="off-track">Off-track rows (not ranked on track {track})</h2><p>{html.escape(OFF_TRACK_NOTE)}</p>'
        f'<table id="off-track-table"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'
    )


def _ranking(envs: Sequence[EnvColumn], rows: Sequence[Row]) -> list[RankAgreement]:
    out = []
    for lab in (c for c in envs if c.is_lab):
        for sim in (c for c in envs if not c.is_lab and c.settings == lab.settings):
            both = [r for r in rows if lab.label in r.cells and sim.label in r.cells]
            if len(both) < 2:
                continue
            s = tuple(r.cells[sim.label].mean for r in both)
            real = tuple(r.cells[lab.label].mean for r in both)
            out.append(
                RankAgreement(
                    sim_env=sim.label,
                    lab_env=lab.label,
                    rows=tuple(r.label for r in both),
                    sim=s,
                    lab=real,
                    pearson=pearson(s, real),
                    mmrv=mmrv(s, real),
                )
            )
            # Per condition too ("all shifted" included) when the results hold several: does the simulator rank the
            # rows as the lab does under each shift?  One board holds one mix, so every cell has the same conditions.
            names = list(both[0].cells[lab.label].conditions)
            for name in names if len(names) > 1 else ():
                s_c = tuple(r.cells[sim.label].conditions[name]["mean"] for r in both)
                real_c = tuple(r.cells[lab.label].conditions[name]["mean"] for r in both)
                out.append(
                    RankAgreement(
                        sim_env=f"{sim.label} [{name}]",
                        lab_env=f"{lab.label} [{name}]",
                        rows=tuple(r.label for r in both),
                        sim=s_c,
                        lab=real_c,
                        pearson=pearson(s_c, real_c),
                        mmrv=mmrv(s_c, real_c),
                    )
                )
    return out


# ---------------------------------------------------------------------- writing
def build_leaderboard(
    results_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    title: str = "Leaderboard",
    skip_damaged: bool = False,
) -> Leaderboard:
    """Read the results under ``results_dir`` and write ``leaderboard.md``, ``index.html`` and ``leaderboard.json``.

    ``skip_damaged``: build without files that look like damaged results (:func:`load_results`) instead of failing.

    Raises:
        LeaderboardError: see :func:`load_results` and :func:`group_results`; an output folder that is a file or
            cannot be written.
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise LeaderboardError(f"--out {out} is a file; the leaderboard is written into a folder")
    results, skipped = load_results(results_dir, skip_damaged=skip_damaged)
    board = group_results(results, skipped)
    if board.track is not None:
        title = f"{title}: track {board.track['name']} v{board.track['version']}"
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "leaderboard.md").write_text(to_markdown(board, title) + off_track_markdown(board))
        page = to_html(board, title)
        if board.off_track_rows:
            at = page.rfind("</body>")
            page = page[:at] + off_track_html(board) + page[at:] if at >= 0 else page + off_track_html(board)
        (out / "index.html").write_text(page)
        (out / "leaderboard.json").write_text(json.dumps(board.to_dict(), indent=2) + "\n")
    except OSError as e:
        raise LeaderboardError(f"cannot write the leaderboard into {out}: {e.strerror or e}") from None
    return board


__all__ = [
    "NO_VARIANT",
    "Cell",
    "EnvColumn",
    "Leaderboard",
    "LeaderboardError",
    "PanelFigures",
    "RankAgreement",
    "Row",
    "build_leaderboard",
    "check_one_panel",
    "check_one_protocol",
    "check_one_track",
    "condition_mix",
    "damaged_result_reason",
    "env_column",
    "group_results",
    "load_results",
    "off_track_html",
    "off_track_markdown",
    "split_mark",
    "track_checks",
]
