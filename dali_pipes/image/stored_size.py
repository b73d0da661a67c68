"""An image stored smaller, once, for every epoch after: its long side cut to ``pack.max_side``.

Photos as cameras take them hold far more pixels than a training crop uses, and most of a
JPEG's decoding cost is entropy decoding, which grows with the stored pixels whatever the
output size. Storing each image at most ``max_side`` pixels on its long side, as FFCV
does with its maximum resolution, makes every later decode cheaper by about the ratio of
pixels (benchmarks/RESULTS.md has the measurement).

The resize is the project's own antialiased linear filter
(:func:`~dali_pipes.image.resample.resize_window`, DALI's ``fn.resize``), so a stored
image is what the loaders' own resize of the whole image would give; it is then encoded
as a baseline JPEG at ``quality`` with full-resolution chroma (4:4:4; libjpeg-turbo,
through Pillow). This is not lossless: the pack records ``max_side`` and ``quality``, and
reading a pack warns when the training crop asks for more pixels than were stored.
"""

from __future__ import annotations

import io

import numpy as np

from dali_pipes.image.decode import decode_bytes
from dali_pipes.image.headers import image_size


def stored_shape(height: int, width: int, max_side: int) -> tuple[int, int]:
    """(height, width) of an image stored at most ``max_side`` on its long side, the
    aspect ratio kept (each side at least one pixel)."""
    long = max(height, width)
    if long <= max_side:
        return height, width
    scale = max_side / long
    return max(1, round(height * scale)), max(1, round(width * scale))


def shrunk(data: bytes, path: str, max_side: int, quality: int) -> bytes | None:
    """The image in ``data`` (named ``path`` in errors) resized to at most ``max_side``
    pixels on its long side and encoded as a JPEG at ``quality``; None when it is within
    ``max_side`` already (it is then stored as it is). Raises
    :class:`~dali_pipes.errors.DataError` for a file that cannot be decoded."""
    height, width = image_size(data, path)
    shape = stored_shape(height, width, max_side)
    if shape == (height, width):
        return None
    from PIL import Image

    from dali_pipes.image.resample import resize_window  # compiled: imported when used

    pixels = decode_bytes(np.frombuffer(data, np.uint8), path).permute(1, 2, 0).contiguous()
    out = np.empty((*shape, 3), np.uint8)
    resize_window(pixels.numpy(), np.zeros(2), np.array([height, width], np.float64), out)
    encoded = io.BytesIO()
    Image.fromarray(out).save(encoded, "JPEG", quality=quality, subsampling=0)  # 4:4:4
    return encoded.getvalue()


__all__ = ["shrunk", "stored_shape"]
