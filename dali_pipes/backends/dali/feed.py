"""The DALI loader's ``external_source`` callback: each planned batch's encoded files,
read a few batches ahead, and every parameter the graph is fed.

The feed, not a DALI reader, decides what is read: the order is the shared
DistributedSampler-equivalent one (:mod:`dali_pipes.data.sampling`) and the crop windows
and op parameters come from :meth:`dali_pipes.augment.Pipeline.draw`, so ``set_epoch``,
sharding and padding behave exactly as in the torch backend, and the two backends compute
the same geometry and the same random parameters. Each image's size is read from its
header first, so a file that is not an image is reported by path before DALI sees it. A
packed dataset (``data=shards``) is read by DALI's webdataset reader in the same planned
order (:mod:`dali_pipes.backends.dali.webdataset`).
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, NamedTuple

import numpy as np

from dali_pipes.backends.base import BadFiles, EpochPlan
from dali_pipes.backends.dali.views import feed_columns
from dali_pipes.backends.dali.webdataset import WebdatasetStream
from dali_pipes.backends.specs import LoaderSpec
from dali_pipes.data.sources import ImageSource
from dali_pipes.data.specs import TOLERATE
from dali_pipes.data.substitutes import first_good
from dali_pipes.errors import DataError
from dali_pipes.image.decode import header_size


class InFlight(NamedTuple):
    """A batch handed to DALI and not yet delivered: what a search for a bad file re-decodes."""

    position: int  # index of the batch in the epoch plan
    indices: np.ndarray  # the samples DALI was given (bad ones already substituted)
    anchor: np.ndarray  # float32 [n, 2]: each one's decode window (x, y) ...
    shape: np.ndarray  # ... and (w, h), as fed to the decoder: a probe decodes the same


class Feed:
    """``external_source`` callback: returns the next batch of the current epoch's plan.

    Files are read a few batches ahead on a thread pool; each one's header is checked
    (format, size, pixel limit) before DALI sees it. Under ``on_error=skip`` a failing
    file is reported and its slot filled by a substitute (:mod:`dali_pipes.data.
    substitutes`); a file DALI's decoder rejects is reported by the loader's search and
    its batch fed again, with the substitute. Under ``drop`` it is left out of its batch,
    and a batch left empty is passed over.
    """

    def __init__(
        self,
        spec: LoaderSpec,
        bad: BadFiles,
        read_ahead: int,
        threads: int,
        stream: WebdatasetStream | None = None,
    ) -> None:
        # Holds what it needs, not the loader: the pipeline holds this callback, and a
        # loader -> pipeline -> callback -> loader cycle would delay freeing them all.
        assert isinstance(spec.source, ImageSource)
        self.spec = spec
        self.bad = bad
        self.source = spec.source
        self.stream = stream
        self.files = spec.source.files
        self.labels = spec.source.labels
        self.read_ahead = read_ahead
        self.views = spec.augment.views(spec.train)
        self.multi_view = spec.augment.multi_view(spec.train)
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="dali-pipes-read")
        self._plan = EpochPlan(0, [])
        self._next = 0
        self._reads: deque[Future[list[np.ndarray | DataError]]] = deque()
        self.in_flight: deque[InFlight] = deque()  # batches handed to DALI, oldest first

    def start(self, plan: EpochPlan, position: int = 0) -> None:
        """Feed ``plan`` from batch ``position`` on."""
        self.stop()
        self._plan, self._next = plan, position
        if self.stream is not None:
            self.stream.start(plan, position, self.spec.batch_size)
        for k in range(position, min(position + self.read_ahead, len(plan.batches))):
            self._reads.append(self._submit(plan.batches[k]))

    def stop(self) -> None:
        """Forget the rest of the plan: the next call ends the epoch."""
        for fut in self._reads:
            fut.cancel()
        for fut in self._reads:  # a read already running finishes before the plan changes
            if not fut.cancelled():
                fut.exception()
        self._reads.clear()
        self._plan = EpochPlan(0, [])
        self._next = 0
        self.in_flight.clear()

    def _submit(self, batch: np.ndarray) -> Future[list[np.ndarray | DataError]]:
        read = self.stream.read if self.stream is not None else self.source.read
        return self._pool.submit(read, batch)

    def _next_batch(self) -> tuple[int, np.ndarray, list[np.ndarray], np.ndarray]:
        """The next plan batch with its good files: position, indices, bytes, sizes.

        A bad file (its read or header failed, or DALI's decoder rejected it earlier) is
        replaced by its substitute under ``on_error=skip`` and left out under ``drop``.
        """
        batches = self._plan.batches
        while self._next < len(batches):
            position, batch = self._next, batches[self._next]
            blobs = self._reads.popleft().result()
            if position + self.read_ahead < len(batches):
                self._reads.append(self._submit(batches[position + self.read_ahead]))
            self._next += 1
            keep, kept, sizes = [], [], []
            slots = self._plan.positions[position]
            for i, blob, slot in zip(batch, blobs, slots, strict=True):
                found = self._checked(int(i), blob)
                if found is None and self.spec.on_error == "skip":
                    i, found = first_good(
                        self.spec.sampling.seed,
                        self._plan.epoch,
                        int(slot),
                        len(self.files),
                        lambda j: self._checked(j, self.source.read([j])[0]),
                        self.files.__getitem__,
                    )
                if found is not None:
                    keep.append(i)
                    kept.append(found[0])
                    sizes.append(found[1])
            if keep:
                return position, np.asarray(keep), kept, np.asarray(sizes)
        raise StopIteration

    def _checked(
        self, index: int, blob: np.ndarray | DataError
    ) -> tuple[np.ndarray, tuple[int, int]] | None:
        """(bytes, size from the header) of a good file; None for a bad one (reported),
        which raises unless ``on_error`` is ``skip`` or ``drop``."""
        path = self.files[index]
        if path in self.bad:  # failed earlier, maybe inside DALI
            self.bad.add(path, self.bad.reasons[path])
            return None
        try:
            size = header_size(blob, path, self.spec.max_pixels)
        except DataError as exc:
            if self.spec.on_error not in TOLERATE:
                raise
            self.bad.add(path, exc)
            return None
        assert not isinstance(blob, DataError)  # header_size raised the read error
        return blob, size

    def __call__(self) -> tuple[Any, ...]:
        position, indices, blobs, sizes = self._next_batch()
        ids = self.source.identity(indices)
        draws = self.views.draw(sizes, ids, self.spec.sampling.seed, self._plan.epoch)
        anchor, shape, columns = feed_columns(self.views, draws, self.multi_view)
        self.in_flight.append(InFlight(position, indices, anchor, shape))
        return (blobs, self.labels[indices], anchor, shape, *columns)

    def close(self) -> None:
        """Stop feeding and the reader threads (and a packed dataset's reader)."""
        self.stop()
        if self.stream is not None:
            self.stream.stop()
        self._pool.shutdown(wait=True, cancel_futures=True)
