"""A trained policy at inference: :class:`TrainedPolicy` and :func:`load_policy` (needs torch).

The policy satisfies the evaluation protocol's ``Policy`` (``reset(seed)``, ``act(obs)``; docs/protocol.md): it
stacks the episode's observations as the training data was stacked, predicts an action chunk through the same
:class:`~r2s2r_envs.policies.pipeline.Pipeline` as training, executes its first ``execute_steps`` actions
(receding horizon) and predicts again. Its randomness (the flow's noise) comes from the seed of ``reset``.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from r2s2r_envs.policies.checkpoint import WEIGHTS_FILE, CheckpointError, read_checkpoint
from r2s2r_envs.policies.models import PolicyModel
from r2s2r_envs.policies.pipeline import FrameStacker, Pipeline


class TrainedPolicy:
    """A policy trained by ``r2s2r train``.

    Args:
        model: the network (switched to eval mode).
        pipeline: the observation/action pipeline of its training.
        execute_steps: actions executed per predicted chunk.
        flow_steps: Euler steps of the flow.
        cfg_scale: guidance scale toward the real domain (CFG models).
        metadata: what was trained on what (see ``r2s2r_envs.policies.checkpoint.METADATA_KEYS``).
        config: the resolved training config.
    """

    def __init__(
        self,
        model: PolicyModel,
        pipeline: Pipeline,
        *,
        execute_steps: int,
        flow_steps: int,
        cfg_scale: float,
        metadata: dict[str, Any],
        config: dict[str, Any],
    ) -> None:
        self.model = model.eval()
        self.pipeline = pipeline
        self.execute_steps = int(execute_steps)
        self.flow_steps = int(flow_steps)
        self.cfg_scale = float(cfg_scale)
        self.metadata = dict(metadata)
        self.config = dict(config)
        self.name = f"r2s2r-{self.metadata['method']}"
        self._stacker = FrameStacker(pipeline)
        self._queue: list[np.ndarray] = []
        self._generator = torch.Generator().manual_seed(0)

    @property
    def settings(self) -> dict[str, Any]:
        """What an evaluation result records about this policy (JSON)."""
        return {"metadata": self.metadata, "execute_steps": self.execute_steps, "cfg_scale": self.cfg_scale}

    def reset(self, seed: int | None = None) -> None:
        """Starts an episode: forgets the frame stack and the queued actions; the flow's noise comes from ``seed``."""
        self._stacker.reset()
        self._queue = []
        self._generator = torch.Generator().manual_seed(0 if seed is None else int(seed))

    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """The next action (float32, the env's action shape) for an observation of the env.

        Raises:
            PipelineError: the observation lacks a key the policy was trained on, has another shape, or is not
                finite.
        """
        stacked = self._stacker.push(obs)
        if not self._queue:
            self._queue = list(self.predict_chunk(stacked)[0, : self.execute_steps])
        return self._queue.pop(0).copy()

    def predict_chunk(self, stacked: dict[str, np.ndarray]) -> np.ndarray:
        """Action chunks ``(B, H, A)`` in env units for stacked raw observations ``{key: (B, F, ...)}``."""
        inputs = {k: torch.from_numpy(v) for k, v in self.pipeline.encode_obs(stacked).items()}
        flat = self.model.predict(inputs, self._generator, flow_steps=self.flow_steps, cfg_scale=self.cfg_scale)
        return self.pipeline.decode_actions(flat.numpy())

    # Sent to evaluation workers as weights, not as a live generator; a worker process runs single-threaded.
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_generator"] = None
        state["_queue"] = []
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._generator = torch.Generator().manual_seed(0)
        torch.set_num_threads(1)

    def __repr__(self) -> str:
        return f"TrainedPolicy(method={self.metadata['method']!r}, real_fraction={self.metadata['real_fraction']})"


def build_model(model_config: dict[str, Any]) -> PolicyModel:
    """A :class:`PolicyModel` from the ``model`` section of a checkpoint config."""
    return PolicyModel(**copy.deepcopy(model_config))


def load_policy(path: str | os.PathLike[str]) -> TrainedPolicy:
    """Loads a policy written by ``r2s2r train --out DIR``.

    Args:
        path: the checkpoint directory.

    Returns:
        A :class:`TrainedPolicy` with ``reset(seed)``, ``act(obs)`` and ``metadata``.

    Raises:
        FileNotFoundError: the directory does not exist.
        CheckpointError: not a checkpoint, another checkpoint version, or weights that do not fit the config.
    """
    data = read_checkpoint(path)
    root = Path(path)
    try:
        state = torch.load(root / WEIGHTS_FILE, map_location="cpu", weights_only=True)
    except Exception as exc:  # a truncated or foreign file: torch raises several types
        raise CheckpointError(
            f"{root / WEIGHTS_FILE} cannot be read as policy weights ({type(exc).__name__}: {exc})"
        ) from None
    try:
        model = build_model(data["model"])
        model.load_state_dict(state)
        pipeline = Pipeline.from_dict(data["pipeline"])
    except (RuntimeError, KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{root}: the weights do not fit the model in {root / 'config.json'} ({exc})") from None
    config = data["config"]
    return TrainedPolicy(
        model,
        pipeline,
        execute_steps=config["execute_steps"],
        flow_steps=config["flow_steps"],
        cfg_scale=config["cfg_scale"],
        metadata=data["metadata"],
        config=config,
    )
