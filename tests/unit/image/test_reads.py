"""Every read has a deadline: a file whose read never returns is a bad file, named."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.stalls import fifo_at

from dali_pipes.errors import DataError
from dali_pipes.image import reads
from dali_pipes.image.decode import read_files


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Path]:
    """A FIFO no one writes to: opening it for reading blocks until a writer comes."""
    with fifo_at(tmp_path / "stalled.jpg") as path:
        yield path


def test_a_read_that_never_returns_is_a_bad_file_named_with_the_deadline(
    tmp_path: Path, fifo: Path
) -> None:
    good = [tmp_path / f"{k}.jpg" for k in range(3)]
    for k, path in enumerate(good):
        path.write_bytes(bytes([k]) * (k + 1))
    paths = [str(good[0]), str(fifo), str(good[1]), str(good[2])]
    start = time.monotonic()
    blobs = read_files(paths, timeout=0.5)
    assert time.monotonic() - start < 5
    good_blobs = [blobs[0], blobs[2], blobs[3]]
    assert [b.tobytes() for b in good_blobs if not isinstance(b, DataError)] == [
        b"\0",
        b"\1\1",
        b"\2\2\2",
    ]
    assert isinstance(blobs[1], DataError)
    message = str(blobs[1])
    assert str(fifo) in message and "0.5 s" in message and "\n" not in message


def test_a_slow_read_within_the_deadline_is_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def slow(path: str) -> bytes:
        time.sleep(0.3)
        return path.encode()

    paths = [str(tmp_path / f"{k}") for k in range(4)]  # 1.2 s in all, 0.3 s each
    assert reads.read_all(slow, paths, timeout=1.0) == [p.encode() for p in paths]


def test_a_file_system_that_stops_answering_ends_reading_in_one_line(
    fifo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reads, "_stalled", reads.MAX_STALLED)
    with pytest.raises(DataError, match="not answering") as exc:
        read_files([str(fifo)], timeout=0.2)
    assert "\n" not in str(exc.value) and str(fifo) in str(exc.value)


def test_an_error_raised_by_the_read_reaches_the_caller(tmp_path: Path) -> None:
    def broken(path: str) -> bytes:
        raise ValueError(path)

    with pytest.raises(ValueError, match="x"):
        reads.read_all(broken, ["x"], timeout=1.0)
