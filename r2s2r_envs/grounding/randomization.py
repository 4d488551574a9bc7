"""Domain randomization over worlds: ranges as data, one sampling function, applied at reset.

A :class:`WorldRandomization` holds a centre world and a uniform range per randomized ``WorldParams`` field
(per element for vector fields); every other field stays at the centre.  Two constructors cover the usual cases:

- :meth:`WorldRandomization.from_grounding`: the 95% intervals of a grounding file (``r2s2r sysid``) become the
  ranges, centred on the identified world: randomize over what identification could not pin down.
- :meth:`WorldRandomization.around_nominal`: +-``scale`` relative ranges around a world (the nominal one by
  default), the classic "randomize everything by 20%".

``sample(rng)`` draws a ``WorldParams``; :class:`RandomizedWorld` is a Gymnasium wrapper that passes a fresh draw
to every ``reset`` through ``options={"world": ...}`` (the env's ``set_world``; docs/architecture.md), and
:class:`RandomizedWorlds` does the same for each env of the native vector env (``gym.make_vec``), autoresets
included.  Ranges
round-trip through JSON (``to_json`` / ``from_json``) so an experiment can record exactly what it randomized.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from r2s2r_envs.mappings import check_keys
from r2s2r_envs.world.params import FIELD_BOUNDS, WorldParams, nominal
from r2s2r_envs.world.presets import load_world

#: Version of :meth:`WorldRandomization.to_dict`'s format.
RANDOMIZATION_FORMAT_VERSION = 1

Range = tuple[float, float]


@dataclasses.dataclass(frozen=True, kw_only=True)
class WorldRandomization:
    """Uniform ranges over ``WorldParams`` fields around a centre world.

    Attributes:
        center: The world whose values the unrandomized fields keep; every range must contain its value.
        ranges: Field name -> ``(low, high)`` for a scalar field, or a tuple of ``(low, high)`` per element for a
            vector field, in the field's unit.  Each range lies within what the field accepts
            (``r2s2r_envs.world.params.FIELD_BOUNDS``), so every sample is a valid world.

    Raises:
        KeyError: an unknown field (the message lists the valid ones).
        ValueError: a range of the wrong shape, with low > high, outside the field's accepted values, or that
            excludes the centre's value.
    """

    center: WorldParams = dataclasses.field(default_factory=nominal)
    ranges: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.center, WorldParams):
            raise TypeError(f"WorldRandomization.center must be a WorldParams, got {type(self.center).__name__}")
        fields = WorldParams.field_names()
        check_keys(self.ranges, fields, what="field", where="WorldRandomization")
        # Declaration order, so sampling draws in the same order however the mapping was built.
        checked = {n: _check_range(n, self.ranges[n], getattr(self.center, n)) for n in fields if n in self.ranges}
        object.__setattr__(self, "ranges", checked)

    # ------------------------------------------------------------------ constructors
    @classmethod
    def around_nominal(
        cls, scale: float, *, world: WorldParams | None = None, fields: Iterable[str] | None = None
    ) -> WorldRandomization:
        """Ranges of +-``scale`` (relative) around ``world`` (default: the nominal world).

        Args:
            scale: Relative half-width, in [0, 1): 0.2 gives ``[0.8 v, 1.2 v]`` per value ``v``.
            world: The centre (default ``nominal()``).
            fields: Fields to randomize (default: every field whose value is not zero; a zero value, such as a
                perfect sensor's noise, has no relative range).  Ranges are clipped to what each field accepts.

        Raises:
            ValueError: ``scale`` out of range, or a named field whose value is zero.
            KeyError: an unknown field name.
        """
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 0.0 <= scale < 1.0:
            raise ValueError(f"scale must be a relative half-width in [0, 1), got {scale!r}")
        center = world if world is not None else nominal()
        names = _field_list(fields)
        ranges: dict[str, Any] = {}
        for name in names if names is not None else WorldParams.field_names():
            value = getattr(center, name)
            values = list(value) if isinstance(value, tuple) else [value]
            if all(v == 0.0 for v in values):
                if names is not None:
                    raise ValueError(
                        f"around_nominal: {name} is 0 in the centre world, so it has no relative range; give it an "
                        "absolute range with WorldRandomization(center=..., ranges={...})"
                    )
                continue
            pairs = [_clip(name, v - abs(v) * scale, v + abs(v) * scale, v) for v in values]
            ranges[name] = pairs[0] if not isinstance(value, tuple) else tuple(pairs)
        return cls(center=center, ranges=ranges)

    @classmethod
    def from_grounding(
        cls, grounding: Any, *, fields: Iterable[str] | None = None, widen: float = 1.0
    ) -> WorldRandomization:
        """Ranges from a grounding's 95% intervals, centred on its identified world.

        Args:
            grounding: A :class:`~r2s2r_envs.grounding.result.Grounding`, a shipped grounding name or a path.
            fields: Fields to randomize (default: every field with an interval).  A field without an interval,
                or with an unbounded side, is kept at the identified value unless named here (then an error).
            widen: Factor on each interval's half-widths around the estimate (1: the 95% interval itself).
                Ranges are clipped to what each field accepts.

        Raises:
            ValueError: a named field has no bounded interval, or ``widen`` is not positive.
        """
        from r2s2r_envs.grounding.result import load_grounding

        if isinstance(widen, bool) or not isinstance(widen, (int, float)) or not widen > 0:
            raise ValueError(f"widen must be a positive factor, got {widen!r}")
        g = load_grounding(grounding)
        names = _field_list(fields)
        ranges: dict[str, Any] = {}
        for name in names if names is not None else WorldParams.field_names():
            interval = g.intervals.get(name)
            value = getattr(g.world, name)
            vector = isinstance(value, tuple)
            pairs: list[Any] = [] if interval is None else list(interval) if vector else [interval]
            values = list(value) if vector else [value]
            bounded = interval is not None and all(lo is not None and hi is not None for lo, hi in pairs)
            if not bounded:
                if names is not None:
                    raise ValueError(
                        f"from_grounding: {name} has no bounded interval in the grounding "
                        f"({'none' if interval is None else interval}); identified fields with intervals: "
                        f"{sorted(k for k in g.intervals)}"
                    )
                continue
            out = [_clip(name, v - (v - lo) * widen, v + (hi - v) * widen, v) for (lo, hi), v in zip(pairs, values)]
            ranges[name] = tuple(out) if vector else out[0]
        return cls(center=g.world, ranges=ranges)

    # ------------------------------------------------------------------ sampling
    def sample(self, rng: np.random.Generator) -> WorldParams:
        """One world: every randomized value drawn uniformly from its range, in field declaration order."""
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy.random.Generator (np.random.default_rng(seed)), got {rng!r}")
        values: dict[str, Any] = {}
        for name, r in self.ranges.items():
            if isinstance(getattr(self.center, name), tuple):
                lows, highs = np.array([p[0] for p in r]), np.array([p[1] for p in r])
                values[name] = tuple(float(v) for v in rng.uniform(lows, highs))
            else:
                values[name] = float(rng.uniform(r[0], r[1]))
        return dataclasses.replace(self.center, **values)

    # ------------------------------------------------------------------ JSON
    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable form: ``{"version", "center": {...every field...}, "ranges": {...}}``."""
        ranges = {
            k: [list(p) for p in v] if isinstance(getattr(self.center, k), tuple) else list(v)
            for k, v in self.ranges.items()
        }
        return {"version": RANDOMIZATION_FORMAT_VERSION, "center": self.center.to_dict(), "ranges": ranges}

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WorldRandomization:
        """Inverse of :meth:`to_dict` (``center`` may be partial over the nominal world, or a preset name).

        Raises:
            ValueError: another format version or unknown keys.
        """
        if not isinstance(data, Mapping):
            raise TypeError(f"a world randomization is a JSON object, got {type(data).__name__}")
        check_keys(data, ("center", "ranges", "version"), what="key", where="world randomization", error=ValueError)
        version = data.get("version", RANDOMIZATION_FORMAT_VERSION)
        if version != RANDOMIZATION_FORMAT_VERSION:
            raise ValueError(
                f"world randomization format version {version!r}; this code reads {RANDOMIZATION_FORMAT_VERSION}"
            )
        ranges = data.get("ranges", {})
        if not isinstance(ranges, Mapping):
            raise TypeError(f"world randomization 'ranges' must be an object of field -> range, got {ranges!r}")
        return cls(center=load_world(data.get("center")), ranges=dict(ranges))

    @classmethod
    def from_json(cls, text: str) -> WorldRandomization:
        return cls.from_dict(json.loads(text))


class RandomizedWorld(gym.Wrapper):
    """Draw a world from ``randomization`` at every ``reset`` and pass it as ``options={"world": ...}``.

    The draw comes from the wrapper's own generator, seeded by the first ``reset(seed=...)`` (and re-seeded by
    each later seeded reset), so a seeded run is reproducible and the env's own streams are left alone.
    ``info["world"]`` carries the drawn world (``WorldParams.to_dict()``) after each reset.

    Args:
        env: A simulated PickSort env (the lab refuses ``set_world``: it is not a simulator).
        randomization: The ranges.
    """

    def __init__(self, env: gym.Env, randomization: WorldRandomization) -> None:
        super().__init__(env)
        if not isinstance(randomization, WorldRandomization):
            raise TypeError(f"randomization must be a WorldRandomization, got {type(randomization).__name__}")
        self.randomization = randomization
        self._rng = np.random.default_rng()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        if seed is not None:
            self._rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0x5D0,)))
        options = dict(options or {})
        if "world" in options:
            raise ValueError("RandomizedWorld draws the world itself: do not pass options={'world': ...}")
        world = self.randomization.sample(self._rng)
        obs, info = self.env.reset(seed=seed, options={**options, "world": world})
        return obs, {**info, "world": world.to_dict()}


class RandomizedWorlds(gym.vector.VectorWrapper):
    """:class:`RandomizedWorld` for the native vector env (``gym.make_vec``): every env draws its own world at
    every reset, autoresets included, from its own generator.

    Env ``i``'s generator is seeded as a ``RandomizedWorld`` reset with env ``i``'s seed would be (``seed + i`` for
    an int seed, the list's entry for a list), so env ``i`` runs the worlds of a single env wrapped in
    ``RandomizedWorld`` and reset with that seed, in the same order (tested).  The world of an env's next episode
    is drawn as soon as its last one has started and given to the vector env's next autoreset of that env
    (``set_autoreset_options``); ``reset`` passes fresh draws itself.  ``worlds`` holds the world each env runs
    now.

    Args:
        env: The vector env of a simulated PickSort id (the lab refuses ``set_world``).
        randomization: The ranges.

    Raises:
        TypeError: ``randomization`` is not a ``WorldRandomization``, or ``env`` is not a PickSort vector env.
    """

    def __init__(self, env: gym.vector.VectorEnv, randomization: WorldRandomization) -> None:
        from r2s2r_envs.envs.vector import PickSortVectorEnv

        super().__init__(env)
        if not isinstance(randomization, WorldRandomization):
            raise TypeError(f"randomization must be a WorldRandomization, got {type(randomization).__name__}")
        if not isinstance(env.unwrapped, PickSortVectorEnv):
            raise TypeError(f"RandomizedWorlds wraps a PickSort vector env (gym.make_vec), got {env.unwrapped!r}")
        self.randomization = randomization
        self._vec: PickSortVectorEnv = env.unwrapped
        self._rngs = [np.random.default_rng() for _ in range(self.num_envs)]
        self._next: list[WorldParams | None] = [None] * self.num_envs
        self._reset_at_next_step = np.zeros(self.num_envs, dtype=np.bool_)
        #: The world each env runs now (``None`` before its first reset).
        self.worlds: list[WorldParams | None] = [None] * self.num_envs

    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        n = self.num_envs
        options = dict(options or {})
        if "world" in options:
            raise ValueError("RandomizedWorlds draws the worlds itself: do not pass options={'world': ...}")
        mask = options.get("reset_mask")
        good_mask = mask is None or (
            isinstance(mask, np.ndarray) and mask.dtype == np.bool_ and mask.shape == (n,) and bool(mask.any())
        )
        int_seed = isinstance(seed, (int, np.integer)) and not isinstance(seed, bool)
        good_seed = seed is None or int_seed or (isinstance(seed, (list, tuple)) and len(seed) == n)
        if not (good_mask and good_seed):  # the vector env refuses it, naming what it takes
            return self.env.reset(seed=seed, options=options)  # type: ignore[arg-type]  # a list: one per env
        resetting = list(range(n)) if mask is None else np.flatnonzero(mask).tolist()
        seeds: list[Any] | None = None
        if isinstance(seed, (list, tuple)):
            seeds = list(seed)
        elif seed is not None:
            seeds = [int(seed) + i for i in range(n)]
        worlds: list[WorldParams | None] = list(self.worlds)
        saved = copy.deepcopy(self._rngs)  # a reset the env refuses draws nothing
        for i in resetting:
            env_seed = None if seeds is None else seeds[i]
            if env_seed is not None:
                self._rngs[i] = np.random.default_rng(np.random.SeedSequence(int(env_seed), spawn_key=(0x5D0,)))
                worlds[i] = self.randomization.sample(self._rngs[i])
            else:  # the world already drawn for the env's next episode
                worlds[i] = self._next[i] or self.randomization.sample(self._rngs[i])
        nominal_world = worlds[resetting[0]]  # envs left out of reset_mask ignore their entry
        try:
            options["world"] = [w or nominal_world for w in worlds]
            obs, info = self.env.reset(seed=seed, options=options)  # type: ignore[arg-type]  # a list per env
        except Exception:
            self._rngs = saved
            raise
        for i in resetting:
            self.worlds[i] = worlds[i]
            self._draw_next(i)
        self._reset_at_next_step[list(resetting)] = False
        return obs, info

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        mode = self._vec.autoreset_mode
        obs, rewards, terminations, truncations, info = self.env.step(actions)
        ended = np.logical_or(terminations, truncations)
        if mode == gym.vector.AutoresetMode.NEXT_STEP:  # an env that ended is reset by the next step
            reset_now, self._reset_at_next_step = self._reset_at_next_step, ended
        elif mode == gym.vector.AutoresetMode.SAME_STEP:
            reset_now = ended
        else:  # DISABLED: only reset() resets
            reset_now = np.zeros(self.num_envs, dtype=np.bool_)
        for i in np.flatnonzero(reset_now).tolist():
            self.worlds[i] = self._next[i]
            self._draw_next(i)
        return obs, rewards, terminations, truncations, info

    def _draw_next(self, i: int) -> None:
        """Draw env ``i``'s next world and give it to the env's next autoreset."""
        self._next[i] = self.randomization.sample(self._rngs[i])
        self._vec.set_autoreset_options(i, {"world": self._next[i]})


# ---------------------------------------------------------------------- helpers
def _field_list(fields: Iterable[str] | None) -> list[str] | None:
    if fields is None:
        return None
    names = [fields] if isinstance(fields, str) else list(fields)
    check_keys(names, WorldParams.field_names(), what="WorldParams field")
    return names


def _clip(name: str, low: float, high: float, value: float) -> Range:
    """``(low, high)`` clipped to what ``name`` accepts (a strict minimum stays just above it)."""
    bound = FIELD_BOUNDS[name]
    if bound.minimum is not None:
        floor = math.nextafter(bound.minimum, math.inf) if bound.strict else bound.minimum
        low = max(low, min(floor, value))
    if bound.maximum is not None:
        high = min(high, bound.maximum)
    return float(low), float(high)


def _check_range(name: str, r: Any, value: Any) -> Any:
    bound = FIELD_BOUNDS[name]
    vector = bound.length is not None
    where = f"WorldRandomization.ranges[{name!r}]"
    if vector:
        if not _is_seq(r) or len(r) != bound.length or not all(_is_pair(p) for p in r):
            raise ValueError(f"{where} must be {bound.length} (low, high) pairs, one per element, got {r!r}")
        pairs, values = [tuple(map(float, p)) for p in r], list(value)
    else:
        if not _is_pair(r):
            raise ValueError(f"{where} must be a (low, high) pair, got {r!r}")
        pairs, values = [tuple(map(float, r))], [value]
    for k, ((low, high), v) in enumerate(zip(pairs, values)):
        label = where if not vector else f"{where}[{k}]"
        if not (math.isfinite(low) and math.isfinite(high)) or low > high:
            raise ValueError(f"{label} = ({low}, {high}) must be finite with low <= high")
        if not low <= v <= high:
            raise ValueError(
                f"{label} = ({low}, {high}) excludes the centre world's value {v:g}; a range must contain it"
            )
        lo_ok = bound.minimum is None or (low > bound.minimum if bound.strict else low >= bound.minimum)
        hi_ok = bound.maximum is None or high <= bound.maximum
        if not (lo_ok and hi_ok):
            raise ValueError(f"{label} = ({low}, {high}) leaves what {name} accepts: {bound.describe()}")
    return tuple(pairs) if vector else pairs[0]


def _is_seq(value: Any) -> bool:
    return isinstance(value, (list, tuple)) or isinstance(value, np.ndarray)


def _is_pair(value: Any) -> bool:
    return (
        _is_seq(value)
        and len(value) == 2
        and all(isinstance(v, (int, float, np.floating, np.integer)) and not isinstance(v, bool) for v in value)
    )


__all__ = ["RANDOMIZATION_FORMAT_VERSION", "RandomizedWorld", "RandomizedWorlds", "WorldRandomization"]
