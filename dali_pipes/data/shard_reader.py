"""Reading samples out of shards by position: positioned reads of files, blocks of objects.

Where the shards are local files, a batch's samples are read with positioned reads,
neighbours at most :data:`MERGE_GAP` apart in one read, from one descriptor per shard that
the reader keeps open (the page cache does the rest).

Where they are objects (``s3://``), one ranged GET per sample would cost as many requests
as a folder of files, because an epoch shuffles samples within windows of
``data.shuffle_buffer`` consecutive ones (:class:`~dali_pipes.data.sampling.StreamSampler`)
and a batch's samples lie all over its window. So each shard is read in aligned blocks of
``data.block_mb`` (a few MiB: requests of that size are what object stores serve fastest),
fetched concurrently and kept in a per-process cache large enough for two windows: every
block is fetched once per window and process, and a batch only waits for the blocks it
still lacks. Threads asking for a block already in flight wait for that request instead
of sending their own. Blocks are positions in the shard, not samples, so which bytes a
sample gets is the same as from a file: the batches do not depend on the storage.
"""

from __future__ import annotations

import math
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, Generic, TypeVar

import numpy as np

from dali_pipes.data.shards import ShardLayout
from dali_pipes.data.storage import Storage, pread, storage_for
from dali_pipes.errors import DataError, unreadable

#: Local reads: neighbouring samples at most this far apart are read in one call.
MERGE_GAP = 64 * 1024
_Block = tuple[int, int]  # (shard, block number)
K = TypeVar("K")  # what a cached block is keyed by
V = TypeVar("V")  # a block's content (or the error fetching it)


class ShardReader:
    """Reads samples out of a packed split's shards; safe to use from threads, and from
    DataLoader workers (each process keeps its own descriptors and blocks)."""

    def __init__(self, layout: ShardLayout, storage: Storage | None = None) -> None:
        self.layout = layout
        self.storage: Storage = storage or storage_for(layout.tars[0] if layout.tars else "")
        self._blocks: BlockCache[_Block, bytes | DataError] | None = None
        self._fds: dict[int, int] = {}  # shard -> descriptor, local files
        self._pid = -1
        self._lock = threading.Lock()
        self._ends: np.ndarray | None = None  # where each shard's last sample ends

    def __getstate__(self) -> dict[str, Any]:
        return {"layout": self.layout, "storage": self.storage}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["layout"], state["storage"])  # type: ignore[misc]

    def read(self, indices: Sequence[int] | np.ndarray) -> list[np.ndarray | DataError]:
        """The encoded bytes of each sample, in the order given; the error naming its
        shard for a sample whose read failed."""
        idx = np.asarray(indices, np.int64)
        if self.storage.remote:
            return self._from_blocks(idx)
        return self._merged(idx)

    def _merged(self, idx: np.ndarray) -> list[np.ndarray | DataError]:
        """Positioned reads, neighbours within :data:`MERGE_GAP` in one."""
        lay = self.layout
        out: list[np.ndarray | DataError] = [np.empty(0, np.uint8)] * len(idx)
        runs: list[list[int]] = []
        for k in np.lexsort((lay.offset[idx], lay.shard[idx])):
            i = idx[k]
            if runs:
                prev = idx[runs[-1][-1]]
                gap = lay.offset[i] - (lay.offset[prev] + lay.size[prev])
                if lay.shard[prev] == lay.shard[i] and gap <= MERGE_GAP:
                    runs[-1].append(int(k))
                    continue
            runs.append([int(k)])
        ranges = []
        for run in runs:
            first, last = idx[run[0]], idx[run[-1]]
            start, end = int(lay.offset[first]), int(lay.offset[last] + lay.size[last])
            ranges.append((lay.tars[int(lay.shard[first])], start, end - start))
        blobs = [
            self._pread(int(lay.shard[idx[run[0]]]), *r[1:])
            for run, r in zip(runs, ranges, strict=True)
        ]
        for run, (_, start, _), blob in zip(runs, ranges, blobs, strict=True):
            for k in run:
                i, a = idx[k], int(lay.offset[idx[k]]) - start
                out[k] = blob if isinstance(blob, DataError) else _view(blob, a, lay.size[i])
        return out

    def _process(self) -> None:
        """Forget what a parent process opened and cached, and its lock (a thread of the
        parent may have held it at the fork): called before taking the lock."""
        if self._pid != os.getpid():
            self._fds, self._blocks, self._pid = {}, None, os.getpid()
            self._lock = threading.Lock()

    def _pread(self, shard: int, start: int, length: int) -> bytes | DataError:
        """A positioned read of a local shard, from the descriptor this reader keeps."""
        path = self.layout.tars[shard]
        self._process()
        with self._lock:
            fd = self._fds.get(shard)
            if fd is None:
                try:
                    fd = self._fds[shard] = os.open(path, os.O_RDONLY)
                except OSError as exc:
                    return unreadable(path, exc, "the shard")
        return pread(path, fd, start, length)

    def _cache(self) -> BlockCache[_Block, bytes | DataError]:
        self._process()
        with self._lock:
            if self._blocks is None:
                lay, size = self.layout, self.layout.block_bytes
                window = max(lay.shuffle_buffer, 1) * _stride(lay)
                capacity = 2 * math.ceil(window / size) + 4  # two windows, and their edges
                self._blocks = BlockCache(capacity)
            return self._blocks

    def _from_blocks(self, idx: np.ndarray) -> list[np.ndarray | DataError]:
        """Each sample cut from the cached blocks it spans (fetched where missing)."""
        lay, size = self.layout, self.layout.block_bytes
        starts, ends = lay.offset[idx], lay.offset[idx] + lay.size[idx]
        wanted = sorted(
            {
                (int(s), b)
                for s, a, e in zip(lay.shard[idx], starts, ends, strict=True)
                if e > a
                for b in range(int(a) // size, (int(e) - 1) // size + 1)
            }
        )
        blocks = self._cache().get(wanted, self._fetch)
        out: list[np.ndarray | DataError] = []
        for s, a, e in zip(lay.shard[idx], starts, ends, strict=True):
            if e <= a:
                out.append(np.empty(0, np.uint8))
                continue
            parts = [blocks[(int(s), b)] for b in range(int(a) // size, (int(e) - 1) // size + 1)]
            bad = next((p for p in parts if isinstance(p, DataError)), None)
            if bad is not None:
                out.append(bad)
                continue
            first = int(a) // size * size
            joined = parts[0] if len(parts) == 1 else b"".join(parts)  # type: ignore[arg-type]
            out.append(_view(joined, int(a) - first, int(e - a)))  # type: ignore[arg-type]
        return out

    def _fetch(self, blocks: list[_Block]) -> list[bytes | DataError]:
        """The blocks' bytes, one ranged GET each, concurrently; a shard's last block ends
        where its last sample does."""
        lay, size = self.layout, self.layout.block_bytes
        ends = self._ends
        if ends is None:  # filled here, then published whole: threads may race to it
            last = np.flatnonzero(np.diff(lay.shard, append=lay.num_shards))  # ascending
            ends = np.zeros(lay.num_shards, np.int64)
            ends[lay.shard[last]] = (lay.offset + lay.size)[last]
            self._ends = ends
        ranges = [(lay.tars[s], b * size, int(min(size, ends[s] - b * size))) for s, b in blocks]
        return self.storage.read_ranges(ranges)


def _stride(layout: ShardLayout) -> float:
    """The mean bytes from one sample to the next in a shard: its image, and the tar
    headers and class member between (for small images, most of the stride)."""
    same = layout.shard[1:] == layout.shard[:-1]
    if same.any():
        return float(np.diff(layout.offset)[same].mean())
    return float(layout.size.mean()) if len(layout.size) else 0.0


def _view(blob: bytes, start: int, length: int | np.integer) -> np.ndarray:
    return np.frombuffer(blob, np.uint8, count=int(length), offset=start)


class BlockCache(Generic[K, V]):
    """The most recently used ``capacity`` blocks of a process, and those in flight (also
    the row groups of Parquet files, :mod:`dali_pipes.data.parquet`): a block is fetched
    once however many threads ask for it, and one that failed is asked for again later."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.lock = threading.Lock()
        self.blocks: OrderedDict[K, Future[V]] = OrderedDict()

    def get(self, wanted: list[K], fetch: Callable[[list[K]], list[V]]) -> dict[K, V]:
        """Each wanted block: from the cache, from a request another thread has in flight,
        or fetched here (``fetch(blocks) -> bytes or error each``) for the rest."""
        mine: list[K] = []
        with self.lock:
            futures: dict[K, Future[V]] = {}
            for key in wanted:
                future = self.blocks.get(key)
                if future is None:
                    future = self.blocks[key] = Future()
                    mine.append(key)
                self.blocks.move_to_end(key)
                futures[key] = future
            while len(self.blocks) > max(self.capacity, len(wanted)):
                self.blocks.popitem(last=False)  # waiters hold their own futures
        if mine:
            try:
                fetched = fetch(mine)
            except BaseException as exc:  # e.g. the server gone past the retries
                self._forget(mine, futures)
                for key in mine:
                    futures[key].set_exception(exc)
                raise
            for key, blob in zip(mine, fetched, strict=True):
                futures[key].set_result(blob)
            self._forget(
                [k for k, b in zip(mine, fetched, strict=True) if isinstance(b, DataError)], futures
            )
        return {key: future.result() for key, future in futures.items()}

    def _forget(self, keys: list[K], futures: dict[K, Future[V]]) -> None:
        """Drop failed blocks, so that a later batch asks again."""
        with self.lock:
            for key in keys:
                if self.blocks.get(key) is futures[key]:
                    del self.blocks[key]
