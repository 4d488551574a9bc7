"""What the evaluation protocol runs: the :class:`Policy` interface, how a policy or factory becomes the policy of an
env (:func:`resolve_policy`), the opt-in sensors it asks for, and which of its actions the env cannot take; and a
policy named by ``module:factory`` (:func:`import_policy`).

The protocol itself is :mod:`r2s2r_envs.evaluation.protocol` (docs/protocol.md); a policy spec of ``r2s2r evaluate``
(a checkpoint directory, ``zoo:NAME`` or ``module:factory``) becomes a policy or factory in
:func:`r2s2r_envs.policies.policy_spec.resolve_policy_spec`, which knows the checkpoints.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym
import numpy as np


class PolicyError(TypeError):
    """A policy the protocol cannot run: not a Policy and not callable, or a factory that raised or returned
    something that is not a Policy; the message names the factory and what went wrong."""


class PolicySpecError(PolicyError, ValueError):
    """A policy spec (``--policy``) that names no policy directory and no importable ``module:factory`` (a
    ``PolicyError``, so the protocol passes it on as it is)."""


@runtime_checkable
class Policy(Protocol):
    """What :func:`evaluate` runs: the demonstrators of :mod:`r2s2r_envs.behavior` satisfy it.

    Optional attributes, recorded in the result when present: ``name`` (str), ``settings`` (JSON-serializable
    configuration) and ``metadata`` (a mapping: how the policy was made, the result's ``method`` section;
    ``METHOD_KEYS`` lists what the leaderboard reads, docs/leaderboard.md#schema). An optional method
    ``set_domain(domain)`` is called with the env's domain (``"real"`` for the lab, ``"sim"`` for a simulator)
    before the first episode: a domain-conditioned policy acts as in that domain. An optional attribute ``sensors``
    (opt-in sensor names, e.g. ``("object_visible",)``) asks for those observation keys: the protocol makes every
    env with them (added to ``env_kwargs["sensors"]``, and recorded so).

    Optional batch methods, used by ``evaluate(..., batch=N)`` (docs/protocol.md#batched-policies):
    ``reset_batch(seeds, mask=None)`` starts an episode in each row ``i`` of a batch of ``len(seeds)`` envs where
    ``mask[i]`` is true (every row without a mask), as ``reset(seeds[i])`` would; ``act_batch(obs)`` returns the
    ``(B, A)`` actions for observations ``{key: (B, ...)}``, row ``i`` what ``act`` would give in row ``i``'s
    episode.  A policy without them is called per env, one copy per row.
    """

    def reset(self, seed: int | None) -> None:
        """Start an episode; all of the policy's own randomness must come from ``seed``."""
        ...

    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """The action for an observation of the env."""
        ...


#: ``f(env) -> Policy``, called once per env the protocol makes (once per worker process).
PolicyFactory = Callable[[gym.Env], Policy]
PolicyOrFactory = Policy | PolicyFactory


def _is_policy(obj: Any) -> bool:
    # A class has `reset` and `act` attributes too; it is a factory (called with the env), not a policy.
    return isinstance(obj, Policy) and not isinstance(obj, type)


def resolve_policy(policy: PolicyOrFactory, env: gym.Env) -> Policy:
    """``policy`` itself if it is a :class:`Policy`, else ``policy(env)``.

    Raises:
        PolicyError: ``policy`` is neither a policy nor callable, the factory raised (its error is named, and
            kept as the cause), or it returned something that is not a policy.
    """
    if _is_policy(policy):
        return _tell_domain(policy, env)  # type: ignore[arg-type]
    if callable(policy):
        try:
            made = policy(env)
        except PolicyError:
            raise
        except Exception as e:  # noqa: BLE001 - the factory is the user's code: any error is named, not relayed raw
            raise PolicyError(f"the policy factory {qualified_name(policy)} raised {type(e).__name__}: {e}") from e
        if not _is_policy(made):
            raise PolicyError(
                f"the policy factory {qualified_name(policy)} returned a {type(made).__name__}, which is not a "
                "Policy: it needs methods reset(seed) and act(obs)"
            )
        return _tell_domain(made, env)
    raise PolicyError(
        f"policy must be a Policy (an object with methods reset(seed) and act(obs)) or a factory f(env) -> Policy, "
        f"got a {type(policy).__name__}"
    )


def _tell_domain(policy: Policy, env: gym.Env) -> Policy:
    """Calls the policy's optional ``set_domain`` with the env's domain (a public label, not its state)."""
    set_domain = getattr(policy, "set_domain", None)
    if callable(set_domain):
        set_domain(str(getattr(env.unwrapped, "domain", "sim")))
    return policy


def with_policy_sensors(policy: Policy, env_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``env_kwargs`` with the opt-in sensors the policy's optional ``sensors`` names added to ``sensors`` (a copy;
    unchanged when it names none the arguments lack).

    Raises:
        PolicyError: ``sensors`` is not a sequence of names.
    """
    asked = getattr(policy, "sensors", None) or ()
    if isinstance(asked, str) or not all(isinstance(k, str) for k in asked):
        raise PolicyError(f"a policy's sensors must be a sequence of sensor names, got {asked!r}")
    have = list(env_kwargs.get("sensors", ()))
    missing = [k for k in asked if k not in have]
    return {**env_kwargs, "sensors": [*have, *missing]} if missing else dict(env_kwargs)


#: The observation modes that hold the cameras' images (``PickSortEnv``'s ``obs_mode``).
_CAMERA_MODES = ("rgb", "state+rgb")


def with_policy_inputs(policy: Policy, env_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``env_kwargs`` with what the policy reads: its opt-in sensors (:func:`with_policy_sensors`) and, for a policy
    whose optional ``obs_mode`` holds cameras (``"rgb"``, ``"state+rgb"``), that ``obs_mode`` and its ``image_size``
    where the arguments give none. A copy; unchanged for a state policy.

    Raises:
        PolicyError: ``sensors`` is not a sequence of names, or the arguments set an ``obs_mode`` without the
            cameras the policy reads, or another ``image_size`` (both values named).
    """
    kwargs = with_policy_sensors(policy, env_kwargs)
    mode, size = getattr(policy, "obs_mode", None), getattr(policy, "image_size", None)
    if mode not in _CAMERA_MODES:
        return kwargs
    given = kwargs.setdefault("obs_mode", mode)
    if given != mode and given != "state+rgb":
        raise PolicyError(
            f"the policy reads cameras (obs_mode {mode!r}); the env arguments set obs_mode {given!r}, which has "
            f"none: give obs_mode {mode!r} or 'state+rgb', or leave it out"
        )
    if size is not None and kwargs.setdefault("image_size", size) != size:
        raise PolicyError(
            f"the policy reads {size} px camera frames; the env arguments set image_size {kwargs['image_size']!r}: "
            f"give {size} or leave it out"
        )
    return kwargs


def qualified_name(obj: Any) -> str:
    """``module.qualname`` of a class or function (of the type of anything else)."""
    target = obj if hasattr(obj, "__qualname__") else type(obj)
    return f"{getattr(target, '__module__', '?')}.{target.__qualname__}"


def action_problem(action: Any, shape: tuple[int, ...]) -> str | None:
    """Why ``action`` cannot be sent to an env whose actions have ``shape`` (None when it can).

    The env itself would raise on these; the protocol records them as a policy failure instead. An exception the
    policy raised instead of answering (passed here as the action) is one too.
    """
    if isinstance(action, BaseException):
        text = " ".join(str(action).split())[:300]
        return f"the policy raised {type(action).__name__}{': ' + text if text else ''}"
    try:
        a = np.asarray(action)
        if a.dtype.kind == "c":
            return "the action holds complex numbers; the env takes real numbers"
        a = np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError):
        return f"the action is not an array of numbers (got a {type(action).__name__})"
    if a.shape != tuple(shape):
        return f"the action has shape {a.shape}; the env takes shape {tuple(shape)}"
    bad = np.flatnonzero(~np.isfinite(a.ravel()))
    if bad.size:
        return f"the action has NaN/inf at indices {bad[:8].tolist()}{' ...' if bad.size > 8 else ''}"
    return None


def import_policy(spec: str) -> Any:
    """What ``module:attribute`` (or ``path/to/file.py:attribute``) names: a factory ``f(env) -> Policy``, a policy
    class (as a :class:`ClassPolicy`) or a policy object.

    The module is imported with the current directory, or the file's folder, first on ``sys.path`` (as
    ``python -m`` does), so worker processes import it too.

    Raises:
        PolicySpecError: not of the form ``module:attribute``, a module that cannot be imported, no such attribute,
            or an attribute that is neither callable nor a policy.
    """
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise PolicySpecError(
            f"--policy {spec!r} is neither a policy directory (r2s2r train --out DIR) nor module:factory "
            "(e.g. my_policies:make_policy, a function f(env) -> Policy)"
        )
    search_dir = os.getcwd()
    if module_name.endswith(".py"):  # a file: its folder goes on sys.path, so worker processes import it too
        file = Path(module_name)
        if not file.is_file():
            raise PolicySpecError(f"--policy {spec!r}: no such file {module_name!r}")
        search_dir, module_name = str(file.resolve().parent), file.stem
    if search_dir not in sys.path:
        sys.path.insert(0, search_dir)
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise PolicySpecError(f"--policy {spec!r}: cannot import module {module_name!r} ({e})") from e
    target: Any = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            public = sorted(n for n in dir(module) if not n.startswith("_"))
            raise PolicySpecError(f"--policy {spec!r}: module {module_name!r} has no {attribute!r}; it has {public}")
        target = getattr(target, part)
    if isinstance(target, type):
        return ClassPolicy(target)
    if not callable(target) and not (hasattr(target, "reset") and hasattr(target, "act")):
        raise PolicySpecError(
            f"--policy {spec!r} names a {type(target).__name__}; it must name a factory f(env) -> Policy, a policy "
            "class or a policy object (with methods reset(seed) and act(obs))"
        )
    return target


class ClassPolicy:
    """Factory for a policy class named by ``--policy module:Class``: ``Class()``, or ``Class(env)`` when its
    constructor needs an argument.  Picklable (the class is pickled by reference)."""

    def __init__(self, cls: type) -> None:
        self.cls = cls
        # Messages about this factory name the class it makes.
        self.__module__, self.__qualname__ = cls.__module__, cls.__qualname__

    def __call__(self, env: Any) -> Any:
        try:
            required: list[inspect.Parameter | None] = [
                p
                for p in inspect.signature(self.cls).parameters.values()
                if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            ]
        except (TypeError, ValueError):  # no signature to read (a builtin): pass the env
            required = [None]
        return self.cls(env) if required else self.cls()
