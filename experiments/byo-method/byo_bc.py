"""Domain-weighted BC: an MLP regressing the action chunk; a real sample's loss weighs more than a sim one's."""

import torch
from torch import nn

from r2s2r_envs.policies.method import Batch, Method, Spec


class DomainWeightedBC(Method):
    name = "dw-bc"  # its name in results and on the leaderboard
    real_weight = 2.0  # a real (lab) sample's loss counts as much as this many sim samples'

    def __init__(self, spec: Spec) -> None:
        super().__init__(spec)
        layers, width = [], spec.state_dim  # the recipe's sizes (cpu: 3 layers of 256)
        for _ in range(spec.layers):
            layers += [nn.Linear(width, spec.hidden_dim), nn.LayerNorm(spec.hidden_dim), nn.SiLU()]
            width = spec.hidden_dim
        self.net = nn.Sequential(*layers, nn.Linear(width, spec.chunk_dim))

    def loss(self, batch: Batch) -> torch.Tensor:
        # Each sample's mean squared error over its chunk (weight 0: past the demo's end) ...
        err = ((self.net(batch.state) - batch.target) ** 2 * batch.weight).sum(1) / batch.weight.sum(1).clamp(min=1)
        # ... averaged with a per-domain weight (domain: 1 real, 0 sim).
        w = torch.where(batch.domain == 1, self.real_weight, 1.0)
        return (w * err).sum() / w.sum()

    def predict(self, batch: Batch) -> torch.Tensor:
        return self.net(batch.state)  # normalized chunks (B, H * A); the suite maps them to env actions
