"""The runner of the evaluation protocol: :func:`evaluate` runs a policy's episodes on a PickSort env and returns
an :class:`~r2s2r_envs.evaluation.results.EvaluationResult` (one episode is
:func:`~r2s2r_envs.evaluation.episode.run_episode`'s).

:mod:`r2s2r_envs.evaluation.protocol` describes the protocol (docs/protocol.md).  An evaluation runs its episodes in
one of four ways, each a function here: one after the other (:func:`_run_serial`), ``batch`` at a time in the native
vector env (:func:`_run_batched`), spread over worker processes (:func:`_run_in_workers`), or both
(:func:`_run_batched_in_workers`); the workers are :class:`r2s2r_envs.workers.WorkerPool`'s.  Records do not depend
on the way.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, cast

import gymnasium as gym
import numpy as np

from r2s2r_envs.envs.conditions import CONDITIONS, CONDITIONS_VERSION, check_images
from r2s2r_envs.envs.registration import EnvArgumentError, check_env_id, make_env, registered_ids
from r2s2r_envs.envs.seeding import episode_seeds
from r2s2r_envs.evaluation.batched import batch_capable, make_batch_env, run_batched
from r2s2r_envs.evaluation.episode import (
    episode_record,
    filmed_episode,
    policy_failure_record,
    run_episode,
)
from r2s2r_envs.evaluation.policy import Policy, PolicyOrFactory, action_problem, resolve_policy, with_policy_inputs
from r2s2r_envs.evaluation.results import (
    EpisodeRecord,
    EvaluationResult,
    env_provenance,
    method_record,
    policy_record,
    recorded_env_kwargs,
)
from r2s2r_envs.evaluation.splits import (
    CUSTOM_SPLIT,
    LEGACY_BASE_SEED,
    SPLITS,
    STANDARD,
    ConditionRun,
    plan_conditions,
)
from r2s2r_envs.evaluation.tracks import Track, check_track, evaluation_arguments, get_track, training_samples
from r2s2r_envs.paths import check_output_file
from r2s2r_envs.provenance import versions
from r2s2r_envs.workers import WorkerError, WorkerJob, WorkerPool

#: Base seed of the evaluation protocol before its seed splits, now the ``legacy`` split's
#: (docs/protocol.md#dev-and-test-splits); what ``evaluate(..., episodes=N)`` still runs, so that old results
#: reproduce.  It never changes (``tests/test_protocol.py`` pins the seeds it gives).
EVALUATION_BASE_SEED = LEGACY_BASE_SEED


# ---------------------------------------------------------------------- envs and seeds
def picksort_env_ids() -> list[str]:
    """Every registered id whose name starts with ``PickSort-`` (``r2s2r_envs.envs.registered_ids()``, a list)."""
    return list(registered_ids())


def evaluation_seeds(episodes: int, base_seed: int = EVALUATION_BASE_SEED) -> list[tuple[int, int]]:
    """``(env_seed, policy_seed)`` of episodes ``0 .. episodes - 1`` of base seed ``base_seed``.

    With the default base seed these are the episodes of the fixed protocol.

    Raises:
        ValueError: a negative ``episodes`` or ``base_seed``.
    """
    if isinstance(episodes, bool) or not isinstance(episodes, (int, np.integer)) or episodes < 0:
        raise ValueError(f"episodes must be an integer >= 0, got {episodes!r}")
    return [episode_seeds(base_seed, i) for i in range(int(episodes))]


def _condition_kwargs(env_kwargs: Mapping[str, Any], condition: str) -> dict[str, Any]:
    """``gym.make`` arguments of the env under ``condition`` (nominal: the arguments as given)."""
    return dict(env_kwargs) if condition == "nominal" else {**env_kwargs, "condition": condition}


def _plan(
    episodes: int | None,
    base_seed: int | None,
    conditions: str | Sequence[str] | Mapping[str, int] | None,
    split: str | None,
) -> tuple[str, tuple[ConditionRun, ...]]:
    """The split and condition runs of an ``evaluate`` call (see its ``conditions`` argument)."""
    if conditions is not None or split is not None or (episodes is None and base_seed is None):
        if base_seed is not None:
            raise ValueError(
                f"base_seed={base_seed!r} cannot be combined with conditions= or split=: a split fixes every "
                f"condition's seeds (splits {list(SPLITS)}); give base_seed with episodes alone for seeds of your own"
            )
        split = "test" if split is None else split
        return split, plan_conditions(conditions, split, episodes)
    for name, value, low in (("episodes", episodes, 1), ("base_seed", base_seed, 0)):
        if value is None and name == "episodes":
            raise ValueError("episodes is needed with base_seed (an integer >= 1)")
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low):
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    seed = EVALUATION_BASE_SEED if base_seed is None else int(base_seed)
    split = "legacy" if seed == LEGACY_BASE_SEED else CUSTOM_SPLIT
    return split, (ConditionRun("nominal", seed, int(cast(int, episodes))),)


def _checked_sizes(workers: int, batch: int, threads: int | None, runs: Sequence[ConditionRun]) -> tuple[int, int]:
    """``workers`` and ``batch`` as ints, checked (with ``threads``) against each other and the conditions' episodes.

    Raises:
        ValueError: a size < 1, or ``batch`` larger than the episodes of a condition.
    """
    checks = [("workers", workers, 1), ("batch", batch, 1)]
    if threads is not None:
        checks.append(("threads", threads, 1))
    for name, value, low in checks:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    workers, batch = int(workers), int(batch)
    fewest = min(run.episodes for run in runs)
    if batch > fewest:
        raise ValueError(
            f"batch={batch} is larger than the {fewest} episodes asked{' of a condition' if len(runs) > 1 else ''}: "
            f"batch must be in [1, {fewest}] "
            "(the envs stepped together)"
        )
    return workers, batch


def _checked_env_kwargs(env_kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
    """A copy of ``env_kwargs``, without ``condition`` (the protocol's to set).

    Raises:
        ValueError: ``condition`` in ``env_kwargs``.
    """
    kwargs = dict(env_kwargs or {})
    if "condition" in kwargs:
        raise ValueError(
            f"env_kwargs holds 'condition' ({kwargs['condition']!r}); give conditions= instead (one of "
            f"{list(CONDITIONS)}, a list of them or {STANDARD!r}): the protocol makes each condition's env and "
            "records it"
        )
    return kwargs


def _episode_list(runs: Sequence[ConditionRun]) -> list[tuple[int, str, int, int]]:
    """Every episode: (index over the result, condition, env_seed, policy_seed), conditions in order."""
    todo: list[tuple[int, str, int, int]] = []
    for run in runs:
        todo += [
            (len(todo) + k, run.condition, *s) for k, s in enumerate(evaluation_seeds(run.episodes, run.base_seed))
        ]
    return todo


def _split(items: list[Any], parts: int) -> list[list[Any]]:
    """``items`` in ``parts`` contiguous runs of near-equal length (none empty)."""
    parts = min(parts, len(items))
    size, extra = divmod(len(items), parts)
    out, start = [], 0
    for k in range(parts):
        end = start + size + (k < extra)
        out.append(items[start:end])
        start = end
    return out


def _check_picklable(obj: Any, what: str) -> None:
    try:
        pickle.dumps(obj)
    except Exception as e:  # noqa: BLE001 - pickling raises many kinds of errors
        raise TypeError(
            f"{what} cannot be sent to worker processes ({type(e).__name__}: {e}); use workers=1, or "
            "pass a policy or factory defined at module level (not a lambda or local function)"
        ) from e


# ---------------------------------------------------------------------- the ways an evaluation runs
class _Run:
    """The calling process's side of an evaluation: its env and policy per condition, the records, the progress bar.

    ``env`` is the nominal env, made with ``render`` (for a video); every condition's env is made alike.
    """

    def __init__(self, env_id: str, policy: PolicyOrFactory, kwargs: dict[str, Any], render: dict[str, Any]) -> None:
        self.env_id = env_id
        self.policy = policy
        self.kwargs = kwargs
        self.render = render
        self.env: gym.Env | None = None
        self.envs: dict[str, tuple[gym.Env, Policy]] = {}
        self.records: list[EpisodeRecord | None] = []
        self.bar: Any = None

    def start(self) -> Policy:
        """Makes the nominal env and its policy; the policy's opt-in sensors and cameras join ``kwargs`` (every env
        has them)."""
        self.env = make_env(self.env_id, {**self.kwargs, **self.render})
        main_policy = resolve_policy(self.policy, self.env)
        wanted = with_policy_inputs(main_policy, self.kwargs)
        if wanted != self.kwargs:  # the policy reads opt-in sensors or cameras: every env of the run has them
            self.kwargs = wanted
            self.env.close()
            self.env = make_env(self.env_id, {**self.kwargs, **self.render})
            main_policy = resolve_policy(self.policy, self.env)
        return main_policy

    def env_of(self, condition: str) -> tuple[gym.Env, Policy]:
        """The env and policy of ``condition`` in this process, made at its first episode."""
        if condition not in self.envs:
            made = make_env(self.env_id, _condition_kwargs({**self.kwargs, **self.render}, condition))
            self.envs[condition] = (made, resolve_policy(self.policy, made))
        return self.envs[condition]

    def done(self, record: EpisodeRecord) -> None:
        self.records[record.index] = record
        self.bar.update()

    def done_count(self) -> int:
        return sum(r is not None for r in self.records)

    def close(self) -> None:
        for made, _ in self.envs.values():
            if made is not self.env:
                made.close()
        if self.env is not None:
            self.env.close()


def _film(run: _Run, episode: tuple[int, str, int, int], video: str) -> None:
    """The first episode, filmed into ``video`` in this process."""
    _, condition, env_seed, policy_seed = episode
    filmed_env, filmed_policy = run.env_of(condition)
    run.done(filmed_episode(filmed_env, filmed_policy, (env_seed, policy_seed), video))


def _run_serial(run: _Run, rest: list[tuple[int, str, int, int]]) -> None:
    """The episodes one after the other in this process."""
    for i, condition, env_seed, policy_seed in rest:
        run_env, run_policy = run.env_of(condition)
        run.done(run_episode(run_env, run_policy, env_seed=env_seed, policy_seed=policy_seed, index=i))


def _run_batched(
    run: _Run, by_condition: dict[str, list[tuple[int, int, int]]], batch: int, threads: int | None
) -> None:
    """Each condition's episodes ``batch`` at a time in the vector env, in this process."""
    for condition, todo in by_condition.items():
        _batched_episodes(
            run.env_id, _condition_kwargs(run.kwargs, condition), run.policy, todo, min(batch, len(todo)), run.done,
            threads=threads,
        )  # fmt: skip


def _run_in_workers(run: _Run, rest: list[tuple[int, str, int, int]], workers: int, film: Callable[[], None]) -> None:
    """The episodes spread over worker processes, one episode per task; ``film`` runs here meanwhile."""
    job = _EpisodeJob(run.env_id, run.kwargs, run.policy)
    with WorkerPool(job, min(workers, len(rest)), **_pool_args(run)) as pool:
        for episode in rest:
            pool.submit(episode[0], episode)
        film()  # filmed here while the workers run the other episodes
        for _, record in _worker_results(pool, len(rest)):
            run.done(record)


def _run_batched_in_workers(
    run: _Run,
    by_condition: dict[str, list[tuple[int, int, int]]],
    workers: int,
    batch: int,
    threads: int | None,
    film: Callable[[], None],
) -> None:
    """Each condition's episodes in contiguous parts, one per worker, each run ``batch`` at a time in a vector env."""
    parts = [(condition, part) for condition, todo in by_condition.items() for part in _split(todo, workers)]
    processes = min(workers, len(parts))
    # Each worker's physics threads share the cores with the other workers' (no oversubscription).
    per_worker = threads or max(1, (os.cpu_count() or 1) // processes)
    job = _BatchJob(run.env_id, run.kwargs, run.policy, batch, per_worker)
    with WorkerPool(job, processes, **_pool_args(run)) as pool:
        for k, part in enumerate(parts):
            pool.submit(k, part)
        film()
        for _, records in _worker_results(pool, len(parts)):
            for record in records:
                run.done(record)


def _pool_args(run: _Run) -> dict[str, Any]:
    """The :class:`WorkerPool` arguments of an evaluation: its env id registered in every worker."""
    return {"call": "evaluate()", "done": run.done_count, "env_ids": [run.env_id]}


def _worker_results(pool: WorkerPool, count: int) -> Iterator[tuple[Any, Any]]:
    """``pool.results(count)``, an error of a worker raised here as it was raised there (its traceback the cause)."""
    try:
        yield from pool.results(count)
    except WorkerError as e:
        if e.error is None:
            raise
        raise e.error from e


@dataclasses.dataclass
class _EpisodeJob(WorkerJob):
    """A worker that runs single episodes: its env and policy per condition, made at the condition's first episode."""

    env_id: str
    env_kwargs: dict[str, Any]
    policy: PolicyOrFactory
    envs: dict[str, tuple[gym.Env, Policy]] = dataclasses.field(default_factory=dict)

    def run(self, task: Any) -> EpisodeRecord:
        index, condition, env_seed, policy_seed = task
        if condition not in self.envs:  # one env (and policy) per condition, made at its first episode
            env = make_env(self.env_id, _condition_kwargs(self.env_kwargs, condition))
            self.envs[condition] = (env, resolve_policy(self.policy, env))
        env, policy = self.envs[condition]
        return run_episode(env, policy, env_seed=env_seed, policy_seed=policy_seed, index=index)

    def close(self) -> None:
        for env, _ in self.envs.values():
            env.close()


@dataclasses.dataclass
class _BatchJob(WorkerJob):
    """A worker that runs parts ``(condition, episodes)``, ``batch`` at a time in a vector env of ``threads``."""

    env_id: str
    env_kwargs: dict[str, Any]
    policy: PolicyOrFactory
    batch: int
    threads: int

    def run(self, task: Any) -> list[EpisodeRecord]:
        condition, part = task
        kwargs = _condition_kwargs(self.env_kwargs, condition)
        return _batched_episodes(
            self.env_id, kwargs, self.policy, part, min(self.batch, len(part)), threads=self.threads
        )


def _batched_episodes(
    env_id: str,
    env_kwargs: dict[str, Any],
    policy: PolicyOrFactory,
    episodes: list[tuple[int, int, int]],
    batch: int,
    done: Callable[[EpisodeRecord], None] | None = None,
    threads: int | None = None,
) -> list[EpisodeRecord]:
    """Episodes ``(index, env_seed, policy_seed)`` run ``batch`` at a time in the vector env (``batched``), its
    physics in ``threads`` threads (default: the vector env's)."""

    def record(slot: Any, terminated: bool, truncated: bool) -> EpisodeRecord:
        return episode_record(
            slot.info, slot.index, slot.env_seed, slot.policy_seed, slot.steps, slot.total, slot.success_any_step,
            terminated, truncated,
        )  # fmt: skip

    try:
        vec = make_batch_env(env_id, env_kwargs, min(batch, len(episodes)), threads)
    except (TypeError, ValueError, KeyError, FileNotFoundError) as e:  # the env names what is valid
        raise EnvArgumentError(f"cannot make the vector env of {env_id} with {env_kwargs}: {e}") from e
    try:
        return run_batched(
            vec, policy, episodes, resolve=resolve_policy, action_problem=action_problem, record=record,
            failure=policy_failure_record, done=done,
        )  # fmt: skip
    finally:
        vec.close()


def _check_images(env_id: str, env: Any, runs: Sequence[ConditionRun]) -> None:
    """Refuses, before any episode, a condition that changes only images for an env that has none."""
    obs_mode = getattr(getattr(env, "unwrapped", env), "obs_mode", None)
    for run in runs:
        try:
            check_images(CONDITIONS[run.condition], str(obs_mode))
        except ValueError as exc:
            raise EnvArgumentError(f"cannot evaluate on {env_id} with this policy: {exc}") from None


def evaluate(
    env_id: str,
    policy: PolicyOrFactory,
    *,
    episodes: int | None = None,
    base_seed: int | None = None,
    conditions: str | Sequence[str] | Mapping[str, int] | None = None,
    split: str | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    progress: bool = True,
    video: str | os.PathLike[str] | None = None,
    workers: int = 1,
    method: Mapping[str, Any] | None = None,
    batch: int = 1,
    threads: int | None = None,
    track: str | None = None,
) -> EvaluationResult:
    """Evaluate a policy on a PickSort env with the suite's protocol.

    Without ``episodes`` and ``base_seed`` this is the protocol's evaluation (docs/protocol.md#conditions): the
    standard mix of conditions (nominal 50 episodes, fast-belt 25, novel-objects 25) on the ``test`` split's seeds.
    ``conditions=`` and ``split=`` choose others.  ``episodes=N`` alone runs N nominal episodes at the legacy base
    seed ``EVALUATION_BASE_SEED``, as every evaluation did before the splits (``base_seed=S``: at your own seeds,
    split ``custom``).  Episode ``i`` of a condition at base seed ``S`` resets the env with ``env_seed`` and the
    policy with ``policy_seed``, where ``(env_seed, policy_seed) = episode_seeds(S, i)``, and steps until the env
    ends it.  Records come in the order of the conditions, indexed from 0 over the whole result.

    Args:
        env_id: A registered id starting with ``PickSort-``.
        policy: A :class:`Policy`, or a factory ``f(env) -> Policy`` (e.g. ``r2s2r_envs.behavior.make_demonstrator``
            for the env's own demonstrator).  A factory is called once per env made (per condition and worker).
        episodes: Episodes of each condition (default: each condition's own count in the standard mix); alone, the
            number of nominal episodes at the legacy seeds.
        base_seed: Base seed ``S`` of a nominal run at seeds of your own (with ``episodes``; split ``custom``).
        conditions: ``"standard"`` (the default), a condition name (``envs.conditions.CONDITIONS``), a list of
            names or a mapping of names to episode counts.
        split: ``"test"`` (the default: reported figures), ``"dev"`` (every choice made while developing a method)
            or ``"legacy"`` (the seeds of results made before the splits).
        env_kwargs: Arguments of ``gym.make``, e.g. ``num_objects``, ``episode_steps`` (the episode's time limit),
            ``obs_mode``, or ``lab`` for ``PickSort-Real-v0`` (not ``condition``: give ``conditions``).
        progress: Show a tqdm progress bar on stderr.
        video: Path of an MP4 of the first episode (the env is made with ``render_mode="rgb_array"``).
        workers: Worker processes (spawned).  Records come back in episode order and do not depend on the number
            of workers.  With more than one, ``policy`` is pickled to the workers, and a script calling this
            must guard its entry point with ``if __name__ == "__main__":``; an id the caller registered at run time
            is registered in the workers too.
        method: Entries of the result's ``method`` section that override the policy's ``metadata``
            (:func:`method_record`), e.g. ``{"method": "my-method"}``.
        batch: Envs stepped together in the native vector env (``gym.make_vec``; their physics in parallel
            threads), with the policy's ``act_batch`` answering for all of them at once (docs/protocol.md#batched-
            policies).  A policy without it is called per env (said once).  Records are identical to
            ``batch=1``'s.  With ``workers`` > 1 each worker runs its share of the episodes ``batch`` at a time.
        threads: Threads that step a batch's physics in each process (default: the machine's cores shared among
            the workers, ``max(1, cores // workers)``, at most ``batch``); 1 steps it in the calling thread (a
            process given one core, as an ablation evaluation task).  Records do not depend on it.
        track: A track (``tracks.TRACKS``, docs/leaderboard.md#tracks): its conditions and split are the
            evaluation's (``conditions``/``split`` may repeat them; ``episodes``/``base_seed`` are refused) and the
            result records whether it is on the track (datasets, training samples, evaluation) and why not;
            off-track is said in a warning before the first episode.

    Returns:
        The result: records, summary (all records), per-condition and "all shifted" summaries, provenance.

    Raises:
        UnknownEnvError: ``env_id`` is not a registered PickSort id (the message lists them).
        EnvArgumentError: the env refused ``env_kwargs`` (the message passes on what it accepts).
        RenderError: ``video`` was asked for but offscreen rendering is not available.
        TypeError: ``policy`` is not a policy or factory, or cannot be pickled for workers.
        ResultSchemaError: the policy's ``metadata`` or ``method`` holds a value the result schema refuses.
        ValueError: an unknown condition, split or track (the message lists the valid ones), another evaluation
            than ``track``'s (naming both), ``episodes`` < 1,
            ``workers`` < 1, ``batch`` < 1 or larger than the episodes of a condition, ``base_seed`` < 0 or given
            with ``conditions`` or ``split``, or ``condition`` in ``env_kwargs``.
    """
    from tqdm import tqdm

    check_env_id(env_id)
    on_track = None if track is None else get_track(track)
    if on_track is not None:
        conditions, split = evaluation_arguments(
            on_track, episodes=episodes, base_seed=base_seed, conditions=conditions, split=split
        )
    split, runs = _plan(episodes, base_seed, conditions, split)
    workers, batch = _checked_sizes(workers, batch, threads, runs)
    kwargs = _checked_env_kwargs(env_kwargs)
    todo_all = _episode_list(runs)
    total = len(todo_all)
    video = None if video is None else os.fspath(check_output_file(video, option="video", suffix=".mp4"))
    start = time.perf_counter()
    run = _Run(env_id, policy, kwargs, {"render_mode": "rgb_array"} if video is not None else {})
    try:
        main_policy = run.start()
        _check_images(env_id, run.env, runs)
        provenance = env_provenance(cast(gym.Env, run.env))
        recorded_kwargs = recorded_env_kwargs(run.kwargs, provenance["domain"])
        run.envs["nominal"] = (cast(gym.Env, run.env), main_policy)
        policy_section = policy_record(main_policy)
        method_section = method_record(main_policy, method)
        track_record = None
        if on_track is not None:
            track_record = _track_record(on_track, main_policy, method_section, split, runs)
        first = 1 if video is not None else 0
        rest = todo_all[first:]
        parallel = workers > 1 and len(rest) > 1
        batched = batch > 1 and len(rest) > 1
        if batched and not batch_capable(main_policy):
            warnings.warn(
                f"policy {policy_section['name'] or policy_section['class']} has no act_batch/reset_batch: "
                f"batch={batch} steps {batch} envs together but calls the policy once per env "
                "(docs/protocol.md#batched-policies)",
                stacklevel=2,
            )
        if parallel:
            _check_picklable(policy, "the policy")
            _check_picklable(run.kwargs, "env_kwargs")
        run.records = [None] * total
        # Each condition's episodes of ``rest`` as (index, env_seed, policy_seed), for the batched ways.
        by_condition: dict[str, list[tuple[int, int, int]]] = {}
        for i, condition, env_seed, policy_seed in rest:
            by_condition.setdefault(condition, []).append((i, env_seed, policy_seed))

        def film() -> None:
            if video is not None:
                _film(run, todo_all[0], video)

        with tqdm(total=total, desc=env_id, unit="ep", file=sys.stderr, disable=not progress) as run.bar:
            if not parallel:
                film()
                if batched:
                    _run_batched(run, by_condition, batch, threads)
                else:
                    _run_serial(run, rest)
            elif batched:
                _run_batched_in_workers(run, by_condition, workers, batch, threads, film)
            else:
                _run_in_workers(run, rest, workers, film)
    finally:
        run.close()
    return EvaluationResult(
        env_id=env_id,
        env_kwargs=recorded_kwargs,
        provenance=provenance,
        policy=policy_section,
        method=method_section,
        base_seed=runs[0].base_seed,
        records=tuple(r for r in run.records if r is not None),  # all filled: every episode ran or raised
        versions=versions("r2s2r_envs", "mujoco", "gymnasium", "numpy", "python"),
        video=video,
        wall_time_s=time.perf_counter() - start,
        split=split,
        conditions=runs,
        track=track_record,
    )


def _track_record(
    track: Track, policy: Policy, method_section: dict[str, Any], split: str, runs: Sequence[ConditionRun]
) -> dict[str, Any]:
    """The result's ``track`` section; a result off its track is said in a warning (to :func:`evaluate`'s caller)."""
    checked = check_track(
        track,
        method=method_section,
        training_samples=training_samples(method_section, getattr(policy, "config", None)),
        split=split,
        conditions=[(run.condition, run.episodes) for run in runs],
        conditions_version=CONDITIONS_VERSION,
        panel=None,
    )
    if not checked.on_track:
        warnings.warn(
            f"this result will be off track {track.name!r} (v{track.version}): " + "; ".join(checked.reasons),
            stacklevel=3,
        )
    return checked.to_record()
