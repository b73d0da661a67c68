"""Weighted sampling: ``WeightedRandomSampler``'s draws, dealt out to ranks like
``DistributedSampler``'s order, and its class-balanced form.

An epoch draws ``draws`` samples with probability proportional to ``weights`` (with or
without replacement) exactly as ``torch.utils.data.WeightedRandomSampler`` does with a
generator seeded ``seed + epoch``: the same ``torch.multinomial`` call, so the draws are
torch's own, and a pure function of (seed, epoch). The drawn order is then padded and
dealt out like any epoch order (:class:`~dali_pipes.data.sampling.RankSampler`): every
rank reads the same number of samples, the ranks' shares are disjoint slots of one order,
and an epoch resumes part-way from the samples consumed.

A sample drawn more than once in an epoch is augmented afresh each time, as a
``DataLoader`` would: :meth:`WeightedSampler.repeats` counts its earlier draws, and the
augmentation draws from (seed, epoch, sample, repeat).

Class-balanced weights (:func:`class_balanced`) give each sample
``count(its class) ** -power``: ``power=1`` draws every class equally often, ``0.5``
halfway (square-root balancing, as long-tailed recipes use), ``0`` uniformly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from dali_pipes.data.sampling import RankSampler
from dali_pipes.errors import ConfigError


@dataclass(frozen=True)
class WeightedSampler(RankSampler):
    """``draws`` samples per epoch drawn by ``weights`` (one per sample, not all zero)."""

    weights: np.ndarray = field(default_factory=lambda: np.ones(0), compare=False)
    draws: int = 0
    replacement: bool = True

    def __post_init__(self) -> None:
        weights = np.asarray(self.weights, np.float64)
        if weights.shape != (self.num_items,):
            raise ConfigError(
                f"sampling weights: {weights.size} given for {self.num_items} samples; "
                "give one weight per sample, in the dataset's order"
            )
        if not np.all(np.isfinite(weights)) or weights.min(initial=0) < 0 or not weights.any():
            raise ConfigError(
                "sampling weights must be finite, >= 0 and not all 0; check the weights given"
            )
        if self.draws < 1:
            raise ConfigError(f"sampling.num_samples={self.draws} is invalid: must be >= 1")
        if not self.replacement and self.draws > np.count_nonzero(weights):
            raise ConfigError(
                f"sampling.num_samples={self.draws} without replacement needs as many samples "
                f"of weight > 0, but {np.count_nonzero(weights)} have one; draw fewer, or set "
                "sampling.replacement=true"
            )

    @property
    def epoch_length(self) -> int:
        return self.draws

    def order(self, epoch: int) -> np.ndarray:
        """The epoch's draws: ``WeightedRandomSampler(weights, draws, replacement)`` with a
        generator seeded ``seed + epoch``."""
        g = torch.Generator()
        g.manual_seed(self.spec.seed + epoch)
        weights = torch.as_tensor(np.asarray(self.weights), dtype=torch.double)
        drawn = torch.multinomial(weights, self.draws, self.replacement, generator=g)
        return drawn.numpy().astype(np.int64)

    def repeats(self, epoch: int, start: int = 0) -> np.ndarray:
        return counted_repeats(self, epoch, start)


def class_balanced(labels: np.ndarray, power: float = 1.0) -> np.ndarray:
    """Each sample's weight ``count(its class) ** -power``: ``power=1`` draws every class
    equally often."""
    if power < 0:
        raise ConfigError(f"sampling.power={power} is invalid: must be >= 0")
    labels = np.asarray(labels, np.int64)
    counts = np.bincount(labels)
    return np.asarray(counts[labels], np.float64) ** -power


def counted_repeats(sampler: RankSampler, epoch: int, start: int) -> np.ndarray:
    """:meth:`~dali_pipes.data.sampling.RankSampler.repeats` of a sampler whose epoch order
    may hold a sample several times: its earlier places in the order, padding included."""
    order = sampler.order(epoch)
    total = start + sampler.remaining(start) * sampler.spec.world_size
    padded = order if total <= len(order) else np.resize(order, total)
    earlier = _earlier(padded[:total])
    return earlier[start + sampler.spec.rank : total : sampler.spec.world_size].astype(np.int64)


def _earlier(order: np.ndarray) -> np.ndarray:
    """For each place of ``order``, how many times its value came before it."""
    sort = np.argsort(order, kind="stable")
    ranked = order[sort]
    first = np.r_[True, ranked[1:] != ranked[:-1]]
    where = np.arange(len(order))
    starts = np.maximum.accumulate(np.where(first, where, 0))
    out = np.empty(len(order), np.int64)
    out[sort] = where - starts
    return out


__all__ = ["WeightedSampler", "class_balanced", "counted_repeats"]
