"""The demonstrator interface and the registry that maps names to demonstrators.

A demonstrator turns observations into actions, like a policy, but also records what it is (``name``) and
how it was configured (``settings``, JSON-serializable) so datasets can say who made them.  Environments name
the demonstrator that comes with them (``env.unwrapped.demonstrator``, with its settings for that env in
``env.unwrapped.demonstrator_settings``); ``make_demonstrator(env)`` builds it.
Other modules add their own with ``register_demonstrator`` (``r2s2r_envs.behavior`` its planners and generator,
the lab its teleoperator), so this module never imports them.  It lives in ``envs/``, below every package that
makes or runs demonstrators: dataset generation, the lab and evaluation use the registry without importing
``behavior`` (docs/architecture.md#dependencies); ``r2s2r_envs.behavior`` re-exports it.

Optional hook: a demonstrator with a method ``executed(action)`` is told, after each ``act``, the action the env
actually executed when it differs from the one returned (under noise injection, ``generate --action-noise``). A
demonstrator that integrates its own commands (that keeps an estimate of the controller's TCP target) needs it to
keep its estimate right; the closed-loop ones (the planner, the humanlike generator) read the measured hand instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym
import numpy as np


@runtime_checkable
class Demonstrator(Protocol):
    """Something that produces demonstrations on a PickSort env."""

    name: str

    @property
    def settings(self) -> dict[str, Any]:
        """JSON-serializable configuration, recorded in dataset provenance."""
        ...

    def reset(self, seed: int | None = None) -> None:
        """Start a new episode (re-seeds any randomness of the demonstrator itself)."""
        ...

    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """Action in the env's action space for a state observation (``obs_mode`` "state" or "state+rgb")."""
        ...


DemonstratorFactory = Callable[..., Demonstrator]
_REGISTRY: dict[str, DemonstratorFactory] = {}


def register_demonstrator(name: str, factory: DemonstratorFactory) -> None:
    """Register ``factory(env, **settings) -> Demonstrator`` under ``name``."""
    _REGISTRY[name] = factory


def demonstrator_names() -> list[str]:
    """Names of all registered demonstrators."""
    return sorted(_REGISTRY)


def make_demonstrator(env: gym.Env, name: str | None = None, **settings: Any) -> Demonstrator:
    """Build the demonstrator ``name`` (default: the one that comes with ``env``) for ``env``.

    With ``name`` None the env's own demonstrator also gets the env's settings for it
    (``env.unwrapped.demonstrator_settings``: in ``PickSort-WorldGrounded-v0`` the scripted planner as tuned in the
    grounded world), under any ``settings`` given here. A demonstrator named explicitly gets ``settings`` only, so
    ``make_demonstrator(env, "scripted")`` is the same planner in every env (e.g. to compare worlds).

    Raises:
        KeyError: unknown name; the message lists the registered ones.
    """
    base = env.unwrapped
    if name is None:
        name = getattr(base, "demonstrator", None)
        settings = {**dict(getattr(base, "demonstrator_settings", None) or {}), **settings}
    if name not in _REGISTRY:
        raise KeyError(f"unknown demonstrator {name!r}; registered: {demonstrator_names()}")
    return _REGISTRY[name](env, **settings)
