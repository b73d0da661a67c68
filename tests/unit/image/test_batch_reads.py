"""Local files read a batch at a time by the compiled loop: the same bytes and the same
errors as every other reader, the read deadline kept, buffers reused only when given back."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from helpers.stalls import fifo_at

from dali_pipes.errors import DataError
from dali_pipes.image import reads
from dali_pipes.image.batch_reads import LocalReads, encode
from dali_pipes.image.decode import read_files


@pytest.fixture
def files(tmp_path: Path) -> list[str]:
    """Files of different sizes (an empty one among them), one with a non-ASCII name."""
    rng = np.random.default_rng(0)
    out = []
    for k, size in enumerate([3000, 0, 1, 70_000, 4096, 250_000]):
        path = tmp_path / (f"ü-{k}.jpg" if k == 3 else f"{k}.jpg")
        path.write_bytes(rng.integers(0, 256, size, dtype=np.uint8).tobytes())
        out.append(str(path))
    return out


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Path]:
    """A FIFO no one writes to: opening it for reading blocks until a writer comes."""
    with fifo_at(tmp_path / "stalled.jpg") as path:
        yield path


def contents(paths: list[str]) -> list[bytes]:
    return [Path(p).read_bytes() for p in paths]


@pytest.mark.parametrize("timeout", [None, 5.0])
def test_a_batch_is_read_byte_for_byte(files: list[str], timeout: float | None) -> None:
    batch = LocalReads(timeout).read(files + files[:2])
    assert [b.tobytes() for b in batch.blobs] == contents(files + files[:2])  # type: ignore[union-attr]


def test_paths_are_handed_to_the_loop_as_the_file_system_spells_them(files: list[str]) -> None:
    names, starts = encode(files)
    ends = [*starts[1:], len(names)]
    got = [names[s : e - 1].tobytes() for s, e in zip(starts, ends, strict=True)]
    assert got == [os.fsencode(p) for p in files] and names[-1] == 0


def test_a_file_that_cannot_be_read_gets_the_error_every_reader_gives(
    files: list[str], tmp_path: Path
) -> None:
    missing, folder = str(tmp_path / "gone.jpg"), str(tmp_path)
    batch = LocalReads(5.0).read([files[0], missing, folder, files[3]])
    expected = read_files([missing, folder])
    assert [str(b) for b in batch.blobs[1:3]] == [str(e) for e in expected]
    assert all(isinstance(b, DataError) for b in batch.blobs[1:3])
    assert [batch.blobs[0].tobytes(), batch.blobs[3].tobytes()] == contents([files[0], files[3]])  # type: ignore[union-attr]


def test_a_read_that_never_returns_is_named_with_the_deadline_and_the_rest_is_read(
    files: list[str], fifo: Path
) -> None:
    paths = [files[0], str(fifo), files[3], files[5]]
    start = time.monotonic()
    batch = LocalReads(0.5).read(paths)
    assert time.monotonic() - start < 5
    stalled = batch.blobs[1]
    assert isinstance(stalled, DataError)
    message = str(stalled)
    assert str(fifo) in message and "read_timeout=0.5 s" in message and "\n" not in message
    got = [b.tobytes() for k, b in enumerate(batch.blobs) if k != 1]  # type: ignore[union-attr]
    assert got == contents([files[0], files[3], files[5]])
    assert batch.buffers, "the buffers of the batch read after the stall are its own"


def test_a_file_system_that_stops_answering_ends_reading_in_one_line(
    fifo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reads, "_stalled", reads.MAX_STALLED)
    with pytest.raises(DataError, match="not answering") as exc:
        LocalReads(0.2).read([str(fifo)])
    assert "\n" not in str(exc.value) and str(fifo) in str(exc.value)


def test_buffers_are_read_into_again_only_once_given_back(files: list[str]) -> None:
    reader = LocalReads(None)
    first = reader.read(files)
    held = [b.tobytes() for b in first.blobs]  # type: ignore[union-attr]
    second = reader.read(list(reversed(files)))
    assert [b.tobytes() for b in first.blobs] == held, "a batch not given back is kept"  # type: ignore[union-attr]
    assert not set(map(id, first.buffers)) & set(map(id, second.buffers))
    given_back = set(map(id, first.buffers))
    reader.recycle(first)
    third = reader.read(files[:3])
    assert set(map(id, third.buffers)) & given_back, "a buffer given back is read into again"
    assert [b.tobytes() for b in third.blobs] == contents(files[:3])  # type: ignore[union-attr]
    assert [b.tobytes() for b in second.blobs] == contents(list(reversed(files)))  # type: ignore[union-attr]


def test_a_batch_larger_than_its_first_buffer_is_read_into_further_ones(tmp_path: Path) -> None:
    big = tmp_path / "big.jpg"
    big.write_bytes(os.urandom(3 << 20))  # more than the first buffer's guess per file
    paths = [str(big)] * 3
    batch = LocalReads(None).read(paths)
    assert [b.tobytes() for b in batch.blobs] == contents(paths)  # type: ignore[union-attr]
    assert len(batch.buffers) >= 2


def test_batches_read_on_several_threads_at_once_keep_their_own_bytes(files: list[str]) -> None:
    reader = LocalReads(5.0)
    results: list[bool] = []

    def work(order: list[str]) -> None:
        for _ in range(20):
            batch = reader.read(order)
            results.append([b.tobytes() for b in batch.blobs] == contents(order))  # type: ignore[union-attr]
            reader.recycle(batch)

    threads = [
        threading.Thread(target=work, args=(order,)) for order in (files, files[::-1], files[1:])
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 60 and all(results)
