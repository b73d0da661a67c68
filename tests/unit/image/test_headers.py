"""Header sizes equal decoded sizes; non-images are named with a reason."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import torch
from PIL import Image
from torchvision.io import decode_image, encode_png

from dali_pipes.errors import DataError
from dali_pipes.image.headers import image_size


def test_jpeg_header_size_equals_decoded_size_on_every_photo(photos: Path) -> None:
    files = sorted(p for p in photos.rglob("*") if p.suffix.lower() in (".jpg", ".jpeg"))
    assert len(files) > 200
    for path in files:
        data = path.read_bytes()
        decoded = decode_image(
            torch.frombuffer(bytearray(data), dtype=torch.uint8), apply_exif_orientation=False
        )
        assert image_size(data, str(path)) == tuple(decoded.shape[-2:]), path


def test_png_and_webp_sizes() -> None:
    png = bytes(encode_png(torch.zeros(3, 17, 29, dtype=torch.uint8)).numpy())
    assert image_size(png) == (17, 29)
    for mode, kwargs in (("lossy", {}), ("lossless", {"lossless": True})):
        buf = io.BytesIO()
        Image.new("RGB", (31, 13)).save(buf, format="WEBP", **kwargs)
        assert image_size(buf.getvalue()) == (13, 31), mode
    buf = io.BytesIO()
    Image.new("RGBA", (40, 22)).save(buf, format="WEBP", exif=b"Exif\x00\x00")  # VP8X
    assert image_size(buf.getvalue()) == (22, 40)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "empty file"),
        (b"GIF89a....", "not a JPEG, PNG or WebP"),
        (b"\xff\xd8\xff\xe0\x00\x10JFIF\x00", "without a frame header"),
        (b"\xff\xd8\xff\xc0\x00\x11\x08\x00\x00\x00\x10\x03", "0 pixels"),
        (b"\x89PNG\r\n\x1a\n", "IHDR"),
    ],
)
def test_broken_headers_raise_data_error_with_path(data: bytes, reason: str) -> None:
    with pytest.raises(DataError, match=reason) as exc:
        image_size(data, "/data/x.jpg")
    assert str(exc.value).startswith("/data/x.jpg: ")
