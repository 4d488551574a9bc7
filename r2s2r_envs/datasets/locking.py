"""The lock of a dataset file being generated: one run at a time per file.

A generation run holds an exclusive lock on ``<out>.lock`` (:func:`writer_lock`) from before it creates anything
until it returns, so a second run on the same file fails at once with a :class:`GenerationError` instead of racing
the first; :func:`check_not_locked` refuses a file another program holds open for writing (HDF5's own lock).
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path

from r2s2r_envs.datasets.rollout import GenerationError


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


def check_not_locked(path: Path) -> None:
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
