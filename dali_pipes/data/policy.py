"""``data.on_error`` in one place: what a bad sample does, and the record of bad samples.

A sample is bad when its read fails or times out, its header is not a JPEG, PNG or WebP
within ``data.max_pixels``, or a decoder rejects it. Every place that reads or decodes
(the DALI feed, the torch backend's workers, the decoded-image caches, ``pack``, listing
a folder) hands the failure to :class:`OnError`, which decides:

- ``raise``: the one-line :class:`~dali_pipes.errors.DataError` naming the sample stops
  the run;
- ``skip``: the sample is reported once and its slot in the epoch order gets a substitute
  drawn from (seed, epoch, position) (:mod:`dali_pipes.data.substitutes`), so batches keep
  their size and the ranks stay equal;
- ``drop``: it is reported and left out of its batch.

Where it is reported is the caller's (a :class:`BadFiles` record in the process that
iterates, a list a DataLoader worker sends back with its batch): ``report(name, error)``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from dali_pipes.data.specs import TOLERATE
from dali_pipes.data.substitutes import Filled, Slot, first_good
from dali_pipes.errors import DataError

log = logging.getLogger("dali_pipes.data")

T = TypeVar("T")
#: Where a bad sample is reported: ``report(name, error or reason)``.
Report = Callable[[str, DataError], None]


class BadFiles:
    """Samples found bad under ``on_error=skip|drop``: each reported once, counted every
    epoch."""

    def __init__(self) -> None:
        self.reasons: dict[str, str] = {}
        self.epoch_paths: set[str] = set()  # distinct samples left out in the current epoch

    @property
    def this_epoch(self) -> int:
        """How many distinct samples were left out in the current epoch."""
        return len(self.epoch_paths)

    def add(self, path: str, reason: str | BaseException, *, count: bool = True) -> None:
        """Record ``path`` as left out for ``reason``: logged the first time, counted in this
        epoch's figure unless ``count`` is False."""
        text = str(reason).removeprefix(f"{path}: ")
        if path not in self.reasons:
            self.reasons[path] = text
            log.warning("skipping %s: %s", path, text)
        if count:
            self.epoch_paths.add(path)

    def __contains__(self, path: object) -> bool:
        return path in self.reasons

    def share_reports(self, other: BadFiles) -> None:
        """Report samples through ``other``'s record: one both loaders meet (the two splits
        of one folder) is logged once per run, not once per loader. Counts stay apart."""
        other.reasons.update(self.reasons)
        self.reasons = other.reasons


@dataclass(frozen=True)
class OnError:
    """``data.on_error`` (``mode``) with the seed substitutes are drawn from."""

    mode: str = "raise"
    seed: int = 0

    @property
    def tolerates(self) -> bool:
        """``skip`` or ``drop``: a bad sample is reported, not raised."""
        return self.mode in TOLERATE

    @property
    def substitutes(self) -> bool:
        """``skip``: a bad sample's slot gets a substitute (``drop``: left out)."""
        return self.mode == "skip"

    def judge(self, name: str, error: DataError, report: Report) -> None:
        """A bad sample: raise ``error`` under ``raise``, else ``report(name, error)``."""
        if not self.tolerates:
            raise error
        report(name, error)

    def attempt(self, name: str, work: Callable[[], T], report: Report) -> T | None:
        """``work()`` for sample ``name``; None when it fails with a ``DataError`` that
        :meth:`judge` reported (raised under ``raise``)."""
        try:
            return work()
        except DataError as exc:
            self.judge(name, exc, report)
            return None

    def fill(
        self,
        index: int,
        found: T | None,
        slot: Slot,
        retry: Callable[[int], T | None],
        name: Callable[[int], str],
    ) -> Filled[T] | None:
        """What fills ``slot`` of the epoch order, whose sample ``index`` gave ``found``
        (None: bad, already judged): that sample; for a bad one under ``skip`` the first
        substitute drawn for the slot that ``retry`` accepts; under ``drop`` None."""
        if found is not None:
            return Filled(index, found)
        if not self.substitutes:
            return None
        return first_good(self.seed, slot, retry, name)


def warn_drop(mode: str, world_size: int) -> None:
    """``on_error=drop`` under several ranks lets their counts differ: say so once."""
    if mode == "drop" and world_size > 1:
        log.warning(
            "data.on_error=drop with %d ranks: a batch with a bad file shrinks on one rank "
            "only, so the ranks yield different sample counts; use data.on_error=skip "
            "(substitutes keep every rank equal)",
            world_size,
        )
