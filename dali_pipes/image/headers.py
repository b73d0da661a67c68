"""Image size from the first bytes of a file, without decoding it.

The DALI backend needs each image's size before decoding (the crop window is computed in
Python, see :mod:`dali_pipes.augment.geometry`), and reading it here also means a file that is not
an image is reported by path with a reason instead of stopping a DALI pipeline.
"""

from __future__ import annotations

import struct

import numpy as np

from dali_pipes.errors import DataError

#: The file extensions of the formats both backends decode (torchvision.io and DALI's
#: decoders): what an image folder's listing keeps.
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".webp")
#: Formats ImageFolder would list but torchvision.io cannot decode.
UNSUPPORTED_EXTENSIONS = (".bmp", ".ppm", ".pgm", ".tif", ".tiff")

# JPEG start-of-frame markers (baseline, extended, progressive, lossless, arithmetic ...);
# 0xC4 (DHT), 0xC8 (JPG) and 0xCC (DAC) share the range but are not frames.
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_STANDALONE = frozenset(range(0xD0, 0xDA)) | {0x01}  # RSTn, SOI, EOI, TEM: no length field


def image_size(
    data: bytes | memoryview | np.ndarray, path: str = "<bytes>", max_pixels: int | None = None
) -> tuple[int, int]:
    """Return (height, width) of a JPEG, PNG or WebP image, or raise :class:`DataError`.

    With ``max_pixels``, a header claiming more pixels is refused here, before any decoder
    allocates memory for it.
    """
    buf: bytes | memoryview = data if isinstance(data, bytes) else memoryview(data).cast("B")  # type: ignore[arg-type]
    head = bytes(buf[:16])
    if head[:2] == b"\xff\xd8":
        h, w = _jpeg_size(buf, path)
    elif head[:8] == b"\x89PNG\r\n\x1a\n":
        h, w = _png_size(buf, path)
    elif head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        h, w = _webp_size(buf, path)
    elif not head:
        raise DataError(f"{path}: empty file; remove it or replace it with an image")
    else:
        raise DataError(
            f"{path}: not a JPEG, PNG or WebP image (starts with {head[:8]!r}); "
            "remove it or convert it"
        )
    if h <= 0 or w <= 0:
        raise DataError(f"{path}: image header says {w}x{h} pixels; the file is broken")
    if max_pixels is not None and h * w > max_pixels:
        raise DataError(
            f"{path}: image header says {w}x{h} = {h * w} pixels, above "
            f"data.max_pixels={max_pixels}; raise the limit or remove the file"
        )
    return h, w


def _jpeg_size(buf: bytes | memoryview, path: str) -> tuple[int, int]:
    _, h, w = _jpeg_frame(buf, path)
    return h, w


def jpeg_coding(data: bytes | memoryview) -> str | None:
    """How a JPEG's frame is coded, from its start-of-frame marker: ``baseline`` (or
    extended sequential, Huffman-coded), ``progressive``, ``arithmetic`` (sequential or
    progressive) or ``lossless``; None for bytes that are not a JPEG with a frame header."""
    if bytes(data[:2]) != b"\xff\xd8":
        return None
    try:
        marker, _, _ = _jpeg_frame(data, "<bytes>")
    except DataError:
        return None
    if marker in (0xC3, 0xC7, 0xCB, 0xCF):
        return "lossless"
    if marker >= 0xC8:
        return "arithmetic"
    return "progressive" if marker in (0xC2, 0xC6) else "baseline"


def _jpeg_frame(buf: bytes | memoryview, path: str) -> tuple[int, int, int]:
    """The start-of-frame marker of a JPEG and the height and width it gives."""
    pos, end = 2, len(buf)
    while pos + 1 < end:
        if buf[pos] != 0xFF:  # stray bytes between segments: libjpeg skips them too
            pos += 1
            continue
        marker = buf[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        pos += 2
        if marker in _STANDALONE:
            continue
        if marker in (0xD9, 0xDA):  # EOI or start of scan before any frame header
            break
        if pos + 2 > end:
            break
        (length,) = struct.unpack(">H", bytes(buf[pos : pos + 2]))
        if marker in _SOF:
            if pos + 7 > end:
                break
            h, w = struct.unpack(">HH", bytes(buf[pos + 3 : pos + 7]))
            return marker, h, w
        if length < 2:
            raise DataError(f"{path}: corrupt JPEG (segment length {length}); the file is broken")
        pos += length
    raise DataError(f"{path}: JPEG without a frame header (truncated?); the file is broken")


def _png_size(buf: bytes | memoryview, path: str) -> tuple[int, int]:
    if len(buf) < 24 or bytes(buf[12:16]) != b"IHDR":
        raise DataError(f"{path}: PNG without an IHDR header; the file is broken")
    w, h = struct.unpack(">II", bytes(buf[16:24]))
    return h, w


def _webp_size(buf: bytes | memoryview, path: str) -> tuple[int, int]:
    chunk = bytes(buf[12:16])
    body = bytes(buf[20:30])
    if chunk == b"VP8 " and len(body) >= 10:
        w, h = struct.unpack("<HH", body[6:10])
        return h & 0x3FFF, w & 0x3FFF
    if chunk == b"VP8L" and len(body) >= 5:
        bits = int.from_bytes(body[1:5], "little")
        return ((bits >> 14) & 0x3FFF) + 1, (bits & 0x3FFF) + 1
    if chunk == b"VP8X" and len(body) >= 10:
        w = int.from_bytes(body[4:7], "little") + 1
        h = int.from_bytes(body[7:10], "little") + 1
        return h, w
    raise DataError(f"{path}: WebP without a known image chunk; the file is broken")
