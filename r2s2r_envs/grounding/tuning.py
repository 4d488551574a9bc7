"""Tuning the scripted demonstrator in a simulated world: what a grounded world adds to the demos it makes.

The scripted planner's settings (``behavior.scripted.PlannerConfig``) were tuned in the nominal world. A team that
trusts its grounded simulator tunes its demonstrator there: in the default lab's grounded world the planner's
position gain decides between 47% and 95% success, while the nominal world cannot tell the settings apart
(docs/grounding.md, "Tuning the demonstrator"). :func:`tune_planner` runs every combination of a grid of planner
settings on its own episodes of a simulated env and chooses by episode success, then sort accuracy, then (on a
tie) the settings nearest the defaults, so that a setting moves only for a measured gain.

Honesty: it reads only the simulated env it is given. The lab (an env whose ``domain`` is ``"real"``) is refused,
and so are the evaluation protocol's seeds: settings chosen on the episodes they are judged on would be tuned to
the protocol. Judging the choice in the lab is the evaluation's job (``evaluation.evaluate``), once.

The choice made in a grounded world is stored in its grounding file (:func:`tune_grounding`, the file's
``demonstrator`` section): ``PickSort-WorldGrounded-v0`` then demonstrates with it, so every variant's scripted
demonstrator is tuned in its own world by one procedure (in the nominal world the same procedure keeps the defaults).
``r2s2r sysid`` runs it after identification.

Example:
    r2s2r tune-planner --env PickSort-WorldGrounded-v0 --episodes 40 --workers 2 --out tuned_planner.json
    r2s2r tune-planner --grounding my_lab.json --workers 2 --update-grounding   # store the choice in the file
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

# The planner's bounds live beside PlannerConfig; PLANNER_BOUNDS stays importable from here, where it was.
from r2s2r_envs.behavior.scripted import (
    PLANNER_BOUNDS,  # noqa: F401
    PlannerConfig,
    ScriptedPlanner,
    check_planner_setting,
)
from r2s2r_envs.grounding.result import load_grounding, write_grounding

#: The grid of the measured tuning: how far the planner leads a moving object and how much of the TCP error it
#: corrects per control step (a controller that lags its commands overshoots with a high gain).
DEFAULT_GRID: dict[str, tuple[float, ...]] = {"lead_time": (0.05, 0.1), "position_gain": (0.2, 0.3, 0.45, 0.6)}
#: Base seed of the tuning episodes (the protocol's is ``evaluation.protocol.EVALUATION_BASE_SEED``).
TUNING_BASE_SEED = 314159
FORMAT = "r2s2r_envs.planner_tuning"


class TuningError(ValueError):
    """A tuning request that cannot run: the lab as tuning env, the protocol's seeds, a bad grid."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class GridPoint:
    """One grid point's result in the tuning env.

    Attributes:
        settings: the planner settings of this point (the grid's fields only; the rest stay at their defaults).
        success: share of episodes with every object sorted.
        sort_accuracy: share of objects sorted.
        failure_causes: episodes by their first failure cause.
    """

    settings: dict[str, float]
    success: float
    sort_accuracy: float
    failure_causes: dict[str, int]


@dataclasses.dataclass(frozen=True, kw_only=True)
class PlannerTuning:
    """The result of :func:`tune_planner`.

    Attributes:
        env_id: the simulated env tuned in.
        env_kwargs: its ``gym.make`` arguments.
        episodes: episodes per grid point (the same episodes for every point).
        base_seed: the tuning episodes' base seed.
        grid: the values tried per setting.
        points: every grid point's result, in grid order.
        chosen: the chosen settings (grid fields only).
        default: the default value of every grid field.
    """

    env_id: str
    env_kwargs: dict[str, Any]
    episodes: int
    base_seed: int
    grid: dict[str, tuple[float, ...]]
    points: tuple[GridPoint, ...]
    chosen: dict[str, float]
    default: dict[str, float]

    @property
    def chosen_point(self) -> GridPoint:
        """The chosen grid point's result."""
        return next(p for p in self.points if p.settings == self.chosen)

    def planner_settings(self) -> dict[str, float]:
        """Keyword arguments of ``ScriptedPlanner`` (``make_demonstrator(env, "scripted", **settings)``)."""
        return dict(self.chosen)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``format`` and the fields)."""
        d = dataclasses.asdict(self)
        d["grid"] = {k: list(v) for k, v in self.grid.items()}
        return {"format": FORMAT, **d}

    def table(self) -> str:
        """The grid's results, best first, the chosen point marked."""
        lines = [f"{'settings':<48} {'success':>8} {'sort acc':>9}"]
        ranked = sorted(self.points, key=lambda p: (-p.success, -p.sort_accuracy))
        for p in ranked:
            mark = "  <- chosen" if p.settings == self.chosen else ""
            lines.append(f"{json.dumps(p.settings):<48} {p.success:>8.3f} {p.sort_accuracy:>9.3f}{mark}")
        return "\n".join(lines)


def check_grid(grid: Mapping[str, Sequence[float | str]]) -> dict[str, tuple[float, ...]]:
    """The grid as ``{field: values}`` after checking it.

    Raises:
        TuningError: an unknown ``PlannerConfig`` field, a field without values, or a value that is not a finite
            number.
    """
    fields = {f.name for f in dataclasses.fields(PlannerConfig)}
    if not grid:
        raise TuningError(f"the grid is empty; give values for some of {sorted(fields)}")
    out: dict[str, tuple[float, ...]] = {}
    for name, values in grid.items():
        if name not in fields:
            raise TuningError(f"unknown planner setting {name!r}; PlannerConfig has {sorted(fields)}")
        try:
            numbers = tuple(float(v) for v in values)
        except (TypeError, ValueError):
            raise TuningError(f"{name}: values must be numbers, got {list(values)!r}") from None
        if not numbers or not all(np.isfinite(numbers)):
            raise TuningError(f"{name}: give at least one finite value, got {list(values)!r}")
        for v in numbers:
            try:
                check_planner_setting("grid", name, v)
            except ValueError as e:
                raise TuningError(str(e)) from None
        out[name] = tuple(dict.fromkeys(numbers))
    return out


def parse_grid(text: str) -> dict[str, tuple[float, ...]]:
    """``"lead_time=0.05,0.1;position_gain=0.3"`` -> a checked grid.

    Raises:
        TuningError: a malformed part, or what :func:`check_grid` refuses.
    """
    grid: dict[str, list[str]] = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        name, sep, values = part.partition("=")
        if not sep:
            raise TuningError(f"{part!r}: expected NAME=V1,V2,... (e.g. position_gain=0.3,0.6)")
        grid[name.strip()] = [v for v in values.split(",") if v.strip()]
    return check_grid(grid)


def choose(points: Sequence[GridPoint], default: Mapping[str, float]) -> dict[str, float]:
    """The best point's settings: episode success, then sort accuracy, then on a tie the settings nearest
    ``default`` (sum of relative differences), so that only a measured gain moves a setting."""

    def change(settings: Mapping[str, float]) -> float:
        return sum(abs(v - default[n]) / max(abs(default[n]), 1e-9) for n, v in settings.items())

    return dict(max(points, key=lambda p: (p.success, p.sort_accuracy, -change(p.settings))).settings)


def _planner(env: Any, **settings: float) -> ScriptedPlanner:
    return ScriptedPlanner(env, **settings)


def planner_factory(**settings: float) -> Callable[[Any], ScriptedPlanner]:
    """A picklable factory ``f(env)`` of the scripted planner with ``settings`` (for ``evaluation.evaluate`` or
    ``datasets.generate`` with worker processes, where a lambda cannot be sent)."""
    return functools.partial(_planner, **settings)


#: The env a grounding file's demonstrator is tuned in (and demonstrates in).
GROUNDED_ENV = "PickSort-WorldGrounded-v0"


def tune_grounding(
    grounding: str | os.PathLike[str],
    *,
    grid: Mapping[str, Sequence[float]] = DEFAULT_GRID,
    episodes: int = 40,
    base_seed: int = TUNING_BASE_SEED,
    workers: int = 1,
    log: Callable[[str], None] | None = None,
) -> tuple[Any, PlannerTuning]:
    """Tunes the scripted planner in the world of the grounding file ``grounding`` and rewrites the file with the
    choice as its ``demonstrator`` section (every other section unchanged); returns the new grounding and the tuning.

    The planner is tuned from its defaults, whatever settings the file held before. ``PickSort-WorldGrounded-v0``
    with this file then demonstrates with the chosen settings.

    Raises:
        TuningError: ``grounding`` is not an existing file (a shipped name is refused: copy the file first), or
            what :func:`tune_planner` refuses.
        GroundingFileError: the file is not a valid grounding.
    """
    path = Path(grounding)
    if not path.is_file():
        raise TuningError(
            f"grounding {os.fspath(grounding)!r} is not a file: give the path of the grounding file to update "
            "(a shipped grounding is part of the package; copy it first)"
        )
    current = load_grounding(path)  # checked before any episode runs
    tuning = tune_planner(
        GROUNDED_ENV,
        grid=grid,
        episodes=episodes,
        base_seed=base_seed,
        env_kwargs={"grounding": str(path)},
        workers=workers,
        log=log,
    )
    updated = current.with_tuning(tuning)
    write_grounding(updated, path)
    return load_grounding(path), tuning


def tune_planner(
    env_id: str,
    *,
    grid: Mapping[str, Sequence[float]] = DEFAULT_GRID,
    episodes: int = 40,
    base_seed: int = TUNING_BASE_SEED,
    env_kwargs: Mapping[str, Any] | None = None,
    workers: int = 1,
    log: Callable[[str], None] | None = None,
) -> PlannerTuning:
    """Runs every grid point of planner settings in a simulated env and chooses one (see the module docstring).

    Args:
        env_id: a simulated PickSort env (e.g. ``PickSort-WorldGrounded-v0``); never the lab.
        grid: values per ``PlannerConfig`` field; every combination is tried.
        episodes: episodes per grid point (the same ones for every point), >= 1.
        base_seed: base seed of those episodes; not the evaluation protocol's.
        env_kwargs: ``gym.make`` arguments (e.g. ``grounding=`` a grounding file).
        workers: evaluation worker processes.
        log: called with one line per grid point.

    Raises:
        TuningError: an unknown env or arguments it refuses, the lab as env, the protocol's base seed, fewer than
            1 episode, or a bad grid.
    """
    import gymnasium as gym

    from r2s2r_envs.evaluation.protocol import EVALUATION_BASE_SEED, evaluate

    checked = check_grid(grid)
    if episodes < 1:
        raise TuningError(f"episodes must be >= 1, got {episodes}")
    if base_seed == EVALUATION_BASE_SEED:
        raise TuningError(
            f"base seed {base_seed} is the evaluation protocol's: tuning on the episodes the choice is judged on "
            f"would fit the protocol; use another (default {TUNING_BASE_SEED})"
        )
    kwargs = dict(env_kwargs or {})
    if env_id not in gym.registry or not env_id.startswith("PickSort-"):
        sims = sorted(i for i in gym.registry if i.startswith("PickSort-") and i != "PickSort-Real-v0")
        raise TuningError(f"unknown env {env_id!r}; simulated PickSort envs: {sims}")
    try:
        env = gym.make(env_id, **kwargs)
    except (TypeError, ValueError, FileNotFoundError, KeyError) as exc:
        raise TuningError(f"{env_id} refused its arguments {kwargs}: {exc}") from None
    try:
        domain = getattr(env.unwrapped, "domain", "sim")
    finally:
        env.close()
    if domain != "sim":
        raise TuningError(
            f"{env_id} is a {domain} env: the demonstrator is tuned in a simulated world only (the lab is used to "
            "evaluate the choice, once, with the evaluation protocol)"
        )
    names = list(checked)
    default = {n: float(getattr(PlannerConfig(), n)) for n in names}
    points = []
    for values in itertools.product(*(checked[n] for n in names)):
        settings = dict(zip(names, values, strict=True))
        result = evaluate(
            env_id,
            planner_factory(**settings),
            episodes=episodes,
            base_seed=base_seed,
            env_kwargs=kwargs,
            workers=workers,
            progress=False,
        )
        s = result.summary
        point = GridPoint(
            settings=settings,
            success=float(s["success_rate"]),
            sort_accuracy=float(s["sort_accuracy"]),
            failure_causes={k: int(v) for k, v in s["failure_causes"].items() if v},
        )
        points.append(point)
        if log is not None:
            log(f"{json.dumps(settings)}: success {point.success:.3f}, sort accuracy {point.sort_accuracy:.3f}")
    return PlannerTuning(
        env_id=env_id,
        env_kwargs=kwargs,
        episodes=episodes,
        base_seed=base_seed,
        grid=checked,
        points=tuple(points),
        chosen=choose(points, default),
        default=default,
    )
