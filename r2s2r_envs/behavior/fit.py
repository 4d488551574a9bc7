"""Fitting the human-like generator to real demonstrations, and the fitted model's file format.

``fit_behavior(demos)`` reads a real (lab) demonstration dataset, segments every grasp of an object that ended up
sorted (``behavior.segments``) and keeps, per grasp, the pieces the generator replays (docs/behavior.md#generator):

* the **approach**: from the previous release (or the episode's start) to the closure onset: the TCP path in the
  world and relative to the object, the finger commands, the hand's yaw, where the hand paused and how long after
  the object's arrival it started its reach;
* the **closure**: closure onset to lift start, relative to the object, with the finger commands;
* the **transport**: lift start to release, in the world (the bins do not move), with the finger commands;
* the **tail**: the first 2 s after the release, for when no object is left.

The model is JSON (``MODEL_FORMAT``, schema ``MODEL_SCHEMA_VERSION``) with its provenance: the demo file's content
hash, env id and lab identity (name and config hash, never parameters), the grasps per category, the fit settings and
the package version. ``load_model`` refuses unknown keys and physically absurd values, naming the field, and a model of
an older schema with the command that refits it.
Only what a real cell records is read (commands and sensor readings); nothing of the lab's or its operator's
settings is, or could be.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.resources
import json
import math
from pathlib import Path
from typing import Any, cast

import numpy as np

from r2s2r_envs.behavior.segments import (
    DT,
    BehaviorDataError,
    DemoSet,
    DemoTrace,
    Grasp,
    load_demos,
)
from r2s2r_envs.envs.hand import quat_yaw
from r2s2r_envs.mappings import check_keys
from r2s2r_envs.provenance import versions
from r2s2r_envs.safe_json import (
    CONTENT_HASH_FIELD,
    GZIP_SUFFIX,
    JSONFileError,
    check_content_hash,
    read_json,
    with_content_hash,
)
from r2s2r_envs.world import constants as C

MODEL_FORMAT = "r2s2r_envs.behavior_model"
#: Version 3: the closed-loop generator's (docs/behavior.md#generator): keys and values checked strictly, grasps per
#: category recorded. Version 2 (the open-loop generator's: the same paths, replayed on the controller's target) and
#: version 1 (commanded targets) are refused with the command that refits them.
MODEL_SCHEMA_VERSION = 3
#: The command that (re)fits a model, named by every refusal of an old or foreign model.
REFIT_COMMAND = "r2s2r fit-behavior --demos LAB_DEMOS.hdf5 --out MODEL.json"
#: Name of the shipped model fitted to the default lab's canonical demonstrations (``lab-50``).
DEFAULT_MODEL = "default"
#: Steps of motion kept after a release for when no object is left (2 s).
TAIL_STEPS = 40
_SEGMENT_KEYS = ("approach", "close", "transport", "tail")


class BehaviorModelError(ValueError):
    """A behavior model file is missing, malformed or of another format or version; the message says which."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class FitSettings:
    """Settings of a fit (recorded in the model's provenance).

    Attributes:
        max_sources: Most grasps kept as sources, spread evenly over categories and the file's order (bounds the
            model's size; the generator samples among them).
        seed: Seed of the choice of sources when there are more than ``max_sources``.
        require_real: Refuse a simulated dataset (behavior grounding fits the real operator, not a simulator's
            demonstrator).
        min_grasps_per_category: Fewest usable grasps (of objects that ended up sorted) of each category the
            dataset's scenes hold: the generator grasps every object the way the operator grasped its category, and
            a handful of grasps carry too little of that.
    """

    max_sources: int = 90
    seed: int = 0
    require_real: bool = True
    min_grasps_per_category: int = 3

    def __post_init__(self) -> None:
        if not isinstance(self.max_sources, int) or self.max_sources < 1:
            raise ValueError(f"max_sources must be a positive integer, got {self.max_sources!r}")
        if not isinstance(self.min_grasps_per_category, int) or self.min_grasps_per_category < 1:
            raise ValueError(
                f"min_grasps_per_category must be a positive integer, got {self.min_grasps_per_category!r}"
            )


def fit_behavior(demos: str | Path, *, settings: FitSettings | None = None) -> dict[str, Any]:
    """Fits the human-like generator to a real demonstration dataset; returns the model (a JSON-able dict).

    Args:
        demos: a dataset written by ``r2s2r generate PickSort-Real-v0 ...`` (the lab's demonstrations).
        settings: fit settings (default ``FitSettings()``).

    Raises:
        FileNotFoundError, r2s2r_envs.datasets.DatasetError: missing, foreign, damaged or empty file.
        BehaviorDataError: a simulated dataset, another task's, one without successful episodes or without a
            usable grasp.
    """
    settings = settings or FitSettings()
    data = load_demos(demos)
    if settings.require_real and data.domain != "real":
        raise BehaviorDataError(
            f"{data.path} is a simulated dataset (domain {data.domain!r}, env {data.env_id!r}); behavior grounding "
            "fits the real operator: pass a lab dataset (r2s2r generate PickSort-Real-v0 --lab LAB ...)"
        )
    successes = sum(t.success for t in data.traces)
    if successes == 0:
        raise BehaviorDataError(
            f"{data.path} has no successful episode among its {len(data.traces)}; the generator is fitted to "
            "successful grasps: collect demonstrations that succeed (r2s2r generate ... --successes-only)"
        )
    sources = [_source(t, g, k) for t in data.traces for k, g in enumerate(t.grasps) if _usable(t, g)]
    if not sources:
        raise BehaviorDataError(
            f"{data.path}: no grasp of a sorted object could be segmented in its {len(data.traces)} demos; is it a "
            "dataset of PickSort demonstrations with task-space commands?"
        )
    present = sorted({c for t in data.traces for c in t.categories}, key=C.CATEGORIES.index)
    per_category = {c: sum(s["category"] == c for s in sources) for c in present}
    few = {c: n for c, n in per_category.items() if n < settings.min_grasps_per_category}
    if few:
        listed = ", ".join(f"{c}: {n}" for c, n in few.items())
        raise BehaviorDataError(
            f"{data.path}: too few usable grasps of category {listed} (at least {settings.min_grasps_per_category} "
            f"of each category the scenes hold are needed; usable grasps per category: {per_category}); collect "
            "more demonstrations (r2s2r generate PickSort-Real-v0 --episodes N --successes-only ...)"
        )
    sources = _choose(sources, settings)
    close_y = [s["object_y_close"] for s in sources]
    # Where the hand closes relative to the perceived object, on average over every grasp: a person centres the
    # hand on the object, so a consistent horizontal offset is the perception's error (a camera's calibration
    # offset), which the generator removes; each grasp's own scatter around it stays.
    offset_xy = np.mean([s["close"]["relative"][0][:2] for s in sources], axis=0)
    model = {
        "format": MODEL_FORMAT,
        "schema_version": MODEL_SCHEMA_VERSION,
        "provenance": _provenance(data, settings, successes, per_category),
        "limits": {
            # The operator's reach along the belt, with a margin: objects beyond are not attempted.
            "reach_limit_y": float(min(close_y)) - 0.03,
            "reach_upstream_y": float(max(s["object_y_start"] for s in sources)) + 0.05,
        },
        "calibration": {"grasp_offset_xy": _r(offset_xy)},
        "sources": sources,
    }
    return model


#: Shortest transport (lift to release) of a usable grasp, control steps (0.5 s; a carry to a bin takes seconds): a
#: shorter one is a lift seen only as the object came back into a camera's view.
MIN_TRANSPORT_STEPS = 10


def _usable(trace: DemoTrace, g: Grasp) -> bool:
    return (
        g.sorted
        and g.release is not None
        and g.close - g.reach_start >= 2
        and g.lift > g.close
        and g.release - g.lift >= MIN_TRANSPORT_STEPS
    )


def _r(a: np.ndarray, digits: int = 4) -> list:
    return np.round(np.asarray(a, dtype=float), digits).tolist()


def _source(trace: DemoTrace, g: Grasp, index: int) -> dict[str, Any]:
    seg_start = 0 if index == 0 else (trace.grasps[index - 1].release or 0)
    seg_start = min(seg_start, g.rest_start)
    obj = trace.objects[:, g.obj]
    # Where the hand was (the measured TCP, low-passed against the sensor's noise), not the commands: those were
    # shaped by the lab's own arm, and replayed through another world's controller they would move the hand faster
    # or slower than the operator's moved (docs/behavior.md#generator).
    world = trace.eef_lowpass
    yaw = np.unwrap(quat_yaw(trace.eef_quat))
    rest = g.rest_start - seg_start
    reach = g.reach_start - seg_start
    arrival = max(g.arrival, g.rest_start)
    release = int(cast(int, g.release))  # not None: the only caller keeps the grasps _usable() accepts
    tail_end = min(len(world), release + TAIL_STEPS)
    seg = slice(seg_start, g.close)
    return {
        "demo_id": trace.demo_id,
        "grasp": index,
        "category": g.category,
        "first": index == 0,
        "object_y_start": float(obj[g.reach_start, 1]),
        "object_y_segment": float(obj[seg_start, 1]),
        "object_y_close": float(obj[g.close, 1]),
        "object_yaw_close": float(quat_yaw(trace.object_quat[g.close, g.obj])),
        "rest": int(rest),
        "reach": int(reach),
        "delay_s": round((g.reach_start - arrival) * DT, 3),
        "approach": {
            "world": _r(world[seg]),
            "relative": _r(world[seg] - obj[seg]),
            "fingers": _r(trace.fingers[seg], 3),
            "yaw": _r(yaw[seg], 3),
        },
        "close": {
            "world": _r(world[g.close : g.lift]),
            "relative": _r(world[g.close : g.lift] - obj[g.close : g.lift]),
            "fingers": _r(trace.fingers[g.close : g.lift], 3),
            "yaw": _r(yaw[g.close : g.lift], 3),
        },
        "transport": {
            "world": _r(world[g.lift : release + 1]),
            "fingers": _r(trace.fingers[g.lift : release + 1], 3),
            "yaw": _r(yaw[g.lift : release + 1], 3),
        },
        "tail": {
            "world": _r(world[release:tail_end]),
            "fingers": _r(trace.fingers[release:tail_end], 3),
            "yaw": _r(yaw[release:tail_end], 3),
        },
    }


def _choose(sources: list[dict[str, Any]], settings: FitSettings) -> list[dict[str, Any]]:
    if len(sources) <= settings.max_sources:
        return sources
    rng = np.random.default_rng(settings.seed)
    per_cat = {c: [s for s in sources if s["category"] == c] for c in C.CATEGORIES}
    share = max(1, settings.max_sources // sum(1 for v in per_cat.values() if v))
    kept = []
    for group in per_cat.values():
        if len(group) > share:
            idx = np.sort(rng.choice(len(group), size=share, replace=False))
            group = [group[i] for i in idx]
        kept += group
    return kept


def _provenance(data: DemoSet, settings: FitSettings, successes: int, per_category: dict[str, int]) -> dict[str, Any]:

    return {
        "demos": {
            "file": Path(data.path).name,
            "content_sha256": data.content_hash,
            "env_id": data.env_id,
            "domain": data.domain,
            "lab": data.world.get("lab"),
            "episodes": len(data.traces),
            "successes": successes,
            "grasps": len(data.grasps),
            "usable_grasps_per_category": per_category,
        },
        "fit_settings": dataclasses.asdict(settings),
        "method": "object-centric segments of the real demonstrations, tracked closed loop in the moving object frame",
        "versions": versions("r2s2r_envs", "mujoco", "numpy"),
    }


def save_model(model: dict[str, Any], path: str | Path) -> Path:
    """Writes a model to ``path`` (JSON, with ``content_sha256``, the hash of its own content, that
    :func:`load_model` verifies); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(with_content_hash(model), separators=(",", ":"), sort_keys=True) + "\n")
    return path


def model_sha256(model: dict[str, Any]) -> str:
    """SHA-256 of a model's canonical JSON, without the software versions in its provenance (it identifies what
    a model does) and without the file's own ``content_sha256``."""
    body = {k: v for k, v in model.items() if k != CONTENT_HASH_FIELD}
    prov = dict(body.get("provenance", {}))
    prov.pop("versions", None)
    body["provenance"] = prov
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


#: Names a shipped model's file may end in: plain JSON, or gzip-compressed (how the package ships them).
MODEL_SUFFIXES: tuple[str, ...] = (".json", ".json" + GZIP_SUFFIX)


def _shipped_files() -> dict[str, Path]:
    """``{name: file}`` of the models shipped in ``r2s2r_envs/behavior/models/``."""
    root = importlib.resources.files("r2s2r_envs.behavior").joinpath("models")
    try:
        entries = list(root.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return {}
    return {
        p.name.removesuffix(suffix): Path(str(p))
        for p in entries
        for suffix in MODEL_SUFFIXES
        if p.name.endswith(suffix)
    }


def shipped_models() -> list[str]:
    """Names of the models shipped in ``r2s2r_envs/behavior/models/``."""
    return sorted(_shipped_files())


def resolve_model_path(name_or_path: str | Path) -> Path:
    """The file of a shipped model name (``"default"``) or a path (``*.json``, or gzip-compressed ``*.json.gz``).

    Raises:
        BehaviorModelError: neither a shipped name nor an existing file; the message lists the shipped names.
    """
    text = str(name_or_path)
    shipped = _shipped_files()
    if text in shipped:
        return shipped[text]
    path = Path(text)
    if path.is_file():
        return path
    raise BehaviorModelError(
        f"no behavior model {text!r}: not a shipped model ({sorted(shipped)}) and not a file; fit one with "
        "r2s2r fit-behavior --demos FILE --out MODEL.json"
    )


def load_model(name_or_path: str | Path | dict[str, Any]) -> dict[str, Any]:
    """Reads and checks a fitted model: a shipped name (``"default"``), a JSON file, or a model dict.

    Raises:
        BehaviorModelError: missing file, invalid JSON, another format or schema version, or a malformed source.
    """
    if isinstance(name_or_path, dict):
        model, where = name_or_path, "the model"
    else:
        path = resolve_model_path(name_or_path)
        where = str(path)
        try:  # bounded and strict (safe_json): a 100,000-deep file or a NaN is refused, naming the file
            model = read_json(path)
        except JSONFileError as exc:
            raise BehaviorModelError(f"{where} is not a readable JSON behavior model ({exc})") from None
    if not isinstance(model, dict) or model.get("format") != MODEL_FORMAT:
        raise BehaviorModelError(
            f"{where} is not a behavior model (expected 'format': {MODEL_FORMAT!r}); fit one with r2s2r fit-behavior"
        )
    if model.get("schema_version") != MODEL_SCHEMA_VERSION:
        older = isinstance(model.get("schema_version"), int) and model["schema_version"] < MODEL_SCHEMA_VERSION
        raise BehaviorModelError(
            f"{where} has schema version {model.get('schema_version')!r}"
            + (" (an older generator's model)" if older else "")
            + f"; this package reads version {MODEL_SCHEMA_VERSION}: refit it from its lab demonstrations with "
            f"{REFIT_COMMAND}"
        )
    # After format and version (another version's file gets that message): the content_sha256 save_model writes
    # (an older file has none and is read as before).
    try:
        model = check_content_hash(
            model, where, fix=f"refit it ({REFIT_COMMAND}) or restore the file; a model is not edited by hand"
        )
    except JSONFileError as exc:
        raise BehaviorModelError(str(exc)) from None
    _check_keys(model, where)
    _check_model(model, where)
    _check_coverage(model, where)
    return model


_TOP_KEYS = {"format", "schema_version", "provenance", "limits", "calibration", "sources"}
_PROVENANCE_KEYS = {"demos", "fit_settings", "method", "versions"}
_SOURCE_KEYS = {
    "demo_id",
    "grasp",
    "category",
    "first",
    "object_y_start",
    "object_y_segment",
    "object_y_close",
    "object_yaw_close",
    "rest",
    "reach",
    "delay_s",
    *_SEGMENT_KEYS,
}
_SEGMENT_FIELDS = {
    "approach": {"world", "relative", "fingers", "yaw"},
    "close": {"world", "relative", "fingers", "yaw"},
    "transport": {"world", "fingers", "yaw"},
    "tail": {"world", "fingers", "yaw"},
}
#: Plausibility bounds of a model's values (physically absurd beyond them), with their units.
#: Ref: the scene's layout (the belt's surface spans y from -0.9 to 3.5 m, assets/pick_sort_scene.xml: an operator
#: who leads moving objects starts some reaches while the object is still 1 m upstream; the workspace box of
#: ``envs.config.ControlConfig`` with 0.2 m of margin), finger commands in [-1, 1], and a person's hand, which
#: does not move 0.1 m in a 0.05 s control step (2 m/s).
_BELT_Y = (-0.9, 3.5)  # m
_WORLD_LOW, _WORLD_HIGH = (-0.15, -0.75, -0.1), (1.0, 0.75, 0.8)  # m
_MAX_RELATIVE = 2.0  # m: an operator who leads objects starts some reaches while the object is 1 m or more upstream
_MAX_STEP = 0.1  # m per control step
_MAX_OFFSET = 0.05  # m
_DELAY_S = (-20.0, 60.0)  # s
_MAX_YAW = 50.0  # rad (unwrapped)


def _check_keys(model: dict[str, Any], where: str) -> None:
    """Unknown or missing keys, named with the keys accepted."""

    def check(obj: Any, accepted: set[str], what: str) -> None:
        if not isinstance(obj, dict):
            raise BehaviorModelError(f"{where}: {what} must be an object with keys {sorted(accepted)}")
        keys = sorted(accepted)
        check_keys(obj, keys, what="key", where=f"{where}: {what}", required=keys, error=BehaviorModelError)

    check(model, _TOP_KEYS, "the model")
    check(model["provenance"], _PROVENANCE_KEYS, "'provenance'")
    check(model["limits"], {"reach_limit_y", "reach_upstream_y"}, "'limits'")
    check(model["calibration"], {"grasp_offset_xy"}, "'calibration'")
    if isinstance(model["sources"], list):
        for k, source in enumerate(model["sources"]):
            check(source, _SOURCE_KEYS, f"source {k}")
            for seg, fields in _SEGMENT_FIELDS.items():
                check(source[seg], fields, f"source {k} '{seg}'")


def _check_model(model: dict[str, Any], where: str) -> None:
    cal = model.get("calibration")
    offset = np.asarray(cal.get("grasp_offset_xy") if isinstance(cal, dict) else None, dtype=object)
    if offset.shape != (2,) or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in offset):
        raise BehaviorModelError(f"{where}: 'calibration.grasp_offset_xy' must be two finite numbers (m)")
    if max(abs(float(v)) for v in offset) > _MAX_OFFSET:
        raise BehaviorModelError(
            f"{where}: 'calibration.grasp_offset_xy' {offset.tolist()} m is beyond {_MAX_OFFSET} m: a hand that far "
            "off the objects it grasps is not a perception offset"
        )
    limits = model.get("limits")
    if not isinstance(limits, dict) or not all(
        isinstance(limits.get(k), (int, float)) and math.isfinite(limits[k])
        for k in ("reach_limit_y", "reach_upstream_y")
    ):
        raise BehaviorModelError(f"{where}: 'limits' must hold finite reach_limit_y and reach_upstream_y (m)")
    for key in ("reach_limit_y", "reach_upstream_y"):
        if not _BELT_Y[0] <= limits[key] <= _BELT_Y[1]:
            raise BehaviorModelError(f"{where}: 'limits.{key}' {limits[key]} m is off the belt (range {_BELT_Y} m)")
    if limits["reach_limit_y"] >= limits["reach_upstream_y"]:
        raise BehaviorModelError(
            f"{where}: 'limits.reach_limit_y' ({limits['reach_limit_y']} m) must lie downstream of (below) "
            f"'limits.reach_upstream_y' ({limits['reach_upstream_y']} m)"
        )
    sources = model.get("sources")
    if not isinstance(sources, list) or not sources:
        raise BehaviorModelError(f"{where}: 'sources' must be a non-empty list of segmented grasps")
    for k, s in enumerate(sources):
        try:
            if s["category"] not in C.CATEGORIES:
                raise ValueError(f"category {s['category']!r} is not one of {list(C.CATEGORIES)}")
            lengths: dict[str, int] = {}
            for key in _SEGMENT_KEYS:
                seg = s[key]
                for name, arr in seg.items():
                    a = np.asarray(arr, dtype=float)
                    width = 16 if name == "fingers" else (None if name == "yaw" else 3)
                    if (a.ndim != (1 if width is None else 2)) or (width and a.shape[1] != width):
                        raise ValueError(f"{key}.{name} has shape {a.shape}")
                    if not np.all(np.isfinite(a)):
                        raise ValueError(f"{key}.{name} holds NaN or inf")
                    _check_values(key, name, a)
                    lengths.setdefault(key, len(a))
                    if len(a) != lengths[key]:
                        raise ValueError(f"{key} arrays differ in length")
            if lengths["approach"] < 1 or lengths["close"] < 1 or lengths["transport"] < 1:
                raise ValueError("an empty approach, close or transport segment")
            if not 0 <= int(s["rest"]) <= int(s["reach"]) < lengths["approach"]:
                raise ValueError("rest/reach markers outside the approach")
            for key in ("delay_s", "object_yaw_close", "object_y_start", "object_y_close", "object_y_segment"):
                if not math.isfinite(float(s[key])):
                    raise ValueError(f"{key} is not finite")
            for key in ("object_y_start", "object_y_close", "object_y_segment"):
                if not _BELT_Y[0] <= float(s[key]) <= _BELT_Y[1]:
                    raise ValueError(f"{key} {s[key]} m is off the belt (range {_BELT_Y} m)")
            if not _DELAY_S[0] <= float(s["delay_s"]) <= _DELAY_S[1]:
                raise ValueError(f"delay_s {s['delay_s']} s is outside {_DELAY_S} s")
            if not isinstance(s["first"], bool):
                raise ValueError(f"first must be true or false, got {s['first']!r}")
        except (KeyError, TypeError, ValueError) as exc:
            raise BehaviorModelError(f"{where}: source {k} is malformed ({exc})") from None


def _check_coverage(model: dict[str, Any], where: str) -> None:
    """The rule :func:`fit_behavior` applies, checked again on reading: every category the fitted demos' scenes held
    had enough usable grasps and keeps a source, and no source is of another category. The generator grasps each
    object the way a source of its category was grasped and carries it along that source's path to that source's
    bin, so a model left with the sources of one category would put every other object into the wrong bin."""
    demos = model["provenance"].get("demos")
    per = demos.get("usable_grasps_per_category") if isinstance(demos, dict) else None
    settings = model["provenance"].get("fit_settings")
    minimum = settings.get("min_grasps_per_category", 1) if isinstance(settings, dict) else None
    field = "'provenance.demos.usable_grasps_per_category'"
    if (
        not isinstance(per, dict)
        or not per
        or any(c not in C.CATEGORIES or isinstance(n, bool) or not isinstance(n, int) for c, n in per.items())
    ):
        raise BehaviorModelError(
            f"{where}: {field} must map each category the fitted demos held (of {list(C.CATEGORIES)}) to its number "
            f"of usable grasps, got {per!r}; refit the model ({REFIT_COMMAND})"
        )
    if isinstance(minimum, bool) or not isinstance(minimum, int) or minimum < 1:
        raise BehaviorModelError(
            f"{where}: 'provenance.fit_settings.min_grasps_per_category' must be a positive integer, got {minimum!r}"
        )
    few = {c: n for c, n in per.items() if n < minimum}
    if few:
        raise BehaviorModelError(
            f"{where}: {field} gives too few usable grasps of {few} (fit-behavior needs at least {minimum} of each "
            f"category the demos held); refit it from more demonstrations ({REFIT_COMMAND})"
        )
    covered = {s["category"] for s in model["sources"]}
    lacking = [c for c in C.CATEGORIES if c in per and c not in covered]
    extra = sorted(covered - set(per))
    if lacking or extra:
        raise BehaviorModelError(
            f"{where}: 'sources' must hold grasps of exactly the categories the fitted demos held ({sorted(per)}, "
            f"{field}); it lacks {lacking} and has others {extra}: objects of a category without a source would be "
            f"carried to another category's bin. Refit the model ({REFIT_COMMAND}) or restore the file"
        )


def _check_values(segment: str, name: str, a: np.ndarray) -> None:
    """Physically absurd values of one segment array (``ValueError`` naming the field)."""
    field = f"{segment}.{name}"
    if name == "fingers" and np.abs(a).max(initial=0.0) > 1.0 + 1e-6:
        raise ValueError(f"{field} holds commands outside [-1, 1] (max |{np.abs(a).max():.3g}|)")
    if name == "yaw" and np.abs(a).max(initial=0.0) > _MAX_YAW:
        raise ValueError(f"{field} holds yaws beyond {_MAX_YAW} rad")
    if name == "relative" and np.abs(a).max(initial=0.0) > _MAX_RELATIVE:
        raise ValueError(f"{field} puts the hand more than {_MAX_RELATIVE} m from its object")
    if name == "world":
        low, high = np.asarray(_WORLD_LOW), np.asarray(_WORLD_HIGH)
        outside = np.flatnonzero(np.any((a < low) | (a > high), axis=1))
        if len(outside):
            raise ValueError(
                f"{field} step {int(outside[0])} is at {np.round(a[outside[0]], 3).tolist()} m, outside the cell "
                f"({list(_WORLD_LOW)} to {list(_WORLD_HIGH)} m)"
            )
        if len(a) > 1:
            steps = np.linalg.norm(np.diff(a, axis=0), axis=1)
            if steps.max() > _MAX_STEP:
                raise ValueError(
                    f"{field} step {int(steps.argmax())} moves {steps.max():.3f} m in one control step (at most "
                    f"{_MAX_STEP} m: {_MAX_STEP / DT:.0f} m/s)"
                )
