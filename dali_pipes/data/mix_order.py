"""The training order of several sources read together in proportions (``data=mix``).

Each epoch reads ``per_epoch`` samples of every part, as the weights say
(:func:`epoch_shares`). A part's samples come from its own endless stream: permutations of
the part, one after another, each drawn from (seed, part, cycle). Epoch ``e`` takes the
stream's places ``e * per_epoch`` to ``(e + 1) * per_epoch``. So a part read less than its
size per epoch (down-sampled) shows every sample once before any comes again, across
epochs; a part read more (up-sampled) shows every sample once per cycle, and a sample that
comes twice in an epoch draws its own augmentation the second time
(:meth:`MixSampler.repeats`). The parts' samples are then shuffled together by (seed,
epoch), and dealt out to the ranks like any epoch order
(:class:`~dali_pipes.data.sampling.RankSampler`).

Everything is a pure function of (seed, epoch): an epoch resumed part-way continues every
part where it was, on any world size, and ``set_epoch`` gives the same draws again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dali_pipes.data.interface import PartShare
from dali_pipes.data.sampling import RankSampler
from dali_pipes.data.weighted import counted_repeats
from dali_pipes.errors import ConfigError

#: Keeps a mix's draws apart from every other use of the seed.
_MIX = 0x6D6978


def epoch_shares(sizes: Sequence[int], weights: Sequence[float] | None, total: int) -> list[int]:
    """How many samples of each part an epoch of ``total`` reads: ``total`` split in
    proportion to ``weights`` (None: to the parts' sizes), the rounding remainders given to
    the largest fractions, so the counts sum to ``total`` exactly."""
    if isinstance(total, bool) or not isinstance(total, int) or total < 1:
        raise ConfigError(f"epoch_size={total!r} is invalid: give a number of samples >= 1")
    if sum(sizes) == 0:
        raise ConfigError("every dataset of the mix is empty: give datasets with images")
    shares = np.asarray(sizes if weights is None else weights, np.float64)
    if shares.size == 0 or not np.all(np.isfinite(shares)) or shares.min() < 0:
        raise ConfigError(f"weights {shares.tolist()} are invalid: give each a number >= 0")
    if shares.sum() <= 0:
        raise ConfigError("weights are all 0: give at least one dataset a weight above 0")
    exact = shares / shares.sum() * total
    counts = np.floor(exact).astype(np.int64)
    left = total - int(counts.sum())
    counts[np.argsort(-(exact - counts), kind="stable")[:left]] += 1
    return [int(c) for c in counts]


@dataclass(frozen=True)
class MixSampler(RankSampler):
    """A rank's order over a mix: each epoch ``per_epoch`` samples of every part, from the
    part's stream (see the module docstring). Indices are the mix's: part ``i``'s samples
    follow the parts before it."""

    parts: tuple[PartShare, ...] = ()

    def __post_init__(self) -> None:
        if sum(p.size for p in self.parts) != self.num_items:
            raise ConfigError(f"a mix of {self.num_items} samples has parts {self.parts}")
        if not self.epoch_length:
            raise ConfigError("a mix whose epochs read no sample; give a dataset a weight")
        for part in self.parts:
            if part.per_epoch and not part.size:
                raise ConfigError(
                    f"data.sources: {part.name} has no samples but a weight; give it data, "
                    "or weight 0"
                )

    @property
    def epoch_length(self) -> int:
        return sum(p.per_epoch for p in self.parts)

    @property
    def kind(self) -> str:
        """What a loader state's ``sampler`` says: each part's samples per epoch and size,
        in order (a state saved with other weights, or the datasets in another order, is
        refused)."""
        return "mix " + "+".join(f"{p.per_epoch}/{p.size}" for p in self.parts)

    def order(self, epoch: int) -> np.ndarray:
        """The epoch's samples of every part, shuffled together: f(seed, epoch)."""
        offsets = np.cumsum([0, *(p.size for p in self.parts)])
        chosen = [
            offsets[i] + self.stream(i, epoch)
            for i, part in enumerate(self.parts)
            if part.per_epoch
        ]
        joined = np.concatenate(chosen).astype(np.int64)
        if self.spec.shuffle:
            rng = np.random.default_rng([_MIX, self.spec.seed, epoch])
            joined = joined[rng.permutation(len(joined))]
        return joined

    def stream(self, part: int, epoch: int) -> np.ndarray:
        """Part ``part``'s samples of ``epoch`` (its own indices): places ``epoch *
        per_epoch`` onwards of its stream of permutations."""
        share = self.parts[part]
        size, first = share.size, epoch * share.per_epoch
        last = first + share.per_epoch
        out = []
        for cycle in range(first // size, (last - 1) // size + 1):
            lo, hi = max(first - cycle * size, 0), min(last - cycle * size, size)
            out.append(self._cycle(part, cycle)[lo:hi])
        return np.concatenate(out)

    def _cycle(self, part: int, cycle: int) -> np.ndarray:
        size = self.parts[part].size
        if not self.spec.shuffle:
            return np.arange(size, dtype=np.int64)
        return np.random.default_rng([_MIX, self.spec.seed, part, cycle]).permutation(size)

    def repeats(self, epoch: int, start: int = 0) -> np.ndarray:
        return counted_repeats(self, epoch, start)

    def describe(self) -> str:
        """The parts' samples per epoch, for the training log's first line."""
        return " + ".join(f"{p.per_epoch} of {p.name}" for p in self.parts)


__all__ = ["MixSampler", "PartShare", "epoch_shares"]
