"""The HTML report of a grounding: ``r2s2r sysid ... --report DIR`` writes ``DIR/index.html``.

Built with MuJoCo's own sysid report builder (``mujoco.sysid.report.builder.ReportBuilder``: its page layout,
table of contents and light/dark themes), with sections of ours: the identified parameters and their 95%
intervals, what could not be identified and why, the held-out prediction error per signal group, lab vs nominal
vs grounded trajectories of the held-out runs, what is left after grounding and the planner's success table.

The page works offline: plotly.js is embedded in it (sysid's builder links it from a CDN) and the web-font import
of the layout is removed, so the file opens on a machine without network access (docs/grounding.md#report).
"""

from __future__ import annotations

import html
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from r2s2r_envs.extras import require
from r2s2r_envs.grounding.validation import (
    SIGNAL_GROUPS,
    Validation,
    format_planner_table,
    format_unmodeled,
    group_masks,
    nrmse_rows,
    percent_text,
)
from r2s2r_envs.world.params import WorldParams, nominal

#: Held-out runs plotted at most (the report stays a few MB).
MAX_RUNS_PLOTTED = 8
# Signals whose range ranks runs for plotting.
_MOVING = ("arm_qpos", "hand_qpos")
_COLORS = {"lab": "#212529", "nominal": "#388e3c", "grounded": "#1976d2"}
_FONT_IMPORT = "@import url('https://fonts.googleapis.com"


def write_report(
    directory: str | Path,
    grounding: Any,
    validation: Validation | None = None,
    heldout_runs: Sequence[Any] = (),
    *,
    title: str | None = None,
) -> Path:
    """Write ``directory/index.html`` and return its path.

    Args:
        directory: Output directory (created).
        grounding: The :class:`~r2s2r_envs.grounding.result.Grounding`.
        validation: Its validation with predictions (from :func:`r2s2r_envs.grounding.validation.validate`); None:
            the tables stored in the grounding, without trajectory plots.
        heldout_runs: The held-out ``LogRun``s whose trajectories to plot (those in ``validation.predictions``).
        title: Page title (default: names the lab).
    """
    require("plotly", what="the grounding report page")
    from mujoco.sysid.report.builder import ReportBuilder
    from mujoco.sysid.report.sections.group import GroupSection
    from mujoco.sysid.report.utils import plotly_script_tag
    from plotly import offline

    lab = grounding.provenance.get("lab", {}).get("name", "?")
    created = grounding.provenance.get("created") or time.strftime("%Y-%m-%d %H:%M:%S %Z")
    builder = ReportBuilder(title or f"World grounding of lab '{lab}'", {"report_timestamp": created})
    builder.add_section(_Section("Parameters", _parameters_html(grounding), anchor="parameters"))
    builder.add_section(_Section("Not identifiable", _not_identifiable_html(grounding), anchor="not-identifiable"))
    nrmse = validation.nrmse if validation is not None else grounding.validation.get("nrmse", {})
    builder.add_section(_Section("Held-out prediction error", _nrmse_html(nrmse), anchor="validation"))
    if validation is not None and heldout_runs:
        plotted = runs_to_plot([r for r in heldout_runs if r.name in validation.predictions])
        sections = [
            _Section(f"{r.name} ({r.protocol})", _trajectory_html(r, validation.predictions[r.name]), anchor=r.name)
            for r in plotted
        ]
        if sections:
            builder.add_section(GroupSection("Held-out trajectories: lab vs nominal vs grounded", sections, "runs"))
    unmodeled = validation.unmodeled if validation is not None else grounding.validation.get("unmodeled")
    if unmodeled:
        builder.add_section(_Section("Left after grounding", _pre(format_unmodeled(unmodeled)), anchor="unmodeled"))
    planner = validation.planner if validation is not None else grounding.validation.get("planner")
    if planner:
        builder.add_section(_Section("Planner success", _pre(format_planner_table(planner)), anchor="planner"))
    builder.add_section(_Section("Provenance", _provenance_html(grounding), anchor="provenance"))

    page = builder.build()
    page = page.replace(plotly_script_tag(), f'<script type="text/javascript">{offline.get_plotlyjs()}</script>')
    page = "\n".join(line for line in page.splitlines() if _FONT_IMPORT not in line)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "index.html"
    path.write_text(page, encoding="utf-8")
    return path


def runs_to_plot(runs: Sequence[Any], limit: int = MAX_RUNS_PLOTTED) -> list[Any]:
    """One run per protocol, the ones whose signals move most first (a run at rest shows little), at most
    ``limit``."""
    first: dict[str, Any] = {}
    for run in runs:
        first.setdefault(run.protocol, run)

    def motion(run: Any) -> float:
        return float(sum(np.ptp(np.asarray(v, dtype=float), axis=0).sum() for k, v in run.obs.items() if k in _MOVING))

    return sorted(first.values(), key=motion, reverse=True)[:limit]


class _Section:
    """A report section of ready HTML (sysid's ``plot_generic.html`` template renders it as is)."""

    template_filename = "plot_generic.html"
    collapsible = True
    is_open = True

    def __init__(self, title: str, content: str, *, anchor: str) -> None:
        self.title = title
        self.anchor = anchor
        self._content = content

    def get_context(self) -> dict[str, Any]:
        return {"title": self.title, "plot_div": self._content}

    def header_includes(self) -> set[str]:
        from mujoco.sysid.report.utils import plotly_script_tag

        return {plotly_script_tag()}


# ---------------------------------------------------------------------- sections
def _fmt(v: Any) -> str:
    if v is None:
        return "unbounded"
    if isinstance(v, float):
        return "inf" if math.isinf(v) else f"{v:.4g}"
    return str(v)


def _parameters_html(grounding: Any) -> str:
    nominal_world = nominal()
    rows = []
    rel_names, rel_est, rel_lo, rel_hi = [], [], [], []
    for name in WorldParams.field_names():
        value = getattr(grounding.world, name)
        nom = getattr(nominal_world, name)
        interval = grounding.intervals.get(name)
        vector = isinstance(value, tuple)
        values, noms = (list(value), list(nom)) if vector else ([value], [nom])
        pairs = interval if (vector and interval is not None) else [interval] * len(values)
        for k, (v, n, pair) in enumerate(zip(values, noms, pairs)):
            label = f"{name}[{k}]" if vector else name
            status = (
                "identified"
                if name in grounding.identified or label in grounding.identified
                else ("not identifiable" if name in grounding.not_identifiable else "nominal")
            )
            ci = "" if pair is None else f"[{_fmt(pair[0])}, {_fmt(pair[1])}]"
            changed = "" if v == n else " style='font-weight:600'"
            rows.append(
                f"<tr{changed}><td>{html.escape(label)}</td><td>{_fmt(n)}</td><td>{_fmt(v)}</td><td>{ci}</td>"
                f"<td>{status}</td></tr>"
            )
            if pair is not None and None not in pair and n != 0:
                rel_names.append(label)
                rel_est.append(v / n)
                rel_lo.append((v - pair[0]) / abs(n))
                rel_hi.append((pair[1] - v) / abs(n))
    table = (
        "<table class='table'><thead><tr><th>field</th><th>nominal</th><th>identified</th><th>95% interval</th>"
        f"<th>status</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )
    figure = ""
    if rel_names:
        import plotly.graph_objects as go

        fig = go.Figure(
            go.Scatter(
                x=rel_est,
                y=rel_names,
                mode="markers",
                error_x={"type": "data", "symmetric": False, "array": rel_hi, "arrayminus": rel_lo},
                marker={"color": _COLORS["grounded"]},
                name="identified / nominal",
            )
        )
        fig.add_vline(x=1.0, line_dash="dash", line_color=_COLORS["nominal"])
        fig.update_layout(
            title="Identified value relative to nominal, with its 95% interval (fields with a non-zero nominal value)",
            height=max(300, 22 * len(rel_names) + 120),
            template="plotly_white",
            margin={"l": 160},
        )
        figure = fig.to_html(full_html=False, include_plotlyjs=False)
    return figure + table


def _not_identifiable_html(grounding: Any) -> str:
    if not grounding.not_identifiable:
        return "<p>Every parameter the logs were meant to excite was identified.</p>"
    items = "".join(
        f"<li><code>{html.escape(k)}</code>: {html.escape(v)} (kept at {_fmt(_value(grounding.world, k))})</li>"
        for k, v in grounding.not_identifiable.items()
    )
    return f"<ul>{items}</ul>"


def _value(world: WorldParams, ref: str) -> Any:
    name, _, index = ref.partition("[")
    value = getattr(world, name, None)
    return value[int(index.rstrip("]"))] if index and isinstance(value, tuple) else value


def _nrmse_html(nrmse: Mapping[str, Mapping[str, Any]]) -> str:
    rows = []
    for group, row, beyond in nrmse_rows(nrmse):
        rows.append(
            f"<tr><td>{group}</td><td>{_fmt(row['nominal'])}</td><td>{_fmt(row['grounded'])}</td>"
            f"<td>{percent_text(row.get('reduction_percent'))}</td><td>{row['samples']}</td>"
            f"<td>{_fmt(beyond.get('nominal'))}</td><td>{_fmt(beyond.get('grounded'))}</td>"
            f"<td>{percent_text(beyond.get('reduction_percent'))}</td></tr>"
        )
    table = (
        "<p>Normalized RMSE = sqrt(SSE / SST) of the predicted against the logged signals on the held-out runs "
        "(0: perfect, 1: no better than predicting the mean); <em>beyond noise</em>: the same with the expected share "
        "of the sensor noise the grounded world models taken out of both sums, the error a noise-free prediction can "
        "remove.</p><table class='table'><thead><tr><th>signal group</th><th>nominal</th><th>grounded</th>"
        "<th>reduction</th><th>samples</th><th>beyond noise: nominal</th><th>grounded</th><th>reduction</th></tr>"
        "</thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )
    import plotly.graph_objects as go

    groups = [g for g in SIGNAL_GROUPS if g in nrmse and nrmse[g]["nominal"] is not None]
    fig = go.Figure(
        [
            go.Bar(name=which, x=groups, y=[_finite(nrmse[g][which]) for g in groups], marker_color=_COLORS[which])
            for which in ("nominal", "grounded")
        ]
    )
    fig.update_layout(barmode="group", height=320, template="plotly_white", yaxis_title="NRMSE")
    return fig.to_html(full_html=False, include_plotlyjs=False) + table


def _finite(v: Any) -> Any:
    return None if v is None or (isinstance(v, float) and not math.isfinite(v)) else v


def _trajectory_html(run: Any, predictions: Mapping[str, Mapping[str, np.ndarray]]) -> str:
    """Lab (logged) vs nominal vs grounded for the run's most active channels."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    t = np.asarray(run.timestamps, dtype=float)
    panels: list[tuple[str, np.ndarray, dict[str, np.ndarray]]] = []
    for key, count, labels in (("arm_qpos", 3, "arm joint {} (rad)"), ("hand_qpos", 2, "finger joint {} (rad)")):
        if key not in run.obs:
            continue
        y = np.asarray(run.obs[key], dtype=float)
        for j in np.argsort(np.ptp(y, axis=0))[::-1][:count]:
            pred = {w: np.asarray(p[key], dtype=float)[:, j] for w, p in predictions.items()}
            panels.append((labels.format(int(j)), y[:, j], pred))
    if "object_pos" in run.obs:
        masks = group_masks(run.obs)
        pos = np.asarray(run.obs["object_pos"], dtype=float).reshape(len(t), -1, 3)
        active = (masks["objects on the belt"] | masks["held objects"]).sum(axis=0)
        if active.max() > 0:
            i = int(np.argmax(active))
            for axis in (1, 2):
                pred = {
                    w: np.asarray(p["object_pos"], dtype=float).reshape(len(t), -1, 3)[:, i, axis]
                    for w, p in predictions.items()
                }
                panels.append((f"object {i} {'xyz'[axis]} (m)", pos[:, i, axis], pred))
    if not panels:
        return "<p>No plotted signal in this run.</p>"
    fig = make_subplots(rows=len(panels), cols=1, shared_xaxes=True, subplot_titles=[p[0] for p in panels])
    for row, (_, logged, pred) in enumerate(panels, start=1):
        show = row == 1
        fig.add_trace(_line(go, t, logged, "lab", show, None), row=row, col=1)
        for which in ("nominal", "grounded"):
            if which in pred:
                fig.add_trace(_line(go, t, pred[which], which, show, "dash" if which == "nominal" else None), row, 1)
    fig.update_layout(height=180 * len(panels) + 80, template="plotly_white")
    fig.update_xaxes(title_text="time (s)", row=len(panels), col=1)
    return fig.to_html(full_html=False, include_plotlyjs=False)


def _line(go: Any, t: np.ndarray, y: np.ndarray, name: str, show: bool, dash: str | None) -> Any:
    return go.Scatter(
        x=t,
        y=y,
        name=name,
        legendgroup=name,
        showlegend=show,
        mode="lines",
        line={"color": _COLORS[name], "dash": dash},
    )


def _provenance_html(grounding: Any) -> str:
    import json

    text = json.dumps(dict(grounding.provenance), indent=2, sort_keys=True)
    return _pre(text)


def _pre(text: str) -> str:
    return f"<pre style='white-space: pre-wrap'>{html.escape(text)}</pre>"


__all__ = ["MAX_RUNS_PLOTTED", "write_report"]
