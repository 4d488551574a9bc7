"""World presets: ``load_world(name | path | mapping | WorldParams)``, mirroring ``r2s2r_envs.lab.load_lab``.

A preset is a JSON document shipped in ``world/presets/`` (``nominal.json`` is the spec sheet)::

    {"name": "nominal", "description": "...", "world": {"belt_speed": 0.08, ...}}

A world file written elsewhere (for example by system identification) has the same form; its ``world`` mapping
may be partial, the missing fields come from the nominal world.  A plain mapping of ``WorldParams`` fields is a
partial world over the nominal one.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from r2s2r_envs.mappings import check_keys
from r2s2r_envs.safe_json import JSONFileError, read_json
from r2s2r_envs.world.params import WorldParams, nominal

_DOCUMENT_KEYS = ("name", "description", "world")


def _preset_dir() -> Path:
    return Path(str(resources.files("r2s2r_envs.world").joinpath("presets")))


def available_worlds() -> list[str]:
    """Names of the world presets shipped with the package."""
    return sorted(p.stem for p in _preset_dir().glob("*.json"))


def load_world(world: str | Path | Mapping[str, Any] | WorldParams | None = None) -> WorldParams:
    """A world from a shipped preset name, a JSON file, a (partial) mapping over the nominal world, or as is.

    Raises:
        FileNotFoundError: neither a shipped preset nor an existing file; the message lists the presets.
        KeyError: an unknown key; the message lists the valid ones.
        TypeError / ValueError: a malformed file or an invalid value; the message names the field.
    """
    if world is None:
        return nominal()
    if isinstance(world, WorldParams):
        return world
    if isinstance(world, Mapping):
        return _from_mapping(world, "world mapping")
    if not isinstance(world, (str, Path)):
        raise TypeError(
            f"world must be a preset name {available_worlds()}, a JSON file path, a mapping of WorldParams fields "
            f"or a WorldParams, got {type(world).__name__}: {world!r}"
        )
    raw, path = read_json_config(world, _preset_dir(), kind="world", shipped_as="preset", keys=_DOCUMENT_KEYS)
    return _from_mapping(raw, f"world file {path}")


def read_json_config(
    ref: str | Path, shipped_dir: Path, *, kind: str, shipped_as: str, keys: tuple[str, ...]
) -> tuple[dict[str, Any], Path]:
    """The JSON object of a config shipped in ``shipped_dir`` as ``<ref>.json``, else of the file at path ``ref``.

    Shared by world presets and labs (``r2s2r_envs.lab.load_lab``).

    Args:
        ref: A shipped config's name or a file path.
        shipped_dir: Folder of the shipped configs.
        kind: What the config is ("world", "lab"), for messages.
        shipped_as: What a shipped one is called ("preset", "lab"), for messages.
        keys: The keys the JSON object should have, for messages.

    Returns:
        The parsed object and the path it was read from.

    Raises:
        FileNotFoundError: neither a shipped name nor an existing file; the message lists the shipped ones.
        ValueError: not strict JSON within the reader's limits (``r2s2r_envs.safe_json``), or not a JSON object.
    """
    shipped = sorted(p.stem for p in shipped_dir.glob("*.json"))
    path = shipped_dir / f"{ref}.json" if str(ref) in shipped else Path(ref)
    if not path.is_file():
        raise FileNotFoundError(f"{kind} {str(ref)!r} is neither a shipped {shipped_as} {shipped} nor a JSON file")
    try:
        raw = read_json(path)
    except JSONFileError as e:
        raise ValueError(f"{kind} file {e}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{kind} file {path} must hold a JSON object with keys {list(keys)}")
    return raw, path


def _from_mapping(raw: Mapping[str, Any], what: str) -> WorldParams:
    if "world" in raw:  # a preset document
        check_keys(raw, _DOCUMENT_KEYS, what="world document key", where=what)
        raw = raw["world"]
        if not isinstance(raw, Mapping):
            raise TypeError(f"{what}: 'world' must be a mapping of WorldParams fields, got {raw!r}")
    return WorldParams.from_dict(raw)
