"""Training batches through the shared pipeline: :func:`batch_tensors` encodes a loader batch per step;
:class:`ResidentBatches` encodes every sample once and keeps it on the training device (low-dimensional data up to
:data:`RESIDENT_LIMIT_BYTES`), giving the same batches as a gather.

Camera frames stay uint8 in the loaders (a 1,000-demo set of two 64 px cameras is about 1.9 GB; float32 would be
four times that) and become float32 batch by batch: on the CPU in the pipeline, for a GPU on the device after the
uint8 frames are copied there."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from r2s2r_envs.datasets.loaders import TrajectoryDataset
from r2s2r_envs.datasets.mixture import CoTrainingMixture
from r2s2r_envs.policies.pipeline import Pipeline


def batch_tensors(
    pipeline: Pipeline, batch: dict[str, Any], device: torch.device | str = "cpu"
) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor]:
    """A raw loader batch through the pipeline: ``(inputs, normalized targets, loss weights)`` on ``device``."""
    on_cpu = torch.device(device).type == "cpu"
    encoded = pipeline.encode_obs(batch["obs"], scale_images=on_cpu)
    inputs = {k: torch.from_numpy(v).to(device) for k, v in encoded.items()}
    if not on_cpu:
        for key in pipeline.image_keys:
            inputs[f"image/{key}"] = inputs[f"image/{key}"].to(torch.float32).div_(255.0)
    target = torch.from_numpy(pipeline.encode_actions(batch["actions"])).to(device)
    mask = np.repeat(batch["action_mask"].astype(np.float32), pipeline.action_dim, axis=1)
    return inputs, target, torch.from_numpy(mask).to(device)


class ResidentBatches:
    """Every training sample encoded once and kept on the training device; a batch is a gather.

    The mixture draws each batch's composition as it would for :meth:`CoTrainingMixture.sample` (the same random
    stream, so the same samples), and the batch is gathered from tensors made once by the pipeline: the same
    inputs, targets, loss weights and domains as encoding each batch anew (the feature stage and the normalization
    work sample by sample), without the per-step gathering, feature computation and host-to-device copies. For
    low-dimensional inputs only (camera frames would not fit).

    Args:
        mixture: the training mixture (its datasets and random stream).
        pipeline: the shared pipeline.
        device: where the tensors live and the batches are gathered.
        chunk: samples encoded at a time while building.
    """

    def __init__(self, mixture: CoTrainingMixture, pipeline: Pipeline, device: torch.device, chunk: int = 8192) -> None:
        if pipeline.image_keys:
            raise ValueError("ResidentBatches holds low-dimensional inputs only; camera frames are encoded per batch")
        self.mixture = mixture
        self.action_dim = pipeline.action_dim
        state, target, mask, domain, offsets = [], [], [], [], [0]
        for d in mixture.datasets:
            for start in range(0, len(d), chunk):
                batch = d.get_batch(np.arange(start, min(start + chunk, len(d))), normalizer=mixture.normalizer)
                inputs, targets, _ = batch_tensors(pipeline, batch)  # the per-step encoding, once per sample
                state.append(inputs["state"])
                target.append(targets)
                mask.append(torch.from_numpy(batch["action_mask"]))  # compact: widened per action at sampling
                domain.append(torch.from_numpy(batch["domain"]))
            offsets.append(offsets[-1] + len(d))
        self.offsets = np.asarray(offsets[:-1], dtype=np.int64)
        self.state = torch.cat(state).to(device)
        self.target = torch.cat(target).to(device)
        self.mask = torch.cat(mask).to(device)
        self.domain = torch.cat(domain).to(device)
        self.device = device

    @staticmethod
    def nbytes(datasets: list[TrajectoryDataset], pipeline: Pipeline) -> int:
        """Memory the tensors take for ``datasets``."""
        per_sample = 4 * (pipeline.state_dim + pipeline.chunk_dim) + pipeline.action_chunk + 8
        return per_sample * sum(len(d) for d in datasets)

    def sample(self, batch_size: int) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor, torch.Tensor]:
        """One batch: ``(inputs, normalized targets, loss weights, domain labels)``, as :func:`batch_tensors` and
        the batch's ``domain`` give for ``mixture.sample(batch_size)``."""
        return self.gather(self.draw(batch_size))

    def draw(self, batch_size: int) -> torch.Tensor:
        """The samples of one batch, drawn by the mixture: ``(batch_size,)`` indices into the resident tensors."""
        which, local = self.mixture.draw(batch_size)
        return torch.from_numpy(self.offsets[which] + local).to(self.device)

    def gather(self, index: torch.Tensor) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor, torch.Tensor]:
        """The batch of the samples ``index`` (:meth:`draw`): ``(inputs, targets, loss weights, domain labels)``."""
        mask = self.mask.index_select(0, index).to(torch.float32)
        weight = mask.repeat_interleave(self.action_dim, dim=1)
        return (
            {"state": self.state.index_select(0, index)},
            self.target.index_select(0, index),
            weight,
            self.domain.index_select(0, index),
        )


#: Largest sample tensors kept resident (:class:`ResidentBatches`); bigger data is encoded batch by batch.
RESIDENT_LIMIT_BYTES = 8 * 2**30
