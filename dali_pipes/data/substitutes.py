"""What takes a bad file's place under ``data.on_error=skip``: a pure function of
(seed, epoch, position).

A sample that cannot be read or decoded is not left out of its batch (that would shrink
the batch, and under torchrun one rank would yield fewer samples than another, which
stops DDP and ``gather_for_metrics``): its slot is filled with another sample of the
split, drawn in NumPy from (seed, epoch, the slot's position in the epoch order, attempt).
Attempt 0 is tried first; when the drawn sample is bad too, attempt 1, and so on. Which
samples are bad is a property of the files, so every backend, every rank and a resumed
epoch pick the same substitute for the same slot: batches keep their size, the ranks
yield equal counts, the backends still give equal batches and a replay is exact.

The position is the slot's place in the epoch's (padded) order, the same whatever the
world size (:meth:`dali_pipes.data.sampling.RankSampler.positions`), so the substitute of
a slot does not change with the rank that reads it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

from dali_pipes.errors import DataError

#: Keeps the substitutes' draws apart from any other user of the same seed.
_STREAM = 0x5AB5
#: Attempts per slot before giving up: reached only when most of the split is bad.
MAX_ATTEMPTS = 64

Found = TypeVar("Found")


@dataclass(frozen=True)
class Slot:
    """A place in an epoch's order, which a substitute for a bad sample there is drawn for:
    the epoch, the place in its (padded) order, and how many samples the split has."""

    epoch: int
    position: int
    num_items: int


@dataclass(frozen=True)
class Filled(Generic[Found]):
    """What fills a slot: the sample that does (the one planned, or its substitute) and
    what reading it gave."""

    index: int
    found: Found


def substitute(seed: int, epoch: int, position: int, attempt: int, num_items: int) -> int:
    """The sample index that replaces the bad one at ``position`` on ``attempt``."""
    key = [_STREAM, int(seed), int(epoch), int(position), int(attempt)]
    return int(np.random.default_rng(key).integers(num_items))


def first_good(
    seed: int,
    slot: Slot,
    attempt_one: Callable[[int], Found | None],
    name: Callable[[int], str],
) -> Filled[Found]:
    """The first substitute for ``slot`` that ``attempt_one`` accepts (it returns what the
    sample gives, or None after reporting it as bad), with that result.

    Raises a one-line :class:`DataError` after :data:`MAX_ATTEMPTS` bad substitutes in a
    row: most of the split is bad, and ``scan`` is the tool for that.
    """
    tried: list[int] = []
    for attempt in range(MAX_ATTEMPTS):
        index = substitute(seed, slot.epoch, slot.position, attempt, slot.num_items)
        found = attempt_one(index)
        if found is not None:
            return Filled(index, found)
        tried.append(index)
    raise DataError(
        f"data.on_error=skip: {MAX_ATTEMPTS} substitutes in a row for a bad sample were bad "
        f"too ({name(tried[0])}, {name(tried[-1])}, ...); most of the split cannot be read: "
        "run python -m dali_pipes.scan and check the data"
    )
