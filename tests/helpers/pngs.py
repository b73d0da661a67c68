"""16-bit PNG files written byte by byte (Pillow cannot write 16-bit RGB)."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np


def write_png16(path: Path, pixels: np.ndarray) -> None:
    """``pixels``: uint16 ``[H, W, C]`` with C = 1 (grey) or 3 (RGB), as a 16-bit PNG."""
    h, w, c = pixels.shape
    raw = b"".join(b"\x00" + pixels[y].astype(">u2").tobytes() for y in range(h))

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", w, h, 16, {1: 0, 3: 2}[c], 0, 0, 0)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def textured16(h: int, w: int, c: int = 3, seed: int = 0) -> np.ndarray:
    """A smooth 16-bit gradient with noise: every level of the uint8 scale is reached."""
    rng = np.random.default_rng(seed)
    ramp = np.linspace(0, 65535, w)[None, :, None] * np.ones((h, 1, c))
    noise = rng.normal(0, 2000, size=(h, w, c))
    return np.clip(ramp + noise, 0, 65535).astype(np.uint16)
