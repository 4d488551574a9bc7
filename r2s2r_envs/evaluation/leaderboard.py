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

Across rows evaluated both in a simulated env and in the lab with the same task settings, ``ranking.pearson``
and ``ranking.mmrv`` say how well the simulator ranks the rows the way the lab does.  The pages are rendered by
:mod:`r2s2r_envs.evaluation.leaderboard_pages` (the HTML embeds plotly.js: it opens offline, without a server).
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from r2s2r_envs.evaluation.panels import lab_agreement, panel_mean
from r2s2r_envs.evaluation.protocol import EvaluationResult, ResultSchemaError
from r2s2r_envs.evaluation.ranking import mmrv, pearson
from r2s2r_envs.evaluation.schema import RESULT_FORMAT, result_schema
from r2s2r_envs.evaluation.splits import SPLITS
from r2s2r_envs.evaluation.stats import wilson_interval
from r2s2r_envs.evaluation.tracks import TRACKS, TrackCheck, check_result
from r2s2r_envs.safe_json import JSONFileError, read_json

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


# ---------------------------------------------------------------------- reading
def load_results(
    results_dir: str | os.PathLike[str], *, skip_damaged: bool = False
) -> tuple[list[tuple[str, EvaluationResult]], list]:
    """Every evaluation result under ``results_dir`` (recursively, ``*.json``), checked against the schema.

    JSON files that are not evaluation results (no ``format`` of one: training configs, logs) are skipped and
    returned with the reason; a file that claims to be a result but is invalid is an error, and so is a skipped
    file that looks like a damaged result (invalid JSON or a wrong ``format`` in a file holding most of a result's
    keys, see :func:`damaged_result_reason`) unless ``skip_damaged``: one flipped byte must not make a result vanish
    from the board unnoticed.

    Args:
        results_dir: the folder searched.
        skip_damaged: skip files that look like damaged results (each listed with the reason) instead of failing.

    Raises:
        LeaderboardError: no such folder, an invalid result file, or files that look like damaged results (the
            message names each file and what is wrong).
    """
    root = Path(results_dir)
    if not root.is_dir():
        raise LeaderboardError(f"results folder {root} does not exist (expected a folder of result JSON files)")
    results, skipped, damaged = [], [], []
    for path in sorted(root.rglob("*.json")):
        if not path.is_file():  # a folder named x.json, a dangling link
            what = "a folder" if path.is_dir() else "a link to nothing" if path.is_symlink() else "not a file"
            skipped.append((str(path), f"{what}, not a result file"))
            continue
        try:
            data = read_json(path)
        except JSONFileError as e:
            skipped.append((str(path), f"not read ({e})"))
            if why := damaged_result_reason(path, None):
                damaged.append((str(path), f"not read ({e}), and {why}"))
            continue
        if not isinstance(data, dict) or data.get("format") != RESULT_FORMAT:
            skipped.append((str(path), f"not an evaluation result (no format {RESULT_FORMAT!r})"))
            if why := damaged_result_reason(path, data):
                found = repr(data["format"]) if isinstance(data, dict) and "format" in data else "missing"
                damaged.append((str(path), f"field 'format' is {found}, not {RESULT_FORMAT!r}, but {why}"))
            continue
        try:
            results.append((str(path), EvaluationResult.from_dict(data)))
        except ResultSchemaError as e:
            raise LeaderboardError(f"{path}: {e}") from e
    if damaged and not skip_damaged:
        listed = "; ".join(f"{p}: {why}" for p, why in damaged)
        raise LeaderboardError(
            f"{len(damaged)} file(s) under {root} look like damaged evaluation results and would be left off the "
            f"board: {listed}. Restore or re-run them, remove them, or pass --skip-damaged (skip_damaged=True) to "
            "build without them"
        )
    return results, skipped


#: A result file's top-level keys (its schema's ``required``): a file holding most of them is a result.
_RESULT_KEYS: tuple[str, ...] = tuple(result_schema()["required"])
#: Bytes of an unreadable file searched for a result's keys.
_DAMAGE_SCAN_BYTES = 1 << 20


def damaged_result_reason(path: Path, data: Any) -> str | None:
    """Why a file the leaderboard skips looks like a damaged evaluation result, or None.

    A result's keys survive a flipped byte elsewhere: a file skipped for invalid JSON (``data`` None: its first MiB
    is searched for the keys as quoted strings) or for a ``format`` other than the result's, that holds at least
    half of a result's top-level keys or a ``format`` near :data:`RESULT_FORMAT` (at most 3 characters off), is
    one. Training configs, logs and other JSON files hold neither.
    """
    if data is None:
        try:
            with open(path, "rb") as fh:
                text = fh.read(_DAMAGE_SCAN_BYTES).decode("utf-8", "replace")
        except OSError:
            return None
        keys = [k for k in _RESULT_KEYS if f'"{k}"' in text]
        near = RESULT_FORMAT in text
    elif isinstance(data, dict):
        keys = [k for k in _RESULT_KEYS if k in data]
        near = any(
            isinstance(v, str) and _within_edits(v, RESULT_FORMAT, 3) for k, v in data.items() if k != "content_sha256"
        )
    else:
        return None
    if 2 * len(keys) >= len(_RESULT_KEYS):
        return f"it holds {len(keys)} of a result's {len(_RESULT_KEYS)} top-level keys"
    if near:
        return f"it holds a format near {RESULT_FORMAT!r}"
    return None


def _within_edits(a: str, b: str, limit: int) -> bool:
    """Whether the edit distance of ``a`` and ``b`` is at most ``limit``."""
    if abs(len(a) - len(b)) > limit:
        return False
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        if min(current) > limit:
            return False
        previous = current
    return previous[-1] <= limit


def _defaults() -> dict[str, Any]:
    from r2s2r_envs.envs import PickSortEnv

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


def split_mark(split: str) -> str:
    """What a row's label says about its split: dev rows are marked ``[dev]`` (their figures are not for
    reporting), rows of the other splits are not."""
    return " [dev]" if split == "dev" else ""


def condition_mix(result: EvaluationResult) -> tuple[tuple[str, float], ...]:
    """A result's conditions with their shares of its episodes, e.g. ``(("nominal", 0.5), ("fast-belt", 0.25), ...)``:
    results of one ranking have the same mix."""
    return tuple((c.condition, round(c.episodes / result.episodes, 3)) for c in result.conditions)


def _describe_mix(mix: tuple[tuple[str, float], ...]) -> str:
    return ", ".join(f"{name} {share:.0%}" for name, share in mix)


def check_one_protocol(results: Sequence[tuple[str, EvaluationResult]]) -> None:
    """Refuse results that one ranking cannot hold: another split, another mix of conditions, or conditions made by
    another version of their definitions than the first result's (docs/protocol.md#dev-and-test-splits).

    Raises:
        LeaderboardError: names both files and both splits, mixes or versions.
    """
    first_path, first = results[0]
    check_one_panel(results)
    for path, result in results[1:]:
        if result.conditions_version != first.conditions_version:
            raise LeaderboardError(
                f"{path} was evaluated under conditions of protocol version {result.conditions_version}, {first_path} "
                f"under version {first.conditions_version}: results of two versions of the conditions do not "
                "compare; rank each version's results apart"
            )
        if result.split != first.split:
            raise LeaderboardError(
                f"{path} is on the {result.split!r} split, {first_path} on the {first.split!r} split: one ranking "
                f"never mixes splits (splits {list(SPLITS)}, docs/protocol.md#dev-and-test-splits); rank each "
                "split's results apart"
            )
        if condition_mix(result) != condition_mix(first):
            raise LeaderboardError(
                f"{path} was evaluated under {_describe_mix(condition_mix(result))}, {first_path} under "
                f"{_describe_mix(condition_mix(first))}: one ranking holds one mix of conditions; rank each mix's "
                "results apart"
            )


def _panel_key(result: EvaluationResult) -> tuple[str, int, tuple[tuple[str, str, str], ...]] | None:
    if result.panel is None:
        return None
    labs = tuple((e["lab"], e["name"], e["config_sha256"]) for e in result.panel["labs"])
    return result.panel["name"], result.panel["version"], labs


def check_one_panel(results: Sequence[tuple[str, EvaluationResult]]) -> None:
    """Refuse results of two lab panels, two versions of one, or one version whose labs differ (a lab changed
    without a version bump) in one ranking.

    Raises:
        LeaderboardError: names both files and both panels (name, version and the lab that differs).
    """
    tagged = [(path, _panel_key(r)) for path, r in results if r.panel is not None]
    if not tagged:
        return
    first_path, first = tagged[0]
    for path, key in tagged[1:]:
        assert first is not None and key is not None
        if key == first:
            continue
        if key[:2] != first[:2]:
            why = f"lab panel {key[0]!r} version {key[1]}, {first_path} on panel {first[0]!r} version {first[1]}"
        else:
            diff = next((a, b) for a, b in itertools.zip_longest(key[2], first[2]) if a != b)
            why = (
                f"panel {key[0]!r} version {key[1]} with lab {diff[0]}, {first_path} on the same version with lab "
                f"{diff[1]} (a lab changed without a new panel version)"
            )
        raise LeaderboardError(
            f"{path} was evaluated on {why}: one ranking holds one panel; rank each panel's results apart "
            "(docs/leaderboard.md#lab-panel)"
        )


def track_checks(results: Sequence[tuple[str, EvaluationResult]]) -> dict[str, TrackCheck | None]:
    """Each result's track claim checked again with this package's definitions (``tracks.check_result``), by file;
    None for a result that names no track."""
    return {path: check_result(result) for path, result in results}


def check_one_track(
    results: Sequence[tuple[str, EvaluationResult]], checks: dict[str, TrackCheck | None] | None = None
) -> tuple[str, int] | None:
    """The one track (name, version) the on-track results are on, or None when none is on a track.

    Raises:
        LeaderboardError: results on two tracks, or two versions of one (names both files and both tracks).
    """
    checks = track_checks(results) if checks is None else checks
    first: tuple[str, str, int] | None = None
    for path, _ in results:
        check = checks[path]
        if check is None or not check.on_track:
            continue
        if first is None:
            first = (path, check.name, check.version)
        elif (check.name, check.version) != first[1:]:
            raise LeaderboardError(
                f"{path} is on track {check.name!r} version {check.version}, {first[0]} on track {first[1]!r} version "
                f"{first[2]}: one ranking holds one track; rank each track's results apart "
                "(docs/leaderboard.md#tracks)"
            )
    return None if first is None else (first[1], first[2])


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
    from r2s2r_envs.evaluation.leaderboard_pages import _md_escape

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
    import html

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
    from r2s2r_envs.evaluation.leaderboard_pages import to_html, to_markdown

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
