"""Env arguments that may name a file the env reads when it is made: what each accepts besides a path.

``PickSortEnv(world=...)`` reads a world JSON file, ``WorldGroundedEnv(grounding=...)`` a grounding file,
``BehaviorGroundedEnv(behavior=...)`` a behavior model and ``LabEnv(lab=...)`` a lab config.  Each of them also
takes a shipped name (it resolves inside the package) and, except the lab's black-box path, the file's JSON object
inline, checked by the same loader.  An env class lists such arguments in its ``file_arguments`` (a mapping of
argument name to :class:`FileArgument`), so code that records env arguments (dataset generation,
``r2s2r_envs.datasets.env_values``) can store a file by value and code that rebuilds an env from a file (replay)
can refuse a path: arguments read from a file hold values, never paths (docs/datasets.md#env-arguments).

Example:
    >>> from r2s2r_envs.envs.pick_sort import PickSortEnv
    >>> value, sha256 = read_by_value(PickSortEnv.file_arguments["world"], "my_world.json")  # doctest: +SKIP
    >>> env = PickSortEnv(world=value)  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from r2s2r_envs.safe_json import MAX_BYTES, JSONFileError, is_compressed, loads, read_text_bytes
from r2s2r_envs.world.presets import available_worlds, load_world


@dataclasses.dataclass(frozen=True, kw_only=True)
class FileArgument:
    """An env argument that may name a file.

    Attributes:
        kind: What the file is, for messages (``"grounding file"``).
        shipped: The names that resolve inside the package (the shipped presets, groundings, models, labs).
        check: Checks the file's JSON object as the env checks it when given inline (``check(value, where)``,
            raising the loader's own errors); ``None``: the argument is never recorded by value (a lab config is
            the lab's hidden parameters, docs/concepts.md#honesty-rules).
        inline: What the env takes inline, for messages (``"the grounding file's JSON object"``).
    """

    kind: str
    shipped: Callable[[], Sequence[str]]
    check: Callable[[Any, str], object] | None
    inline: str = "the file's JSON object"


def is_file_reference(argument: FileArgument, value: Any) -> bool:
    """Whether ``value`` would be opened as a path: a string (or path) that is not a shipped name."""
    if isinstance(value, os.PathLike):
        return True
    return isinstance(value, str) and value not in set(argument.shipped())


def read_by_value(argument: FileArgument, path: str | os.PathLike[str]) -> tuple[Any, str]:
    """The JSON object of the file at ``path``, checked as the env checks it inline, and the SHA-256 of its bytes.

    The file is read once: the value returned is exactly what was hashed and checked.

    Raises:
        ValueError: ``argument`` is not recorded by value, or the file is not strict JSON within the reader's limits
            (``r2s2r_envs.safe_json``); the loader's own errors for a malformed object.
        OSError: the file cannot be read.
    """
    if argument.check is None:
        raise ValueError(f"a {argument.kind} is not recorded by value")
    path = Path(path)
    where = f"{argument.kind} {path}"
    if path.stat().st_size > MAX_BYTES:
        raise JSONFileError(f"{where}: {path.stat().st_size} bytes; at most {MAX_BYTES} bytes are read")
    raw = path.read_bytes()
    value = loads(read_text_bytes(path) if is_compressed(path) else raw, what=where)  # a *.gz file: its JSON
    argument.check(value, where)
    return value, hashlib.sha256(raw).hexdigest()


def object_check(
    load: Callable[[dict[str, Any], str], object], holds: str, error: type[Exception] = ValueError
) -> Callable[[Any, str], None]:
    """A :attr:`FileArgument.check`: the value must be a JSON object, which ``load(value, where)`` then checks.

    Args:
        load: The loader, raising its own errors for a malformed object.
        holds: What the object is, for the message (``"a grounding file written by `r2s2r sysid`"``).
        error: The exception class for a value that is no JSON object.

    Raises:
        error: ``{where} must hold a JSON object ({holds})``.
    """

    def check(value: Any, where: str) -> None:
        if not isinstance(value, dict):
            raise error(f"{where} must hold a JSON object ({holds})")
        load(value, where)

    return check


#: ``world``: a preset name, a world file, or its JSON object (a world document or a partial mapping of fields).
WORLD_FILE = FileArgument(
    kind="world file",
    shipped=available_worlds,
    check=object_check(lambda value, where: load_world(value), "a world document or a mapping of WorldParams fields"),
    inline="a world document or a mapping of WorldParams fields",
)
