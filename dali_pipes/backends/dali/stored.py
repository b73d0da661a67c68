"""DALI's own readers for sources that say how their samples are stored
(:class:`~dali_pipes.data.interface.StoredAs`), by the stored format's name.

The feed reads a batch's encoded bytes through the source's ``read``, unless the source
names a stored format that a reader here is registered for: then that reader delivers the
planned samples instead (``"webdataset"``: DALI's webdataset reader for ``pack``'s shards
on a local disk, :mod:`.webdataset`). The loader asks the source, never which kind of
source it is; a new format is one registration, with the reader named as
``"module:attr"`` so DALI's reader module is imported only when a source uses it.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from dali_pipes.backends.base import EpochPlan
from dali_pipes.data.interface import Source, StoredAs, StoredFormat
from dali_pipes.data.sampling import RankSampler
from dali_pipes.errors import DataError
from dali_pipes.registry import Lazy, Registry


class StoredReader(Protocol):
    """Reads planned batches of a source in its stored format, in the sampler's order."""

    def start(self, plan: EpochPlan, position: int, batch_size: int) -> None:
        """Read for ``plan`` from its batch ``position`` on."""
        ...

    def read(self, indices: list[int] | np.ndarray) -> list[np.ndarray | DataError]:
        """The encoded bytes of one planned batch, in its order (or why each is bad)."""
        ...

    def stop(self) -> None:
        """Forget the reader and what it buffered."""
        ...


class StoredReaderKind(Protocol):
    """Makes a :class:`StoredReader` for one source, its stored format and the rank's
    sampler (a reader that cannot follow this sampler returns None: the feed reads)."""

    def __call__(
        self, source: Source, stored: StoredFormat, sampler: RankSampler
    ) -> StoredReader | None: ...


#: DALI's own readers by stored format name.
STORED_READERS: Registry[Lazy[StoredReaderKind]] = Registry("DALI stored-format reader")
STORED_READERS.register("webdataset", Lazy("dali_pipes.backends.dali.webdataset:webdataset_reader"))


def stored_reader(source: Source, sampler: RankSampler) -> StoredReader | None:
    """DALI's own reader for ``source``'s samples, when it names a stored format one is
    registered for; None otherwise (the feed reads through ``source.read``)."""
    stored = source.stored_format() if isinstance(source, StoredAs) else None
    if stored is None or stored.format_name not in STORED_READERS:
        return None
    return STORED_READERS[stored.format_name].get()(source, stored, sampler)
