"""The ablation's analysis: the four-variant table, the effect of each grounding axis with its intervals, the
interaction, the real_fraction sweep and the mixture curves; written as Markdown, JSON and PNG plots.

This module gathers the analysis's public names; each lives in the module of its job:

* :mod:`~r2s2r_envs.ablation.runs`: result files as matrices, the store's finished evaluations as :class:`EvalRun`;
* :mod:`~r2s2r_envs.ablation.stats`: the statistics (contrasts and their intervals, effects, findings, detectable
  differences; docs/ablation.md, "Analysis");
* :mod:`~r2s2r_envs.ablation.tables`: the report's numbers (:func:`analyze`);
* :mod:`~r2s2r_envs.ablation.report`: the Markdown report, :func:`write_report` and :func:`print_table`;
* :mod:`~r2s2r_envs.ablation.interventions_report`: the interventions' section (docs/ablation.md#interventions);
* :mod:`~r2s2r_envs.ablation.plots`: the PNG plots (matplotlib, imported only when plotting).

Everything here reads finished task results from the store; nothing trains or evaluates.
"""

from __future__ import annotations

from r2s2r_envs.ablation.interventions_report import (
    INTERVENTION_EFFECTS,
    interventions_analysis,
    interventions_markdown,
)
from r2s2r_envs.ablation.plots import MIN_BIN_STATES, plot_all
from r2s2r_envs.ablation.report import (
    chain_markdown,
    detectable_markdown,
    effects_markdown,
    failures_markdown,
    findings_markdown,
    print_table,
    to_markdown,
    variant_markdown,
    versus_study_markdown,
    write_report,
)
from r2s2r_envs.ablation.runs import (
    EvalRun,
    cell_matrix,
    failure_counts,
    load_runs,
    nominal_records,
    result_matrices,
)
from r2s2r_envs.ablation.stats import (
    EFFECTS,
    FINDING_EFFECTS,
    FINDINGS_ALPHA,
    HETEROGENEITY_ALPHA,
    INTERVALS,
    METRIC_NAMES,
    METRICS,
    OLD_INTERVALS,
    bootstrap_contrast,
    contrast,
    detectable,
    effects,
    finding_policies,
    findings,
    report_interval_method,
    seeds_to_detect,
)
from r2s2r_envs.ablation.tables import (
    STUDY,
    analyze,
    chain_summary,
    design_cells,
    failure_table,
    mixture_summaries,
    sweep_cells,
    sweep_table,
    task_status,
    variant_table,
    versus_real_only,
    versus_study,
)

__all__ = [
    "EFFECTS",
    "FINDINGS_ALPHA",
    "FINDING_EFFECTS",
    "HETEROGENEITY_ALPHA",
    "INTERVALS",
    "INTERVENTION_EFFECTS",
    "METRICS",
    "METRIC_NAMES",
    "MIN_BIN_STATES",
    "OLD_INTERVALS",
    "STUDY",
    "EvalRun",
    "analyze",
    "bootstrap_contrast",
    "cell_matrix",
    "chain_markdown",
    "chain_summary",
    "contrast",
    "design_cells",
    "detectable",
    "detectable_markdown",
    "effects",
    "effects_markdown",
    "failure_counts",
    "failure_table",
    "failures_markdown",
    "finding_policies",
    "findings",
    "findings_markdown",
    "interventions_analysis",
    "interventions_markdown",
    "load_runs",
    "mixture_summaries",
    "nominal_records",
    "plot_all",
    "print_table",
    "report_interval_method",
    "result_matrices",
    "seeds_to_detect",
    "sweep_cells",
    "sweep_table",
    "task_status",
    "to_markdown",
    "variant_markdown",
    "variant_table",
    "versus_real_only",
    "versus_study",
    "versus_study_markdown",
    "write_report",
]
