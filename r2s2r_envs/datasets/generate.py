"""Generate demonstration datasets by running an env's demonstrator, in parallel, resumably.

Attempt ``i`` of a run with base seed ``S`` resets the env with ``env_seed`` and the demonstrator with
``demonstrator_seed`` from the suite's one seeding convention (:mod:`r2s2r_envs.envs.seeding`, docs/architecture.md,
"Seeding"): ``(env_seed, demonstrator_seed) = SeedSequence(S, spawn_key=(i,)).generate_state(2, uint32)``. An
episode is determined by its seeds, and results are written in attempt order whatever worker finished first, so any
number of workers writes the same file content. With ``successes_only`` failed attempts are skipped (and counted),
the kept demos are the first successful attempts in attempt order.  One attempt's rollout and what is recorded with
it live in :mod:`r2s2r_envs.datasets.rollout`; the workers are :class:`r2s2r_envs.workers.WorkerPool`'s.

The writer flushes after every demo (see :mod:`r2s2r_envs.datasets.writer`): an interrupted run leaves a
valid file with every completed demo, and running the same call again resumes from the next attempt. A run that
ends uninterrupted writes the file's data card (:mod:`r2s2r_envs.datasets.card`; outside the content hash). A run holds
an exclusive lock on ``<out>.lock`` from before it creates anything until it returns, so a second run on the same
file fails at once with a :class:`GenerationError` instead of racing the first (:mod:`r2s2r_envs.datasets.locking`).

A dataset is data, never code: envs are made only from registered Gymnasium ids and demonstrators only from
registered names (:func:`r2s2r_envs.behavior.demonstrator_names`) or a factory passed in Python; nothing read from a
file is imported or called.

Example:
    >>> from r2s2r_envs.datasets.generate import generate  # doctest: +SKIP
    >>> generate("PickSort-Ungrounded-v0", episodes=100, out="ungrounded.hdf5", workers=2, seed=0)  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import gymnasium as gym
import numpy as np

from r2s2r_envs.datasets import schema
from r2s2r_envs.datasets.card import refresh_card
from r2s2r_envs.datasets.env_values import record_by_value
from r2s2r_envs.datasets.locking import check_not_locked, writer_lock
from r2s2r_envs.datasets.reader import open_dataset
from r2s2r_envs.datasets.rollout import (
    DEFAULT_DEMONSTRATOR,
    GYM_MAKE_ARGUMENTS,
    LAB_WITHHELD,
    OBS_MODES,
    DemonstratorSpec,
    GenerationConfig,
    GenerationError,
    as_generation_error,
    build_provenance,
    check_demonstrator,
    check_env_kwargs,
    demonstrator_record,
    lab_record,
    make_config_env,
    make_demonstrator_for,
    rollout,
    run_attempt,
    withhold_inline_labs,
)
from r2s2r_envs.datasets.schema import DatasetError
from r2s2r_envs.datasets.writer import DatasetWriter, Episode
from r2s2r_envs.envs.registration import check_env_id
from r2s2r_envs.envs.seeding import episode_seeds as episode_seeds  # re-exported: the name this module always had
from r2s2r_envs.mappings import check_keys
from r2s2r_envs.workers import WorkerDiedError, WorkerError, WorkerJob, WorkerPool

__all__ = [
    "DEFAULT_DEMONSTRATOR",
    "GYM_MAKE_ARGUMENTS",
    "LAB_WITHHELD",
    "OBS_MODES",
    "DemonstratorSpec",
    "GenerationConfig",
    "GenerationError",
    "GenerationResult",
    "build_provenance",
    "check_demonstrator",
    "check_env_kwargs",
    "demonstrator_record",
    "episode_seeds",
    "generate",
    "lab_record",
    "make_demonstrator_for",
    "rollout",
    "run_attempt",
    "verify_file",
    "withhold_inline_labs",
    "writer_lock",
]


# Attempts in flight per worker (bounds memory held by finished, not yet written episodes).
_IN_FLIGHT_PER_WORKER = 2


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
    with as_generation_error():
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
        env = make_config_env(config)
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
        if not result.interrupted:  # an interrupted run gets its card when it is resumed
            refresh_card(out)
    return result


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
        probe = make_config_env(config, obs_mode=config.obs_mode)
        available = list(cast(gym.spaces.Dict, probe.observation_space).spaces)
        probe.close()
    if config.obs_keys is None:
        return sorted(available)
    where = f"obs_keys (obs_mode {config.obs_mode!r})"
    check_keys(config.obs_keys, sorted(available), what="observation key", where=where, error=ValueError)
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
        check_not_locked(out)
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
        self.env = make_config_env(self.config)
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
