"""The one worker pool of parallel runs (r2s2r_envs.workers.WorkerPool), used by generate() and evaluate().

Workers are spawned and import this module to unpickle their job, so the jobs live at module level here.
"""

from __future__ import annotations

import os
import signal
from typing import Any

import gymnasium as gym
import pytest

from r2s2r_envs.evaluation.protocol import evaluate
from r2s2r_envs.workers import WorkerDiedError, WorkerError, WorkerJob, WorkerPool

RUNTIME_ID = "R2S2RTest-RegisteredAtRunTime-v0"


class Echo(WorkerJob):
    """Doubles a number; other tasks raise, kill the worker or list the test ids the worker knows."""

    def run(self, task: Any) -> Any:
        if task == "raise":
            raise ValueError("no such task")
        if task == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if task == "registered":
            return sorted(k for k in gym.registry if k.startswith("R2S2RTest-"))
        return 2 * task


class FailsToStart(WorkerJob):
    def start(self) -> None:
        raise RuntimeError("cannot start")

    def run(self, task: Any) -> Any:
        return task


@pytest.fixture
def runtime_id():
    gym.register(RUNTIME_ID, entry_point="gymnasium.envs.classic_control:CartPoleEnv")
    yield RUNTIME_ID
    del gym.registry[RUNTIME_ID]


def _pool(job: WorkerJob, workers: int = 1, **kwargs: Any) -> WorkerPool:
    return WorkerPool(job, workers, call="test()", done=lambda: 0, **kwargs)


def test_every_task_comes_back_with_its_key_and_ids_registered_at_run_time_are_known(runtime_id):
    with _pool(Echo(), 2, env_ids=[runtime_id]) as pool:
        for k in range(6):
            pool.submit(k, k)
        pool.submit("ids", "registered")
        got = dict(pool.results(7))
    assert got == {**{k: 2 * k for k in range(6)}, "ids": [RUNTIME_ID]}


def test_an_error_in_a_worker_comes_back_with_its_type_and_traceback():
    with _pool(Echo()) as pool:
        pool.submit(3, "raise")
        with pytest.raises(WorkerError) as caught:
            list(pool.results(1))
    assert caught.value.key == 3 and isinstance(caught.value.error, ValueError)
    assert "no such task" in str(caught.value.error) and "Traceback" in caught.value.remote_traceback


def test_a_job_that_fails_to_start_is_reported_with_no_key():
    with _pool(FailsToStart()) as pool:
        pool.submit(0, 0)
        with pytest.raises(WorkerError, match="cannot start") as caught:
            list(pool.results(1))
    assert caught.value.key is None and isinstance(caught.value.error, RuntimeError)


def test_a_killed_worker_is_reported_as_killed():
    with _pool(Echo()) as pool:
        pool.submit(0, "kill")
        with pytest.raises(WorkerDiedError, match=r"killed by SIGKILL \(exit code -9\) after 0 result\(s\)"):
            list(pool.results(1))


@pytest.mark.slow  # worker processes are spawned: ~10 s
def test_evaluate_in_workers_knows_a_picksort_id_registered_at_run_time():
    spec = gym.spec("PickSort-Ungrounded-v0")
    env_id = "PickSort-RegisteredAtRunTime-v0"
    gym.register(env_id, entry_point=spec.entry_point, kwargs=dict(spec.kwargs))
    try:
        kwargs = {"num_objects": 1, "episode_steps": 30}
        two = evaluate(env_id, Still(), episodes=3, env_kwargs=kwargs, workers=2, progress=False)
        one = evaluate(env_id, Still(), episodes=3, env_kwargs=kwargs, progress=False)
    finally:
        del gym.registry[env_id]
    assert [r.to_dict() for r in two.records] == [r.to_dict() for r in one.records]


class Still:
    """A policy that sends zero actions."""

    def reset(self, seed: int | None) -> None:
        pass

    def act(self, obs: dict[str, Any]) -> Any:
        import numpy as np

        return np.zeros(22, dtype=np.float32)
