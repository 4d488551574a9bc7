"""``--lab`` and ``--grounding``: the options of the ``r2s2r`` commands that choose where an env's physics come from,
turned into env arguments in one place (``demo``, ``evaluate``, ``generate``, ``datasets make``, ``tune-planner``);
and the task options ``--num-objects`` / ``--episode-steps`` of the commands that run episodes (``demo``,
``evaluate``).

:func:`env_source_kwargs` checks each option given, before any work, and raises :class:`~r2s2r_envs.argtypes.UsageError`
(reported as ``r2s2r COMMAND: error: ...``, exit code 2) for an env that does not take it, an option that
``--env-kwargs`` sets too, or a value that does not load; the message names what was wrong and what is accepted.
A command module (it reads the lab's and the grounding's loaders), not a library one.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

import gymnasium as gym

from r2s2r_envs.argtypes import UsageError, positive_int

#: Env arguments that choose where an env's physics come from, and the command-line option of each.
ENV_SOURCE_OPTIONS = {"lab": "--lab", "grounding": "--grounding"}

#: What each option accepts, for help texts and messages.
ENV_SOURCE_VALUES = {
    "lab": "a shipped lab name, the path of a lab JSON file or 'draw:SEED' (a drawn lab)",
    "grounding": "a shipped grounding name or the path of a grounding file written by `r2s2r sysid --out FILE`",
}


def add_env_source_options(
    parser: argparse.ArgumentParser, *, which: str = "", note: str = "", lab: bool = True
) -> None:
    """Adds ``--lab LAB`` and ``--grounding FILE`` (default ``None``: the env's own) to ``parser``.

    Args:
        which: what the option selects the lab or grounding of (default: the env's).
        note: appended to each help text.
        lab: add ``--lab`` too (a command that never runs the lab takes only ``--grounding``).
    """
    for key, metavar in (("lab", "LAB"), ("grounding", "FILE"))[0 if lab else 1 :]:
        parser.add_argument(
            ENV_SOURCE_OPTIONS[key],
            default=None,
            metavar=metavar,
            help=f"the {key} {which or 'of the env'} (envs {', '.join(envs_taking(key))}): "
            f"{ENV_SOURCE_VALUES[key]}{note}",
        )


def add_task_options(parser: argparse.ArgumentParser) -> None:
    """Adds ``--num-objects K`` and ``--episode-steps T`` (default ``None``: the env's own); :func:`task_kwargs`
    reads them."""
    parser.add_argument(
        "--num-objects", type=positive_int, default=None, metavar="K", help="objects per episode (default: the env's)"
    )
    parser.add_argument(
        "--episode-steps",
        type=positive_int,
        default=None,
        metavar="T",
        help="time limit of an episode in control steps (default: the env's)",
    )


def task_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The env arguments of the task options (:func:`add_task_options`) that were given."""
    return {key: getattr(args, key) for key in ("num_objects", "episode_steps") if getattr(args, key) is not None}


def envs_taking(key: str) -> list[str]:
    """The registered PickSort ids whose env takes the argument ``key`` (``lab``, ``grounding``)."""
    return sorted(k for k in gym.registry if k.startswith("PickSort-") and key in gym.spec(k).kwargs)


def _shipped(key: str) -> list[str]:
    if key == "lab":
        from r2s2r_envs.lab import available_labs

        return available_labs()
    from r2s2r_envs.grounding.result import shipped_groundings

    return shipped_groundings()


def check_env_source_value(key: str, value: str) -> None:
    """Loads the lab or grounding ``value`` names, as the env would.

    Raises:
        UsageError: it does not load: no such name or file (the message lists the shipped names), or a file that is
            not a valid lab or grounding (the loader's message, naming the field).
    """
    option = ENV_SOURCE_OPTIONS[key]
    try:
        if key == "lab":
            from r2s2r_envs.lab import load_lab

            load_lab(value)
        else:
            from r2s2r_envs.grounding.result import load_grounding

            load_grounding(value)
    except FileNotFoundError:
        raise UsageError(
            f"{option} {value!r}: no such {key}; expected {ENV_SOURCE_VALUES[key]} (shipped: {_shipped(key)})"
        ) from None
    except (KeyError, TypeError, ValueError) as e:  # GroundingFileError is a ValueError
        raise UsageError(f"{option} {value!r}: {e.args[0] if e.args else e}") from None


def check_env_source(env_id: str, key: str, value: str) -> None:
    """Raises :class:`UsageError` unless ``env_id`` takes the argument ``key`` and ``value`` loads as one.

    An id that is not registered is not refused here (the command reports an unknown env its own way).
    """
    option = ENV_SOURCE_OPTIONS[key]
    if env_id in gym.registry and key not in gym.spec(env_id).kwargs:
        takes = envs_taking(key)
        raise UsageError(f"{option} applies to the envs that take a {key} {takes}; {env_id} does not take one")
    check_env_source_value(key, value)


def env_source_kwargs(
    env_id: str,
    env_kwargs: Mapping[str, Any] | None = None,
    *,
    lab: str | None = None,
    grounding: str | None = None,
) -> dict[str, Any]:
    """A copy of ``env_kwargs`` plus ``lab`` / ``grounding`` given as options (``None``: not given), each checked by
    :func:`check_env_source`.

    Raises:
        UsageError: the env does not take that argument (the message names the ids that do), ``env_kwargs`` already
            sets it (``--env-kwargs``), or the value does not load.
    """
    kwargs = dict(env_kwargs or {})
    for key, value in (("lab", lab), ("grounding", grounding)):
        if value is None:
            continue
        if key in kwargs:
            raise UsageError(f"{ENV_SOURCE_OPTIONS[key]} and --env-kwargs both set {key!r}: give it once")
        check_env_source(env_id, key, value)
        kwargs[key] = value
    return kwargs


def check_lab(env_id: str, lab: str) -> None:
    """:func:`check_env_source` for ``--lab``."""
    check_env_source(env_id, "lab", lab)


def check_grounding(env_id: str, grounding: str) -> None:
    """:func:`check_env_source` for ``--grounding``."""
    check_env_source(env_id, "grounding", grounding)
