"""The env arguments a dataset records hold values, never paths (docs/datasets.md#env-arguments).

A dataset records the env arguments it was made with, and replay passes them to ``gymnasium.make``.  Some env
arguments may name a file the env opens when it is made (``world``, ``grounding``, ``behavior``, ``lab``; an env
class lists them in ``file_arguments``, :mod:`r2s2r_envs.envs.file_arguments`), so a recorded path would let a
dataset make replay open any local file.  Hence:

- generation records such an argument by value (:func:`record_by_value`): a path becomes the file's JSON object,
  checked as the env checks it inline, and ``generation["env_kwarg_files"]`` names the file and the SHA-256 of its
  bytes.  A shipped name stays a name (it resolves inside the package).  A lab file stays as given: its content is
  the lab's hidden parameters, and lab datasets are never replayed.
- replay accepts inline values and shipped names (:func:`check_recorded`) and refuses any other string with a
  ``DatasetError``, unless the caller trusts the dataset's paths (``trust_paths=True``, ``r2s2r replay
  --trust-paths``: for a dataset one made oneself before values were recorded).

Canonical datasets are made with registered ids and no path arguments: nothing here changes what they record.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import load_env_creator

from r2s2r_envs.datasets.schema import DatasetError
from r2s2r_envs.envs.file_arguments import FileArgument, is_file_reference, read_by_value

#: Key of ``generation`` naming the file each argument recorded by value was read from (absent when none was).
FILES_KEY = "env_kwarg_files"


def file_arguments_of(env_id: str) -> dict[str, FileArgument]:
    """The arguments of registered env ``env_id`` that may name a file (``{}``: none declared).

    The class comes from Gymnasium's registry (an id registered in this process), never from a file.
    """
    entry = gym.spec(env_id).entry_point
    creator = load_env_creator(entry) if isinstance(entry, str) else entry
    return dict(getattr(creator, "file_arguments", None) or {})


def record_by_value(env_id: str, env_kwargs: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, dict[str, str]]]:
    """``env_kwargs`` with every file argument that names an existing file replaced by the file's JSON object.

    Args:
        env_id: a registered id (its class declares the file arguments).
        env_kwargs: the env arguments as given.

    Returns:
        The arguments to make the env with and record, and for each argument read by value the file's name and
        the SHA-256 of its bytes (``{"grounding": {"file": "grounding.json", "sha256": "..."}}``; empty when none).

    Raises:
        The env's own loader errors for a malformed file (the file is checked as the env checks its object).
    """
    kwargs = dict(env_kwargs)
    files: dict[str, dict[str, str]] = {}
    for name, argument in file_arguments_of(env_id).items():
        value: Any = kwargs.get(name)  # any value; is_file_reference() tells a path (str or os.PathLike)
        if argument.check is None or not is_file_reference(argument, value) or not Path(value).is_file():
            continue  # a shipped name, a value, the lab, or a missing file (the env names what it accepts)
        kwargs[name], sha256 = read_by_value(argument, value)
        files[name] = {"file": Path(os.fspath(value)).name, "sha256": sha256}
    return kwargs, files


def check_recorded(dataset: str | os.PathLike[str], env_id: str, kwargs: Mapping[str, Any]) -> None:
    """Refuses recorded env arguments that would make the env open a path.

    Raises:
        DatasetError: naming the dataset, each argument and value, what the argument accepts and how to fix it.
    """
    refused = []
    for name, argument in sorted(file_arguments_of(env_id).items()):
        if name in kwargs and is_file_reference(argument, kwargs[name]):
            shipped = sorted(argument.shipped())
            refused.append(
                f"{name}={_short(kwargs[name])} (a {argument.kind} path; accepted: {argument.inline} or a shipped "
                f"name {shipped})"
            )
    if refused:
        raise DatasetError(
            f"{dataset}: its recorded env arguments name local files: {'; '.join(refused)}. Env arguments read "
            "from a dataset may hold values, never paths, so replay does not open them. Re-generate the dataset "
            "with this version of r2s2r_envs (it records such a file by value), or, for a dataset you made "
            "yourself, trust its paths: replay_demo(..., trust_paths=True) / r2s2r replay --trust-paths"
        )


def _short(value: Any) -> str:
    text = repr(os.fspath(value) if isinstance(value, os.PathLike) else value)
    return text if len(text) <= 200 else text[:200] + "...'"
