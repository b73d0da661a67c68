"""JPEGs stored baseline with optimised tables (``pack``): the same pixels, the orientation
kept, and a file jpegtran cannot take kept byte for byte."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import BUNDLED_PHOTOS
from PIL import Image

from dali_pipes.image.baseline import exif_orientation, jpegtran, rewrite, with_orientation
from dali_pipes.image.decode import decode_bytes
from dali_pipes.image.headers import jpeg_coding


@pytest.fixture(scope="module")
def tool() -> str:
    found = jpegtran()
    if found is None:
        pytest.skip("jpegtran not installed (make test installs libjpeg-turbo-progs)")
    return found


def pixels(data: bytes) -> torch.Tensor:
    return decode_bytes(np.frombuffer(data, np.uint8), "<test>")


def photo_jpeg(orientation: int | None = None, **save: object) -> bytes:
    """A real photo saved again by Pillow, with ``save``'s options and an orientation."""
    image = Image.open(next(BUNDLED_PHOTOS.rglob("*.jpg"))).convert("RGB")
    exif = Image.Exif()
    if orientation is not None:
        exif[0x0112] = orientation
    out = io.BytesIO()
    image.save(out, "JPEG", quality=90, exif=exif.tobytes(), **save)
    return out.getvalue()


def test_a_progressive_jpeg_is_converted_to_baseline_with_the_same_pixels(tool: str) -> None:
    progressive = photo_jpeg(progressive=True)
    assert jpeg_coding(progressive) == "progressive"
    done = rewrite(progressive, "p.jpg", tool)
    assert done.change == "converted" and jpeg_coding(done.data) == "baseline"
    assert torch.equal(pixels(done.data), pixels(progressive))


def test_an_arithmetic_coded_jpeg_is_converted_to_huffman_baseline(tool: str) -> None:
    arithmetic = subprocess.run(
        [tool, "-arithmetic"], input=photo_jpeg(), capture_output=True, check=True
    ).stdout
    assert jpeg_coding(arithmetic) == "arithmetic"
    done = rewrite(arithmetic, "a.jpg", tool)
    assert done.change == "converted" and jpeg_coding(done.data) == "baseline"
    assert torch.equal(pixels(done.data), pixels(arithmetic))


def test_every_shipped_photo_decodes_to_its_pixels_after_the_rewrite(tool: str) -> None:
    changes = set()
    for path in sorted(BUNDLED_PHOTOS.rglob("*.jpg")):
        data = path.read_bytes()
        done = rewrite(data, str(path), tool)
        changes.add(done.change)
        assert jpeg_coding(done.data) == "baseline", path
        assert torch.equal(pixels(done.data), pixels(data)), path
    assert "converted" in changes  # the shipped set has progressive photos


def test_the_exif_orientation_is_kept_and_the_rest_of_the_metadata_dropped(tool: str) -> None:
    original = photo_jpeg(orientation=6, progressive=True, comment=b"x" * 5000)
    done = rewrite(original, "o.jpg", tool)
    assert exif_orientation(done.data) == 6
    with Image.open(io.BytesIO(done.data)) as image:
        assert image.getexif()[0x0112] == 6 and "comment" not in image.info
    assert "fe" in markers(original) and "fe" not in markers(done.data)  # no comment
    assert [m for m in markers(done.data) if m.startswith("e")] == ["e0", "e1"]


def markers(data: bytes) -> list[str]:
    """The markers of a JPEG's segments before its first scan, in hex."""
    found, pos = [], 2
    while data[pos + 1] != 0xDA:
        found.append(f"{data[pos + 1]:02x}")
        pos += 2 + int.from_bytes(data[pos + 2 : pos + 4], "big")
    return found


def test_an_orientation_segment_follows_the_jfif_one() -> None:
    jfif = photo_jpeg()
    assert jfif[2:4] == b"\xff\xe0"
    oriented = with_orientation(jfif, 8)
    assert oriented[2:4] == b"\xff\xe0" and exif_orientation(oriented) == 8
    assert with_orientation(jfif, 1) == jfif and with_orientation(jfif, None) == jfif


def test_a_file_jpegtran_cannot_take_or_warns_about_is_kept_byte_for_byte(tool: str) -> None:
    whole = photo_jpeg(progressive=True)
    for data in (whole[: len(whole) // 2], b"not an image", b"\xff\xd8\xff\xd9"):
        done = rewrite(data, "bad.jpg", tool)
        assert done.change == "kept" and done.data == data and done.why


def test_a_baseline_file_is_kept_when_optimising_saves_nothing(tool: str) -> None:
    optimised = subprocess.run(
        [tool, "-optimize", "-copy", "none"], input=photo_jpeg(), capture_output=True, check=True
    ).stdout
    done = rewrite(optimised, "b.jpg", tool)
    assert done.change == "kept" and done.data == optimised


def test_the_coding_of_a_jpeg_is_read_from_its_frame_marker() -> None:
    assert jpeg_coding(photo_jpeg()) == "baseline"
    assert jpeg_coding(photo_jpeg(progressive=True)) == "progressive"
    assert jpeg_coding(b"\x89PNG\r\n\x1a\n") is None
    assert jpeg_coding(b"\xff\xd8\xff\xd9") is None


def test_the_corner_files_jpegtran_rewrites_keep_their_pixels(tool: str, tmp_path: Path) -> None:
    from conftest import CORNER

    if not CORNER.is_dir():
        pytest.skip(f"corner-case files not found at {CORNER}")
    rewritten = 0
    for path in sorted(p for p in CORNER.rglob("*") if p.is_file() and p.suffix != ".csv"):
        data = path.read_bytes()
        done = rewrite(data, str(path), tool)
        if done.change == "kept":
            assert done.data == data, path
            continue
        rewritten += 1
        assert torch.equal(pixels(done.data), pixels(data)), path
        # orientation 1 is the default: written or not, the same
        assert (exif_orientation(done.data) or 1) == (exif_orientation(data) or 1), path
    assert rewritten > 0


def test_an_orientation_is_not_read_from_a_header_claiming_absurd_sizes() -> None:
    frame = b"\xff\xc0\x00\x11\x08\xff\xff\xff\xff\x03\x01\x22\x00\x02\x11\x01\x03\x11\x01"
    assert exif_orientation(b"\xff\xd8" + frame + b"\xff\xd9") is None  # 65535 x 65535
    assert exif_orientation(b"not an image") is None
