"""Generate demonstration datasets by running an env's demonstrator, in parallel, resumably.

Attempt ``i`` of a run with base seed ``S`` resets the env with ``env_seed`` and the demonstrator with
``demonstrator_seed`` from the suite's one seeding convention (:mod:`r2s2r_envs.envs.seeding`, docs/architecture.md,
"Seeding"): ``(env_seed, demonstrator_seed) = SeedSequence(S, spawn_key=(i,)).generate_state(2, uint32)``. An
episode is determined by its seeds, and results are written in attempt order whatever worker finished first, so any
number of workers writes the same file content. With ``successes_only`` failed attempts are skipped (and counted),
the kept demos are the first successful attempts in attempt order.

The writer flushes after every demo (see :mod:`r2s2r_envs.datasets.writer`): an interrupted run leaves a
valid file with every completed demo, and running the same call again resumes from the next attempt. A run holds
an exclusive lock on ``<out>.lock`` from before it creates anything until it returns, so a second run on the same
file fails at once with a :class:`GenerationError` instead of racing the first.

A dataset is data, never code: envs are made only from registered Gymnasium ids and demonstrators only from
registered names (:func:`r2s2r_envs.behavior.demonstrator_names`) or a factory passed in Python; nothing read from a
file is imported or called.

Example:
    >>> from r2s2r_envs.datasets.generate import generate  # doctest: +SKIP
    >>> generate("PickSort-Ungrounded-v0", episodes=100, out="ungrounded.hdf5", workers=2, seed=0)  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import math
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import gymnasium as gym
import numpy as np

from r2s2r_envs.datasets import schema
from r2s2r_envs.datasets.env_values import FILES_KEY, record_by_value
from r2s2r_envs.datasets.reader import open_dataset
from r2s2r_envs.datasets.schema import DatasetError
from r2s2r_envs.datasets.writer import DatasetWriter, Episode
from r2s2r_envs.envs.registration import EnvArgumentError, UnknownEnvError, check_env_id, make_env
from r2s2r_envs.envs.seeding import SEEDING_CONVENTION
from r2s2r_envs.envs.seeding import episode_seeds as episode_seeds  # re-exported: the name this module always had
from r2s2r_envs.provenance import versions
from r2s2r_envs.workers import WorkerDiedError, WorkerError, WorkerJob, WorkerPool
from r2s2r_envs.world.constants import HAND_JOINTS

if TYPE_CHECKING:
    from r2s2r_envs.datasets.replay import SimulatedEnv

#: The demonstrator used unless another is named: ``None``, the env's own (``env.unwrapped.demonstrator``).
DEFAULT_DEMONSTRATOR: str | None = None
OBS_MODES: tuple[str, ...] = ("state", "rgb", "state+rgb")
#: ``gymnasium.make`` arguments that are not env arguments. ``max_episode_steps`` would add Gymnasium's outer
#: TimeLimit, which cuts episodes without giving pending objects an outcome; the env's ``episode_steps`` is the
#: one time limit.
GYM_MAKE_ARGUMENTS: tuple[str, ...] = ("max_episode_steps", "disable_env_checker")

#: A demonstrator: a registered name, ``None`` (the env's own), or a factory ``f(env) -> demonstrator``.
DemonstratorSpec = str | None | Callable[[gym.Env], Any]

# An env without a time limit must still end; past this many steps the rollout is abandoned.
_MAX_STEPS_WITHOUT_LIMIT = 100_000
# Second entropy word of the action-noise generator (its seed is [demonstrator seed, this]).
_NOISE_STREAM = 0xDA27
# Attempts in flight per worker (bounds memory held by finished, not yet written episodes).
_IN_FLIGHT_PER_WORKER = 2


class GenerationError(RuntimeError):
    """Generation could not proceed (a worker failed, settings conflict with an existing file, ...)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class GenerationConfig:
    """Everything that determines a dataset's content (stored in the file as ``generation``).

    Attributes:
        env_id: a registered Gymnasium id.
        env_kwargs: keyword arguments of the env (JSON-able), including ``episode_steps`` when overridden.
        obs_mode: observation mode the dataset stores: ``"state"``, ``"rgb"`` or ``"state+rgb"``.
        obs_keys: store only these observation keys (default: all keys of ``obs_mode``).
        seed: base seed.
        successes_only: keep only successful episodes.
        demonstrator: a registered demonstrator name, ``None`` for the env's own, or a factory ``f(env)``.
        valid_fraction: share of demos in the ``valid`` filter key.
        action_noise: standard deviation of the Gaussian noise added to the arm part of every demonstrator
            action before it is executed, in normalized action units (0: none).  Noise injection in the manner of
            DART: the demonstrator corrects the disturbance it meets, so the data covers the states a learned
            policy drifts into and shows how to recover from them.  The executed (noisy) action is recorded as
            ``actions`` and the demonstrator's own, clean one as ``action_labels`` (the label to learn).
        env_kwarg_files: for each env argument given as a file path and recorded by value (its JSON object is in
            ``env_kwargs``), the file's name and the SHA-256 of its bytes (``datasets.env_values``).
    """

    env_id: str
    env_kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    obs_mode: str = "state"
    obs_keys: tuple[str, ...] | None = None
    seed: int = 0
    successes_only: bool = False
    demonstrator: DemonstratorSpec = DEFAULT_DEMONSTRATOR
    valid_fraction: float = 0.1
    action_noise: float = 0.0
    env_kwarg_files: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict)

    @property
    def env_name(self) -> str:
        """The env id."""
        return self.env_id

    @property
    def env_obs_mode(self) -> str:
        """The mode the env runs in: demonstrators need the state keys, so image-only datasets run ``state+rgb``."""
        return self.obs_mode if "state" in self.obs_mode else f"state+{self.obs_mode}"

    def to_json_dict(self) -> dict[str, Any]:
        """JSON-able form, compared when a run resumes."""
        return {
            "env_id": self.env_id,
            "env_kwargs": dict(self.env_kwargs),
            "obs_mode": self.obs_mode,
            "obs_keys": None if self.obs_keys is None else list(self.obs_keys),
            "seed": int(self.seed),
            "successes_only": bool(self.successes_only),
            "demonstrator": demonstrator_record(self.demonstrator),
            "valid_fraction": float(self.valid_fraction),
            "seeding": SEEDING_CONVENTION,
            # Only when used, so files made without noise keep their content (and hash).
            **({"action_noise": float(self.action_noise)} if self.action_noise else {}),
            # Likewise only when a file was recorded by value.
            **({FILES_KEY: {k: dict(v) for k, v in self.env_kwarg_files.items()}} if self.env_kwarg_files else {}),
        }


@dataclasses.dataclass(frozen=True, kw_only=True)
class GenerationResult:
    """What a :func:`generate` call did.

    Attributes:
        path: the dataset file.
        num_demos: demos in the file now.
        attempts: attempts recorded in the file (including discarded failures).
        successes: successful demos in the file.
        new_demos: demos written by this call.
        resumed: whether the call continued an existing file.
        complete: whether the file holds the requested number of demos.
        interrupted: whether the call stopped early on SIGINT/SIGTERM.
        content_hash: the file's content hash.
        elapsed_s: wall time of this call, seconds.
    """

    path: Path
    num_demos: int
    attempts: int
    successes: int
    new_demos: int
    resumed: bool
    complete: bool
    interrupted: bool
    content_hash: str
    elapsed_s: float

    @property
    def demos_per_minute(self) -> float:
        """Throughput of this call."""
        return 60.0 * self.new_demos / self.elapsed_s if self.elapsed_s > 0 else float("nan")


def demonstrator_record(demonstrator: DemonstratorSpec) -> str | dict[str, str] | None:
    """How a demonstrator choice is recorded in the generation settings (a description, never imported).

    A registered name or ``None`` as is; a factory as ``{"callable": "<module>.<qualified name>"}``.
    """
    if demonstrator is None or isinstance(demonstrator, str):
        return demonstrator
    module = getattr(demonstrator, "__module__", None) or "?"
    name = getattr(demonstrator, "__qualname__", None) or type(demonstrator).__qualname__
    return {"callable": f"{module}.{name}"}


def check_demonstrator(demonstrator: DemonstratorSpec) -> None:
    """Checks a demonstrator choice before anything runs.

    Raises:
        ValueError: a string that is not a registered demonstrator name (the message lists them).
        TypeError: neither a name, ``None`` nor a callable.
    """
    if demonstrator is None or callable(demonstrator):
        return
    if not isinstance(demonstrator, str):
        raise TypeError(
            f"demonstrator must be a registered name, None (the env's own) or a callable f(env), got {demonstrator!r}"
        )
    from r2s2r_envs.envs.demonstrators import demonstrator_names

    names = demonstrator_names()
    if demonstrator in names:
        return
    hint = ""
    if ":" in demonstrator:
        hint = (
            " Demonstrators are named, not imported: 'module:function' is not accepted. Register yours with "
            "r2s2r_envs.behavior.register_demonstrator(name, factory), or pass the factory itself in Python."
        )
    raise ValueError(f"unknown demonstrator {demonstrator!r}; registered names: {names}.{hint}")


def make_demonstrator_for(env: gym.Env, demonstrator: DemonstratorSpec) -> Any:
    """Builds the demonstrator for ``env``: a registered name, ``None`` (the env's own) or a factory ``f(env)``.

    Raises:
        GenerationError: the env names no registered demonstrator of its own.
    """
    check_demonstrator(demonstrator)
    if callable(demonstrator):
        return demonstrator(env)
    from r2s2r_envs.envs.demonstrators import demonstrator_names, make_demonstrator

    if demonstrator is None:
        own = getattr(env.unwrapped, "demonstrator", None)
        if own not in demonstrator_names():
            raise GenerationError(
                f"env {_env_id_of(env)!r} names no registered demonstrator of its own (env.unwrapped.demonstrator "
                f"is {own!r}); pass demonstrator=<one of {demonstrator_names()}> or a factory f(env)"
            )
    return make_demonstrator(env, demonstrator)


@contextlib.contextmanager
def _as_generation_error() -> Iterator[None]:
    """The registry's refusals (``r2s2r_envs.envs.check_env_id`` / ``make_env``) as a :class:`GenerationError`."""
    try:
        yield
    except (UnknownEnvError, EnvArgumentError) as exc:
        raise GenerationError(str(exc)) from exc


def check_env_kwargs(env_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Checks that ``env_kwargs`` holds env arguments only, JSON-able; returns a copy.

    Raises:
        ValueError: a ``gymnasium.make`` argument (e.g. ``max_episode_steps``: use ``episode_steps``) or a value
            JSON cannot hold.
    """
    kwargs = dict(env_kwargs)
    wrong = sorted(k for k in kwargs if k in GYM_MAKE_ARGUMENTS)
    if wrong:
        raise ValueError(
            f"env_kwargs {wrong} are gymnasium.make arguments, not env arguments; the env's own episode_steps is the "
            "one time limit (pass episode_steps=N, or --episode-steps N)"
        )
    try:
        schema.to_json(kwargs)
    except TypeError as exc:
        raise ValueError(f"env_kwargs must be JSON-able (they are stored in the file): {exc}") from None
    return kwargs


def _make_env(config: GenerationConfig, *, obs_mode: str | None = None, render_mode: str | None = None) -> gym.Env:
    """Makes the env of a generation config (in ``config.env_obs_mode`` unless ``obs_mode`` is given).

    Raises:
        GenerationError: the id is not registered or the env cannot be made with these arguments.
    """
    kwargs = dict(config.env_kwargs)
    kwargs["obs_mode"] = obs_mode or config.env_obs_mode
    if render_mode is not None:
        kwargs["render_mode"] = render_mode
    with _as_generation_error():
        return make_env(config.env_id, kwargs, picksort_only=False)


def rollout(
    env: gym.Env,
    demonstrator: Any,
    *,
    env_seed: int,
    demonstrator_seed: int,
    obs_keys: Sequence[str],
    attempt: int = 0,
    action_noise: float = 0.0,
) -> Episode:
    """Runs one episode of ``demonstrator`` in ``env`` and records it.

    The simulator state before every step is recorded for simulated envs only: a lab env (``env.unwrapped.domain
    == "real"``) is a black box whose state is never read (docs/concepts.md, "Honesty rules").

    A demonstrator with an ``executed_action()`` method only labels: ``act(obs)`` returns the label and
    ``executed_action()`` then the action executed in that state (DAgger: the learner's; docs/baselines.md#dagger).

    Args:
        env: the env (its observations must include the state keys the demonstrator reads).
        demonstrator: object with ``reset(seed)`` and ``act(obs) -> action``.
        env_seed: seed for ``env.reset``.
        demonstrator_seed: seed for ``demonstrator.reset``.
        obs_keys: observation keys to record.
        attempt: attempt index, stored with the episode.
        action_noise: standard deviation of the noise added to the arm part of each action before it is executed
            (``GenerationConfig.action_noise``); drawn from a generator seeded by ``demonstrator_seed``, so an
            attempt is reproducible.  The executed action is recorded as ``actions``, the demonstrator's own (before
            the noise) as ``action_labels``.

    Returns:
        The recorded episode.
    """
    unwrapped = cast("SimulatedEnv", env.unwrapped)  # get_state() is read for simulated envs only
    record_states = str(getattr(unwrapped, "domain", "sim")) != "real"
    obs, info = env.reset(seed=env_seed)
    demonstrator.reset(seed=demonstrator_seed)
    observations: dict[str, list[np.ndarray]] = {k: [np.array(obs[k], copy=True)] for k in obs_keys}
    actions: list[np.ndarray] = []
    labels: list[np.ndarray] = []
    rewards: list[float] = []
    states: list[np.ndarray] = []
    success_any = False
    unstable = False
    terminated = truncated = False
    steps = 0
    # The envs act in a Box (_ActionNoise clips to its bounds).
    perturb = (
        _ActionNoise(cast(gym.spaces.Box, env.action_space), action_noise, demonstrator_seed)
        if action_noise > 0
        else None
    )
    # The optional ``executed(action)`` hook (r2s2r_envs.envs.demonstrators): a demonstrator that integrates its own
    # commands is told what was executed when it differs from what it returned. The shipped ones are closed loop
    # (they read the measured hand) and have none.
    executed = getattr(demonstrator, "executed", None) if perturb is not None else None
    if not callable(executed):
        executed = None
    # A labelling demonstrator (DAgger's expert with a learner at the wheel) labels the state with ``act`` and says
    # what is executed instead with ``executed_action()``.
    driver = getattr(demonstrator, "executed_action", None)
    if not callable(driver):
        driver = None
    while not (terminated or truncated):
        if record_states:
            states.append(np.array(unwrapped.get_state(), dtype=np.float64, copy=True))
        action = np.asarray(demonstrator.act(obs), dtype=np.float32)
        # The demonstrator's own action, before noise injection: the label for the state it saw (DART).
        labels.append(np.array(action, copy=True))
        if driver is not None:
            action = np.asarray(driver(), dtype=np.float32)
        if perturb is not None:
            action = perturb(action)
            if executed is not None:
                executed(action)
        obs, reward, terminated, truncated, info = env.step(action)
        actions.append(action)
        rewards.append(float(reward))
        for k in obs_keys:
            observations[k].append(np.array(obs[k], copy=True))
        success_any |= bool(info.get("is_success", False))
        unstable |= bool(info.get("unstable", False))
        steps += 1
        if steps >= _MAX_STEPS_WITHOUT_LIMIT:
            raise GenerationError(f"episode did not end after {steps} steps; give the env a time limit (episode_steps)")
    return Episode(
        observations={k: np.stack(v) for k, v in observations.items()},
        actions=np.stack(actions),
        action_labels=np.stack(labels),
        rewards=np.asarray(rewards, dtype=np.float32),
        states=np.stack(states) if record_states else None,
        terminated=bool(terminated),
        truncated=bool(truncated),
        seed=env_seed,
        demonstrator_seed=demonstrator_seed,
        attempt=attempt,
        success=bool(info.get("is_success", False)),
        success_any_step=success_any,
        failure_cause=info.get("failure_cause"),
        time_to_sort=info.get("time_to_sort"),
        unstable=unstable,
        object_outcomes=[str(o) for o in info.get("object_outcomes", [])],
    )


def run_attempt(
    env: gym.Env, demonstrator: Any, config: GenerationConfig, obs_keys: Sequence[str], attempt: int
) -> Episode:
    """Attempt ``attempt`` of a generation run: :func:`rollout` with the attempt's seeds
    (``episode_seeds(config.seed, attempt)``) and the run's ``action_noise``."""
    env_seed, demo_seed = episode_seeds(config.seed, attempt)
    return rollout(
        env,
        demonstrator,
        env_seed=env_seed,
        demonstrator_seed=demo_seed,
        obs_keys=obs_keys,
        attempt=attempt,
        action_noise=config.action_noise,
    )


class _ActionNoise:
    """Adds Gaussian noise to the arm part of an action (everything before the 16 finger targets) and clips the
    result to the action space (``GenerationConfig.action_noise``)."""

    def __init__(self, space: gym.spaces.Box, sigma: float, seed: int) -> None:
        self.low = np.asarray(space.low, dtype=np.float32)
        self.high = np.asarray(space.high, dtype=np.float32)
        self.arm = int(np.prod(space.shape)) - len(HAND_JOINTS)
        self.sigma = float(sigma)
        # Its own stream, derived from the demonstrator's seed: the demonstrator's own draws are unchanged.
        self.rng = np.random.default_rng([int(seed), _NOISE_STREAM])

    def __call__(self, action: np.ndarray) -> np.ndarray:
        noisy = action.copy()
        noisy[: self.arm] += self.rng.normal(0.0, self.sigma, self.arm).astype(np.float32)
        return np.clip(noisy, self.low, self.high)


LAB_WITHHELD = "withheld: an inline lab config holds the lab's hidden parameters"


def withhold_inline_labs(record: Any) -> Any:
    """Copy of a JSON-able record in which every inline lab config (a mapping under a ``"lab"`` key) is replaced
    by a note.

    A lab made with ``lab={...}`` carries its physics in its constructor arguments, which would otherwise reach the
    dataset through the env spec, ``env_args`` and the generation settings; grounding code reads datasets and must
    see the lab only as a black box.  Shipped lab names and file paths are kept: they name a lab, they are not it.
    """
    if isinstance(record, Mapping):
        return {
            k: LAB_WITHHELD if k == "lab" and isinstance(v, Mapping) else withhold_inline_labs(v)
            for k, v in record.items()
        }
    if isinstance(record, (list, tuple)):
        return [withhold_inline_labs(v) for v in record]
    return record


def lab_record(world: Mapping[str, Any], env_id: str) -> dict[str, Any]:
    """What a lab dataset says about its lab: its name and config hash, nothing else (docs/concepts.md).

    Args:
        world: the lab env's ``provenance()``; its ``"lab"`` is the lab's name (str) or
            ``{"name": str, "config_sha256": str}``. Every other field is dropped.
        env_id: the env, for error messages.

    Raises:
        GenerationError: the record names no lab.
    """
    lab = world.get("lab")
    if isinstance(lab, str):
        name, config_hash = lab, None
    elif isinstance(lab, Mapping) and isinstance(lab.get("name"), str):
        name, config_hash = lab["name"], lab.get("config_sha256")
        if config_hash is not None and not isinstance(config_hash, str):
            raise GenerationError(f"env {env_id!r}: provenance()['lab']['config_sha256'] must be a str or None")
    else:
        raise GenerationError(
            f"env {env_id!r} reports domain 'real' but its provenance() names no lab: expected 'lab' to be a name "
            f"or {{'name': str, 'config_sha256': str}}, got {lab!r}"
        )
    return {"domain": "real", "lab": {"name": name, "config_sha256": config_hash}}


def build_provenance(
    env: gym.Env, demonstrator: Any, config: GenerationConfig, obs_keys: Sequence[str]
) -> dict[str, Any]:
    """The provenance record of a dataset made by ``demonstrator`` in ``env``.

    For the lab (domain ``"real"``) the world record is the lab's name and config hash only, inline lab configs in
    the env spec are withheld, and the operator's settings are withheld: grounding code reads datasets and must see
    the lab only as a black box (docs/concepts.md, "Honesty rules"). The recorded env spec is a description; it is
    never used to make an env.
    """
    unwrapped = env.unwrapped
    domain = str(getattr(unwrapped, "domain", "sim"))
    if domain not in schema.DOMAINS:
        raise GenerationError(f"env reports domain {domain!r}; expected one of {schema.DOMAINS}")
    spec = env.spec
    try:
        spec_json: Any = json.loads(spec.to_json()) if spec is not None else None
    except (ValueError, TypeError) as exc:  # kwargs that JSON cannot hold
        spec_json = {"id": spec.id if spec else config.env_name, "unserializable": str(exc)}
    if config.env_kwarg_files and isinstance(spec_json, dict) and isinstance(spec_json.get("kwargs"), dict):
        # A file read by value is in generation's env_kwargs (and env_args); the spec names it instead of a third copy.
        spec_json["kwargs"] = {
            k: {"recorded_by_value": dict(config.env_kwarg_files[k])} if k in config.env_kwarg_files else v
            for k, v in spec_json["kwargs"].items()
        }
    world = unwrapped.provenance() if hasattr(unwrapped, "provenance") else {}
    demo_record: dict[str, Any] = {"name": str(getattr(demonstrator, "name", type(demonstrator).__name__))}
    if domain == "real":
        world = lab_record(world, config.env_name)
        spec_json = withhold_inline_labs(spec_json)
        demo_record["settings"] = None
        demo_record["settings_withheld"] = "the lab's operator is a black box to grounding code"
    else:
        demo_record["settings"] = getattr(demonstrator, "settings", {})

    return {
        "schema_version": schema.SCHEMA_VERSION,
        "env_id": spec.id if spec is not None else config.env_name,
        "env_version": spec.version if spec is not None else None,
        "env_spec": spec_json,
        "domain": domain,
        "world": world,
        "demonstrator": demo_record,
        "obs_mode": config.obs_mode,
        "obs_keys": list(obs_keys),
        "seed": int(config.seed),
        "seeding": SEEDING_CONVENTION,
        "successes_only": bool(config.successes_only),
        "versions": versions("r2s2r_envs", "mujoco", "gymnasium", "numpy", "h5py", "python"),
    }


def generate(
    env_id: str,
    episodes: int,
    out: str | os.PathLike[str],
    *,
    workers: int = 1,
    seed: int = 0,
    successes_only: bool = False,
    obs_mode: str = "state",
    obs_keys: Sequence[str] | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    demonstrator: DemonstratorSpec = DEFAULT_DEMONSTRATOR,
    episode_steps: int | None = None,
    max_episode_steps: int | None = None,
    max_attempts: int | None = None,
    valid_fraction: float = 0.1,
    action_noise: float = 0.0,
    overwrite: bool = False,
    progress: bool = True,
    handle_signals: bool = True,
) -> GenerationResult:
    """Generates (or resumes generating) a dataset of demonstrations.

    Args:
        env_id: a registered env id (e.g. ``"PickSort-Ungrounded-v0"``).
        episodes: number of demos the file should hold.
        out: the HDF5 file. If it exists and was made with the same settings, generation resumes.
        workers: processes running episodes in parallel (the file content does not depend on it).
        seed: base seed (see the module docstring for per-attempt seeds).
        successes_only: keep only successful episodes; the attempts are recorded.
        obs_mode: ``"state"``, ``"rgb"`` or ``"state+rgb"``: which observations the file stores.
        obs_keys: store only these observation keys.
        env_kwargs: env arguments (e.g. ``{"num_objects": 1}``), JSON-able. One that names a file the env reads
            (``grounding="my.json"``, ``behavior=``, ``world=``) is recorded by value: the file's JSON object,
            checked as the env checks it, with the file's name and SHA-256 in the generation record; the env runs
            that object (docs/datasets.md#env-arguments).
        demonstrator: a registered demonstrator name (:func:`r2s2r_envs.behavior.demonstrator_names`), ``None``
            for the env's own, or a factory ``f(env) -> demonstrator`` (recorded by its qualified name; with
            ``workers > 1`` it must be picklable, e.g. a module-level function).
        episode_steps: the env's time limit in steps (its ``episode_steps`` argument; pending objects then time
            out). Default: the env's own.
        max_episode_steps: the same as ``episode_steps`` (the older name); give one of them.
        max_attempts: give up after this many attempts (default ``20 * episodes``).
        valid_fraction: share of demos under ``mask/valid``.
        overwrite: start over even if ``out`` exists.
        progress: show a progress bar.
        handle_signals: on SIGINT/SIGTERM finish the current write and return with ``interrupted=True``
            (only when called from the main thread).

    Returns:
        What was done; ``complete`` is false if interrupted or ``max_attempts`` was reached.

    Note:
        Workers are spawned processes (MuJoCo's GL state does not survive ``fork``), which import the
        calling script's main module: call ``generate(..., workers=2)`` from a script under
        ``if __name__ == "__main__":``.

    Raises:
        GenerationError: another process is writing ``out``, settings differ from the existing file's, a worker
            failed, or the env is not registered or unusable.
        DatasetError: ``out`` exists but is not a usable dataset (pass ``overwrite=True`` to replace it).
        ValueError: invalid arguments.
    """
    start = time.perf_counter()
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if int(seed) < 0:
        raise ValueError(f"seed must be >= 0 (a SeedSequence entropy), got {seed}")
    if obs_mode not in OBS_MODES:
        raise ValueError(f"unknown obs_mode {obs_mode!r}; choose one of {OBS_MODES}")
    if not (isinstance(action_noise, (int, float)) and math.isfinite(action_noise) and 0.0 <= action_noise <= 1.0):
        raise ValueError(
            f"action_noise must be a number in [0, 1] (standard deviation in normalized action units), got "
            f"{action_noise!r}"
        )
    with _as_generation_error():
        check_env_id(env_id, picksort_only=False)  # datasets can come from a user's own registered env
    check_demonstrator(demonstrator)
    # A file named by an argument is recorded (and run) by value: a dataset's arguments never hold a path.
    try:
        by_value, files = record_by_value(env_id, env_kwargs or {})
    except (OSError, KeyError, TypeError, ValueError) as exc:  # the env's loader refuses the file
        raise GenerationError(f"cannot make env {env_id!r} with {sorted(env_kwargs or {})}: {exc}") from exc
    kwargs = check_env_kwargs(by_value)
    steps = _episode_steps(episode_steps, max_episode_steps, kwargs)
    if steps is not None:
        kwargs["episode_steps"] = steps
    config = GenerationConfig(
        env_id=env_id,
        env_kwargs=kwargs,
        obs_mode=obs_mode,
        obs_keys=None if obs_keys is None else tuple(obs_keys),
        seed=int(seed),
        successes_only=successes_only,
        demonstrator=demonstrator,
        valid_fraction=valid_fraction,
        action_noise=float(action_noise),
        env_kwarg_files=files,
    )
    max_attempts = 20 * episodes if max_attempts is None else int(max_attempts)
    out = Path(out)

    with writer_lock(out):
        env = _make_env(config)
        try:
            demo = make_demonstrator_for(env, config.demonstrator)
            stored_keys = _stored_obs_keys(config, env)
            provenance = build_provenance(env, demo, config, stored_keys)
            writer, resumed = _open_writer(out, config, provenance, episodes, overwrite, _time_limit(env))
            demos_before = writer.num_demos
            try:
                interrupted = _run(
                    writer, config, episodes, stored_keys, workers, max_attempts, env, demo, progress, handle_signals
                )
                result = GenerationResult(
                    path=out,
                    num_demos=writer.num_demos,
                    attempts=writer.attempts,
                    successes=writer.successes,
                    new_demos=writer.num_demos - demos_before,
                    resumed=resumed,
                    complete=writer.num_demos >= episodes,
                    interrupted=interrupted,
                    content_hash=writer.content_hash,
                    elapsed_s=time.perf_counter() - start,
                )
            finally:
                writer.close()
        finally:
            env.close()
    return result


@contextlib.contextmanager
def writer_lock(out: Path) -> Iterator[Path]:
    """Holds the exclusive lock of dataset file ``out`` (``<out>.lock``) for the duration of a generation run.

    The lock is taken before anything is created, atomically (``flock`` on a file opened with ``O_CREAT``), so of
    two runs started together on one file exactly one proceeds. The kernel releases it if the process dies, so a
    lock file left by a killed run is never stale. The lock file is removed on release.

    Raises:
        GenerationError: another process holds the lock.
    """
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    lock = out.with_name(out.name + ".lock")
    try:
        import fcntl
    except ImportError:  # not POSIX: an exclusive create, removed on release (a crash leaves it to delete by hand)
        yield from _exclusive_create_lock(out, lock)
        return
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise GenerationError(_locked_message(out, lock)) from None
            raise
        # The holder before us removes the lock file as it releases: if the name now points elsewhere (or nowhere),
        # we locked a file nobody else will look at, so start over with the current one.
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(lock))
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield lock
    finally:
        try:
            os.unlink(lock)  # before unlocking, so no one locks a name that is about to vanish
        except FileNotFoundError:
            pass
        os.close(fd)


def _exclusive_create_lock(out: Path, lock: Path) -> Iterator[Path]:
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        raise GenerationError(
            _locked_message(out, lock) + f"; if no run is active (a crashed one), delete {lock}"
        ) from None
    try:
        os.write(fd, f"{os.getpid()}\n".encode())
        yield lock
    finally:
        os.close(fd)
        try:
            os.unlink(lock)
        except FileNotFoundError:
            pass


def _locked_message(out: Path, lock: Path) -> str:
    return (
        f"another process is writing {out} (it holds the lock {lock.name}); wait for that generation to finish or "
        "stop it, then run again to resume"
    )


# -- internals -------------------------------------------------------------------------------------


def _env_id_of(env: gym.Env) -> str:
    return env.spec.id if env.spec is not None else type(env.unwrapped).__name__


def _episode_steps(
    episode_steps: int | None, max_episode_steps: int | None, env_kwargs: Mapping[str, Any]
) -> int | None:
    """The time-limit override from ``episode_steps``/``max_episode_steps`` (aliases), checked against env_kwargs."""
    given = {
        k: v for k, v in (("episode_steps", episode_steps), ("max_episode_steps", max_episode_steps)) if v is not None
    }
    if len(set(given.values())) > 1:
        raise ValueError(f"episode_steps and max_episode_steps are the same setting; got {given}")
    if not given:
        return None
    steps = next(iter(given.values()))
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
        raise ValueError(f"episode_steps must be a positive integer, got {steps!r}")
    if "episode_steps" in env_kwargs and env_kwargs["episode_steps"] != steps:
        raise ValueError(
            f"env_kwargs['episode_steps'] = {env_kwargs['episode_steps']!r} contradicts episode_steps={steps}"
        )
    return int(steps)


def _time_limit(env: gym.Env) -> int | None:
    """The env's own time limit (``episode_steps``), if it has one."""
    steps = getattr(env.unwrapped, "episode_steps", None)
    return int(steps) if isinstance(steps, (int, np.integer)) and not isinstance(steps, bool) else None


def _stored_obs_keys(config: GenerationConfig, env: gym.Env) -> list[str]:
    """Observation keys the file stores: those of ``obs_mode`` (optionally a subset)."""
    if config.obs_mode == config.env_obs_mode:
        available = list(cast(gym.spaces.Dict, env.observation_space).spaces)
    else:
        probe = _make_env(config, obs_mode=config.obs_mode)
        available = list(cast(gym.spaces.Dict, probe.observation_space).spaces)
        probe.close()
    if config.obs_keys is None:
        return sorted(available)
    unknown = [k for k in config.obs_keys if k not in available]
    if unknown:
        raise ValueError(
            f"obs_keys {unknown} are not observations of obs_mode {config.obs_mode!r}; it has {sorted(available)}"
        )
    return sorted(config.obs_keys)


def _open_writer(
    out: Path,
    config: GenerationConfig,
    provenance: Mapping[str, Any],
    episodes: int,
    overwrite: bool,
    episode_steps: int | None,
) -> tuple[DatasetWriter, bool]:
    """Creates the file or opens it to resume; returns the writer and whether it resumed."""
    generation = config.to_json_dict()
    # robomimic makes the env with gym.make(env_name, **env_kwargs): the time limit the demos ran under goes with
    # them, so a robomimic rollout has the same horizon even if the env's default changes.
    env_kwargs = {**dict(config.env_kwargs), "obs_mode": config.env_obs_mode}
    if episode_steps is not None:
        env_kwargs.setdefault("episode_steps", episode_steps)
    env_args = {"env_name": config.env_name, "type": schema.ROBOMIMIC_GYM_ENV_TYPE, "env_kwargs": env_kwargs}
    if provenance.get("domain") == "real":
        generation = withhold_inline_labs(generation)
        env_args = withhold_inline_labs(env_args)
    if out.exists():
        _check_not_locked(out)
    stale = out.with_name(out.name + ".creating")
    if stale.exists():
        stale.unlink()
    if overwrite or not out.exists():
        writer = DatasetWriter.create(
            out,
            provenance=provenance,
            env_args=env_args,
            generation=generation,
            episodes_requested=episodes,
            valid_fraction=config.valid_fraction,
            overwrite=overwrite,
        )
        return writer, False
    try:
        writer = DatasetWriter.resume(out)
    except DatasetError as exc:
        raise DatasetError(f"cannot resume into {out}: {exc}. Pass overwrite=True (--overwrite) to start over") from exc
    # Compared as data, never imported or called: a stored demonstrator or env spec is only a description.
    differences = _differences(writer.generation, json.loads(schema.to_json(generation)), ignore=()) + _differences(
        writer.provenance, json.loads(schema.to_json(dict(provenance))), ignore=()
    )
    if differences:
        writer.close()
        raise GenerationError(
            f"{out} was generated with different settings ({'; '.join(differences)}); resuming would mix data. "
            "Use another output path or overwrite=True (--overwrite)"
        )
    if writer.num_demos < episodes:
        writer.set_episodes_requested(episodes)
    return writer, True


def _check_not_locked(path: Path) -> None:
    """Refuses a file another program has open for writing: resuming would fail and overwriting would lose its data."""
    import h5py

    try:
        h5py.File(path, "r").close()
    except BlockingIOError:
        raise GenerationError(
            f"{path} is being written by another process (HDF5 lock held); wait for that generation to finish "
            "or stop it, then run again to resume"
        ) from None
    except OSError:
        pass  # damaged or not HDF5: reported by the resume path (or replaced with overwrite)


def _differences(old: Mapping[str, Any], new: Mapping[str, Any], ignore: Sequence[str]) -> list[str]:
    out = []
    for key in sorted(set(old) | set(new)):
        if key in ignore:
            continue
        if old.get(key) != new.get(key):
            out.append(f"{key}: file has {_short(old.get(key))}, now {_short(new.get(key))}")
    return out


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


class _StopFlag:
    """Set by SIGINT/SIGTERM: the loop finishes the episode in progress, writes it and returns.

    A second signal aborts the episode in progress (KeyboardInterrupt), except while a demo is being
    written (``critical``), so a write is never cut in half.
    """

    def __init__(self) -> None:
        self.stop = False
        self.critical = False
        self._hits = 0
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _handle(self, signum: int, frame: Any) -> None:
        self.stop = True
        self._hits += 1
        if self._hits >= 2 and not self.critical:
            raise KeyboardInterrupt


def _run(
    writer: DatasetWriter,
    config: GenerationConfig,
    episodes: int,
    obs_keys: list[str],
    workers: int,
    max_attempts: int,
    env: gym.Env,
    demo: Any,
    progress: bool,
    handle_signals: bool,
) -> bool:
    """Runs attempts until ``episodes`` demos are stored; returns whether it was interrupted."""
    from tqdm.auto import tqdm

    if writer.num_demos >= episodes:
        return False
    flag = _StopFlag()
    if handle_signals:
        flag.install()
    bar = tqdm(
        total=episodes,
        initial=writer.num_demos,
        unit="demo",
        disable=not progress,
        desc=f"generate {config.env_name}",
        dynamic_ncols=True,
    )
    _update_bar(bar, writer)

    def record(episode: Episode) -> None:
        attempt = int(episode.attempt if episode.attempt is not None else writer.attempts)
        flag.critical = True
        try:
            stored = not (config.successes_only and not episode.success)
            if stored:
                writer.append(episode, attempts=attempt + 1)
            else:
                writer.set_attempts(attempt + 1)
        finally:
            flag.critical = False
        _update_bar(bar, writer)
        if stored:
            bar.update(1)
        else:
            bar.refresh()

    def done() -> bool:
        return writer.num_demos >= episodes or writer.attempts >= max_attempts

    try:
        if workers == 1:
            while not done() and not flag.stop:
                record(run_attempt(env, demo, config, obs_keys, writer.attempts))
        else:
            _run_parallel(writer, config, episodes, obs_keys, workers, max_attempts, record, done, flag)
    finally:
        bar.close()
        flag.restore()
    if not flag.stop and writer.num_demos < episodes:
        raise GenerationError(
            f"stopped after {writer.attempts} attempts (max_attempts) with {writer.num_demos} of {episodes} demos: "
            f"the demonstrator succeeds too rarely ({writer.successes}/{writer.attempts}); the file keeps them"
        )
    return flag.stop


def _update_bar(bar: Any, writer: DatasetWriter) -> None:
    attempts = writer.attempts
    rate = writer.successes / attempts if attempts else float("nan")
    bar.set_postfix(success=f"{rate:.0%}" if attempts else "-", attempts=attempts, refresh=False)


def _run_parallel(
    writer: DatasetWriter,
    config: GenerationConfig,
    episodes: int,
    obs_keys: list[str],
    workers: int,
    max_attempts: int,
    record: Callable[[Episode], None],
    done: Callable[[], bool],
    flag: _StopFlag,
) -> None:
    """Farms attempts out to worker processes and records the results in attempt order."""
    next_attempt = writer.attempts
    next_to_submit = next_attempt
    # Without successes_only every attempt yields a demo: never run more attempts than demos needed.
    last_needed = next_attempt + (episodes - writer.num_demos) if not config.successes_only else max_attempts
    pending: dict[int, Episode] = {}
    window = _IN_FLIGHT_PER_WORKER * workers
    job = _AttemptJob(config, obs_keys)
    # Every result needed is written when the pool closes; attempts still in flight are surplus (successes_only) or
    # abandoned (stop, error).
    with WorkerPool(job, workers, call="generate()", done=lambda: writer.num_demos, env_ids=[config.env_id]) as pool:
        while not done() and not flag.stop:
            while next_to_submit < min(next_attempt + window, last_needed, max_attempts):
                pool.submit(next_to_submit, next_to_submit)
                next_to_submit += 1
            try:
                item = pool.get(timeout=0.5)
            except WorkerError as e:
                attempt = -1 if e.key is None else e.key
                raise GenerationError(f"attempt {attempt} failed in a worker:\n{e.remote_traceback}") from None
            except WorkerDiedError as e:
                if flag.stop:
                    break
                raise GenerationError(f"{e}; the file keeps every demo written, the same call resumes") from None
            if item is None:
                continue
            attempt, episode = item
            pending[attempt] = episode
            while next_attempt in pending and not done():
                record(pending.pop(next_attempt))
                next_attempt += 1


@dataclasses.dataclass
class _AttemptJob(WorkerJob):
    """A generation worker: builds the env and demonstrator once, then runs the attempts it is given."""

    config: GenerationConfig
    obs_keys: list[str]
    env: gym.Env | None = None
    demo: Any = None

    def start(self) -> None:
        self.env = _make_env(self.config)
        self.demo = make_demonstrator_for(self.env, self.config.demonstrator)

    def run(self, task: Any) -> Episode:
        return run_attempt(cast(gym.Env, self.env), self.demo, self.config, self.obs_keys, int(task))

    def close(self) -> None:
        if self.env is not None:
            self.env.close()


def verify_file(path: str | os.PathLike[str]) -> str:
    """Fully verifies a dataset file and returns its content hash."""
    with open_dataset(path, verify="full") as f:
        return f.content_hash
