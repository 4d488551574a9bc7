"""The result files a leaderboard reads, and the checks that they can be ranked together.

:func:`load_results` reads every result under a folder, checked against the result schema, and tells a damaged
result (:func:`damaged_result_reason`) from the other JSON files it skips; :func:`check_one_protocol` refuses
results under a diagnostic condition, and of two splits, condition mixes or versions of the conditions;
:func:`check_one_panel` results of two lab panels and :func:`check_one_track` results of two tracks (each claim
checked again by :func:`track_checks`).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from r2s2r_envs.envs.conditions import check_not_diagnostic
from r2s2r_envs.evaluation.leaderboard_data import LeaderboardError
from r2s2r_envs.evaluation.protocol import EvaluationResult, ResultSchemaError
from r2s2r_envs.evaluation.result_files import read_result_data, read_result_head, result_files
from r2s2r_envs.evaluation.schema import RESULT_FORMAT, result_schema
from r2s2r_envs.evaluation.splits import SPLITS
from r2s2r_envs.evaluation.tracks import TrackCheck, check_result
from r2s2r_envs.safe_json import JSONFileError


def load_results(
    results_dir: str | os.PathLike[str], *, skip_damaged: bool = False
) -> tuple[list[tuple[str, EvaluationResult]], list]:
    """Every evaluation result under ``results_dir`` (recursively, ``*.json`` and ``*.json.gz``), checked against
    the schema.

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
    for path in result_files(root):
        if not path.is_file():  # a folder named x.json, a dangling link
            what = "a folder" if path.is_dir() else "a link to nothing" if path.is_symlink() else "not a file"
            skipped.append((str(path), f"{what}, not a result file"))
            continue
        try:
            data = read_result_data(path)
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
        text = read_result_head(path, _DAMAGE_SCAN_BYTES).decode("utf-8", "replace")
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


def condition_mix(result: EvaluationResult) -> tuple[tuple[str, float], ...]:
    """A result's conditions with their shares of its episodes, e.g. ``(("nominal", 0.5), ("fast-belt", 0.25), ...)``:
    results of one ranking have the same mix."""
    return tuple((c.condition, round(c.episodes / result.episodes, 3)) for c in result.conditions)


def _describe_mix(mix: tuple[tuple[str, float], ...]) -> str:
    return ", ".join(f"{name} {share:.0%}" for name, share in mix)


def check_one_protocol(results: Sequence[tuple[str, EvaluationResult]]) -> None:
    """Refuse results that one ranking cannot hold: a result under a diagnostic condition (an intervention, not a
    benchmark score: ``envs.conditions.DIAGNOSTIC_CONDITIONS``), another split, another mix of conditions, or
    conditions made by another version of their definitions than the first result's
    (docs/protocol.md#dev-and-test-splits).

    Raises:
        LeaderboardError: names the file and its diagnostic conditions, or both files and both splits, mixes or
            versions.
    """
    for path, result in results:
        try:
            check_not_diagnostic([c.condition for c in result.conditions], f"{path} cannot be ranked")
        except ValueError as exc:
            raise LeaderboardError(str(exc)) from None
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
