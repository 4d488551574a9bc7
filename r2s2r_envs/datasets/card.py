"""The data card of a dataset: who made the demos and how, in numbers read from the file (docs/datasets.md#data-card).

A card says what a dataset's demonstrator did, so that two datasets (the variants of an ablation) can be compared on
more than their policies' results:

* ``demonstrator``: its name, attempts, successes and success rate (successes per attempt), whether failed attempts
  were kept, and the failure causes of the failed demos the file holds;
* ``scenes``: which scenes were kept: the base seed, the attempts made and the attempt indices kept (as ranges, e.g.
  ``"0-3,5,7-9"``), and a hash of the kept episodes' env seeds (two files with the same hash hold the same scenes);
* ``time_to_sort``: the episodes' time to sort, s (summary; the sorted episodes only) and how many were not sorted;
* ``objects``: per object in the order the belt brings them, the share of episodes that sorted it;
* ``smoothness``: per episode, the mean change of the arm command per step (``action_change``, normalized action
  units) and the mean squared jerk of the commanded TCP path (``mean_squared_jerk``, m^2/s^6: the translation
  commands as velocities at the nominal step size, ``envs.config.ControlConfig``, differentiated twice), read from
  the demonstrator's own commands (``action_labels``; a file without clean labels: its executed actions, said so);
* ``grasps``: the timing of every grasp against the belt and its type (computed by ``r2s2r_envs.behavior.card``,
  see below).

Every figure is computed from what the file records and its content hash covers (arrays, per-demo attributes, the
root counters and the generation record): :func:`compute_card` gives the same card for the same content, so a card
can be computed for any file, one made before cards existed included (``r2s2r datasets card FILE``).  A summary is
``{"n", "mean", "median", "p10", "p90", "min", "max"}`` (4 significant digits; ``None`` without values); per-episode
values come with ``per_episode=True`` (``--episodes``), not in the stored card, whose size stays bounded.

Where the card is kept: the root attribute ``data_card`` (JSON), written by ``generate`` once a run ends
(:func:`refresh_card`) and by ``r2s2r datasets card FILE --store``.  It is deliberately outside the content hash
(``datasets.schema``): the hash covers what the card is derived from, so adding a card, or recomputing it with a
later version of this code, changes no dataset's content hash and no pinned canonical hash.  The card records the
content hash it describes (``content_sha256``): a card whose hash is not the file's (a file resumed by a run that
was killed before it wrote the new card) is reported as stale and recomputed instead of trusted.

The grasp section needs the segmentation of ``r2s2r_envs.behavior.segments``, a layer above this one
(docs/architecture.md#dependencies): ``r2s2r_envs.behavior`` registers it in ``r2s2r_envs.card_sections``, as the lab
registers its teleoperator in the demonstrator registry, and importing ``r2s2r_envs`` imports it, so every card has
it (without importing this layer and h5py).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from r2s2r_envs._version import __version__
from r2s2r_envs.card_sections import SECTIONS
from r2s2r_envs.card_sections import CardSection as CardSection  # re-exported
from r2s2r_envs.card_sections import register_card_section as register_card_section  # re-exported
from r2s2r_envs.datasets.reader import DatasetFile, open_dataset
from r2s2r_envs.datasets.schema import CorruptDatasetError, NoCleanLabelsError
from r2s2r_envs.envs.config import ControlConfig
from r2s2r_envs.safe_json import JSONFileError, loads

#: Root attribute that holds the card (JSON), outside the content hash.
CARD_ATTR = "data_card"
#: Version of the card's layout and definitions (a card of another version is recomputed).
CARD_VERSION = 1
#: The stored list of kept attempts is cut (at a range) beyond this many characters; its hash stays whole.
MAX_RANGES_CHARS = 4000
#: Dimensions of a PickSort task-space action: 6 arm (translation, rotation) and 16 finger commands.
_PICKSORT_ACTION_DIM = 22
_ARM_DIMS = 6

# Sections computed by a layer above this one live in their own registry (``r2s2r_envs.card_sections``).
_SECTIONS = SECTIONS


# ---------------------------------------------------------------------------------------------- computing
def compute_card(source: str | os.PathLike[str] | DatasetFile, *, per_episode: bool = False) -> dict[str, Any]:
    """The data card of a dataset, computed from its content (see the module docstring).

    Args:
        source: a dataset file (opened and checked as ``open_dataset(verify="quick")`` does), or an open one.
        per_episode: also return ``card["episodes"]``: one row per demo (demo id, attempt, seed, success, time to
            sort, smoothness and each section's own values).

    Raises:
        FileNotFoundError, r2s2r_envs.datasets.DatasetError: the file is missing, not a dataset, or damaged (the
            message names the file and what is wrong).
    """
    if isinstance(source, DatasetFile):
        return _compute(source, per_episode)
    with open_dataset(source, verify="quick", allow_empty=True) as f:
        return _compute(f, per_episode)


def _compute(f: DatasetFile, per_episode: bool) -> dict[str, Any]:
    attrs = [f.demo_attrs(k) for k in f.demo_ids]
    rows: list[dict[str, Any]] = [
        {
            "demo": k,
            "attempt": _known(a.get("attempt")),
            "seed": _known(a.get("seed")),
            "success": bool(a.get("success")),
            "time_to_sort_s": _finite(a.get("time_to_sort")),
        }
        for k, a in zip(f.demo_ids, attrs, strict=True)
    ]
    smoothness, smooth_rows = _smoothness(f)
    card: dict[str, Any] = {
        "card_version": CARD_VERSION,
        "content_sha256": f.content_hash,
        "computed_by": f"r2s2r_envs {__version__}",
        "env_id": f.env_id,
        "domain": f.domain,
        "demos": f.num_demos,
        "demonstrator": _demonstrator(f, attrs),
        "scenes": _scenes(f, rows),
        "time_to_sort": _time_to_sort(rows),
        "objects": _objects(attrs),
        "smoothness": smoothness,
    }
    for row, extra in zip(rows, smooth_rows, strict=True):
        row.update(extra)
    for name, compute in _SECTIONS.items():
        section, section_rows = compute(f)
        card[name] = section
        for row, extra in zip(rows, section_rows, strict=False):
            row.update(extra)
    if per_episode:
        card["episodes"] = rows
    return card


def _demonstrator(f: DatasetFile, attrs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    demonstrator = f.provenance.get("demonstrator")
    name = demonstrator.get("name") if isinstance(demonstrator, Mapping) else None
    causes: dict[str, int] = {}
    for a in attrs:
        if not a.get("success"):
            cause = str(a.get("failure_cause") or "unknown")
            causes[cause] = causes.get(cause, 0) + 1
    successes_only = f.generation.get("successes_only")
    return {
        "name": name,
        "attempts": f.attempts,
        "successes": f.successes,
        "success_rate": _round(f.successes / f.attempts) if f.attempts > 0 else None,
        "successes_only": bool(successes_only) if isinstance(successes_only, bool) else None,
        "failure_causes": dict(sorted(causes.items())),
    }


def _scenes(f: DatasetFile, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    attempts = [r["attempt"] for r in rows]
    seeds = [r["seed"] for r in rows]
    base = f.provenance.get("seed", f.generation.get("seed"))
    known = all(a is not None for a in attempts)
    ranges = to_ranges(sorted(attempts)) if known and attempts else ("" if known else None)
    cut = ranges is not None and len(ranges) > MAX_RANGES_CHARS
    if cut and ranges is not None:
        ranges = ranges[: ranges.rfind(",", 0, MAX_RANGES_CHARS)] + ",..."
    kept_seeds = sorted(int(s) for s in seeds if s is not None)
    return {
        "base_seed": base if isinstance(base, int) and not isinstance(base, bool) else None,
        "attempted": f.attempts,
        "kept": len(rows),
        "kept_attempts": ranges,
        "kept_attempts_cut": cut,
        "kept_seeds_sha256": hashlib.sha256(",".join(map(str, kept_seeds)).encode()).hexdigest()[:16]
        if len(kept_seeds) == len(rows)
        else None,
    }


def _time_to_sort(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    times = [r["time_to_sort_s"] for r in rows if r["time_to_sort_s"] is not None]
    return {"sorted_episodes": len(times), "unsorted_episodes": len(rows) - len(times), "seconds": summary(times)}


def _objects(attrs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    outcomes = [list(a.get("object_outcomes") or []) for a in attrs]
    n = max((len(o) for o in outcomes), default=0)
    out = []
    for i in range(n):
        seen = [o[i] for o in outcomes if i < len(o)]
        counts: dict[str, int] = {}
        for outcome in seen:
            counts[str(outcome)] = counts.get(str(outcome), 0) + 1
        out.append(
            {
                "object": i + 1,
                "sorted_share": _round(counts.get("sorted", 0) / len(seen)) if seen else None,
                "outcomes": dict(sorted(counts.items())),
            }
        )
    return out


def _smoothness(f: DatasetFile) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    if f.num_demos == 0:
        return {"array": None, "action_change": None, "mean_squared_jerk": None, "note": "no demos"}, []
    try:
        array, note = f.label_array(), None
    except NoCleanLabelsError:
        array, note = "actions", "this file stores no clean labels: its executed (noisy) actions are measured"
    task_space = f.action_dim == _PICKSORT_ACTION_DIM
    if not task_space:
        note = f"{f.action_dim}-dimensional actions (not PickSort's task space): change over all dimensions, no jerk"
    control = ControlConfig()
    dt = 1.0 / control.control_hz
    rows = []
    for k in f.demo_ids:
        actions = np.asarray(f.read(k, array), dtype=np.float64)
        arm = actions[:, :_ARM_DIMS] if task_space else actions
        change = float(np.linalg.norm(np.diff(arm, axis=0), axis=1).mean()) if len(arm) > 1 else None
        jerk = None
        if task_space and len(arm) > 3:
            velocity = arm[:, :3] * control.max_linear_step / dt
            jerk = float(np.mean(np.sum((np.diff(velocity, n=2, axis=0) / dt**2) ** 2, axis=1)))
        rows.append({"action_change": _round(change), "mean_squared_jerk": _round(jerk)})
    section = {
        "array": array,
        "action_change": summary(r["action_change"] for r in rows),
        "mean_squared_jerk": summary(r["mean_squared_jerk"] for r in rows),
        "note": note,
    }
    return section, rows


# ---------------------------------------------------------------------------------------------- storing
def stored_card(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The card stored in a dataset file's metadata, as stored (``None`` if it has none). The file is not checked:
    open it with ``open_dataset`` first.

    Raises:
        CorruptDatasetError: the stored card is not a JSON object.
    """
    import h5py

    with h5py.File(path, "r") as f:
        text = f.attrs.get(CARD_ATTR)
    if text is None:
        return None
    try:  # the suite's bounded, strict JSON reader, as for every attribute it reads
        card = loads(
            text.decode() if isinstance(text, bytes) else str(text), what=f"{path}: root attribute {CARD_ATTR}"
        )
    except JSONFileError:
        card = None
    if not isinstance(card, dict):
        raise CorruptDatasetError(
            f"{path}: root attribute {CARD_ATTR!r} is not a JSON object; `r2s2r datasets card {path} --store` "
            "writes a new card (the data are not affected: the card is outside the content hash)"
        )
    return card


def card_state(f: DatasetFile) -> tuple[str, dict[str, Any] | None]:
    """The stored card of an open file and its state: ``"current"`` (:func:`card_is_current`), ``"stale"`` (it
    describes other content, or has another card version), ``"absent"``, or ``"unreadable"`` (then ``None``)."""
    try:
        card = stored_card(f.path)
    except CorruptDatasetError:
        return "unreadable", None
    if card is None:
        return "absent", None
    return ("current" if card_is_current(card, f.content_hash) else "stale"), card


def card_is_current(card: Mapping[str, Any] | None, content_hash: str) -> bool:
    """Whether ``card`` describes the content with hash ``content_hash`` and has this code's card version."""
    return card is not None and card.get("content_sha256") == content_hash and card.get("card_version") == CARD_VERSION


def store_card(path: str | os.PathLike[str], card: Mapping[str, Any]) -> None:
    """Writes ``card`` into the file's root attribute ``data_card`` (outside the content hash).

    Raises:
        DatasetError: another process has the file open (HDF5's lock).
    """
    from r2s2r_envs.datasets.writer import _open_for_writing

    text = json.dumps({k: v for k, v in card.items() if k != "episodes"}, sort_keys=True, allow_nan=False)
    f = _open_for_writing(Path(path))
    try:
        f.attrs[CARD_ATTR] = text
        f.flush()
    finally:
        f.close()


def data_card(path: str | os.PathLike[str], *, store: bool = False) -> dict[str, Any]:
    """The file's card: the stored one if it is current (:func:`card_is_current`), else computed (and, with
    ``store``, written into the file).

    Raises:
        FileNotFoundError, r2s2r_envs.datasets.DatasetError: as :func:`compute_card`.
    """
    with open_dataset(path, verify="quick", allow_empty=True) as f:
        state, card = card_state(f)
        if state == "current" and card is not None:
            return card
        card = _compute(f, per_episode=False)
    if store:
        store_card(path, card)
    return card


def refresh_card(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Makes sure the file stores a current card (what ``generate`` calls when a run ends); returns it."""
    return data_card(path, store=True)


# ---------------------------------------------------------------------------------------------- showing
def format_card(card: Mapping[str, Any]) -> list[str]:
    """The card as text lines (what ``r2s2r datasets info`` and ``r2s2r datasets card`` print)."""
    lines = [
        f"data card of content {str(card.get('content_sha256'))[:16]}... (card version {card.get('card_version')})"
    ]
    d = card.get("demonstrator") or {}
    rate = d.get("success_rate")
    kept = "failed attempts not kept" if d.get("successes_only") else "every attempt kept"
    if d.get("successes_only") is None:
        kept = "kept attempts as recorded"
    causes = ", ".join(f"{k} {v}" for k, v in (d.get("failure_causes") or {}).items())
    lines.append(
        f"  demonstrator   {d.get('name') or 'unknown'}: {d.get('successes')} successes in {d.get('attempts')} "
        f"attempts ({_pct(rate)}), {kept}{f'; failed demos: {causes}' if causes else ''}"
    )
    s = card.get("scenes") or {}
    kept_text = s.get("kept_attempts")
    kept_text = "unknown" if kept_text is None else (kept_text or "none")
    lines.append(
        f"  scenes         base seed {s.get('base_seed')}: kept {s.get('kept')} of {s.get('attempted')} attempts: "
        f"{kept_text} (env seeds hash {s.get('kept_seeds_sha256') or 'n/a'})"
    )
    t = card.get("time_to_sort") or {}
    lines.append(
        f"  time to sort   {_spread(t.get('seconds'), 's')} over {t.get('sorted_episodes')} sorted episodes "
        f"({t.get('unsorted_episodes')} not sorted)"
    )
    objects = card.get("objects") or []
    if objects:
        shares = " / ".join(_pct(o.get("sorted_share")) for o in objects)
        lines.append(f"  sorted         {shares} (per object, in the order the belt brings them)")
    g = card.get("grasps")
    if isinstance(g, Mapping):
        lines += _grasp_lines(g)
    m = card.get("smoothness") or {}
    note = f"; {m['note']}" if m.get("note") else ""
    lines.append(
        f"  smoothness     arm command change per step {_spread(m.get('action_change'), '')}; mean squared jerk "
        f"{_spread(m.get('mean_squared_jerk'), 'm^2/s^6')} ({m.get('array') or 'n/a'}{note})"
    )
    return lines


def _grasp_lines(g: Mapping[str, Any]) -> list[str]:
    if not g.get("available"):
        return [f"  grasps         n/a: {g.get('reason')}"]
    types = ", ".join(f"{k} {v}" for k, v in (g.get("types") or {}).items() if v) or "none"
    lines = [
        f"  grasps         {g.get('grasps')} in {g.get('episodes')} episodes ({g.get('regrasps')} re-grasps); types: "
        f"{types}; digits' closure spread {_spread(g.get('closure_spread_s'), 's')}",
        f"  all objects    arrival to closure {_spread(g.get('arrival_to_closure_s'), 's')}; closure to lift "
        f"{_spread(g.get('closure_to_lift_s'), 's')}; margin at lift {_spread(g.get('margin_s'), 's', low=True)}",
    ]
    for o in g.get("objects") or []:
        lines.append(
            f"  object {o.get('object')}       arrival to closure {_spread(o.get('arrival_to_closure_s'), 's')}; "
            f"margin at lift {_spread(o.get('margin_s'), 's', low=True)} ({o.get('grasped')} grasped)"
        )
    return lines


def format_episodes(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Per-episode rows (``compute_card(..., per_episode=True)["episodes"]``) as a text table."""

    def cell(value: Any) -> str:
        if value is None:
            return "-"
        if isinstance(value, list):
            return "/".join(cell(v) for v in value) or "-"
        if isinstance(value, bool):
            return "yes" if value else "no"
        if isinstance(value, float):
            return f"{value:.3g}"
        return str(value)

    columns = [
        ("demo", "demo"),
        ("attempt", "attempt"),
        ("success", "success"),
        ("time_to_sort_s", "time to sort, s"),
        ("arrival_to_closure_s", "arrival to closure, s"),
        ("margin_s", "margin at lift, s"),
        ("grasp_types", "grasp types"),
        ("action_change", "command change"),
        ("mean_squared_jerk", "squared jerk"),
    ]
    table = [[label for _, label in columns]] + [[cell(r.get(key)) for key, _ in columns] for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(columns))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in table]


# ---------------------------------------------------------------------------------------------- helpers
def summary(values: Iterable[float | None]) -> dict[str, Any] | None:
    """``{"n", "mean", "median", "p10", "p90", "min", "max"}`` of the finite values (4 significant digits), or
    ``None`` when there are none."""
    x = np.array([v for v in values if v is not None and math.isfinite(v)], dtype=np.float64)
    if len(x) == 0:
        return None
    return {
        "n": len(x),
        "mean": _round(float(x.mean())),
        "median": _round(float(np.median(x))),
        "p10": _round(float(np.percentile(x, 10))),
        "p90": _round(float(np.percentile(x, 90))),
        "min": _round(float(x.min())),
        "max": _round(float(x.max())),
    }


def to_ranges(values: Sequence[int]) -> str:
    """Sorted integers as ranges: ``[0, 1, 2, 5, 7, 8]`` -> ``"0-2,5,7-8"``."""
    parts: list[str] = []
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        parts.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    return ",".join(parts)


def _round(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return float(f"{value:.4g}")


def _finite(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _known(value: Any) -> int | None:
    """A recorded seed or attempt index (``-1``: not recorded)."""
    return int(value) if isinstance(value, (int, np.integer)) and int(value) >= 0 else None


def _pct(share: float | None) -> str:
    return "n/a" if share is None else f"{100 * share:.0f}%"


def _spread(s: Mapping[str, Any] | None, unit: str, *, low: bool = False) -> str:
    """``"median 2.7 s (10-90%: 1.9-4.1)"``; with ``low`` the minimum too."""
    if not s:
        return "n/a"
    u = f" {unit}" if unit else ""
    text = f"median {s['median']:.3g}{u} (10-90%: {s['p10']:.3g}-{s['p90']:.3g}"
    return text + (f", min {s['min']:.3g})" if low else ")")
