"""Repeated augmentation (DeiT's ``RASampler``, timm's ``RepeatAugSampler``): each sample
seen ``count`` times in an epoch, on different ranks, each time with its own augmentation.

An epoch's order is a permutation of the samples drawn from (seed, epoch) with every
sample repeated ``count`` times in a row, and the epoch is cut to the usual length (the
dataset's size): ranks take every ``world_size``-th place of it, as
``DistributedSampler`` does, so the copies of a sample go to ``count`` different ranks.
With ``seed=0`` and a dataset size that divides by the world size, a rank reads exactly
what ``RepeatAugSampler(num_repeats=count, selected_round=0)`` gives it (which seeds its
permutation with the epoch alone); DeiT's default rounds the epoch down to a multiple of
256 samples, this does not. A copy's repeat number
(:meth:`~dali_pipes.data.sampling.RankSampler.repeats`) makes its augmentation its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dali_pipes.data.sampling import RankSampler
from dali_pipes.data.weighted import counted_repeats
from dali_pipes.errors import ConfigError


@dataclass(frozen=True)
class RepeatedSampler(RankSampler):
    """Every sample ``count`` times in a row in a shuffled order, cut to one epoch."""

    count: int = 3

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ConfigError(f"sampling.repeats={self.count} is invalid: must be >= 1")

    def order(self, epoch: int) -> np.ndarray:
        """The shuffled samples, each ``count`` times in a row (longer than an epoch: the
        ranks read its first ``num_items`` places, and the padding continues it)."""
        return np.repeat(super().order(epoch), self.count)

    def repeats(self, epoch: int, start: int = 0) -> np.ndarray:
        return counted_repeats(self, epoch, start)


__all__ = ["RepeatedSampler"]
