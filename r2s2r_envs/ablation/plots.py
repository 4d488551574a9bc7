"""The report's PNG plots (:func:`plot_all`): lab results per variant, the effects, the real_fraction sweep and the
mixture curves. matplotlib is imported only when plotting."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from r2s2r_envs.ablation.stats import EFFECTS, METRIC_NAMES, METRICS
from r2s2r_envs.ablation.study import AblationDesign

#: Coverage bins with fewer visited states are left out of the mixture plot (the report's table lists them all).
MIN_BIN_STATES = 10


def plot_all(design: AblationDesign, report: Mapping[str, Any], out: Path) -> None:
    """variants.png, effects.png, sweep.png (when swept) and mixture.png (when analysed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    _plot_variants(plt, report, out / "variants.png")
    _plot_effects(plt, report, out / "effects.png")
    if report["sweep"]:
        _plot_sweep(plt, design, report, out / "sweep.png")
    if report["mixture"]:
        _plot_mixture(plt, report, out / "mixture.png")


def _errorbar(x: Mapping[str, Any] | None, key: str = "mean") -> tuple[float, float, float]:
    """``(value, below, above)`` of ``x[key]`` and its ``ci95``, in percent or points (NaN, 0, 0 when missing)."""
    if not x or x.get(key) is None:
        return math.nan, 0.0, 0.0
    return 100 * x[key], 100 * (x[key] - x["ci95"][0]), 100 * (x["ci95"][1] - x[key])


def _save(plt: Any, fig: Any, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _plot_variants(plt: Any, report: Mapping[str, Any], path: Path) -> None:
    methods = list(report["tables"])
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), squeeze=False)
    for ax, metric in zip(axes[0], METRICS):
        width = 0.8 / max(1, len(methods))
        for i, method in enumerate(methods):
            rows = report["tables"][method]
            vals = [_errorbar(r[f"lab_{metric}"]) for r in rows]
            xs = np.arange(len(rows)) + i * width
            ax.bar(
                xs,
                [v[0] for v in vals],
                width,
                yerr=[[v[1] for v in vals], [v[2] for v in vals]],
                capsize=3,
                label=method,
            )
            ax.set_xticks(np.arange(len(rows)) + width * (len(methods) - 1) / 2)
            ax.set_xticklabels([r["variant"] for r in rows], rotation=20, fontsize=8)
        ax.set_ylabel(f"lab {METRIC_NAMES[metric]}, %")
        ax.set_ylim(0, 100)
        ax.legend(fontsize=8)
    fig.suptitle("Lab results per sim data variant (95% intervals)")
    _save(plt, fig, path)


def _plot_effects(plt: Any, report: Mapping[str, Any], path: Path) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), squeeze=False)
    names = list(EFFECTS)
    for ax, metric in zip(axes[0], METRICS):
        by_effect = report["effects"][metric]
        methods = list(next(iter(by_effect.values())).keys())
        height = 0.8 / max(1, len(methods))
        for i, method in enumerate(methods):
            vals = [_errorbar(by_effect[name][method], "estimate") for name in names]
            ys = np.arange(len(names)) + i * height
            ax.errorbar(
                [v[0] for v in vals],
                ys,
                xerr=[[v[1] for v in vals], [v[2] for v in vals]],
                fmt="o",
                capsize=3,
                label=method,
            )
        ax.axvline(0, color="grey", lw=0.8)
        ax.set_yticks(np.arange(len(names)) + height * (len(methods) - 1) / 2)
        ax.set_yticklabels(names, fontsize=8)
        ax.set_xlabel(f"{METRIC_NAMES[metric]} in the lab, points")
        ax.legend(fontsize=8)
    fig.suptitle("Effects of world and behavior grounding (95% intervals over seeds and episodes)")
    _save(plt, fig, path)


def _plot_sweep(plt: Any, design: AblationDesign, report: Mapping[str, Any], path: Path) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), squeeze=False)
    for ax, metric in zip(axes[0], METRICS):
        for method in design.sweep_methods:
            rows = [r for r in report["sweep"] if r["method"] == method]
            vals = [_errorbar(r[f"lab_{metric}"]) for r in rows]
            ax.errorbar(
                [r["real_fraction"] for r in rows],
                [v[0] for v in vals],
                yerr=[[v[1] for v in vals], [v[2] for v in vals]],
                fmt="o-",
                capsize=3,
                label=method,
            )
        low, high, _ = design.rule_range(design.sweep_variant) if design.sweep_variant else (0, 0, False)
        ax.axvspan(low, high, color="grey", alpha=0.15, label="mixing rule range")
        ax.set_xlabel("real_fraction")
        ax.set_ylabel(f"lab {METRIC_NAMES[metric]}, %")
        ax.set_ylim(0, 100)
        ax.legend(fontsize=8)
    fig.suptitle(f"real_fraction sweep, {design.sweep_variant} sim data")
    _save(plt, fig, path)


def _plot_mixture(plt: Any, report: Mapping[str, Any], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for s in report["mixture"]:
        p = s["policy"]
        shown = [c for c in s["curve"] if c["states"] >= MIN_BIN_STATES]
        xs = [(c["coverage"][0] + c["coverage"][1]) / 2 for c in shown]
        ys = [100 * c["real_like_share"] for c in shown]
        style = "--" if p["real_fraction"] in (0.0, 1.0) else "-"
        ax.plot(xs, ys, style + "o", label=f"{p['method']} @ {p['real_fraction']:g}, seed {p['training_seed']}")
    ax.axhline(50, color="grey", lw=0.8)
    ax.set_xlabel("coverage d_real / (d_real + d_sim): 0 = on real data, 1 = only sim data near")
    ax.set_ylabel("states where the policy acts real-like, %")
    ax.set_ylim(0, 100)
    ax.legend(fontsize=7)
    ax.set_title(f"Mixture analysis: real-like actions vs coverage (bins of >= {MIN_BIN_STATES} lab states)")
    _save(plt, fig, path)
