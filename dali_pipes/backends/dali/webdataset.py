"""``data=shards`` on the DALI backend: DALI's webdataset reader does the reading.

A small CPU pipeline with ``fn.readers.webdataset`` streams this rank's run of shards
(:meth:`~dali_pipes.data.sampling.StreamSampler.stream`) sequentially, in DALI's own reader
threads, with the index files ``pack`` wrote. The samples arrive in stream order; the
plan's window shuffle only reorders samples within a window, so the feed asks for a
batch and this class reads on until every sample of it has arrived, hands the batch
over and forgets samples the plan no longer needs. Order, sharding and augmentation are
therefore the torch backend's (which reads the same shards by offset), and resuming an
epoch part-way starts the reader at the window that holds the first batch.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import numpy as np

from dali_pipes.backends.base import EpochPlan
from dali_pipes.data.interface import Source, StoredFormat
from dali_pipes.data.sampling import RankSampler, StreamSampler
from dali_pipes.data.shards import IMAGE_EXTS, ShardLayout, require_index
from dali_pipes.errors import DataError


def webdataset_reader(
    source: Source, stored: StoredFormat, sampler: RankSampler
) -> WebdatasetStream | None:
    """The reader of ``pack``'s shards (registered for ``"webdataset"`` in :mod:`.stored`),
    when the sampler plans them as a stream of shards."""
    if not isinstance(stored, ShardLayout) or not isinstance(sampler, StreamSampler):
        return None
    return WebdatasetStream(stored, source.labels, sampler)


class WebdatasetStream:
    """Reads planned batches of a packed split through ``fn.readers.webdataset``."""

    def __init__(self, layout: ShardLayout, labels: np.ndarray, sampler: StreamSampler) -> None:
        self.layout = layout
        self.labels = labels
        self.sampler = sampler
        self._lock = threading.Lock()
        self._pipe: Any = None
        self._run = np.zeros(0, np.int64)  # the stream still to come, in order
        self._cursor = 0  # next position in _run
        self._skip = 0  # samples DALI delivers before _run[0] (start of the first shard)
        self._pending: list[tuple[np.ndarray, int]] = []  # delivered, not yet assigned
        self._buffer: dict[int, np.ndarray] = {}
        self._needed: Counter[int] = Counter()

    def start(self, plan: EpochPlan, position: int, batch_size: int) -> None:
        """Read for ``plan`` from its batch ``position`` on."""
        with self._lock:
            self._pipe = None
            self._buffer, self._pending = {}, []
            self._needed = Counter(int(i) for b in plan.batches[position:] for i in b)
            if not self._needed:
                self._run = np.zeros(0, np.int64)
                return
            window = self.sampler.window
            first = (plan.first + position) * batch_size
            start = first // window * window
            self._run, self._cursor = self.sampler.stream(plan.epoch)[start:], 0
            self._build()

    def _build(self) -> None:
        from nvidia.dali import fn
        from nvidia.dali.pipeline import Pipeline

        lay = self.layout
        shards = lay.shard[self._run]
        changes = np.flatnonzero(np.diff(shards)) + 1
        order = [int(shards[0]), *(int(s) for s in shards[changes])]
        self._skip = int(self._run[0] - lay.members(order[0])[0])
        # Checked here, not left to DALI: its error for a missing index is many lines.
        indices = [str(require_index(lay.tars[s])) for s in order]
        pipe = Pipeline(batch_size=64, num_threads=2, device_id=None, prefetch_queue_depth=2)
        with pipe:
            outputs = fn.readers.webdataset(
                paths=[lay.tars[s] for s in order],
                index_paths=indices,
                ext=[";".join(IMAGE_EXTS), "cls"],
                random_shuffle=False,
                missing_component_behavior="error",
            )
            pipe.set_outputs(*outputs)  # type: ignore[misc]
        pipe.build()
        self._pipe = pipe

    def _pull(self) -> None:
        """One reader batch into the buffer (the samples the plan still needs)."""
        if self._pipe is None or self._cursor >= len(self._run):
            raise DataError("the shard stream ended before the epoch's plan did; re-pack it")
        images, classes = self._pipe.run()
        for k in range(len(images)):
            if self._skip:
                self._skip -= 1
                continue
            if self._cursor >= len(self._run):
                break
            index = int(self._run[self._cursor])
            self._cursor += 1
            label = int(bytes(np.asarray(classes.at(k))).decode())
            if label != self.labels[index]:
                raise DataError(
                    f"{self.layout.tars[int(self.layout.shard[index])]}: sample order differs "
                    "from its index; re-pack the dataset"
                )
            if self._needed[index] > 0:
                self._buffer[index] = np.array(images.at(k), dtype=np.uint8)

    def read(self, indices: list[int] | np.ndarray) -> list[np.ndarray | DataError]:
        """The encoded bytes of one planned batch, in its order."""
        with self._lock:
            wanted = [int(i) for i in indices]
            try:
                while any(i not in self._buffer for i in wanted):
                    self._pull()
            except DataError as exc:
                return [exc] * len(wanted)
            out: list[np.ndarray | DataError] = [self._buffer[i] for i in wanted]
            for i in wanted:
                self._needed[i] -= 1
                if self._needed[i] <= 0:
                    self._buffer.pop(i, None)
            return out

    def stop(self) -> None:
        """Forget the reader and what it buffered."""
        with self._lock:
            self._pipe = None
            self._buffer = {}
