"""Worker processes of parallel runs (dataset generation, evaluation): what a dead worker's exit code tells."""

from __future__ import annotations

import signal
import sys
from pathlib import Path


class WorkerDiedError(RuntimeError):
    """A worker process of a parallel run died; the message says what its exit code tells (``worker_death``)."""


def first_cause(exitcodes: list[int]) -> int | None:
    """The exit code that explains a broken process pool: when one worker dies, the pool ends the others with
    SIGTERM, so a code other than SIGTERM's is the cause (``None`` if no worker left one)."""
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
