"""The DALI loader's ``external_source`` callback: each planned batch's encoded files,
read a few batches ahead, and every parameter the graph is fed.

The feed, not a DALI reader, decides what is read: the order is the shared
DistributedSampler-equivalent one (:mod:`dali_pipes.data.sampling`) and the crop windows
and op parameters come from :meth:`dali_pipes.augment.Pipeline.draw` (every view's, for a
split with views: :mod:`dali_pipes.augment.views`, decoded once in the window holding
them all), so ``set_epoch``, sharding and padding behave exactly as in the torch backend,
and the two backends compute the same geometry and the same random parameters. Each
image's size is read from its header (once per sample, :mod:`.sizes`), so a file that is
not an image is reported by path before DALI sees it. A packed dataset (``data=shards``)
is read by DALI's webdataset reader in the same planned order
(:mod:`dali_pipes.backends.dali.webdataset`).

The callback runs on the thread that schedules DALI's work, under the GIL, once per batch:
on a GPU its time per image bounds the loader's speed. So it hands over a batch prepared
ahead and does no per-file work: the files are read ahead on read threads -- local files
by a compiled loop that holds no GIL (:mod:`dali_pipes.image.batch_reads`), files in a
bucket through the source's own reads -- and checked there, and a batch whose files are
all good gets its columns there too (the draws are a pure function of the plan's epoch,
the samples and their sizes, so where they are computed changes nothing). Python touches
a file alone, and the callback draws, only when a batch holds a bad file.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from dali_pipes.backends.base import BadFiles, EpochPlan
from dali_pipes.backends.dali.batch_columns import BatchColumns
from dali_pipes.backends.dali.columns import Fed
from dali_pipes.backends.dali.read_ahead import ReadAhead
from dali_pipes.backends.dali.sizes import HeaderSizes
from dali_pipes.backends.dali.stored import StoredReader
from dali_pipes.backends.specs import LoaderSpec
from dali_pipes.data.interface import Annotated, LocalFiles, images_of, misfit
from dali_pipes.data.substitutes import Slot
from dali_pipes.errors import DataError
from dali_pipes.image.batch_reads import LocalBatch, LocalReads
from dali_pipes.image.decode import Blob


class InFlight(NamedTuple):
    """A batch handed to DALI and not yet delivered: what a search for a bad file re-decodes."""

    position: int  # index of the batch in the epoch plan
    indices: np.ndarray  # the samples DALI was given (bad ones already substituted)
    anchor: np.ndarray  # float32 [n, 2]: each one's decode window (x, y) ...
    shape: np.ndarray  # ... and (w, h), as fed to the decoder: a probe decodes the same
    local: LocalBatch | None = None  # the buffers its local files were read into
    objects: Any = None  # data with targets: the batch's objects, for the hand-over


class Checked(NamedTuple):
    """A sample read and its header checked: its bytes and its (height, width)."""

    blob: Blob
    size: np.ndarray


class Columns(NamedTuple):
    """A batch's columns, drawn on a read thread: by name, and in feed order as DALI takes
    them."""

    fed: Fed
    dali: tuple[Any, ...]


class Ready(NamedTuple):
    """A batch whose every file was good, made ready on the read thread: its images column
    and its columns as DALI takes them."""

    images: Any
    columns: Columns


class Read(NamedTuple):
    """One planned batch as read ahead and checked."""

    blobs: list[Any]  # each file's bytes or why it is bad (read, header)
    sizes: np.ndarray  # [n, 2] height, width from the header (zero for a bad file)
    bad: np.ndarray  # bool [n]: the read or the header check failed
    local: LocalBatch | None  # the buffers of a local read, reused once DALI has the bytes
    #: the batch made ready on the read thread when every file was good; None when one was
    #: bad: then it is mended when its turn comes (:meth:`Feed._mend`)
    ready: Ready | None


class ToFeed(NamedTuple):
    """The next batch to feed DALI: its plan position, the samples it holds (bad ones
    substituted or left out), their images and header sizes, and the buffers of a local
    read. ``drawn``: its columns when the read thread drew them; None when they are drawn
    as it is fed (a mended batch, the cache's decoded images)."""

    position: int
    indices: np.ndarray
    images: Any  # encoded files (or the cache's pixels), as DALI takes them
    sizes: np.ndarray
    local: LocalBatch | None
    drawn: Columns | None
    repeats: np.ndarray | None = None  # of a sampler that draws a sample again


def _dali_batch(blobs: list[Any]) -> Any:
    """A local read's bytes as one DALI batch that shares their memory: made on a read
    thread, so that handing them to DALI costs the feeding thread nothing per file (given
    a list, DALI's ``external_source`` looks at each array in Python). Bytes read otherwise
    (a bucket's, read-only) go to DALI as a list."""
    from nvidia.dali.tensors import TensorListCPU

    return TensorListCPU.from_dlpack_list(blobs)  # type: ignore[attr-defined]


def _dali_columns(fed: Fed) -> tuple[Any, ...]:
    """``fed``'s columns in feed order, each array after the images as the DALI batch that
    ``external_source`` would make of it (sharing its memory, holding it alive): made on a
    read thread, they cost the feeding thread nothing but handing them over."""
    from nvidia.dali.tensors import TensorListCPU

    return (fed.images, *(TensorListCPU(column) for column in fed.params()))


class Feed:
    """``external_source`` callback: returns the next batch of the current epoch's plan.

    Files are read a few batches ahead on a thread pool (:mod:`.read_ahead`); each one's
    header is checked (format, size, pixel limit) before DALI sees it, once (:mod:`.sizes`).
    Under ``on_error=skip`` a failing
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
        stream: StoredReader | None = None,
    ) -> None:
        # Holds what it needs, not the loader: the pipeline holds this callback, and a
        # loader -> pipeline -> callback -> loader cycle would delay freeing them all.
        self.spec = spec
        self.bad = bad
        self.policy = spec.policy
        self.source = images_of(spec.source, "backend=dali decodes image files")
        self.stream = stream
        self.columns = BatchColumns(spec, self.source)
        self._annotated = spec.source if isinstance(spec.source, Annotated) else None
        self.sizes = HeaderSizes(len(self.source), spec.max_pixels)
        #: Local files are read by the compiled loop; others by the source (or shard stream).
        local = self.source if stream is None and isinstance(self.source, LocalFiles) else None
        self._paths = None if local is None else local.local_paths()
        self._local = None
        if local is not None and self._paths is not None:
            self._local = LocalReads(local.read_timeout)
        self._ahead = ReadAhead(self._read, read_ahead, threads)
        self._plan = EpochPlan(0, [])
        self._next = 0
        self.in_flight: deque[InFlight] = deque()  # batches handed to DALI, oldest first

    def start(
        self, plan: EpochPlan, position: int = 0, following: Callable[[], EpochPlan] | None = None
    ) -> None:
        """Feed ``plan`` from batch ``position`` on; ``following``: the plan of the epoch
        expected next, whose first files are read as this one ends (not for a shard
        stream, which reads in order)."""
        self.stop()
        self._plan, self._next = plan, position
        if self.stream is not None:
            self.stream.start(plan, position, self.spec.batch_size)
            following = None
        self._ahead.start(plan, position, following)

    def stop(self) -> None:
        """Forget the rest of the plan: the next call ends the epoch."""
        self._ahead.stop()
        self._plan = EpochPlan(0, [])
        self._next = 0
        # Not recycled: DALI may still read the bytes of batches it has not delivered.
        self.in_flight.clear()

    def _read(self, plan: EpochPlan, k: int) -> Read:
        """Read and check batch ``k`` of ``plan`` and, when every file is good, make its
        columns (on a read thread)."""
        epoch, batch = plan.epoch, plan.batches[k]
        local = None
        if self._local is not None and self._paths is not None:
            paths = self._paths
            local = self._local.read([paths[i] for i in batch.tolist()])
            blobs = local.blobs
        else:
            blobs = (self.stream or self.source).read(batch)
        sizes, bad = self._check(batch, blobs)
        if bad.any():
            return Read(blobs, sizes, bad, local, None)
        images = blobs if local is None else _dali_batch(blobs)
        fed = self.columns.make(epoch, batch, images, sizes, plan.repeats_of(k))
        return Read(blobs, sizes, bad, local, Ready(images, Columns(fed, _dali_columns(fed))))

    def _check(self, indices: np.ndarray, blobs: list[Blob]) -> tuple[np.ndarray, np.ndarray]:
        """The sizes of samples ``indices`` from their headers, and which are bad: a header
        that fails its check, or targets that do not fit their image (the blob replaced by
        the error naming it, as :meth:`HeaderSizes.check` does)."""
        sizes, bad = self.sizes.check(indices, blobs, self.source.name)
        if self._annotated is not None:
            for p in np.flatnonzero(~bad):
                i, hw = int(indices[p]), (int(sizes[p, 0]), int(sizes[p, 1]))
                if (why := misfit(self._annotated, i, hw)) is not None:
                    blobs[p], bad[p] = DataError(why), True
        return sizes, bad

    def _next_batch(self) -> ToFeed:
        """The next plan batch with its good files.

        A bad file (its read or header failed, or DALI's decoder rejected it earlier) is
        replaced by its substitute under ``on_error=skip`` and left out under ``drop``.
        """
        batches = self._plan.batches
        while self._next < len(batches):
            position, batch = self._next, batches[self._next]
            read = self._ahead.take(position)
            self._next += 1
            bad = read.bad | self._known_bad(batch)
            ready = read.ready
            repeats = self._plan.repeats_of(position)
            if ready is not None and not bad.any():
                drawn = ready.columns
                return ToFeed(position, batch, ready.images, read.sizes, read.local, drawn, repeats)
            indices, blobs, sizes, again = self._mend(position, batch, read, bad)
            if len(indices):
                return ToFeed(position, indices, blobs, sizes, read.local, None, again)
            self._recycle(read.local)  # nothing of it goes to DALI
        raise StopIteration

    def delivered(self) -> int:
        """DALI delivered its oldest batch in flight: forget it (its bytes are consumed and
        its buffers read into again); its plan position."""
        batch = self.in_flight.popleft()
        self._recycle(batch.local)
        return batch.position

    def _recycle(self, batch: LocalBatch | None) -> None:
        if batch is not None and self._local is not None:
            self._local.recycle(batch)

    def _known_bad(self, batch: np.ndarray) -> np.ndarray:
        """Which of ``batch`` were found bad before (maybe inside DALI)."""
        reasons, name = self.bad.reasons, self.source.name
        if not reasons:
            return np.zeros(len(batch), bool)
        return np.fromiter((name(i) in reasons for i in batch.tolist()), bool, len(batch))

    def _mend(
        self, position: int, batch: np.ndarray, read: Read, bad: np.ndarray
    ) -> tuple[np.ndarray, list[Any], np.ndarray, np.ndarray | None]:
        """``batch`` with each bad file reported (raised unless ``on_error`` tolerates it)
        and replaced by its substitute (``skip``, keeping its slot's repeat number) or
        left out (``drop``)."""
        keep, blobs, sizes, again = [], [], [], []
        slots = self._plan.positions[position]
        repeats = self._plan.repeats_of(position)
        for p, i in enumerate(batch.tolist()):
            found: Checked | None = Checked(read.blobs[p], read.sizes[p])
            if bad[p]:
                self._report(i, read.blobs[p])
                found = None
            filled = self.policy.fill(
                i,
                found,
                Slot(self._plan.epoch, int(slots[p]), len(self.source)),
                self._substitute,
                self.source.name,
            )
            if filled is not None:
                keep.append(filled.index)
                blobs.append(filled.found.blob)
                sizes.append(filled.found.size)
                again.append(0 if repeats is None else int(repeats[p]))
        shape = np.asarray(sizes, np.int64).reshape(-1, 2)
        return (
            np.asarray(keep, np.int64),
            blobs,
            shape,
            None if repeats is None else np.asarray(again, np.int64),
        )

    def _report(self, index: int, blob: Blob | None) -> None:
        """Sample ``index`` is bad: counted again when it was found before, else reported
        (``blob``: why), which raises unless ``on_error`` is ``skip`` or ``drop``."""
        path = self.source.name(index)
        if path in self.bad:  # failed earlier, maybe inside DALI
            self.bad.add(path, self.bad.reasons[path])
            return
        assert isinstance(blob, DataError)  # the read or the header check failed
        self.policy.judge(path, blob, self.bad.add)

    def _substitute(self, index: int) -> Checked | None:
        """A substitute's bytes and size; None when it is bad too (reported)."""
        if self.source.name(index) in self.bad:
            self._report(index, None)
            return None
        blobs = self.source.read([index])
        sizes, bad = self._check(np.array([index]), blobs)
        if bad[0]:
            self._report(index, blobs[0])
            return None
        return Checked(blobs[0], sizes[0])

    def batch(self) -> Fed:
        """The next batch's columns by name (:mod:`.columns`)."""
        return self._batch()[0]

    def _batch(self) -> tuple[Fed, tuple[Any, ...] | None]:
        """The next batch's columns, and the same as DALI takes them if they were made on
        the read thread (else None)."""
        batch = self._next_batch()
        if batch.drawn is None:  # mended, or not read ahead (the cache's pixels)
            epoch = self._plan.epoch
            made = self.columns.make(epoch, batch.indices, batch.images, batch.sizes, batch.repeats)
            fed, dali = made, None
        else:
            fed, dali = batch.drawn
        decoded = fed.decoded()
        position, indices, local = batch.position, batch.indices, batch.local
        self.in_flight.append(InFlight(position, indices, *decoded, local, fed.objects))
        return fed, dali

    def __call__(self) -> tuple[Any, ...]:
        """The next batch's columns in feed order (DALI's ``external_source`` callback)."""
        fed, dali = self._batch()
        return fed.flat() if dali is None else dali

    def close(self) -> None:
        """Stop feeding and the reader threads (and a packed dataset's reader)."""
        self.stop()
        if self.stream is not None:
            self.stream.stop()
        self._ahead.close()
