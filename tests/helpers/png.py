"""What a PNG a tool writes must be: a real PNG of the expected size, with content."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image


def check_png(path: Path, width: int | None = None, height: int | None = None) -> np.ndarray:
    """The RGB pixels of ``path`` after checking it is a PNG of ``width`` x ``height``
    (each within a pixel: figure sizes round) that is not blank: a fifth of it or more
    differs from its most common colour, and its values spread."""
    with Image.open(path) as image:
        assert image.format == "PNG", path
        pixels = np.asarray(image.convert("RGB"))
    h, w, _ = pixels.shape
    if width is not None:
        assert abs(w - width) <= 1, (path, w, width)
    if height is not None:
        assert abs(h - height) <= 1, (path, h, height)
    flat = pixels.reshape(-1, 3)
    colours, counts = np.unique(flat, axis=0, return_counts=True)
    background = colours[counts.argmax()]
    drawn = float(np.any(flat != background, axis=1).mean())
    assert drawn > 0.2 or (drawn > 0.03 and len(colours) > 50), (path, drawn, len(colours))
    assert float(pixels.std()) > 10, path
    return pixels
