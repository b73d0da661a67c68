"""Each sample's image size is read from its header once, kept, and read again only when the
bytes change; a header that fails its check makes the sample bad, named."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from conftest import write_jpeg

from dali_pipes.backends.dali import sizes as sizes_module
from dali_pipes.backends.dali.sizes import HeaderSizes
from dali_pipes.errors import DataError
from dali_pipes.image.decode import header_size


@pytest.fixture
def jpegs(tmp_path: Path) -> list[str]:
    paths = []
    for k, (h, w) in enumerate([(20, 30), (40, 10), (16, 16)]):
        path = tmp_path / f"{k}.jpg"
        write_jpeg(path, np.full((h, w, 3), 40 * k, np.uint8))
        paths.append(str(path))
    return paths


def blobs_of(paths: list[str], indices: list[int]) -> list[np.ndarray | DataError]:
    return [np.fromfile(paths[i], np.uint8) for i in indices]


def test_sizes_are_the_headers_and_each_header_is_parsed_once(jpegs: list[str]) -> None:
    table = HeaderSizes(len(jpegs), max_pixels=None)
    batch = np.array([2, 0, 1, 0])
    with mock.patch.object(sizes_module, "header_size", wraps=header_size) as parsed:
        sizes, bad = table.check(batch, blobs_of(jpegs, [2, 0, 1, 0]), jpegs.__getitem__)
        assert parsed.call_count == 4  # all new (sample 0 twice in the batch: not yet kept)
        again, _ = table.check(batch, blobs_of(jpegs, [2, 0, 1, 0]), jpegs.__getitem__)
        assert parsed.call_count == 4, "known sizes are not parsed again"
    assert sizes.tolist() == again.tolist() == [[16, 16], [20, 30], [40, 10], [20, 30]]
    assert not bad.any()


def test_a_file_whose_bytes_changed_is_parsed_again(jpegs: list[str]) -> None:
    table = HeaderSizes(len(jpegs), max_pixels=None)
    table.check(np.array([0]), blobs_of(jpegs, [0]), jpegs.__getitem__)
    write_jpeg(Path(jpegs[0]), np.zeros((50, 60, 3), np.uint8))  # replaced, another length
    sizes, _ = table.check(np.array([0]), blobs_of(jpegs, [0]), jpegs.__getitem__)
    assert sizes.tolist() == [[50, 60]]


def test_a_bad_header_or_read_makes_the_sample_bad_with_the_error_naming_it(
    jpegs: list[str],
) -> None:
    table = HeaderSizes(len(jpegs), max_pixels=500)  # 20x30 = 600 pixels: too many
    unreadable = DataError(f"{jpegs[2]}: cannot read the file (gone)")
    blobs = [*blobs_of(jpegs, [0, 1]), unreadable]
    sizes, bad = table.check(np.array([0, 1, 2]), blobs, jpegs.__getitem__)
    assert bad.tolist() == [True, False, True]
    assert sizes.tolist() == [[0, 0], [40, 10], [0, 0]]
    assert isinstance(blobs[0], DataError) and "data.max_pixels=500" in str(blobs[0])
    assert jpegs[0] in str(blobs[0]) and blobs[2] is unreadable
    assert table.nbytes[[0, 2]].tolist() == [-1, -1], "a bad sample's size is not kept"
