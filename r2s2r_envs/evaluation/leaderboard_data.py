"""What a leaderboard holds: its columns (:class:`EnvColumn`), rows (:class:`Row`) and their cells (:class:`Cell`),
the sim-vs-lab ranking agreement (:class:`RankAgreement`), a lab panel's figures (:class:`PanelFigures`) and the
board itself (:class:`Leaderboard`, whose ``to_dict`` is ``leaderboard.json``).

:mod:`r2s2r_envs.evaluation.leaderboard` builds one from result files; :mod:`r2s2r_envs.evaluation.leaderboard_pages`
renders it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from r2s2r_envs.evaluation.protocol import EvaluationResult

#: What the variant column shows for a row trained without simulated data.
NO_VARIANT = "none (real only)"


class LeaderboardError(ValueError):
    """Results that cannot be put on a leaderboard: an invalid result file, a duplicate, an empty folder."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class EnvColumn:
    """An evaluation env as the leaderboard shows it.

    Attributes:
        label: Column title, e.g. ``PickSort-Real-v0 (lab default)``.
        env_id: The registered id.
        is_lab: The env is the lab (``provenance.domain == "real"``).
        settings: Task settings (``num_objects``, ``episode_steps``) that must match to compare sim and lab.
    """

    label: str
    env_id: str
    is_lab: bool
    settings: tuple[tuple[str, Any], ...]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Cell:
    """A row's results in one env.

    Attributes:
        seeds: Training seeds evaluated (None for a policy without one).
        success_rates: Success rate of each seed, same order.
        mean: Mean success rate over seeds, in [0, 1].
        seed_std: Sample standard deviation over seeds (None with one seed).
        successes: Successful episodes over all seeds.
        episodes: Episodes over all seeds.
        ci95: Wilson 95% interval of ``successes / episodes`` (episode noise of the pooled episodes).
        sort_accuracy: Mean sort accuracy over seeds.
        time_to_sort: Mean time to sort over the successful episodes of all seeds, s (None without a success).
        policy_failures: Episodes stopped for an unusable action, over all seeds.
        files: The result files.
    """

    seeds: tuple[int | None, ...]
    success_rates: tuple[float, ...]
    mean: float
    seed_std: float | None
    successes: int
    episodes: int
    ci95: tuple[float, float]
    sort_accuracy: float
    time_to_sort: float | None
    policy_failures: int
    files: tuple[str, ...]
    conditions: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Row:
    """A way of training a policy, with its cells per env label."""

    method: str
    variant: str | None
    real_fraction: float | None
    n_real_demos: int | None
    n_sim_demos: int | None
    datasets: tuple[str, ...]
    cells: dict[str, Cell]
    split: str = "legacy"
    #: The track the row is ranked on (None: a board without tracks, or an off-track row).
    track: str | None = None
    #: Why the row is off the board's track (empty for a ranked row); its results' reasons, each once.
    off_track: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        rf = "" if self.real_fraction is None else f" @ real_fraction {self.real_fraction:g}"
        mark = " [off-track]" if self.off_track else ""
        return f"{self.method} / {self.variant or NO_VARIANT}{rf}{split_mark(self.split)}{mark}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class RankAgreement:
    """How well one simulated env ranks the rows the way one lab env does (same task settings)."""

    sim_env: str
    lab_env: str
    rows: tuple[str, ...]
    sim: tuple[float, ...]
    lab: tuple[float, ...]
    pearson: float | None
    mmrv: float


@dataclasses.dataclass(frozen=True, kw_only=True)
class PanelFigures:
    """A lab panel's figures (docs/leaderboard.md#lab-panel), for the lab results of one set of task settings.

    Attributes:
        label: Column title, e.g. ``panel standard v1 (5 labs)``.
        name, version: The panel's, as its results record them.
        labs: The panel's labs (their ``lab=`` names), in its order.
        settings: Task settings of the lab columns it reads.
        means: Per row of the board (same order): mean success over the panel's labs, None when the row does not
            cover every lab.
        ci95: Per row: t-interval over the labs (``panels.panel_mean``), None with ``means``.
        missing: Per row: the labs it lacks (empty when it covers the panel).
        tau: Kendall tau of every pair of labs over the rows covering the panel: ``(lab, lab, tau or None)``.
        mean_tau: Mean of the defined taus (None when none is).
    """

    label: str
    name: str
    version: int
    labs: tuple[str, ...]
    settings: tuple[tuple[str, Any], ...]
    means: tuple[float | None, ...]
    ci95: tuple[tuple[float, float] | None, ...]
    missing: tuple[tuple[str, ...], ...]
    tau: tuple[tuple[str, str, float | None], ...]
    mean_tau: float | None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Leaderboard:
    """Everything the pages show; :meth:`to_dict` is ``leaderboard.json``."""

    results: tuple[tuple[str, EvaluationResult], ...]
    envs: tuple[EnvColumn, ...]
    rows: tuple[Row, ...]
    ranking: tuple[RankAgreement, ...]
    skipped: tuple[tuple[str, str], ...]
    panels: tuple[PanelFigures, ...] = ()
    #: The track the rows are ranked on (``Track.to_dict``), None on a board without track results.
    track: dict[str, Any] | None = None
    #: With a track: the rows of the other results (off-track or naming no track), apart and unranked, each with its
    #: reasons; their own columns (``off_track_envs``) and files (``off_track_results``).
    off_track_rows: tuple[Row, ...] = ()
    off_track_envs: tuple[EnvColumn, ...] = ()
    off_track_results: tuple[tuple[str, EvaluationResult], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "track": self.track,
            "envs": [dataclasses.asdict(e) | {"settings": dict(e.settings)} for e in self.envs],
            "rows": [_row_dict(r) for r in self.rows],
            "ranking": [dataclasses.asdict(a) for a in self.ranking],
            "panels": [dataclasses.asdict(p) | {"settings": dict(p.settings)} for p in self.panels],
            "off_track_envs": [dataclasses.asdict(e) | {"settings": dict(e.settings)} for e in self.off_track_envs],
            "off_track_rows": [_row_dict(r) for r in self.off_track_rows],
            "skipped": [{"file": f, "reason": why} for f, why in self.skipped],
        }


def _row_dict(row: Row) -> dict[str, Any]:
    return {
        **{k: v for k, v in dataclasses.asdict(row).items() if k != "cells"},
        "label": row.label,
        "cells": {k: dataclasses.asdict(c) for k, c in row.cells.items()},
    }


def split_mark(split: str) -> str:
    """What a row's label says about its split: dev rows are marked ``[dev]`` (their figures are not for
    reporting), rows of the other splits are not."""
    return " [dev]" if split == "dev" else ""
