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

from dali_pipes.shards import ShardLayout
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


@dataclass(frozen=True)
class StreamSampler(ShardSampler):
    """The order for a packed dataset: shard by shard, so reads stay sequential-ish.

    Each epoch visits the shards in an order drawn from (seed, epoch) and concatenates
    their samples; rank ``r`` takes the ``r``-th contiguous run of that sequence (padded
    or truncated exactly like :class:`ShardSampler`, so every rank has the same length and
    the ranks' samples are disjoint), then samples are shuffled within consecutive windows
    of ``layout.shuffle_buffer``. The same order in every backend: f(seed, epoch, rank).
    """

    layout: ShardLayout | None = None

    def stream(self, epoch: int) -> np.ndarray:
        """This rank's samples in shard order, before the window shuffle."""
        assert self.layout is not None
        spec, lay = self.spec, self.layout
        shards = np.arange(lay.num_shards)
        if spec.shuffle:
            g = torch.Generator()
            g.manual_seed(spec.seed + epoch)
            shards = torch.randperm(lay.num_shards, generator=g).numpy()
        order = np.concatenate([lay.members(int(s)) for s in shards] or [np.zeros(0, np.int64)])
        per = self.num_samples
        total = per * spec.world_size
        order = np.resize(order, total) if total > self.num_items else order[:total]
        return order[spec.rank * per : (spec.rank + 1) * per].astype(np.int64)

    @property
    def window(self) -> int:
        """Samples are shuffled within runs of this many consecutive ones (1: not at all)."""
        assert self.layout is not None
        return (
            self.layout.shuffle_buffer
            if self.spec.shuffle and self.layout.shuffle_buffer > 1
            else 1
        )

    def indices(self, epoch: int) -> np.ndarray:
        mine = self.stream(epoch)
        window, spec = self.window, self.spec
        if window > 1:
            rng = np.random.default_rng([spec.seed, epoch, spec.rank])
            for start in range(0, len(mine), window):
                rng.shuffle(mine[start : start + window])
        return mine


def sampler_for(num_items: int, spec: SamplingSpec, layout: ShardLayout | None) -> ShardSampler:
    """DistributedSampler order for files; the streaming order for a packed dataset."""
    if layout is None:
        return ShardSampler(num_items, spec)
    return StreamSampler(num_items, spec, layout)
