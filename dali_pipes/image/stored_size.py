"""An image stored smaller, once, for every epoch after: its long side cut to ``pack.max_side``
(in a pack) or ``data.cache_max_side`` (in a decode-once cache).

Photos as cameras take them hold far more pixels than a training crop uses, and most of a
JPEG's decoding cost is entropy decoding, which grows with the stored pixels whatever the
output size. Storing each image at most ``max_side`` pixels on its long side, as FFCV
does with its maximum resolution, makes every later decode cheaper by about the ratio of
pixels (benchmarks/RESULTS.md has the measurement). A decode-once cache decodes each
image only once, but holds it decoded: there the stored size cuts the memory it takes and
the resize of every crop.

The resize is the project's own antialiased linear filter
(:func:`~dali_pipes.image.resample.resize_window`, DALI's ``fn.resize``), so a stored
image is what the loaders' own resize of the whole image would give. A pack then encodes
it as a baseline JPEG at ``quality`` with full-resolution chroma (4:4:4; libjpeg-turbo,
through Pillow); a cache keeps its pixels. This is not lossless: the pack records
``max_side`` and ``quality``, and a loader warns when the training crop asks for more
pixels than were stored.
"""

from __future__ import annotations

import io

import numpy as np
import torch

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
    if stored_shape(height, width, max_side) == (height, width):
        return None
    from PIL import Image

    pixels = fitted(decode_bytes(np.frombuffer(data, np.uint8), path), max_side)
    encoded = io.BytesIO()
    image = Image.fromarray(pixels.permute(1, 2, 0).numpy())
    image.save(encoded, "JPEG", quality=quality, subsampling=0)  # 4:4:4
    return encoded.getvalue()


def fitted(image: torch.Tensor, max_side: int) -> torch.Tensor:
    """A decoded uint8 ``[C, H, W]`` image resized to at most ``max_side`` pixels on its
    long side (the image itself when it is within that already): what ``pack.max_side``
    encodes and what ``data.cache_max_side`` holds in memory."""
    height, width = image.shape[-2:]
    shape = stored_shape(height, width, max_side)
    if shape == (height, width):
        return image
    from dali_pipes.image.resample import resize_window  # compiled: imported when used

    out = np.empty((*shape, image.shape[0]), np.uint8)
    pixels = image.permute(1, 2, 0).contiguous().numpy()
    resize_window(pixels, np.zeros(2), np.array([height, width], np.float64), out)
    return torch.from_numpy(out).permute(2, 0, 1).contiguous()


__all__ = ["fitted", "shrunk", "stored_shape"]
