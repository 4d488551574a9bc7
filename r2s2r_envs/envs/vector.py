"""The native vector env of every PickSort id: ``gym.make_vec(id, num_envs=N)`` returns a :class:`PickSortVectorEnv`.

It holds ``N`` envs of the id's own class (so the lab, ``PickSort-Real-v0``, stays a black box with its unmodeled
effects).  A control step of one env is the single env's own ``step`` code in three phases
(``PickSortEnv._begin_step``: action check, belt, controller; ``mujoco.mj_step``, which releases the GIL and is
most of the time; ``_finish_step``: outcome rules, reward, observation), so every env's observations, rewards,
outcomes and random streams are bit-identical to a single env reset with the same seed and given the same actions
(``tests/test_vector.py`` checks it for every registered id, with one thread and several).  With state
observations, each of ``num_threads`` threads (the calling thread is one of them) takes the next env still to step
and runs its whole control step: the Python phases of one env run while the physics of the others does, and a lock
lets one thread at a time run a whole Python phase (the GIL alone would switch threads in the middle of one).  With
images the calling thread runs the Python phases of every env (a GL context belongs to the thread that made it)
and the threads only the physics.  The actions of all envs are checked and clipped at once, and ``info`` is
batched one key at a time (the same arrays and masks ``VectorEnv._add_info`` makes one env at a time).
``mujoco.rollout`` was not used: it steps a fixed control sequence, while this env runs its controller, belt model
and divergence check between control steps.

Gymnasium's conventions: batched ``Dict`` observations, ``(N,)`` rewards, terminations and truncations, ``info``
as a dict of arrays with ``_key`` masks (``VectorEnv._add_info``), and the autoreset modes of
``gymnasium.vector.AutoresetMode`` (``NEXT_STEP`` by default, as ``SyncVectorEnv``).  ``reset(seed=s)`` seeds env
``i`` with ``s + i``; a list gives every env its own seed.  In ``DISABLED`` mode an env that has ended is not
stepped (its row repeats its last observation with reward 0 and its termination/truncation kept) until
``reset(options={"reset_mask": mask})`` restarts it, so a caller can run episodes of different lengths to their
ends (the evaluation protocol does, ``evaluation.batched``).

Worlds per env: ``set_world(w)`` or ``reset(options={"world": w})`` with one world (every env) or a list of ``N``
(env ``i`` gets ``w[i]``; same forms as ``PickSortEnv.set_world``), for domain randomization at reset; the
Ungrounded id also takes ``world=[w0, ..., wN-1]`` at construction.  ``set_autoreset_options(i, {"world": w})``
gives env ``i``'s next autoreset its world (``grounding.randomization.RandomizedWorlds`` draws one per episode of
each env with it).  The lab refuses worlds, as its single env does.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any, cast

import gymnasium as gym
import mujoco
import numpy as np
from gymnasium.envs.registration import load_env_creator
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from r2s2r_envs.envs.pick_sort import PickSortEnv
from r2s2r_envs.mappings import check_choice
from r2s2r_envs.world.params import WorldParams
from r2s2r_envs.world.presets import load_world

#: Arguments of the vector env itself (every other one goes to each env).
VECTOR_ARGUMENTS = ("num_envs", "num_threads", "autoreset_mode")
AUTORESET_MODES = tuple(m.value for m in AutoresetMode)
_WORLD_TYPES = (WorldParams, Mapping, str, Path)

__all__ = ["AUTORESET_MODES", "VECTOR_ARGUMENTS", "PickSortVectorEnv", "make_vector_env"]


#: Memory one env of the vector env takes at least, bytes: its MuJoCo data, scene and buffers (0.8 MiB measured
#: for state observations, more with images), rounded up.
ENV_BYTES = 1 << 20


def _physical_memory() -> int | None:
    """The machine's memory, bytes (None where the system does not say)."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, OSError, ValueError):
        return None


def check_num_envs(num_envs: Any, what: str = "num_envs") -> int:
    """``num_envs`` as an int, or a ``ValueError`` saying what is accepted: an integer >= 1 and, for ``num_envs``,
    no more envs than the machine's memory holds at :data:`ENV_BYTES` each (10**6 envs would allocate until the
    machine runs out of memory)."""
    if isinstance(num_envs, bool) or not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
        raise ValueError(f"{what} must be an integer >= 1 (the number of envs stepped together), got {num_envs!r}")
    memory = _physical_memory() if what == "num_envs" else None
    if memory is not None and int(num_envs) > memory // ENV_BYTES:
        raise ValueError(
            f"{what}={int(num_envs)} needs at least {int(num_envs) * ENV_BYTES / 2**30:.0f} GiB ({ENV_BYTES // 2**20} "
            f"MiB per env); this machine has {memory / 2**30:.0f} GiB: give at most {memory // ENV_BYTES} envs"
        )
    return int(num_envs)


def _is_world(value: Any) -> bool:
    return isinstance(value, _WORLD_TYPES) or isinstance(value, os.PathLike)


class PickSortVectorEnv(VectorEnv):
    """``num_envs`` PickSort envs stepped together; see the module docstring.

    Args:
        env_entry_point: ``"module:Class"`` of the single env (a ``PickSortEnv`` subclass), as registered.
        num_envs: Number of envs, >= 1.
        num_threads: Threads that run the physics (default: ``min(num_envs, os.cpu_count())``; 1 runs it in
            the calling thread).
        autoreset_mode: A ``gymnasium.vector.AutoresetMode`` or its value (``"NextStep"``, ``"SameStep"``,
            ``"Disabled"``).
        **env_kwargs: Arguments of every env (the id's registered kwargs and yours, as ``gym.make`` takes them).
            ``world`` may be a list of ``num_envs`` worlds: env ``i`` is made with ``world[i]``.

    Raises:
        ValueError: ``num_envs`` or ``num_threads`` < 1, an unknown autoreset mode, or a world list whose length
            is not ``num_envs``.
        TypeError: the entry point is not a PickSort env, or an argument the env does not take.
    """

    def __init__(
        self,
        env_entry_point: str,
        num_envs: int = 1,
        *,
        num_threads: int | None = None,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        **env_kwargs: Any,
    ) -> None:
        self.num_envs = check_num_envs(num_envs)
        mode = autoreset_mode.value if isinstance(autoreset_mode, AutoresetMode) else autoreset_mode
        self.autoreset_mode = AutoresetMode(check_choice(mode, AUTORESET_MODES, what="autoreset_mode"))
        cpus = os.cpu_count() or 1
        threads = min(self.num_envs, cpus) if num_threads is None else check_num_envs(num_threads, "num_threads")
        env_class = load_env_creator(env_entry_point)
        if not (isinstance(env_class, type) and issubclass(env_class, PickSortEnv)):
            raise TypeError(f"{env_entry_point!r} is not a PickSort env class; the vector env steps PickSortEnv only")
        worlds = env_kwargs.pop("world", None)
        per_env = [dict(env_kwargs) for _ in range(self.num_envs)]
        if worlds is not None:
            for kwargs, world in zip(per_env, self._per_env_worlds(worlds, "world")):
                kwargs["world"] = world
        self.envs: tuple[PickSortEnv, ...] = tuple(cast(PickSortEnv, env_class(**kwargs)) for kwargs in per_env)
        first = self.envs[0]
        self.single_observation_space = first.observation_space
        self.single_action_space = first.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.metadata = {**first.metadata, "autoreset_mode": self.autoreset_mode}
        self.render_mode = first.render_mode
        self.num_threads = threads
        self._pool: ThreadPoolExecutor | None = None
        self._python = threading.Lock()  # held by the thread that runs an env's Python phases
        # Threads run whole control steps where no env renders images (GL contexts belong to the thread that made
        # them); otherwise only the physics.
        self._threads_step_whole = all(env.obs_mode == "state" for env in self.envs)
        self._obs: list[dict[str, np.ndarray] | None] = [None] * self.num_envs
        self._rewards = np.zeros(self.num_envs, dtype=np.float64)
        self._terminations = np.zeros(self.num_envs, dtype=np.bool_)
        self._truncations = np.zeros(self.num_envs, dtype=np.bool_)
        self._ended = np.zeros(self.num_envs, dtype=np.bool_)  # ended at the last step: reset before stepping
        #: Each env's own ``info`` of its last reset or step, as the single env returns it (no batching: ``None``
        #: stays ``None``), for callers that read one env at a time (the evaluation protocol's records).
        self.env_infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        self._autoreset_options: list[dict[str, Any] | None] = [None] * self.num_envs

    # ------------------------------------------------------------------ worlds
    def _per_env_worlds(self, worlds: Any, what: str) -> list[Any]:
        if _is_world(worlds):
            return [worlds] * self.num_envs
        if isinstance(worlds, (bytes, bytearray)) or not isinstance(worlds, Sequence):
            raise TypeError(
                f"{what} must be one world (a preset name, a JSON file, a mapping or a WorldParams; every env gets "
                f"it) or a list of {self.num_envs} worlds (one per env), got a {type(worlds).__name__}"
            )
        if len(worlds) != self.num_envs:
            raise ValueError(
                f"{what} is a list of {len(worlds)} worlds but the vector env has num_envs={self.num_envs}: give one "
                f"world (every env gets it) or a list of exactly {self.num_envs}"
            )
        return list(worlds)

    def set_world(self, world: Any) -> None:
        """Change the world of every env (one world) or of each env (a list of ``num_envs``); takes effect at the
        next reset of each env.  Same forms as ``PickSortEnv.set_world``; the lab refuses it.

        Raises:
            ValueError: a list whose length is not ``num_envs``, or a world an env refuses (then no env changed).
            TypeError: neither a world nor a list of worlds.
        """
        worlds = self._per_env_worlds(world, "world")
        loaded = [w if isinstance(w, WorldParams) else load_world(w) for w in worlds]  # all checked before any change
        for env, w in zip(self.envs, loaded):
            env.set_world(w)

    def set_autoreset_options(self, env: int, options: Mapping[str, Any] | None) -> None:
        """The reset options of env ``env``'s next autoreset (the single env's: ``{"world": w}``, ``{"setup":
        ...}``), used once; ``None`` clears them.  An explicit ``reset`` of the env clears them too.  This is how a
        world can be drawn for each episode of each env (``grounding.randomization.RandomizedWorlds``).

        Raises:
            IndexError: ``env`` is not an env index.
            TypeError: ``options`` is not a mapping or ``None``.
        """
        if isinstance(env, bool) or not isinstance(env, (int, np.integer)) or not 0 <= env < self.num_envs:
            raise IndexError(f"env must be an env index in [0, {self.num_envs}), got {env!r}")
        if options is not None and not isinstance(options, Mapping):
            raise TypeError(f"options must be a mapping of reset options or None, got {type(options).__name__}")
        self._autoreset_options[int(env)] = None if options is None else dict(options)

    def _take_autoreset_options(self, env: int) -> dict[str, Any] | None:
        options, self._autoreset_options[env] = self._autoreset_options[env], None
        return options

    # ------------------------------------------------------------------ reset
    def reset(
        self, *, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Reset every env (or those of ``options["reset_mask"]``); see the module docstring for seeds.

        ``options`` takes the single env's reset options (``"world"``: one or a list of ``num_envs``, each checked
        before any env resets; ``"setup"``:
        one mapping for every env or a list of ``num_envs``) and ``"reset_mask"`` (a bool array of shape
        ``(num_envs,)``).

        Raises:
            ValueError: a seed list or option list of the wrong length, an empty or malformed ``reset_mask``.
        """
        n = self.num_envs
        if seed is None:
            seeds: list[int | None] = [None] * n
        elif isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
            seeds = [int(seed) + i for i in range(n)]
        elif isinstance(seed, Sequence) and not isinstance(seed, (str, bytes)):
            if len(seed) != n:
                raise ValueError(f"seed is a list of {len(seed)} seeds but num_envs={n}: give one int or {n} seeds")
            seeds = list(seed)
        else:
            raise TypeError(f"seed must be None, an int or a list of {n} ints/None, got {seed!r}")
        options = dict(options or {})
        mask = self._reset_mask(options.pop("reset_mask", None))
        per_env: list[dict[str, Any]] = [{} for _ in range(n)]
        if "world" in options:  # written at each env's own reset, so envs left out of reset_mask keep theirs
            worlds = self._per_env_worlds(options.pop("world"), "options['world']")
            for o, w in zip(per_env, [w if isinstance(w, WorldParams) else load_world(w) for w in worlds]):
                o["world"] = w
        if "setup" in options:
            setup = options.pop("setup")
            setups = [setup] * n if setup is None or isinstance(setup, Mapping) else list(setup)
            if len(setups) != n:
                raise ValueError(f"options['setup'] is a list of {len(setups)} set-ups but num_envs={n}")
            for o, s in zip(per_env, setups):
                if s is not None:
                    o["setup"] = s
        for o in per_env:
            o.update(options)  # anything else: the env names what it accepts
        rows: list[tuple[int, dict[str, Any]]] = []
        for i in np.flatnonzero(mask).tolist():
            self._autoreset_options[i] = None
            self._obs[i], info = self.envs[i].reset(seed=seeds[i], options=per_env[i] or None)
            self.env_infos[i] = info
            rows.append((i, info))
        infos = self._batched_infos(rows)
        self._rewards[mask] = 0.0
        self._terminations[mask] = False
        self._truncations[mask] = False
        self._ended[mask] = False
        return self._stacked(), infos

    def _reset_mask(self, mask: Any) -> np.ndarray:
        n = self.num_envs
        if mask is None:
            return np.ones(n, dtype=np.bool_)
        if not isinstance(mask, np.ndarray) or mask.dtype != np.bool_ or mask.shape != (n,):
            raise ValueError(f"options['reset_mask'] must be a numpy bool array of shape ({n},), got {mask!r}")
        if not mask.any():
            raise ValueError("options['reset_mask'] must select at least one env")
        if any(o is None for o, m in zip(self._obs, mask) if not m):
            raise ValueError("options['reset_mask'] leaves out envs never reset: reset every env first")
        return mask

    # ------------------------------------------------------------------ step
    def step(
        self, actions: np.ndarray
    ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every env with its row of ``actions`` ``(num_envs, action_dim)``; see the module docstring.

        Raises:
            ValueError / TypeError: ``actions`` of another shape, or a row the env refuses (the message names the
                env).
            RuntimeError: ``step`` before ``reset``.
        """
        if any(o is None for o in self._obs):
            raise RuntimeError("step() called before reset(): call reset() first")
        actions = self._check_actions(actions)
        mode = self.autoreset_mode
        none = np.zeros(self.num_envs, dtype=np.bool_)
        to_reset = self._ended if mode == AutoresetMode.NEXT_STEP else none  # reset instead of stepped
        left_alone = self._ended if mode == AutoresetMode.DISABLED else none
        to_step = ~to_reset & ~left_alone
        stepping = np.flatnonzero(to_step).tolist()
        envs = self.envs
        checked = self._checked_rows(actions, stepping)  # every row is checked before any env moves
        results: dict[int, tuple] = {}
        pool = self._thread_pool()
        if pool is not None and self._threads_step_whole:
            self._step_in_threads(pool, stepping, checked, results)
        else:
            self._step_physics_in_threads(pool, stepping, checked, results)

        rows: list[tuple[int, dict[str, Any]]] = []  # (env, info) in env order: batched at the end
        for i in range(self.num_envs):
            if i in results:
                obs, reward, terminated, truncated, info = results[i]
                self._rewards[i], self._terminations[i], self._truncations[i] = reward, terminated, truncated
                if mode == AutoresetMode.SAME_STEP and (terminated or truncated):
                    rows.append((i, {"final_obs": obs, "final_info": info}))  # before the reset's info, as Gymnasium
                    obs, info = envs[i].reset(options=self._take_autoreset_options(i))
                self._obs[i] = obs
                self.env_infos[i] = info
                rows.append((i, info))
            elif to_reset[i]:
                self._obs[i], info = envs[i].reset(options=self._take_autoreset_options(i))
                self.env_infos[i] = info
                self._rewards[i], self._terminations[i], self._truncations[i] = 0.0, False, False
                rows.append((i, info))
            else:  # DISABLED and ended: left alone until reset
                self._rewards[i] = 0.0
        infos = self._batched_infos(rows)
        if mode == AutoresetMode.NEXT_STEP:
            self._ended = self._terminations | self._truncations
        elif mode == AutoresetMode.DISABLED:
            self._ended = self._ended | self._terminations | self._truncations
        return (
            self._stacked(),
            self._rewards.copy(),
            self._terminations.copy(),
            self._truncations.copy(),
            infos,
        )

    def _step_in_threads(
        self, pool: ThreadPoolExecutor, stepping: list[int], actions: np.ndarray, results: dict[int, tuple]
    ) -> None:
        """Each thread takes the next env still to step and runs its whole control step (controller, physics,
        outcome rules), until none is left: the GIL serializes the Python phases, the physics of the envs in the
        other threads runs beside them, and the calling thread only waits."""
        envs = self.envs
        todo = iter(stepping)  # shared: next() on a list iterator is atomic under the GIL
        python = self._python

        def work() -> None:
            # One thread at a time runs Python (the lock), and it runs its env's whole Python phase before it lets
            # another in: the GIL alone would hand over at every call that releases it, in the middle of a phase.
            with python:
                for i in todo:
                    env = envs[i]
                    env._begin_step(actions[i], checked=True)
                    python.release()
                    try:
                        mujoco.mj_step(env._model, env._data, nstep=env._n_substeps)
                    finally:
                        python.acquire()
                    results[i] = env._finish_step()

        # The calling thread is one of the threads: it would only wait otherwise.
        futures = [pool.submit(work) for _ in range(min(self.num_threads, len(stepping)) - 1)]
        try:
            work()
        finally:
            wait(futures)  # no env is stepping when an error propagates
        for future in futures:
            future.result()

    def _step_physics_in_threads(
        self, pool: ThreadPoolExecutor | None, stepping: list[int], actions: np.ndarray, results: dict[int, tuple]
    ) -> None:
        """The calling thread runs every env's Python phases and hands each env's physics to the pool as soon as
        its controller has run (images are rendered in the thread that owns their GL context: this one)."""
        envs = self.envs
        physics: list[tuple[int, Future | None]] = []
        try:
            for i in stepping:
                env = envs[i]
                env._begin_step(actions[i], checked=True)
                if pool is None:
                    mujoco.mj_step(env._model, env._data, nstep=env._n_substeps)
                    physics.append((i, None))
                else:
                    physics.append((i, pool.submit(mujoco.mj_step, env._model, env._data, nstep=env._n_substeps)))
            for i, future in physics:  # in submission order: an env's last phase overlaps the others' physics
                if future is not None:
                    future.result()
                results[i] = envs[i]._finish_step()
        finally:
            wait([f for _, f in physics if f is not None])  # no physics step outlives an error

    def _check_actions(self, actions: Any) -> np.ndarray:
        shape = (self.num_envs, *cast(tuple[int, ...], self.single_action_space.shape))
        try:
            a = np.asarray(actions)
        except (TypeError, ValueError):
            raise TypeError(
                f"actions must be an array of shape {shape} (one row per env), got a ragged sequence"
            ) from None
        if a.shape != shape and a.dtype.kind not in "iuf":
            # A string, dict, bool, complex or object: say what it is, not only that its shape is wrong (one of the
            # right shape is refused by each env's own check, naming the env).
            what = type(actions).__name__ if a.ndim == 0 else f"an array of dtype {a.dtype}"
            raise TypeError(
                f"actions must be a numeric array of shape {shape} (one row per env, values in [-1, 1]), got {what}"
            )
        if a.shape != shape:
            raise ValueError(f"actions must have shape {shape} (one row per env), got shape {a.shape}")
        return a

    def _checked_rows(self, actions: np.ndarray, stepping: list[int]) -> np.ndarray:
        """The rows of ``actions`` as the envs take them (``PickSortEnv._validate_action``: float64, clipped to
        [-1, 1]), checked all at once; a row an env refuses raises its error, naming the env."""
        if actions.dtype.kind in "iuf":
            a = actions.astype(np.float64, copy=False)
            if math.isfinite(a[stepping].sum()):  # the envs' own test, on every row at once
                return np.minimum(np.maximum(a, -1.0), 1.0)
        for i in stepping:  # one row is bad: the env that refuses it says why
            try:
                self.envs[i]._validate_action(actions[i])
            except (TypeError, ValueError) as e:
                raise type(e)(f"env {i}: {e}") from None
        raise AssertionError("unreachable: a row failed the batch check but no env refused it")  # pragma: no cover

    def _batched_infos(self, rows: list[tuple[int, dict[str, Any]]]) -> dict[str, Any]:
        """The vector ``info`` of the envs' ``info`` dicts in ``rows`` (``(env, info)``, in the order Gymnasium adds
        them): what ``VectorEnv._add_info`` makes one row at a time, made one key at a time where every row has the
        same flat keys (the PickSort envs' infos; otherwise row by row, as Gymnasium)."""
        infos: dict[str, Any] = {}
        if not rows:
            return infos
        keys = rows[0][1].keys()
        nested = any(isinstance(v, dict) for v in rows[0][1].values())
        if nested or any(info.keys() != keys for _, info in rows):
            for i, info in rows:
                infos = self._add_info(infos, info, i)
            return infos
        n = self.num_envs
        mask = np.zeros(n, dtype=np.bool_)
        mask[[i for i, _ in rows]] = True
        for key, first in rows[0][1].items():
            kind = type(first)
            if kind in (int, float, bool) or issubclass(kind, np.number):  # as _add_info: the first env's type
                array = np.zeros(n, dtype=kind)
            elif isinstance(first, np.ndarray):
                array = np.zeros((n, *first.shape), dtype=first.dtype)
            else:
                array = np.full(n, fill_value=None, dtype=object)
            for i, info in rows:
                array[i] = info[key]
            infos[key], infos[f"_{key}"] = array, mask.copy()
        return infos

    def _thread_pool(self) -> ThreadPoolExecutor | None:
        if self.num_threads <= 1:
            return None
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.num_threads, thread_name_prefix="picksort-physics")
        return self._pool

    def _stacked(self) -> dict[str, np.ndarray]:
        rows = cast(list[dict[str, np.ndarray]], self._obs)  # every env has been reset (step and reset check)
        keys = cast(gym.spaces.Dict, self.single_observation_space).spaces
        return {k: np.stack([o[k] for o in rows]) for k in keys}

    # ------------------------------------------------------------------ the rest of the VectorEnv API
    def get_attr(self, name: str) -> tuple[Any, ...]:
        """``getattr(env, name)`` of every env (the lab refuses what it hides)."""
        return tuple(getattr(env, name) for env in self.envs)

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call method ``name`` of every env (or read the attribute), as ``SyncVectorEnv.call``."""
        out = []
        for env in self.envs:
            attr = getattr(env, name)
            out.append(attr(*args, **kwargs) if callable(attr) else attr)
        return tuple(out)

    def render(self) -> tuple[np.ndarray | None, ...] | None:
        """Every env's ``render()`` (``render_mode="rgb_array"``)."""
        return tuple(env.render() for env in self.envs)

    def close_extras(self, **kwargs: Any) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        for env in self.envs:
            env.close()

    def __repr__(self) -> str:
        return f"PickSortVectorEnv({type(self.envs[0]).__name__}, num_envs={self.num_envs})"


def make_vector_env(env_id: str, num_envs: int, **kwargs: Any) -> PickSortVectorEnv:
    """The native vector env of any registered PickSort id, also one registered without a ``vector_entry_point``
    (a user's own subclass): ``gym.make_vec`` when the id has one, else built from its entry point.

    Raises:
        ValueError: ``num_envs`` < 1 (see :class:`PickSortVectorEnv` for the rest).
        TypeError: the id's entry point is not a PickSort env class given by name.
    """
    check_num_envs(num_envs)
    spec = gym.spec(env_id)
    if spec.vector_entry_point is not None:
        return gym.make_vec(env_id, num_envs=num_envs, **kwargs)  # type: ignore[return-value]
    if not isinstance(spec.entry_point, str):
        raise TypeError(f"{env_id} has no vector entry point and its entry point is not a 'module:Class' string")
    env = PickSortVectorEnv(spec.entry_point, num_envs, **{**spec.kwargs, **kwargs})
    return env


# ---------------------------------------------------------------------- vector entry points of the shipped ids
# registration.py names them by string (``vector_entry_point``): ``gym.make_vec`` calls them with ``num_envs`` and
# the id's kwargs.  One per single-env class, since the entry point is called without the id.
def ungrounded(num_envs: int = 1, **kwargs: Any) -> PickSortVectorEnv:
    """``PickSort-Ungrounded-v0`` (and any id of ``PickSortEnv`` itself)."""
    return PickSortVectorEnv("r2s2r_envs.envs.pick_sort:PickSortEnv", num_envs, **kwargs)


def world_grounded(num_envs: int = 1, **kwargs: Any) -> PickSortVectorEnv:
    """``PickSort-WorldGrounded-v0``."""
    return PickSortVectorEnv("r2s2r_envs.grounding.variants:WorldGroundedEnv", num_envs, **kwargs)


def fully_grounded(num_envs: int = 1, **kwargs: Any) -> PickSortVectorEnv:
    """``PickSort-FullyGrounded-v0``."""
    return PickSortVectorEnv("r2s2r_envs.grounding.variants:FullyGroundedEnv", num_envs, **kwargs)


def behavior_grounded(num_envs: int = 1, **kwargs: Any) -> PickSortVectorEnv:
    """``PickSort-BehaviorGrounded-v0``."""
    return PickSortVectorEnv("r2s2r_envs.behavior.variants:BehaviorGroundedEnv", num_envs, **kwargs)


def lab(num_envs: int = 1, **kwargs: Any) -> PickSortVectorEnv:
    """``PickSort-Real-v0``: N lab envs, each the black box its single env is."""
    return PickSortVectorEnv("r2s2r_envs.lab.lab_env:LabEnv", num_envs, **kwargs)
