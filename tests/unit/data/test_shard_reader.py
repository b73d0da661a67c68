"""How shards are read: by positioned reads where they are files, by cached blocks where
each request is a round trip. The request pattern is checked on local files behind a
storage that says it is remote and counts its requests (the S3 path itself runs against
a real server in tests/e2e/test_object_storage_shards.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import cast

import numpy as np
import pytest
from helpers.shards import pack

from dali_pipes.data.sampling import StreamSampler
from dali_pipes.data.shard_reader import ShardReader
from dali_pipes.data.shards import ShardLayout, open_split
from dali_pipes.data.specs import SamplingSpec
from dali_pipes.data.storage import LocalStorage, Storage
from dali_pipes.errors import DataError


class CountingRemote:
    """Local files read like objects: every range is a request, counted; the files in
    ``fail`` answer with an error."""

    remote = True

    def __init__(self, fail: set[str] | None = None, delay: float = 0.0) -> None:
        self.requests: list[tuple[str, int, int]] = []
        self.lock = threading.Lock()
        self.fail = fail or set()
        self.delay = delay

    def read_ranges(self, ranges: Sequence[tuple[str, int, int]]) -> list[bytes | DataError]:
        with self.lock:
            self.requests += list(ranges)
        time.sleep(self.delay)  # a round trip: other threads ask meanwhile
        out = LocalStorage().read_ranges(ranges)
        return [
            DataError(f"{r[0]}: gone") if r[0] in self.fail else b
            for r, b in zip(ranges, out, strict=True)
        ]


def remote_reader(layout: ShardLayout, storage: CountingRemote) -> ShardReader:
    return ShardReader(layout, cast(Storage, storage))


@pytest.fixture(scope="module")
def packed(identity_tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("reader") / "packed"
    pack(identity_tree, out, "pack.shard_size_mb=0.004")
    return out


def layout_of(packed: Path, block_bytes: int, window: int = 4) -> ShardLayout:
    *_, layout = open_split(packed, "train", shuffle_buffer=window, block_mb=block_bytes / 2**20)
    return layout


def epoch_batches(layout: ShardLayout, batch: int = 3) -> list[np.ndarray]:
    n = len(layout.shard)
    sampler = StreamSampler(n, SamplingSpec(seed=3, shuffle=True), layout)
    order = sampler.indices(0)
    return [order[i : i + batch] for i in range(0, len(order), batch)]


def test_blocks_give_the_same_bytes_as_positioned_reads(packed: Path) -> None:
    for block in (700, 4096, 2**20):  # samples spanning blocks, and whole shards in one
        layout = layout_of(packed, block)
        local, remote = ShardReader(layout), remote_reader(layout, CountingRemote())
        for indices in epoch_batches(layout):
            for a, b in zip(local.read(indices), remote.read(indices), strict=True):
                assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
                assert a.tobytes() == b.tobytes()


def test_each_block_is_fetched_once_per_epoch_when_the_cache_holds_two_windows(
    packed: Path,
) -> None:
    layout = layout_of(packed, 4096, window=16)  # a window's batches share blocks
    storage = CountingRemote()
    reader = remote_reader(layout, storage)
    for indices in epoch_batches(layout):
        reader.read(indices)
    blocks = [(path, start) for path, start, _ in storage.requests]
    assert len(blocks) == len(set(blocks))  # never the same block twice
    covered = sum(length for *_, length in storage.requests)
    assert covered <= int(max(layout.offset + layout.size)) * layout.num_shards  # sanity
    per_sample = len(storage.requests) / len(layout.shard)
    assert per_sample < 1  # fewer requests than samples: what the blocks are for


def test_threads_asking_for_the_same_blocks_share_one_request_each(packed: Path) -> None:
    layout = layout_of(packed, 4096)
    storage = CountingRemote(delay=0.3)
    reader = remote_reader(layout, storage)
    indices = epoch_batches(layout, batch=8)[0]
    results: list[list[np.ndarray | DataError]] = []
    start = threading.Barrier(8)

    def read() -> None:
        start.wait()  # all eight ask while the first request is in flight
        results.append(reader.read(indices))

    threads = [threading.Thread(target=read) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    blocks = [(path, start) for path, start, _ in storage.requests]
    assert len(blocks) == len(set(blocks)) > 0
    assert all(
        all(a.tobytes() == b.tobytes() for a, b in zip(r, results[0], strict=True))  # type: ignore[union-attr]
        for r in results
    )


def test_the_cache_keeps_to_its_capacity_and_refetches_only_at_window_edges(
    packed: Path,
) -> None:
    """A pack many times the cache: blocks of windows gone are dropped, and a block is
    fetched again only if it straddles two windows' reads."""
    layout = layout_of(packed, 700, window=2)
    storage = CountingRemote()
    reader = remote_reader(layout, storage)
    cache = reader._cache()
    total = sum(
        -(-int(e) // 700)
        for e in np.maximum.reduceat(
            layout.offset + layout.size, np.flatnonzero(np.diff(layout.shard, prepend=-1))
        )
    )
    assert cache.capacity < total / 2  # the pack does not fit
    for indices in epoch_batches(layout, batch=2):
        reader.read(indices)
        assert len(cache.blocks) <= cache.capacity
    blocks = [(path, start) for path, start, _ in storage.requests]
    assert len(blocks) - len(set(blocks)) <= 2 * len(layout.shard) / 2  # edges only


def test_a_failed_block_is_a_bad_sample_and_is_asked_for_again_later(packed: Path) -> None:
    layout = layout_of(packed, 4096)
    gone = layout.tars[int(layout.shard[0])]
    storage = CountingRemote(fail={gone})
    reader = remote_reader(layout, storage)
    first = reader.read([0])
    assert isinstance(first[0], DataError) and gone in str(first[0])
    storage.fail.clear()
    again = reader.read([0])
    assert isinstance(again[0], np.ndarray)
    assert len(storage.requests) == 2  # the failure was not cached


def test_threads_racing_to_their_first_blocks_ask_only_for_whole_ranges() -> None:
    """The DALI feed's threads start reading at once: none of them may see where the
    shards end before it is known (a range of length 0 or less, sent as a malformed
    ``Range`` header, came back as a "truncated" shard)."""
    per, shards = 1000, 1300  # large enough that working out the shard ends takes a while
    layout = ShardLayout(
        tars=tuple(f"s3://bucket/all/shard-{i:06d}.tar" for i in range(shards)),
        shard=np.repeat(np.arange(shards), per).astype(np.int64),
        offset=np.tile(np.arange(per) * 110_000 + 512, shards).astype(np.int64),
        size=np.full(per * shards, 100_000, np.int64),
        shuffle_buffer=5000,
    )
    asked: list[int] = []

    class Zeros:
        remote = True

        def read_ranges(self, ranges: Sequence[tuple[str, int, int]]) -> list[bytes | DataError]:
            asked.extend(length for _, _, length in ranges)
            return [bytes(max(length, 0)) for _, _, length in ranges]

    for _ in range(40):
        reader = ShardReader(layout, cast(Storage, Zeros()))
        start = threading.Barrier(4)

        def first_fetch(r: ShardReader = reader, go: threading.Barrier = start) -> None:
            go.wait()
            r._fetch([(0, 0), (3, 2)])

        threads = [threading.Thread(target=first_fetch) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(asked) == 40 * 4 * 2 and min(asked) > 0
