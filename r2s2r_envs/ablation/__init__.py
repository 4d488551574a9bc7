"""The grounding ablation (``r2s2r ablation``): which grounding axis matters for co-training, by how much, with
intervals (docs/ablation.md).

* :mod:`~r2s2r_envs.ablation.design`: the study as typed dataclasses (:class:`AblationDesign`, presets
  :func:`full_design`, :func:`quick_design`, :func:`smoke_design`, and :func:`lab_design` for any lab) and its task
  graph keyed by config hash.
* :mod:`~r2s2r_envs.ablation.chain`: with ``--lab``, the lab's Real2Sim2Real chain as tasks of that graph (sysid,
  the behavior fit), the lab known only by its name and config hash (:class:`LabRef`, :func:`resolve_lab`).
* :mod:`~r2s2r_envs.ablation.arms`: the control arms a design may add (``--arms``), whose data
  :mod:`~r2s2r_envs.ablation.arm_data` makes and :mod:`~r2s2r_envs.ablation.arms_report` reports.
* :mod:`~r2s2r_envs.ablation.tasks`: the units of work (data, training, evaluation, mixture attribution).
* :mod:`~r2s2r_envs.ablation.runner`: :func:`run_ablation`, the checks before any work and the sweep on Ray.
* :mod:`~r2s2r_envs.ablation.analysis`: the four-variant table, effects with paired seed-level t-intervals,
  interaction, sweep and mixture curves, written as Markdown, JSON and PNG.
* :mod:`~r2s2r_envs.ablation.mixture`: nearest-neighbour attribution of a policy's lab actions to real or sim demos.

Importing this package imports neither ray nor torch; running an ablation needs the ``ray`` and ``torch`` extras.
"""

from __future__ import annotations

from r2s2r_envs.ablation.chain import ChainSpec, LabError, LabRef, resolve_lab
from r2s2r_envs.ablation.design import (
    VARIANTS,
    AblationDesign,
    DataSpec,
    DesignError,
    PolicySpec,
    Task,
    config_hash,
    full_design,
    image_track,
    lab_design,
    quick_design,
    smoke_design,
)
from r2s2r_envs.ablation.runner import AblationError, RunSummary, run_ablation

__all__ = [
    "VARIANTS",
    "AblationDesign",
    "AblationError",
    "ChainSpec",
    "DataSpec",
    "DesignError",
    "LabError",
    "LabRef",
    "PolicySpec",
    "RunSummary",
    "Task",
    "config_hash",
    "full_design",
    "image_track",
    "lab_design",
    "quick_design",
    "resolve_lab",
    "run_ablation",
    "smoke_design",
]
