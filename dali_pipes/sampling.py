"""Which samples a rank reads in an epoch, in which order: DistributedSampler semantics.

The order is ``torch.randperm`` seeded with ``seed + epoch`` and the shard is every
``world_size``-th index starting at ``rank``, exactly as ``DistributedSampler`` does, so a
loader here and a ``DataLoader(sampler=DistributedSampler(...))`` agree index for index.
Without ``drop_last`` the permutation is padded with its own head so every rank gets the
same number of samples (and DDP never waits on a rank that ran out); with ``drop_last`` the
tail that does not divide evenly is dropped. Batching then cuts the rank's samples into
``batch_size`` pieces, keeping or dropping the last partial batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from dali_pipes.spec import SamplingSpec


@dataclass(frozen=True)
class ShardSampler:
    """The per-epoch sample indices of one rank."""

    num_items: int
    spec: SamplingSpec

    @property
    def num_samples(self) -> int:
        """Samples this rank reads per epoch (the same on every rank)."""
        n, world = self.num_items, self.spec.world_size
        if self.spec.drop_last and n % world:
            return math.ceil((n - world) / world)
        return math.ceil(n / world)

    def indices(self, epoch: int) -> np.ndarray:
        n = self.num_items
        if self.spec.shuffle:
            g = torch.Generator()
            g.manual_seed(self.spec.seed + epoch)
            order = torch.randperm(n, generator=g).numpy()
        else:
            order = np.arange(n)
        total = self.num_samples * self.spec.world_size
        # Pad with the head of the order (repeated if needed), or drop the uneven tail.
        order = np.resize(order, total) if total > n else order[:total]
        return order[self.spec.rank : total : self.spec.world_size].astype(np.int64)

    def num_batches(self, batch_size: int) -> int:
        if self.spec.drop_last:
            return self.num_samples // batch_size
        return math.ceil(self.num_samples / batch_size)

    def batches(self, epoch: int, batch_size: int) -> list[np.ndarray]:
        order = self.indices(epoch)
        count = self.num_batches(batch_size)
        return [order[i * batch_size : (i + 1) * batch_size] for i in range(count)]
