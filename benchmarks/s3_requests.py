"""Requests and bytes a rank asks of object storage per epoch of ImageNet-1k in shards.

Runs the project's own shard reader (:class:`~dali_pipes.data.shard_reader.ShardReader`)
and streaming order (:class:`~dali_pipes.data.sampling.StreamSampler`) over the layout
``pack`` would write for ImageNet-1k's train split (1,281,167 samples whose sizes are
drawn around ImageNet's 110 KB mean; shards of ``--shard-mb``), against a storage that
counts each ranged GET and answers with zeros: no bytes move, so it runs anywhere in
seconds, and the figures are the reader's request pattern, not a network measurement.
One reader stands for the DALI backend (the feed reads in the training process); ``W``
readers taking batches in turn stand for the torch backend's ``W`` DataLoader workers,
each with its own block cache. Writes JSON. Usage::

    python benchmarks/s3_requests.py [--ranks 64] [--workers 8] [--out OUT.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Sequence
from pathlib import Path
from typing import cast

import numpy as np

from dali_pipes.data.sampling import StreamSampler
from dali_pipes.data.shard_reader import ShardReader
from dali_pipes.data.shards import ShardLayout
from dali_pipes.data.specs import SamplingSpec
from dali_pipes.data.storage import Storage
from dali_pipes.errors import DataError
from dali_pipes.tools import provenance

IMAGENET_TRAIN = 1_281_167
MEAN_BYTES = 110_000


class CountingBucket:
    """A bucket that counts ranged GETs and their bytes and returns zeros."""

    remote = True

    def __init__(self) -> None:
        self.requests = 0
        self.bytes = 0

    def read_ranges(self, ranges: Sequence[tuple[str, int, int]]) -> list[bytes | DataError]:
        self.requests += len(ranges)
        self.bytes += sum(n for *_, n in ranges)
        return [bytes(n) for *_, n in ranges]


def imagenet_layout(shard_mb: float, window: int, block_mb: float, seed: int = 0) -> ShardLayout:
    """Where pack would put ImageNet-1k's samples: sizes log-normal around 110 KB."""
    rng = np.random.default_rng(seed)
    sizes = rng.lognormal(np.log(MEAN_BYTES) - 0.18, 0.6, IMAGENET_TRAIN).astype(np.int64)
    stored = sizes + 3 * 512 + 512  # image header, its padding, the .cls member
    before = np.cumsum(stored) - stored  # bytes ahead of each sample in one long stream
    shard_of = (before // int(shard_mb * 2**20)).astype(np.int64)
    first = np.searchsorted(shard_of, np.arange(shard_of[-1] + 1))
    offsets = before - before[first][shard_of] + 512
    tars = tuple(f"s3://bucket/imagenet/train/shard-{s:06d}.tar" for s in range(len(first)))
    return ShardLayout(tars, shard_of, offsets, sizes, window, block_bytes=int(block_mb * 2**20))


def epoch_requests(
    layout: ShardLayout, ranks: int, workers: int, batch: int, rank: int = 0
) -> dict[str, float]:
    """One epoch of ``rank``: requests and bytes with ``workers`` readers taking batches in turn."""
    spec = SamplingSpec(seed=0, shuffle=True, rank=rank, world_size=ranks)
    order = StreamSampler(len(layout.shard), spec, layout).indices(0)
    buckets = [CountingBucket() for _ in range(workers)]
    readers = [ShardReader(layout, cast(Storage, b)) for b in buckets]
    for k, first in enumerate(range(0, len(order), batch)):
        readers[k % workers].read(order[first : first + batch])
    requests = sum(b.requests for b in buckets)
    fetched = sum(b.bytes for b in buckets)
    needed = int(layout.size[order].sum())
    return {
        "samples": len(order),
        "requests": requests,
        "requests_per_image": round(requests / len(order), 4),
        "bytes_fetched_per_byte_used": round(fetched / needed, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--shard-mb", type=float, default=256)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/s3-requests.json"))
    args = parser.parse_args()
    rows = []
    for window in (2048, 8192):
        for block_mb in (8.0, 16.0):
            layout = imagenet_layout(args.shard_mb, window, block_mb)
            for readers, backend in ((1, "dali (one reader)"), (args.workers, "torch workers")):
                row = {"backend": backend, "readers": readers, "shuffle_buffer": window}
                row |= {"block_mb": block_mb, "shards": layout.num_shards}
                row |= epoch_requests(layout, args.ranks, readers, args.batch)
                rows.append(row)
                print(json.dumps(row), flush=True)
    commit = provenance.commit()
    record = {
        "rows": rows,
        "ranks": args.ranks,
        "batch": args.batch,
        "shard_mb": args.shard_mb,
        "samples": IMAGENET_TRAIN,
        "mean_bytes": MEAN_BYTES,
        "machine": platform.platform(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": commit,
        "command": "python benchmarks/s3_requests.py",
    }
    args.out.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
