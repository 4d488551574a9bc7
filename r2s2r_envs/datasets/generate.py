"""Generate demonstration datasets by running an env's demonstrator, in parallel, resumably.

Attempt ``i`` of a run with base seed ``S`` resets the env with ``env_seed`` and the demonstrator with
``demonstrator_seed``, where ``(env_seed, demonstrator_seed) = SeedSequence(S, spawn_key=(i,))
.generate_state(2, uint32)``. An episode is determined by its seeds, and results are written in attempt
order whatever worker finished first, so any number of workers writes the same file content. With
``successes_only`` failed attempts are skipped (and counted), the kept demos are the first successful
attempts in attempt order.

The writer flushes after every demo (see :mod:`r2s2r_envs.datasets.writer`): an interrupted run leaves a
valid file with every completed demo, and running the same call again resumes from the next attempt.

Example:
    >>> from r2s2r_envs.datasets.generate import generate  # doctest: +SKIP
    >>> generate("PickSort-Ungrounded-v0", episodes=100, out="ungrounded.hdf5", workers=2, seed=0)  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import multiprocessing as mp
import os
import platform
import queue
import signal
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import gymnasium as gym
import numpy as np
from gymnasium.envs.registration import EnvSpec

from r2s2r_envs.datasets import _package_version, schema
from r2s2r_envs.datasets.reader import open_dataset
from r2s2r_envs.datasets.schema import DatasetError
from r2s2r_envs.datasets.writer import DatasetWriter, Episode

#: The demonstrator factory used unless another is named (``"module:function"``, called with the env).
DEFAULT_DEMONSTRATOR = "r2s2r_envs.behavior:make_demonstrator"
OBS_MODES: tuple[str, ...] = ("state", "rgb", "state+rgb")

# An env without a time limit must still end; past this many steps the rollout is abandoned.
_MAX_STEPS_WITHOUT_LIMIT = 100_000
# Attempts in flight per worker (bounds memory held by finished, not yet written episodes).
_IN_FLIGHT_PER_WORKER = 2


class GenerationError(RuntimeError):
    """Generation could not proceed (a worker failed, settings conflict with an existing file, ...)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class GenerationConfig:
    """Everything that determines a dataset's content (stored in the file as ``generation``).

    Attributes:
        env_id: registered id, or an :class:`~gymnasium.envs.registration.EnvSpec` for unregistered envs.
        env_kwargs: extra keyword arguments for ``gymnasium.make`` (JSON-able).
        obs_mode: observation mode the dataset stores: ``"state"``, ``"rgb"`` or ``"state+rgb"``.
        obs_keys: store only these observation keys (default: all keys of ``obs_mode``).
        seed: base seed.
        successes_only: keep only successful episodes.
        demonstrator: ``"module:function"`` that makes the demonstrator from the env.
        max_episode_steps: override of the env's time limit.
        valid_fraction: share of demos in the ``valid`` filter key.
    """

    env_id: str | EnvSpec
    env_kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    obs_mode: str = "state"
    obs_keys: tuple[str, ...] | None = None
    seed: int = 0
    successes_only: bool = False
    demonstrator: str = DEFAULT_DEMONSTRATOR
    max_episode_steps: int | None = None
    valid_fraction: float = 0.1

    @property
    def env_name(self) -> str:
        """The env id as a string."""
        return self.env_id.id if isinstance(self.env_id, EnvSpec) else str(self.env_id)

    @property
    def env_obs_mode(self) -> str:
        """The mode the env runs in: demonstrators need the state keys, so image-only datasets run ``state+rgb``."""
        return self.obs_mode if "state" in self.obs_mode else f"state+{self.obs_mode}"

    def to_json_dict(self) -> dict[str, Any]:
        """JSON-able form, compared when a run resumes."""
        env = json.loads(self.env_id.to_json()) if isinstance(self.env_id, EnvSpec) else self.env_id
        return {
            "env_id": env,
            "env_kwargs": dict(self.env_kwargs),
            "obs_mode": self.obs_mode,
            "obs_keys": None if self.obs_keys is None else list(self.obs_keys),
            "seed": int(self.seed),
            "successes_only": bool(self.successes_only),
            "demonstrator": self.demonstrator,
            "max_episode_steps": self.max_episode_steps,
            "valid_fraction": float(self.valid_fraction),
            "seeding": "attempt i: (env_seed, demonstrator_seed) = "
            "SeedSequence(seed, spawn_key=(i,)).generate_state(2, uint32)",
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


def episode_seeds(seed: int, attempt: int) -> tuple[int, int]:
    """The ``(env_seed, demonstrator_seed)`` of attempt ``attempt`` of a run with base seed ``seed``."""
    state = np.random.SeedSequence(int(seed), spawn_key=(int(attempt),)).generate_state(2, dtype=np.uint32)
    return int(state[0]), int(state[1])


def load_callable(ref: str) -> Callable[..., Any]:
    """Imports ``"module:attribute"``.

    Raises:
        ValueError: if ``ref`` is not of that form or the attribute does not exist.
    """
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"expected 'module:function', got {ref!r}")
    module = importlib.import_module(module_name)
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ValueError(f"{module_name} has no attribute {attr!r}") from None


def make_env(config: GenerationConfig, *, obs_mode: str | None = None, render_mode: str | None = None) -> gym.Env:
    """Makes the env of a generation config (in ``config.env_obs_mode`` unless ``obs_mode`` is given)."""
    kwargs = dict(config.env_kwargs)
    kwargs["obs_mode"] = obs_mode or config.env_obs_mode
    if render_mode is not None:
        kwargs["render_mode"] = render_mode
    if config.max_episode_steps is not None:
        kwargs["max_episode_steps"] = config.max_episode_steps
    try:
        return gym.make(config.env_id, **kwargs)
    except gym.error.Error as exc:
        raise GenerationError(f"cannot make env {config.env_name!r}: {exc}") from exc


def rollout(
    env: gym.Env, demonstrator: Any, *, env_seed: int, demonstrator_seed: int, obs_keys: Sequence[str], attempt: int = 0
) -> Episode:
    """Runs one episode of ``demonstrator`` in ``env`` and records it.

    Args:
        env: the env (its observations must include the state keys the demonstrator reads).
        demonstrator: object with ``reset(seed)`` and ``act(obs) -> action``.
        env_seed: seed for ``env.reset``.
        demonstrator_seed: seed for ``demonstrator.reset``.
        obs_keys: observation keys to record.
        attempt: attempt index, stored with the episode.

    Returns:
        The recorded episode.
    """
    unwrapped = env.unwrapped
    obs, info = env.reset(seed=env_seed)
    demonstrator.reset(seed=demonstrator_seed)
    observations: dict[str, list[np.ndarray]] = {k: [np.array(obs[k], copy=True)] for k in obs_keys}
    actions: list[np.ndarray] = []
    rewards: list[float] = []
    states: list[np.ndarray] = []
    success_any = False
    unstable = False
    terminated = truncated = False
    steps = 0
    while not (terminated or truncated):
        states.append(np.array(unwrapped.get_state(), dtype=np.float64, copy=True))
        action = np.asarray(demonstrator.act(obs), dtype=np.float32)
        obs, reward, terminated, truncated, info = env.step(action)
        actions.append(action)
        rewards.append(float(reward))
        for k in obs_keys:
            observations[k].append(np.array(obs[k], copy=True))
        success_any |= bool(info.get("is_success", False))
        unstable |= bool(info.get("unstable", False))
        steps += 1
        if steps >= _MAX_STEPS_WITHOUT_LIMIT:
            raise GenerationError(
                f"episode did not end after {steps} steps; give the env a time limit (max_episode_steps)"
            )
    return Episode(
        observations={k: np.stack(v) for k, v in observations.items()},
        actions=np.stack(actions),
        rewards=np.asarray(rewards, dtype=np.float32),
        states=np.stack(states),
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


def build_provenance(
    env: gym.Env, demonstrator: Any, config: GenerationConfig, obs_keys: Sequence[str]
) -> dict[str, Any]:
    """The provenance record of a dataset made by ``demonstrator`` in ``env``.

    For the lab (domain ``"real"``) the world record is whatever the env's ``provenance()`` discloses (its
    name, not its hidden parameters) and the operator's settings are withheld: grounding code reads
    datasets and must see the lab only as a black box.
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
    world = unwrapped.provenance() if hasattr(unwrapped, "provenance") else {}
    demo_record: dict[str, Any] = {"name": str(getattr(demonstrator, "name", type(demonstrator).__name__))}
    if domain == "real":
        demo_record["settings"] = None
        demo_record["settings_withheld"] = "the lab's operator is a black box to grounding code"
    else:
        demo_record["settings"] = getattr(demonstrator, "settings", {})
    import h5py
    import mujoco

    if domain == "real":
        spec_json = withhold_inline_labs(spec_json)
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
        "successes_only": bool(config.successes_only),
        "versions": {
            "r2s2r_envs": _package_version(),
            "mujoco": mujoco.__version__,
            "gymnasium": gym.__version__,
            "numpy": np.__version__,
            "h5py": h5py.__version__,
            "python": platform.python_version(),
        },
    }


def generate(
    env_id: str | EnvSpec,
    episodes: int,
    out: str | os.PathLike[str],
    *,
    workers: int = 1,
    seed: int = 0,
    successes_only: bool = False,
    obs_mode: str = "state",
    obs_keys: Sequence[str] | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    demonstrator: str = DEFAULT_DEMONSTRATOR,
    max_episode_steps: int | None = None,
    max_attempts: int | None = None,
    valid_fraction: float = 0.1,
    overwrite: bool = False,
    progress: bool = True,
    handle_signals: bool = True,
) -> GenerationResult:
    """Generates (or resumes generating) a dataset of demonstrations.

    Args:
        env_id: a registered env id (e.g. ``"PickSort-Ungrounded-v0"``) or an ``EnvSpec``.
        episodes: number of demos the file should hold.
        out: the HDF5 file. If it exists and was made with the same settings, generation resumes.
        workers: processes running episodes in parallel (the file content does not depend on it).
        seed: base seed (see the module docstring for per-attempt seeds).
        successes_only: keep only successful episodes; the attempts are recorded.
        obs_mode: ``"state"``, ``"rgb"`` or ``"state+rgb"``: which observations the file stores.
        obs_keys: store only these observation keys.
        env_kwargs: extra ``gymnasium.make`` keyword arguments (e.g. ``{"num_objects": 1}``).
        demonstrator: ``"module:function"`` making the demonstrator from the env.
        max_episode_steps: override of the env's time limit.
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
        GenerationError: settings differ from the existing file's, a worker failed, or the env is unusable.
        DatasetError: ``out`` exists but is not a usable dataset (pass ``overwrite=True`` to replace it).
        ValueError: invalid arguments.
    """
    start = time.perf_counter()
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if obs_mode not in OBS_MODES:
        raise ValueError(f"unknown obs_mode {obs_mode!r}; choose one of {OBS_MODES}")
    config = GenerationConfig(
        env_id=env_id,
        env_kwargs=dict(env_kwargs or {}),
        obs_mode=obs_mode,
        obs_keys=None if obs_keys is None else tuple(obs_keys),
        seed=int(seed),
        successes_only=successes_only,
        demonstrator=demonstrator,
        max_episode_steps=max_episode_steps,
        valid_fraction=valid_fraction,
    )
    max_attempts = 20 * episodes if max_attempts is None else int(max_attempts)
    out = Path(out)

    env = make_env(config)
    try:
        demo = load_callable(config.demonstrator)(env)
        stored_keys = _stored_obs_keys(config, env)
        provenance = build_provenance(env, demo, config, stored_keys)
        writer, resumed = _open_writer(out, config, provenance, episodes, overwrite)
        demos_before = writer.num_demos
        try:
            interrupted = _run(writer, config, episodes, stored_keys, workers, max_attempts, env, demo, progress,
                               handle_signals)
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


# -- internals -------------------------------------------------------------------------------------


def _stored_obs_keys(config: GenerationConfig, env: gym.Env) -> list[str]:
    """Observation keys the file stores: those of ``obs_mode`` (optionally a subset)."""
    if config.obs_mode == config.env_obs_mode:
        available = list(env.observation_space.spaces)
    else:
        probe = make_env(config, obs_mode=config.obs_mode)
        available = list(probe.observation_space.spaces)
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
    out: Path, config: GenerationConfig, provenance: Mapping[str, Any], episodes: int, overwrite: bool
) -> tuple[DatasetWriter, bool]:
    """Creates the file or opens it to resume; returns the writer and whether it resumed."""
    generation = config.to_json_dict()
    env_args = {
        "env_name": config.env_name,
        "type": schema.ROBOMIMIC_GYM_ENV_TYPE,
        "env_kwargs": {**dict(config.env_kwargs), "obs_mode": config.env_obs_mode},
    }
    if config.max_episode_steps is not None:  # gym.make(env_name, **env_kwargs) then has the same time limit
        env_args["env_kwargs"]["max_episode_steps"] = config.max_episode_steps
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
            out, provenance=provenance, env_args=env_args, generation=generation,
            episodes_requested=episodes, valid_fraction=config.valid_fraction, overwrite=overwrite,
        )
        return writer, False
    try:
        writer = DatasetWriter.resume(out)
    except DatasetError as exc:
        raise DatasetError(f"cannot resume into {out}: {exc}. Pass overwrite=True (--overwrite) to start over") from exc
    differences = _differences(writer.generation, generation, ignore=()) + _differences(
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
    """Refuses a file another process is writing: resuming would fail and overwriting would lose its data."""
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
    bar = tqdm(total=episodes, initial=writer.num_demos, unit="demo", disable=not progress,
               desc=f"generate {config.env_name}", dynamic_ncols=True)
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
                attempt = writer.attempts
                env_seed, demo_seed = episode_seeds(config.seed, attempt)
                record(rollout(env, demo, env_seed=env_seed, demonstrator_seed=demo_seed, obs_keys=obs_keys,
                               attempt=attempt))
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
    ctx = mp.get_context("spawn")  # MuJoCo/GL state does not survive fork safely
    tasks: Any = ctx.Queue()
    results: Any = ctx.Queue()
    procs = [
        ctx.Process(target=_worker_main, args=(config, obs_keys, tasks, results, os.getpid()), daemon=True)
        for _ in range(workers)
    ]
    for p in procs:
        p.start()
    next_attempt = writer.attempts
    next_to_submit = next_attempt
    # Without successes_only every attempt yields a demo: never run more attempts than demos needed.
    last_needed = next_attempt + (episodes - writer.num_demos) if not config.successes_only else max_attempts
    pending: dict[int, Episode] = {}
    window = _IN_FLIGHT_PER_WORKER * workers
    try:
        while not done() and not flag.stop:
            while next_to_submit < min(next_attempt + window, last_needed, max_attempts):
                tasks.put(next_to_submit)
                next_to_submit += 1
            try:
                kind, attempt, payload = results.get(timeout=0.5)
            except queue.Empty:
                if flag.stop:
                    break
                dead = [p for p in procs if not p.is_alive()]
                if dead:
                    raise GenerationError(
                        f"a worker process died (exit code {dead[0].exitcode}) without reporting an error. If "
                        "generate() was called from a script, guard the call with `if __name__ == '__main__':` "
                        "(worker processes are spawned and import the main module)"
                    )
                continue
            if kind == "error":
                raise GenerationError(f"attempt {attempt} failed in a worker:\n{payload}")
            pending[attempt] = payload
            while next_attempt in pending and not done():
                record(pending.pop(next_attempt))
                next_attempt += 1
    finally:
        # Every result needed is written; attempts still in flight are surplus (successes_only) or abandoned
        # (stop, error). Workers hold nothing worth a clean exit, and waiting could block on a full result pipe.
        for p in procs:
            if p.is_alive():
                p.terminate()
        for p in procs:
            p.join(timeout=10.0)
        tasks.cancel_join_thread()
        results.cancel_join_thread()


def _worker_main(config: GenerationConfig, obs_keys: list[str], tasks: Any, results: Any, parent_pid: int) -> None:
    """Worker process: builds the env and demonstrator once, then runs the attempts it is given."""
    # The parent handles Ctrl-C; a worker interrupted mid-episode would only lose work.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_when_orphaned, args=(parent_pid,), daemon=True).start()
    env = None
    try:
        env = make_env(config)
        demo = load_callable(config.demonstrator)(env)
        while True:
            try:
                attempt = tasks.get(timeout=1.0)
            except queue.Empty:
                continue
            if attempt is None:
                return
            try:
                env_seed, demo_seed = episode_seeds(config.seed, attempt)
                episode = rollout(env, demo, env_seed=env_seed, demonstrator_seed=demo_seed, obs_keys=obs_keys,
                                  attempt=attempt)
                results.put(("ok", attempt, episode))
            except Exception:  # noqa: BLE001 - reported to the parent with its traceback
                results.put(("error", attempt, traceback.format_exc()))
                return
    except Exception:  # noqa: BLE001 - env or demonstrator construction failed
        results.put(("error", -1, traceback.format_exc()))
    finally:
        if env is not None:
            env.close()


def _exit_when_orphaned(parent_pid: int) -> None:
    """Ends the worker at once if its parent dies (e.g. kill -9).

    A plain return would hang: the queue's feeder thread blocks writing a result nobody reads, and normal
    interpreter exit waits for it.
    """
    while True:
        time.sleep(0.5)
        if os.getppid() != parent_pid:
            os._exit(1)


def verify_file(path: str | os.PathLike[str]) -> str:
    """Fully verifies a dataset file and returns its content hash."""
    with open_dataset(path, verify="full") as f:
        return f.content_hash
