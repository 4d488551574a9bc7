"""The grounding file: the one input of a world-grounded env, written by ``r2s2r sysid``.

A grounding file is JSON (schema ``grounding_schema.json``, shipped with the package; docs/grounding.md#file-format)::

    {
      "format": "r2s2r_envs.grounding",
      "schema_version": 2,
      "world": {...every WorldParams field...},
      "intervals": {"belt_speed": [0.0951, 0.0957], "object_mass": [[0.11, 0.13], [0.12, 0.15], [0.2, 0.24]]},
      "identified": ["belt_speed", "object_mass", ...],
      "not_identifiable": {"arm_armature": "the logs do not excite ..."},
      "validation": {"nrmse": {...}, "planner": {...}, "unmodeled": {...}},
      "provenance": {"lab": {"name": ..., "config_sha256": ...}, "logs": {file: sha256}, "versions": {...},
                     "seed": 0, "wall_time_s": {...}},
      "demonstrator": {"name": "scripted", "settings": {"position_gain": 0.3}, "tuning": {...}},
      "appearance": {"look": {...}, "logs": {file: sha256}, "fit": {...}}
    }

``appearance`` (optional) is the lab's look identified from a visual log (``grounding.visual``, ``r2s2r sysid
--visual-logs``): world-grounded envs render with ``look`` (a ``world.appearance.Appearance``).  A file without it
(every file written before it, and the shipped ones) reads with ``Grounding.appearance`` None: the envs render the
spec sheet, and ``Grounding.appearance_origin`` says so.

``demonstrator`` (schema version 2) is the scripted planner as tuned in this world (``grounding.tuning``,
``r2s2r sysid`` / ``r2s2r tune-planner --update-grounding``): the demonstrator that comes with
``PickSort-WorldGrounded-v0`` when it runs this grounding. ``null``: not tuned, the planner keeps its defaults.
Version-1 files (no such section) are read as ``null``.

``load_grounding("default")`` reads the file shipped for the default lab (``groundings/default.json``);
any other argument is a path.  Every file is checked before it is used: against the JSON schema, then that
``world`` lists every ``WorldParams`` field with a valid value, that each interval has the field's shape and
contains its estimate, and that ``identified`` / ``not_identifiable`` name fields.  Each failure raises a
:class:`GroundingFileError` that names the file, what is wrong and what is accepted.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from r2s2r_envs.behavior.scripted import PlannerConfig, check_planner_setting
from r2s2r_envs.mappings import check_choice, check_keys
from r2s2r_envs.safe_json import (
    CONTENT_HASH_FIELD,
    MAX_BYTES,
    JSONFileError,
    check_content_hash,
    loads,
    plain_json,
    with_content_hash,
)
from r2s2r_envs.world.appearance import Appearance
from r2s2r_envs.world.params import FIELD_BOUNDS, PERCEPTION_FIELDS, WorldParams

#: Version of the grounding file format written; readers take ``READABLE_SCHEMA_VERSIONS`` and refuse others.
GROUNDING_SCHEMA_VERSION = 2
#: Versions this package reads: 1 (before the ``demonstrator`` section; read as ``demonstrator: null``) and 2.
READABLE_SCHEMA_VERSIONS = (1, 2)
#: The demonstrator a grounding file can tune (``demonstrator.name``).
TUNABLE_DEMONSTRATOR = "scripted"
#: The ``format`` field of a grounding file.
GROUNDING_FORMAT = "r2s2r_envs.grounding"
#: The optional section of the look identified from a visual log (checked in code, outside the JSON schema).
APPEARANCE_SECTION = "appearance"
#: Name of the grounding shipped for the default lab.
DEFAULT_GROUNDING = "default"
#: ``Grounding.source`` of a grounding given as a JSON object (no file: ``file_sha256`` is None).
INLINE_SOURCE = "inline"
_SCHEMA_FILE = "grounding_schema.json"
_SHIPPED_DIR = "groundings"
# A field name, or one element of a vector field: "object_mass[1]".
_FIELD_REF = re.compile(r"^([a-z_]+)(?:\[(\d+)\])?$")


class GroundingFileError(ValueError):
    """A grounding file (or dict) that is not a valid grounding of a schema version this package reads."""


# ---------------------------------------------------------------------- the grounding
@dataclasses.dataclass(frozen=True, kw_only=True)
class Grounding:
    """An identified world with its uncertainty, validation and provenance: the content of a grounding file.

    Attributes:
        world: The identified world (every field; fields not identified at their nominal value).
        intervals: 95% interval per identified field: ``[low, high]`` for a scalar field, one ``[low, high]`` per
            element for a vector field; ``None`` on a side the data did not bound.  Same units as the field.
        identified: Fields (or ``field[i]`` elements) the logs identified.
        not_identifiable: Fields (or elements) kept at nominal, each with the reason.
        validation: Held-out validation: ``nrmse`` per signal group (``nominal``, ``grounded``,
            ``reduction_percent``, ``samples``), ``planner`` success table or None, ``unmodeled`` effects or None
            (see :mod:`r2s2r_envs.grounding.validation`).
        provenance: Lab name and config hash, log file hashes, software versions, seed, wall time per stage (s).
        demonstrator: The scripted planner as tuned in this world: ``name`` (``"scripted"``), ``settings``
            (``PlannerConfig`` fields that differ from the defaults' grid) and ``tuning`` (the tuning's grid, episodes,
            base seed and every point's result in this world, or None); None: not tuned (the planner's defaults).
        source: Where it was loaded from (a shipped name, a path, or ``"inline"`` for a JSON object); not part of
            the file.
        file_sha256: SHA-256 of the file's bytes when loaded from a file; not part of the file.
        file_schema_version: The schema version of the file or dict it was read from (a version-1 file is read
            with ``demonstrator`` None); None when made in memory (written as the current version).
        appearance_section: The file's ``appearance`` section (``look``, ``logs``, ``fit``), or None: the file has
            none and the envs render the spec sheet (see ``appearance`` and ``appearance_origin``).
    """

    world: WorldParams
    intervals: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    identified: tuple[str, ...] = ()
    not_identifiable: Mapping[str, str] = dataclasses.field(default_factory=dict)
    validation: Mapping[str, Any] = dataclasses.field(default_factory=lambda: {"nrmse": {}})
    provenance: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    demonstrator: Mapping[str, Any] | None = None
    source: str | None = dataclasses.field(default=None, compare=False)
    file_sha256: str | None = dataclasses.field(default=None, compare=False)
    file_schema_version: int | None = dataclasses.field(default=None, compare=False)
    appearance_section: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.world, WorldParams):
            raise TypeError(f"Grounding.world must be a WorldParams, got {type(self.world).__name__}")
        object.__setattr__(self, "identified", tuple(self.identified))
        object.__setattr__(self, "intervals", {k: _interval_json(v) for k, v in dict(self.intervals).items()})
        object.__setattr__(self, "not_identifiable", dict(self.not_identifiable))
        if self.demonstrator is not None:
            object.__setattr__(self, "demonstrator", plain_json(self.demonstrator))
        if self.appearance_section is not None:
            object.__setattr__(self, "appearance_section", plain_json(self.appearance_section))
        _check_semantics(self.to_dict(), "Grounding")

    @property
    def appearance(self) -> Appearance | None:
        """The identified look the grounded envs render, or None: the file has no ``appearance`` section and they
        render the spec sheet (``world.appearance.SPEC_SHEET``)."""
        if self.appearance_section is None:
            return None
        return Appearance.from_dict(self.appearance_section["look"], where="grounding appearance.look")

    @property
    def appearance_origin(self) -> str:
        """Where the rendered look comes from, in words: the visual log, or the spec sheet for lack of one."""
        if self.appearance_section is None:
            return "spec sheet: the grounding file has no appearance section (no visual log was fitted)"
        return f"identified from a visual log ({len(self.appearance_section['logs'])} run files)"

    def to_dict(self) -> dict[str, Any]:
        """The file's JSON object (``source`` and ``file_sha256`` are not part of it)."""
        return {
            "format": GROUNDING_FORMAT,
            "schema_version": GROUNDING_SCHEMA_VERSION,
            "world": self.world.to_dict(),
            "intervals": {k: _interval_json(v) for k, v in self.intervals.items()},
            "identified": list(self.identified),
            "not_identifiable": dict(self.not_identifiable),
            "validation": plain_json(self.validation),
            "provenance": plain_json(self.provenance),
            "demonstrator": None if self.demonstrator is None else dict(self.demonstrator),
            # Only when identified: a file without it (every earlier one) keeps its content and hash.
            **({} if self.appearance_section is None else {"appearance": dict(self.appearance_section)}),
        }

    def to_json(self, indent: int | None = 2) -> str:
        """The file's text."""
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False) + "\n"

    @classmethod
    def from_dict(cls, data: Any, *, where: str = "grounding") -> Grounding:
        """Check and read a grounding file's JSON object.

        A ``content_sha256`` (written by :func:`write_grounding`) must match the rest of the object and is dropped;
        an object without one (written by hand) is read as it is.

        Raises:
            GroundingFileError: naming ``where``, what is wrong and what is accepted.
        """
        _check_identity(data, where)  # another version's file gets that message, not a hash mismatch
        try:
            data = check_content_hash(data, where, fix=_EDITED)
        except JSONFileError as e:
            raise GroundingFileError(str(e)) from None
        validate_grounding(data, where=where)
        return cls(
            world=WorldParams.from_dict(data["world"]),
            intervals=data["intervals"],
            identified=tuple(data["identified"]),
            not_identifiable=data["not_identifiable"],
            validation=data["validation"],
            provenance=data["provenance"],
            demonstrator=data.get("demonstrator"),
            file_schema_version=data["schema_version"],
            appearance_section=data.get("appearance"),
        )

    @classmethod
    def from_identification(
        cls, identification: Any, *, validation: Mapping[str, Any], provenance: Mapping[str, Any]
    ) -> Grounding:
        """A grounding from the result of :func:`r2s2r_envs.grounding.identify.identify`.

        Infinite interval ends (a parameter the data did not bound) become ``None``; intervals of fields that were
        not identified (kept at nominal) are left out, since they state no uncertainty.
        """
        identified = {m.group(1) if (m := _FIELD_REF.match(r)) else r for r in identification.identified}
        return cls(
            world=identification.world,
            intervals={k: v for k, v in dict(identification.intervals).items() if k in identified},
            identified=tuple(identification.identified),
            not_identifiable=dict(identification.not_identifiable),
            validation=validation,
            provenance=provenance,
        )

    def demonstrator_settings(self) -> dict[str, Any]:
        """Keyword arguments of the scripted planner as tuned in this world (``{}``: not tuned, its defaults)."""
        return dict(self.demonstrator["settings"]) if self.demonstrator is not None else {}

    def with_tuning(self, tuning: Any) -> Grounding:
        """This grounding with its ``demonstrator`` section from a :class:`r2s2r_envs.grounding.tuning.PlannerTuning`
        run in this world (the tuning's env and its arguments are not recorded: the world is this file's)."""
        record = tuning.to_dict()
        for key in ("format", "env_id", "env_kwargs"):
            record.pop(key, None)
        section = {"name": TUNABLE_DEMONSTRATOR, "settings": tuning.planner_settings(), "tuning": record}
        return dataclasses.replace(self, demonstrator=section)

    def interval(self, field: str) -> Any:
        """The 95% interval of ``field`` (``[low, high]`` or a list of them), or None if it has none."""
        check_choice(field, WorldParams.field_names(), what="WorldParams field", error=KeyError)
        return self.intervals.get(field)


# ---------------------------------------------------------------------- reading and writing
#: What to do about a grounding file whose content_sha256 does not match its content.
_EDITED = (
    f"if you edited it by hand, delete its {CONTENT_HASH_FIELD} field (a grounding file without one is read as "
    "written by hand); otherwise restore it or re-run `r2s2r sysid`"
)


def shipped_groundings() -> list[str]:
    """Names of the grounding files shipped with the package (``load_grounding(name)`` takes them)."""
    return sorted(p.stem for p in _shipped_dir().glob("*.json"))


def shipped_grounding_path(name: str) -> Path:
    """Path of the shipped grounding ``name``.

    Raises:
        FileNotFoundError: no such shipped grounding; the message lists the shipped ones.
    """
    path = _shipped_dir() / f"{name}.json"
    if not path.is_file():
        raise FileNotFoundError(f"no shipped grounding {name!r}; shipped: {shipped_groundings()}")
    return path


def load_grounding(
    grounding: str | os.PathLike[str] | Mapping[str, Any] | Grounding = DEFAULT_GROUNDING,
) -> Grounding:
    """A grounding from a shipped name (``"default"``: the default lab's), the path of a grounding file, or a
    grounding file's JSON object given inline (checked as the file would be; ``source`` ``"inline"``).

    Raises:
        FileNotFoundError: neither a shipped name nor an existing file; the message lists the shipped names.
        GroundingFileError: the file (or object) is not valid JSON, is of another schema version, has unknown or
            missing fields, or an invalid value; the message names the file and what is accepted.
        TypeError: ``grounding`` is neither a name, a path, a mapping nor a ``Grounding``.
    """
    if isinstance(grounding, Grounding):
        return grounding
    if isinstance(grounding, Mapping):
        inline = Grounding.from_dict(dict(grounding), where="inline grounding")
        return dataclasses.replace(inline, source=INLINE_SOURCE)
    if not isinstance(grounding, (str, os.PathLike)):
        raise TypeError(
            f"grounding must be a shipped grounding name {shipped_groundings()}, the path of a grounding JSON file "
            f"(written by `r2s2r sysid`) or its JSON object, got {type(grounding).__name__}: {grounding!r}"
        )
    ref = os.fspath(grounding)
    shipped = shipped_groundings()
    path = _shipped_dir() / f"{ref}.json" if ref in shipped else Path(ref)
    if not path.is_file():
        raise FileNotFoundError(
            f"grounding {ref!r} is neither a shipped grounding {shipped} nor a file: pass the path of a grounding "
            "JSON file written by `r2s2r sysid --out FILE`"
        )
    where = f"grounding file {path}"
    if path.stat().st_size > MAX_BYTES:
        raise GroundingFileError(f"{where}: {path.stat().st_size} bytes; at most {MAX_BYTES} bytes are read")
    raw = path.read_bytes()
    try:
        data = loads(raw, what=where)
    except JSONFileError as e:
        raise GroundingFileError(
            f"{e}; a grounding file is written by `r2s2r sysid` (write null for an unbounded interval end)"
        ) from None
    _check_identity(data, where)
    try:  # the content_sha256 write_grounding adds; a file without one (written by hand, or older) is read as is
        checked = check_content_hash(data, where, fix=_EDITED)
    except JSONFileError as e:
        raise GroundingFileError(str(e)) from None
    grounding_ = Grounding.from_dict(checked, where=where)
    source = ref if ref in shipped else str(path)
    if checked is not data:  # the hash of the text write_grounding writes for this content, without the field:
        digest = hashlib.sha256(_file_text(checked).encode()).hexdigest()  # the bytes' hash before the field
    else:
        digest = hashlib.sha256(raw).hexdigest()
    return dataclasses.replace(grounding_, source=source, file_sha256=digest)


def _file_text(data: Mapping[str, Any]) -> str:
    """A grounding file's text as ``write_grounding`` writes it (``Grounding.to_json``) for the JSON object."""
    return json.dumps(data, indent=2, allow_nan=False) + "\n"


def write_grounding(grounding: Grounding, path: str | os.PathLike[str]) -> str:
    """Write ``grounding`` to ``path`` (atomically: a reader never sees half a file) and return its SHA-256.

    The file ends with ``content_sha256``, the hash of its own content (:func:`r2s2r_envs.safe_json.with_content_hash`)
    that :func:`load_grounding` verifies.  The SHA-256 returned (and recorded as ``file_sha256`` when the file is
    loaded) is that of the file's text without that field, ``Grounding.to_json()``: the same as before the field.

    Raises:
        GroundingFileError: the grounding does not pass the checks a reader makes.
    """
    text = grounding.to_json()
    data = json.loads(text)
    validate_grounding(data, where=f"grounding to write to {path}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(_file_text(with_content_hash(data)))
    os.replace(tmp, path)
    return hashlib.sha256(text.encode()).hexdigest()


# ---------------------------------------------------------------------- checks
@lru_cache(maxsize=1)
def grounding_schema() -> dict[str, Any]:
    """The JSON schema of a grounding file (``grounding_schema.json``, shipped with the package)."""
    return json.loads(resources.files("r2s2r_envs.grounding").joinpath(_SCHEMA_FILE).read_text())


def grounding_schema_for(version: int) -> dict[str, Any]:
    """The schema of a file of ``version``: version 1 is version 2 without the ``demonstrator`` section."""
    schema = grounding_schema()
    if version >= 2:
        return schema
    properties = {k: v for k, v in schema["properties"].items() if k != "demonstrator"}
    return {
        **schema,
        "required": [k for k in schema["required"] if k != "demonstrator"],
        "properties": {**properties, "schema_version": {"const": 1}},
    }


def _check_identity(data: Any, where: str) -> None:
    """A JSON object of a grounding ``format`` and a readable ``schema_version``, else a GroundingFileError."""
    if not isinstance(data, Mapping):
        raise GroundingFileError(f"{where} must hold a JSON object, got {type(data).__name__}")
    version = data.get("schema_version")
    if isinstance(version, bool) or version not in READABLE_SCHEMA_VERSIONS:
        what = "has no schema_version" if version is None else f"has schema_version {version!r}"
        readable = " and ".join(map(str, READABLE_SCHEMA_VERSIONS))
        raise GroundingFileError(
            f"{where} {what}; this r2s2r_envs reads grounding schema versions {readable} "
            "(re-run `r2s2r sysid` with this version to rewrite it)"
        )
    if data.get("format") != GROUNDING_FORMAT:
        raise GroundingFileError(
            f"{where}: 'format' is {data.get('format')!r}, expected {GROUNDING_FORMAT!r} (is this a grounding file?)"
        )


def validate_grounding(data: Any, *, where: str = "grounding") -> None:
    """Check a grounding file's JSON object: schema version first, then the JSON schema, then the semantics.

    Raises:
        GroundingFileError: naming ``where``, what is wrong and what is accepted.
    """
    import jsonschema

    _check_identity(data, where)
    version = data["schema_version"]
    required = [k for k in grounding_schema()["properties"] if version >= 2 or k != "demonstrator"]
    known = [*required, APPEARANCE_SECTION] if version >= 2 else required
    check_keys(data, known, what="field", where=where, required=required, error=GroundingFileError)
    if data.get(APPEARANCE_SECTION) is not None:
        _check_appearance_section(data[APPEARANCE_SECTION], where)
    validator = jsonschema.Draft202012Validator(grounding_schema_for(version))
    plain = {k: v for k, v in data.items() if k != APPEARANCE_SECTION}  # checked above, in code
    errors = sorted(validator.iter_errors(plain), key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        at = "/".join(str(p) for p in e.absolute_path) or "(top level)"
        raise GroundingFileError(f"{where}: at {at}: {e.message} (schema: {_SCHEMA_FILE}, docs/grounding.md)")
    _check_semantics(data, where)


def _check_semantics(data: Mapping[str, Any], where: str) -> None:
    fields = WorldParams.field_names()
    world = data["world"]
    # The estimator's fields (added in 0.3) appear only where not nominal: a file without them grounds a world that
    # perceives exactly (docs/grounding.md#file-format).
    check_keys(world, fields, what="WorldParams field", where=f"{where}: world", error=GroundingFileError)
    missing = [f for f in fields if f not in world and f not in PERCEPTION_FIELDS]
    if missing:
        raise GroundingFileError(
            f"{where}: world lacks field(s) {missing}; a grounding file lists every WorldParams field (fields not "
            "identified at their nominal value; the estimator's fields only where not nominal)"
        )
    try:
        params = WorldParams.from_dict(world)
    except (TypeError, ValueError, KeyError) as e:
        raise GroundingFileError(f"{where}: world: {e.args[0] if e.args else e}") from e
    for name, interval in data["intervals"].items():
        _check_interval(where, name, interval, getattr(params, name) if name in fields else None)
    for key in ("identified", "not_identifiable"):
        for ref in data[key]:
            _check_field_ref(where, key, ref)
    both = sorted(set(data["identified"]) & set(data["not_identifiable"]))
    if both:
        raise GroundingFileError(f"{where}: {both} listed both as identified and as not identifiable")
    if data.get("demonstrator") is not None:
        _check_demonstrator(where, data["demonstrator"])
    if data.get(APPEARANCE_SECTION) is not None:
        _check_appearance_section(data[APPEARANCE_SECTION], where)


def _check_appearance_section(section: Any, where: str) -> None:
    """The optional ``appearance`` section: ``look`` (an ``Appearance`` in its JSON form), ``logs`` (file -> SHA-256),
    ``fit`` (the fit's record)."""
    keys = ("look", "logs", "fit")
    if not isinstance(section, Mapping):
        raise GroundingFileError(f"{where}: appearance must be an object with keys {list(keys)}, got {section!r}")
    check_keys(section, keys, what="key", where=f"{where}: appearance", required=keys, error=GroundingFileError)
    logs, fit = section["logs"], section["fit"]
    if not isinstance(logs, Mapping) or not all(
        isinstance(v, str) and re.fullmatch("[0-9a-f]{64}", v) for v in logs.values()
    ):
        raise GroundingFileError(f"{where}: appearance.logs must map each visual log file to its SHA-256, got {logs!r}")
    if not isinstance(fit, Mapping):
        raise GroundingFileError(f"{where}: appearance.fit must be an object (the fit's record), got {fit!r}")
    try:
        Appearance.from_dict(section["look"], where="appearance.look")
    except (KeyError, TypeError, ValueError) as e:
        raise GroundingFileError(f"{where}: {e.args[0] if e.args else e} (docs/grounding.md#appearance)") from None


def _check_demonstrator(where: str, section: Mapping[str, Any]) -> None:
    """The settings must build the scripted planner (``PlannerConfig`` fields within ``PLANNER_BOUNDS``)."""
    fields = [f.name for f in dataclasses.fields(PlannerConfig)]
    settings = section["settings"]
    check_keys(
        settings, fields, what="planner setting", where=f"{where}: demonstrator.settings", error=GroundingFileError
    )
    for name, value in settings.items():
        try:
            check_planner_setting("demonstrator.settings", name, value)
        except (TypeError, ValueError) as e:
            raise GroundingFileError(f"{where}: {e} (docs/grounding.md#tuning-the-demonstrator)") from None


def _check_field_ref(where: str, key: str, ref: str) -> None:
    m = _FIELD_REF.match(ref)
    fields = WorldParams.field_names()
    if m is None or m.group(1) not in fields:
        raise GroundingFileError(
            f"{where}: {key} names {ref!r}, which is not a WorldParams field (or field[i]); fields: {list(fields)}"
        )
    if m.group(2) is not None:
        length = FIELD_BOUNDS[m.group(1)].length
        if length is None or int(m.group(2)) >= length:
            accepted = "a scalar field, no index" if length is None else f"indices 0-{length - 1}"
            raise GroundingFileError(f"{where}: {key} names {ref!r}: {m.group(1)} takes {accepted}")


def _check_interval(where: str, name: str, interval: Any, value: Any) -> None:
    if value is None:
        raise GroundingFileError(
            f"{where}: intervals has an entry for {name!r}, which is not a WorldParams field; "
            f"fields: {list(WorldParams.field_names())}"
        )
    length = FIELD_BOUNDS[name].length
    if length is None:
        if not _is_pair(interval):
            raise GroundingFileError(
                f"{where}: intervals.{name} must be [low, high] (a scalar field), got {interval!r}"
            )
        pairs, values = [interval], [value]
    else:
        if not (isinstance(interval, list) and len(interval) == length and all(_is_pair(p) for p in interval)):
            raise GroundingFileError(
                f"{where}: intervals.{name} must be a list of {length} [low, high] pairs (one per element), "
                f"got {interval!r}"
            )
        pairs, values = interval, list(value)
    for k, ((low, high), v) in enumerate(zip(pairs, values)):
        label = name if length is None else f"{name}[{k}]"
        lo = -math.inf if low is None else low
        hi = math.inf if high is None else high
        if lo > hi:
            raise GroundingFileError(f"{where}: intervals.{label} = [{low}, {high}] has low > high")
        if not lo <= v <= hi:
            raise GroundingFileError(
                f"{where}: intervals.{label} = [{low}, {high}] excludes the field's value {v:g} in world; an "
                "interval must contain its estimate"
            )


def _is_pair(value: Any) -> bool:
    return (
        isinstance(value, list)
        and len(value) == 2
        and all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in value)
    )


def _interval_json(value: Any) -> Any:
    """An interval (or list of intervals) as JSON: lists, floats, None for an infinite or NaN end."""
    if hasattr(value, "tolist"):  # numpy array or scalar
        value = value.tolist()
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [_interval_json(v) for v in value]
    if value is None:
        return None
    v = float(value)
    return v if math.isfinite(v) else None


def _shipped_dir() -> Path:
    return Path(str(resources.files("r2s2r_envs.grounding").joinpath(_SHIPPED_DIR)))


__all__ = [
    "DEFAULT_GROUNDING",
    "GROUNDING_FORMAT",
    "GROUNDING_SCHEMA_VERSION",
    "READABLE_SCHEMA_VERSIONS",
    "TUNABLE_DEMONSTRATOR",
    "Grounding",
    "GroundingFileError",
    "grounding_schema",
    "grounding_schema_for",
    "load_grounding",
    "shipped_grounding_path",
    "shipped_groundings",
    "validate_grounding",
    "write_grounding",
]
