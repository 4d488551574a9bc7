"""Worker processes of parallel runs (dataset generation, evaluation): the one pool both use, and what a dead
worker's exit code tells.

A :class:`WorkerPool` starts spawned processes (MuJoCo's GL state does not survive ``fork``) that each receive one
:class:`WorkerJob` and answer the tasks sent to them; results come back tagged with the task's key, in the order
they finish.  Every worker has the package's env ids registered (it imports ``r2s2r_envs``) and the caller's own
registrations of the ids it names (an id registered at run time, by a test or a notebook, is not known to a process
that only re-imports the main module).  Workers ignore Ctrl-C (the parent handles it) and exit at once if the
parent dies.  A task that raises ends the run with a :class:`WorkerError`; a worker that dies without a word ends it
with a :class:`WorkerDiedError` whose message says what its exit code tells (:func:`worker_death`).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import queue
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import gymnasium as gym


class WorkerDiedError(RuntimeError):
    """A worker process of a parallel run died; the message says what its exit code tells (``worker_death``)."""


class WorkerError(RuntimeError):
    """A task raised in a worker process (or the worker's :meth:`WorkerJob.start` did).

    Attributes:
        key: the key of the task (None: the worker's start).
        error: the exception as raised in the worker (None if it could not be sent back).
        remote_traceback: the worker's traceback, as text (also the message).
    """

    def __init__(self, key: Any, error: BaseException | None, remote_traceback: str) -> None:
        super().__init__(remote_traceback)
        self.key = key
        self.error = error
        self.remote_traceback = remote_traceback


class WorkerJob:
    """What every worker of a :class:`WorkerPool` runs: a picklable object, sent once to each worker.

    ``start()`` runs once in the worker before its first task (to make its env, say), ``run(task)`` answers one task
    and ``close()`` runs when the worker ends.
    """

    def start(self) -> None:
        """Prepares the worker (default: nothing)."""

    def run(self, task: Any) -> Any:
        """The result of one task (picklable: it is sent back to the parent)."""
        raise NotImplementedError

    def close(self) -> None:
        """Releases what :meth:`start` and :meth:`run` made (default: nothing)."""


def first_cause(exitcodes: list[int]) -> int | None:
    """The exit code that explains the death of a pool's workers: others may have been ended with SIGTERM since,
    so a code other than SIGTERM's is the cause (``None`` if no worker left one)."""
    codes = [c for c in exitcodes if c]
    return next((c for c in codes if c != -signal.SIGTERM), codes[0] if codes else None)


def worker_death(exitcode: int | None, *, done: int, call: str) -> str:
    """Why a worker process died, as far as its exit code tells, for the message of a parallel run.

    A negative exit code is a signal (``kill -9``, the kernel's out-of-memory killer): the cause is outside the
    run.  Only a worker that died before any result came back, from a script, may lack the main-module guard that
    spawned workers need (``call`` names the function, e.g. ``"generate()"``).
    """
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return (
            f"a worker process was killed by {name} (exit code {exitcode}) after {done} result(s): killed from "
            "outside or by the out-of-memory killer, not by an error of the run"
        )
    message = f"a worker process died (exit code {exitcode}) without reporting an error, after {done} result(s)"
    main_file = getattr(sys.modules.get("__main__"), "__file__", None) or ""
    if done == 0 and main_file.endswith(".py") and "r2s2r" not in Path(main_file).name:
        message += (
            f". If {call} was called from a script, guard the call with `if __name__ == '__main__':` (worker "
            "processes are spawned and import the main module)"
        )
    return message


class WorkerPool:
    """Spawned worker processes running one :class:`WorkerJob`; a context manager that ends them on exit.

    Args:
        job: sent to every worker (pickled).
        workers: number of processes.
        call: the function the pool serves, for the message of a dead worker (e.g. ``"evaluate()"``).
        done: how many results the run has so far, for that message.
        env_ids: registered env ids the workers need: the caller's registration of each is sent along and used
            where a worker lacks it.

    Raises:
        gymnasium.error.Error: an id of ``env_ids`` is not registered.
    """

    def __init__(
        self,
        job: WorkerJob,
        workers: int,
        *,
        call: str,
        done: Callable[[], int],
        env_ids: Sequence[str] = (),
    ) -> None:
        specs = {env_id: gym.spec(env_id) for env_id in env_ids}
        self._call = call
        self._done = done
        ctx = mp.get_context("spawn")  # MuJoCo/GL state does not survive fork safely
        self._tasks: Any = ctx.Queue()
        self._results: Any = ctx.Queue()
        self._procs = [
            ctx.Process(target=_worker_main, args=(job, specs, self._tasks, self._results, os.getpid()), daemon=True)
            for _ in range(workers)
        ]
        for p in self._procs:
            p.start()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def submit(self, key: Any, task: Any) -> None:
        """Sends ``task`` to the next free worker; its result comes back with ``key``."""
        self._tasks.put((key, task))

    def get(self, timeout: float = 0.5) -> tuple[Any, Any] | None:
        """The next result as ``(key, result)``, or None if none came within ``timeout`` seconds.

        Raises:
            WorkerError: a task (or a worker's start) raised in a worker.
            WorkerDiedError: a worker died without reporting an error.
        """
        # Workers end only when closed or on an error they report first, so a dead one is a failure even while the
        # others keep answering (a run could otherwise finish without the tasks it held).
        dead = [p for p in self._procs if not p.is_alive()]
        try:
            message = self._results.get(timeout=0.5 if dead else timeout)  # a dead worker's last words, if any
        except queue.Empty:
            message = None
        if dead and (message is None or message[0] != "error"):
            codes = [p.exitcode for p in dead if p.exitcode is not None]
            code = first_cause(codes) if any(codes) else dead[0].exitcode
            raise WorkerDiedError(worker_death(code, done=self._done(), call=self._call))
        if message is None:
            return None
        kind, key, payload = message
        if kind == "error":
            data, text = payload
            error = None
            if data is not None:
                try:
                    error = pickle.loads(data)
                except Exception:  # noqa: BLE001 - an exception that cannot be rebuilt here is told by its traceback
                    error = None
            raise WorkerError(key, error, text)
        return key, payload

    def results(self, count: int) -> Iterator[tuple[Any, Any]]:
        """The next ``count`` results as ``(key, result)``, in the order they finish (see :meth:`get`)."""
        received = 0
        while received < count:
            item = self.get()
            if item is not None:
                received += 1
                yield item

    def close(self) -> None:
        """Ends the workers at once: results still in flight are abandoned (the caller has what it needs)."""
        # Workers hold nothing worth a clean exit, and waiting could block on a full result pipe.
        for p in self._procs:
            if p.is_alive():
                p.terminate()
        for p in self._procs:
            p.join(timeout=10.0)
        self._tasks.cancel_join_thread()
        self._results.cancel_join_thread()


def _worker_main(job: WorkerJob, specs: dict[str, Any], tasks: Any, results: Any, parent_pid: int) -> None:
    """A worker process: registers the ids it lacks, starts the job, then answers tasks until told to stop."""
    # The parent handles Ctrl-C; a worker interrupted mid-task would only lose work.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_when_orphaned, args=(parent_pid,), daemon=True).start()
    # This module's import imported r2s2r_envs, which registers the package's ids; these are the caller's own.
    for env_id, spec in specs.items():
        if env_id not in gym.registry:
            gym.registry[env_id] = spec
    try:
        try:
            job.start()
        except Exception as e:  # noqa: BLE001 - reported to the parent with its traceback
            results.put(("error", None, _failure(e)))
            return
        while True:
            try:
                item = tasks.get(timeout=1.0)
            except queue.Empty:
                continue
            if item is None:
                return
            key, task = item
            try:
                results.put(("ok", key, job.run(task)))
            except Exception as e:  # noqa: BLE001 - reported to the parent with its traceback
                results.put(("error", key, _failure(e)))
                return
    finally:
        job.close()


def _failure(error: BaseException) -> tuple[bytes | None, str]:
    """An exception raised in a worker as it travels: pickled (None if it cannot be) and its traceback as text."""
    text = traceback.format_exc()
    try:
        return pickle.dumps(error), text
    except Exception:  # noqa: BLE001 - pickling raises many kinds of errors
        return None, text


def _exit_when_orphaned(parent_pid: int) -> None:
    """Ends the worker at once if its parent dies (e.g. kill -9).

    A plain return would hang: the queue's feeder thread blocks writing a result nobody reads, and normal
    interpreter exit waits for it.
    """
    while True:
        time.sleep(0.5)
        if os.getppid() != parent_pid:
            os._exit(1)
