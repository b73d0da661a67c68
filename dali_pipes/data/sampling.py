"""Which samples a rank reads in an epoch, in which order: DistributedSampler semantics.

The order is ``torch.randperm`` seeded with ``seed + epoch`` and a rank's share is every
``world_size``-th index starting at ``rank``, exactly as ``DistributedSampler`` does, so a
loader here and a ``DataLoader(sampler=DistributedSampler(...))`` agree index for index.
Without ``drop_last`` the permutation is padded with its own head so every rank gets the
same number of samples (and DDP never waits on a rank that ran out); with ``drop_last`` the
tail that does not divide evenly is dropped. Batching then cuts the rank's samples into
``batch_size`` pieces, keeping or dropping the last partial batch.

Resuming part-way (``start``: samples of the epoch order already consumed, across all
ranks). Because rank ``r`` takes every ``world_size``-th sample, after ``k`` batches on every
rank the samples consumed are exactly the first ``k * batch_size * world_size`` of the
(padded) epoch order, whatever the world size was. So the rest of an epoch is described by
``(epoch, start)`` alone, and it is dealt out again by the same rule, for any world size:
the remaining order ``order[start:]``, padded by carrying on from the head of the epoch
order (or with ``drop_last`` cut to a multiple of the world size), every
``world_size``-th sample to a rank. With ``start=0`` that is ``DistributedSampler``; with
the world size and batch size of the run that consumed ``start`` samples it is exactly
that run's continuation, padding included (so resuming, even twice, changes nothing); with
another world size every remaining sample is read once, plus only the padding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from dali_pipes.data.interface import Blocks, Labelled, ReadInBlocks
from dali_pipes.data.specs import SamplingSpec
from dali_pipes.errors import ConfigError


@dataclass(frozen=True)
class RankSampler:
    """One rank's sample indices per epoch: ``DistributedSampler``'s (for independent
    samples; a source read in blocks is read in :class:`StreamSampler`'s order)."""

    num_items: int
    spec: SamplingSpec

    @property
    def epoch_length(self) -> int:
        """Samples in an epoch's order, before it is padded and dealt out to the ranks:
        every item once here; a sampler that draws (:mod:`dali_pipes.data.weighted`) says
        how many it draws."""
        return self.num_items

    @property
    def num_samples(self) -> int:
        """Samples this rank reads per epoch (the same on every rank)."""
        return self._share(self.epoch_length)

    def _share(self, count: int) -> int:
        """One rank's share of ``count`` samples: DistributedSampler's rule (with
        ``drop_last`` whole rounds only, else rounded up and padded)."""
        world = self.spec.world_size
        return count // world if self.spec.drop_last else math.ceil(count / world)

    def remaining(self, start: int) -> int:
        """Samples this rank reads of an epoch of which ``start`` were already consumed."""
        return self._share(max(self.epoch_length - start, 0))

    def order(self, epoch: int) -> np.ndarray:
        """The epoch order of all samples (before padding and dealing out): f(seed, epoch)."""
        if self.spec.shuffle:
            g = torch.Generator()
            g.manual_seed(self.spec.seed + epoch)
            return torch.randperm(self.num_items, generator=g).numpy()
        return np.arange(self.num_items)

    def indices(self, epoch: int, start: int = 0) -> np.ndarray:
        """This rank's samples of ``epoch`` after the first ``start`` of the epoch order."""
        order = self.order(epoch)
        rest = order[start:]
        total = self.remaining(start) * self.spec.world_size
        # Pad by carrying on from the head of the epoch order (repeated if needed), or drop
        # the uneven tail: at start=0 exactly DistributedSampler's padding.
        if total > len(rest):
            rest = np.concatenate([rest, np.resize(order, total - len(rest))])
        return rest[self.spec.rank : total : self.spec.world_size].astype(np.int64)

    def repeats(self, epoch: int, start: int = 0) -> np.ndarray:
        """For each of :meth:`indices`' samples, the how-manieth time its sample comes in
        the epoch (0: the first): what makes a repeat's augmentation draws its own. Each
        sample comes once here (the padding repeats the head's draws, as before)."""
        return np.zeros(self.remaining(start), np.int64)

    def num_batches(self, batch_size: int, start: int = 0) -> int:
        """Batches this rank yields (from ``start``: see :meth:`indices`)."""
        if self.spec.drop_last:
            return self.remaining(start) // batch_size
        return math.ceil(self.remaining(start) / batch_size)

    def batches(self, epoch: int, batch_size: int, start: int = 0) -> list[np.ndarray]:
        """This rank's batches of ``epoch`` after the first ``start`` samples of its order."""
        order = self.indices(epoch, start)
        count = self.num_batches(batch_size, start)
        return [order[i * batch_size : (i + 1) * batch_size] for i in range(count)]

    def positions(self, start: int = 0) -> np.ndarray:
        """Each of :meth:`indices`' samples' place in the epoch's padded order (the slot a
        substitute for a bad file is drawn for): the same slot has the same position on
        any world size, because rank ``r`` reads every ``world_size``-th one."""
        count = self.remaining(start)
        world = self.spec.world_size
        return start + self.spec.rank + world * np.arange(count, dtype=np.int64)

    def batch_positions(self, batch_size: int, start: int = 0) -> list[np.ndarray]:
        """:meth:`positions` cut like :meth:`batches`."""
        where = self.positions(start)
        count = self.num_batches(batch_size, start)
        return [where[i * batch_size : (i + 1) * batch_size] for i in range(count)]

    def check_resume(self, start: int, world_size: int, batch_size: int) -> None:
        """Raise unless this sampler can continue an epoch of which ``start`` samples were
        consumed by ``world_size`` ranks, cutting the rest into batches of ``batch_size``:
        for files any world and batch size can (see the module docstring)."""
        if not 0 <= start <= self.epoch_length:
            size = self.epoch_length
            bound = f"num_items={size}" if size == self.num_items else f"{size} drawn per epoch"
            raise ConfigError(
                f"loader state samples_seen={start} is invalid: must be in [0, {bound}]"
            )


@dataclass(frozen=True)
class StreamSampler(RankSampler):
    """The order for a source read in blocks (the shards of a pack, the row groups of
    Parquet files; :class:`~dali_pipes.data.interface.ReadInBlocks`): block by block, so
    reads stay sequential-ish.

    Each epoch visits the blocks in an order drawn from (seed, epoch) and concatenates
    their samples; rank ``r`` takes the ``r``-th contiguous run of that sequence (padded
    or truncated exactly like :class:`RankSampler`, so every rank has the same length and
    the ranks' samples are disjoint), then samples are shuffled within consecutive windows
    of ``layout.shuffle_buffer``. The same order in every backend: f(seed, epoch, rank).

    Ranks own contiguous runs, so what has been consumed is not a prefix of one order but
    the head of every rank's run: an epoch resumes part-way only on the world size that
    consumed ``start`` samples, each rank from ``start / world_size`` into its run, and only
    at a batch boundary (DALI's webdataset reader restarts there). A different world size
    is refused in one line (:meth:`check_resume`); the next epoch can start on any.
    """

    layout: Blocks | None = None

    def stream(self, epoch: int) -> np.ndarray:
        """This rank's samples in shard order, before the window shuffle."""
        assert self.layout is not None
        spec, lay = self.spec, self.layout
        shards = np.arange(lay.num_blocks)
        if spec.shuffle:
            g = torch.Generator()
            g.manual_seed(spec.seed + epoch)
            shards = torch.randperm(lay.num_blocks, generator=g).numpy()
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

    def remaining(self, start: int) -> int:
        return max(self.num_samples - start // self.spec.world_size, 0)

    def indices(self, epoch: int, start: int = 0) -> np.ndarray:
        mine = self.stream(epoch)
        window, spec = self.window, self.spec
        if window > 1:
            rng = np.random.default_rng([spec.seed, epoch, spec.rank])
            for first in range(0, len(mine), window):
                rng.shuffle(mine[first : first + window])
        return mine[start // spec.world_size :]

    def positions(self, start: int = 0) -> np.ndarray:
        """A slot's place: this rank's run of the stream starts at ``rank * num_samples``
        (ranks own contiguous runs; such an epoch resumes on the saved world size only)."""
        per, world = self.num_samples, self.spec.world_size
        first = self.spec.rank * per + start // world
        return first + np.arange(self.remaining(start), dtype=np.int64)

    def check_resume(self, start: int, world_size: int, batch_size: int) -> None:
        if start and world_size != self.spec.world_size:
            raise ConfigError(
                f"loader state saved on world_size={world_size} cannot resume a packed dataset "
                "(data=shards) or Parquet files (data=parquet) mid-epoch on "
                f"world_size={self.spec.world_size}: their ranks read contiguous runs of "
                "blocks; resume on the saved world size, or start the next "
                "epoch with set_epoch"
            )
        super().check_resume(start, world_size, batch_size)
        per_rank = start // world_size
        if start % world_size or per_rank % batch_size:
            raise ConfigError(
                f"loader state samples_seen={start} is {start / world_size:g} samples per rank, "
                f"not whole batches of batch_size={batch_size}, which a dataset read in blocks "
                "(data=shards, data=parquet) needs to resume mid-epoch; resume with the saved "
                "batch size"
            )


def draw_ids(identity: np.ndarray, repeats: np.ndarray | int | None) -> np.ndarray:
    """What samples' augmentation is drawn from: their identity, and for a sample drawn
    again in the same epoch (:meth:`RankSampler.repeats`) its repeat number above it, so
    each repeat draws anew while a first draw stays what it always was."""
    ids = np.asarray(identity, np.int64)
    if repeats is None:
        return ids
    return ids + (np.asarray(repeats, np.int64) << np.int64(REPEAT_SHIFT))


#: Bits of a draw id below a sample's repeat number (identities are indices, far below).
REPEAT_SHIFT = 32


def sampler_for(source: Labelled, spec: SamplingSpec) -> RankSampler:
    """DistributedSampler order for independent samples; the streaming order for a source
    read in blocks."""
    blocks = source.blocks() if isinstance(source, ReadInBlocks) else None
    if blocks is None:
        return RankSampler(len(source), spec)
    return StreamSampler(len(source), spec, blocks)
