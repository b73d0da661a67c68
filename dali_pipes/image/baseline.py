"""A JPEG rewritten losslessly as baseline with optimised Huffman tables, the way ``pack``
stores it.

A progressive JPEG decodes several times slower than the same coefficients stored
baseline (every scan revisits every block), and the hardware JPEG decoder of A100/H100
GPUs takes baseline files only. Moving the coefficients from one coding to the other
changes no pixel: libjpeg-turbo's ``jpegtran`` does it (``-optimize`` also builds Huffman
tables fitted to the image, so files usually get smaller). Nothing here codes JPEG.

Metadata is dropped (``-copy none``: EXIF thumbnails, comments, ICC profiles: decoding for
training reads none of them) except the EXIF orientation, which is written back alone so
that a viewer shows the packed file as the original. Decoding ignores it either way
(:mod:`dali_pipes.image.decode`).

Every rewrite is checked: the new file must decode (libjpeg-turbo, as training decodes
it) to exactly the original's pixels, else the original bytes are kept. A file jpegtran
cannot take (not a JPEG, truncated, lossless, 12-bit, ...) or warns about is kept as it
is, so a bad file meets the data's bad-file policy exactly as before packing.
"""

from __future__ import annotations

import io
import shutil
import struct
import subprocess
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from dali_pipes.errors import DataError
from dali_pipes.image.decode import decode_bytes
from dali_pipes.image.headers import jpeg_coding

#: How to get the tool, for the one-line message when it is missing.
JPEGTRAN_HINT = "apt-get install libjpeg-turbo-progs (Debian/Ubuntu) or brew install jpeg-turbo"
#: Seconds one file's rewrite may take before the file is kept as it is.
TIMEOUT = 60.0
_ORIENTATION_TAG = 0x0112

Change = Literal["converted", "optimised", "kept"]


@dataclass(frozen=True)
class Rewrite:
    """A file's bytes as packed: ``converted`` (progressive or arithmetic-coded, now
    baseline), ``optimised`` (baseline already, smaller now), or ``kept`` as they were;
    ``why`` says why a JPEG was kept."""

    data: bytes
    change: Change
    why: str = ""


def jpegtran() -> str | None:
    """The path of libjpeg-turbo's ``jpegtran``, None when it is not installed."""
    return shutil.which("jpegtran")


def rewrite(data: bytes, path: str, tool: str) -> Rewrite:
    """``data`` (the file at ``path``) stored baseline with optimised tables when that is
    lossless and, for a file already baseline, smaller; else the bytes as they are."""
    coding = jpeg_coding(data)
    if coding is None:
        return Rewrite(data, "kept", "not a JPEG with a frame header")
    if coding == "lossless":
        return Rewrite(data, "kept", "lossless JPEG")
    try:
        done = subprocess.run(
            [tool, "-optimize", "-copy", "none"],
            input=data,
            capture_output=True,
            timeout=TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return Rewrite(data, "kept", f"jpegtran took over {TIMEOUT:.0f} s")
    if done.returncode != 0 or done.stderr:  # a warning too: the file is damaged
        reason = done.stderr.decode(errors="replace").strip().splitlines()
        return Rewrite(data, "kept", f"jpegtran: {reason[0] if reason else done.returncode}")
    out = with_orientation(done.stdout, exif_orientation(data))
    if coding == "baseline" and len(out) >= len(data):
        return Rewrite(data, "kept", "baseline already; optimising saves nothing")
    if not _same_pixels(data, out, path):
        return Rewrite(data, "kept", "the rewritten file decodes to other pixels")
    return Rewrite(out, "converted" if coding != "baseline" else "optimised")


def _same_pixels(original: bytes, rewritten: bytes, path: str) -> bool:
    """Whether both decode, as training decodes them, to the same pixels."""
    try:
        before = decode_bytes(np.frombuffer(original, np.uint8), path)
        after = decode_bytes(np.frombuffer(rewritten, np.uint8), path)
    except DataError:
        return False
    return torch.equal(before, after)


def exif_orientation(data: bytes) -> int | None:
    """The EXIF orientation (1-8) of a JPEG, None when it has none or it cannot be read
    (Pillow reads the header only; nothing is decoded)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            value = image.getexif().get(_ORIENTATION_TAG)
    except (OSError, ValueError, SyntaxError, UnidentifiedImageError, Image.DecompressionBombError):
        return None  # not an image Pillow reads, or a header claiming absurd sizes
    return value if isinstance(value, int) and 1 <= value <= 8 else None


def with_orientation(jpeg: bytes, orientation: int | None) -> bytes:
    """``jpeg`` with an EXIF segment holding only ``orientation`` (after its JFIF segment,
    if any), or as it is when the orientation is None or 1 (the default)."""
    if orientation is None or orientation == 1:
        return jpeg
    tiff = b"MM\0*" + struct.pack(">I", 8) + struct.pack(">H", 1)
    tiff += struct.pack(">HHIHH", _ORIENTATION_TAG, 3, 1, orientation, 0) + struct.pack(">I", 0)
    payload = b"Exif\0\0" + tiff
    segment = b"\xff\xe1" + struct.pack(">H", len(payload) + 2) + payload
    at = 2
    if jpeg[2:4] == b"\xff\xe0":  # JFIF's APP0 stays first
        (length,) = struct.unpack(">H", jpeg[4:6])
        at = 4 + length
    return jpeg[:at] + segment + jpeg[at:]


__all__ = [
    "JPEGTRAN_HINT",
    "Rewrite",
    "exif_orientation",
    "jpegtran",
    "rewrite",
    "with_orientation",
]
