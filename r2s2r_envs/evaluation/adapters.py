"""Adapters that run policies trained by other frameworks through the protocol (docs/interop.md#robomimic).

A robomimic checkpoint (``model_epoch_N.pth``, written by robomimic's own ``scripts/train.py`` on one of this suite's
HDF5 files) becomes a :class:`~r2s2r_envs.evaluation.protocol.Policy`:

.. code-block:: python

    # my_adapter.py
    from r2s2r_envs.evaluation.adapters import RobomimicCheckpoint

    make_policy = RobomimicCheckpoint("bc_rnn/20260101000000/models/model_epoch_100.pth")

.. code-block:: bash

    r2s2r evaluate --policy my_adapter.py:make_policy --env PickSort-Ungrounded-v0 --episodes 100

Needs robomimic (the Makefile installs 0.3.0 without its old pins) and torch; neither is imported before a
checkpoint is loaded.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np


class RobomimicPolicy:
    """A robomimic checkpoint as a policy of the protocol: ``reset`` starts robomimic's rollout policy (its RNN state
    for BC-RNN) and seeds torch, ``act`` passes the checkpoint's observation keys, as float32, to it.

    Args:
        checkpoint: a robomimic ``.pth`` checkpoint.
        device: torch device (default ``"cpu"``).

    Attributes:
        name: ``robomimic:<algo>`` (recorded in the result's policy section).
        settings: the checkpoint path and algorithm.
        obs_keys: the observation keys the checkpoint reads.
    """

    def __init__(self, checkpoint: str | os.PathLike[str], *, device: str = "cpu") -> None:
        import robomimic.utils.file_utils as file_utils
        import torch

        path = Path(checkpoint).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such robomimic checkpoint (a model_epoch_N.pth of robomimic's train)")
        self._torch = torch
        self.policy, ckpt = file_utils.policy_from_checkpoint(ckpt_path=str(path), device=torch.device(device))
        shape_meta = ckpt["shape_metadata"]
        self.obs_keys: list[str] = list(shape_meta["all_obs_keys"])
        self.action_dim = int(shape_meta["ac_dim"])
        algo = str(ckpt.get("algo_name", "unknown"))
        self.name = f"robomimic:{algo}"
        self.settings: dict[str, Any] = {"checkpoint": str(path), "algo": algo, "obs_keys": self.obs_keys}

    def reset(self, seed: int | None) -> None:
        """Starts an episode; a stochastic robomimic policy (GMM) draws from torch's generator, seeded here."""
        self._torch.manual_seed(0 if seed is None else int(seed))
        self.policy.start_episode()

    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """The checkpoint's action for one observation of the env.

        Raises:
            KeyError: the env does not give a key the checkpoint reads (e.g. trained on images, run in state mode).
        """
        missing = [k for k in self.obs_keys if k not in obs]
        if missing:
            raise KeyError(
                f"the robomimic checkpoint reads observation keys {missing}, which this env does not give "
                f"(it gives {sorted(obs)}); make the env with the obs_mode the checkpoint was trained on"
            )
        with self._torch.no_grad():
            action = self.policy({k: np.asarray(obs[k], dtype=np.float32) for k in self.obs_keys})
        return np.asarray(action, dtype=np.float32).reshape(self.action_dim)


class RobomimicCheckpoint:
    """A policy factory ``f(env) -> RobomimicPolicy`` for ``r2s2r evaluate --policy file.py:NAME``; picklable (it
    holds only the path), so the protocol's worker processes each load the checkpoint themselves.

    Args:
        checkpoint: a robomimic ``.pth`` checkpoint.
        device: torch device (default ``"cpu"``).
    """

    def __init__(self, checkpoint: str | os.PathLike[str], *, device: str = "cpu") -> None:
        self.checkpoint = str(checkpoint)
        self.device = device

    def __call__(self, env: Any) -> RobomimicPolicy:
        return RobomimicPolicy(self.checkpoint, device=self.device)
