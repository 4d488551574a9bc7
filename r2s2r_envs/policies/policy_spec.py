"""A policy spec, what ``r2s2r evaluate --policy`` takes, as a policy or factory of the evaluation protocol: a
checkpoint directory (``r2s2r train --out DIR``), ``zoo:NAME`` (a reference checkpoint shipped with the package) or
``module:factory``.

This module sits in :mod:`r2s2r_envs.policies` because it knows the checkpoints; ``module:factory`` is the evaluation
package's :func:`~r2s2r_envs.evaluation.policy.import_policy`. Importing it does not import torch; loading a
checkpoint does.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from r2s2r_envs import policies
from r2s2r_envs.evaluation.policy import PolicySpecError, import_policy
from r2s2r_envs.policies.zoo import ZooError, resolve_checkpoint


class DirectoryPolicy:
    """Factory ``f(env) -> Policy`` for a ``r2s2r train --out DIR`` checkpoint (``r2s2r_envs.policies.load_policy``).

    Picklable (it holds only the path), so each worker process loads its own copy; ``threads`` caps torch's
    intra-op threads there, so parallel workers do not oversubscribe the cores. ``settings`` are passed to
    ``load_policy`` (``execute_steps``, ``temporal_ensemble``).
    """

    def __init__(self, path: str | os.PathLike[str], threads: int | None = None, **settings: Any) -> None:
        self.path = os.fspath(path)
        self.threads = threads
        self.settings = settings

    def __call__(self, env: Any) -> Any:
        try:
            policy = policies.load_policy(self.path, **self.settings)  # looked up on use: tests stand one in
        except (FileNotFoundError, ImportError, ValueError) as e:  # CheckpointError is a ValueError; torch missing
            raise PolicySpecError(f"cannot load the policy directory {self.path}: {e}") from e
        if self.threads is not None and "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(self.threads)
        return policy


def resolve_policy_spec(spec: str, *, threads: int | None = None, **settings: Any) -> Any:
    """What ``--policy`` names: a checkpoint directory (a :class:`DirectoryPolicy`), ``zoo:NAME`` (a reference
    checkpoint shipped with the package) or ``module:attribute``.

    ``module:attribute`` (or ``path/to/file.py:attribute``) is imported by
    :func:`~r2s2r_envs.evaluation.policy.import_policy` and may be a factory ``f(env) -> Policy``, a policy class
    (:class:`~r2s2r_envs.evaluation.policy.ClassPolicy`) or a policy object. ``settings`` (execution settings of a
    checkpoint: ``execute_steps``, ``temporal_ensemble``) apply to checkpoints only.

    Raises:
        PolicySpecError: neither an existing directory nor an importable ``module:attribute``, or an attribute that
            is neither callable nor a policy.
    """
    if spec.startswith("zoo:"):  # a reference checkpoint that ships with the package
        try:
            return DirectoryPolicy(resolve_checkpoint(spec), threads=threads, **settings)
        except ZooError as e:
            raise PolicySpecError(f"--policy {spec!r}: {e}") from e
    path = Path(spec)
    if path.is_dir():
        return DirectoryPolicy(path, threads=threads, **settings)
    if settings:
        raise PolicySpecError(f"--policy {spec!r}: {sorted(settings)} apply to a checkpoint (a directory or zoo:NAME)")
    return import_policy(spec)


__all__ = ["DirectoryPolicy", "PolicySpecError", "resolve_policy_spec"]
