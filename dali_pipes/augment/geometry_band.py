"""The band of a padded crop that holds image pixels: what DALI resizes instead of the
whole padded window, for the same output.

A crop whose window reaches past its image (SSD's zoom out, a padded random crop) pads the
window with the fill and resizes it. Zoomed out four times, the window is up to sixteen
times the image and mostly fill, and both the padding and the resize cost in proportion
to it. An output pixel whose resize filter reaches no image pixel is the fill exactly
(normalised weights on equal values), so only the output pixels near or over the image
need the resize: the band. Its source region is the image's part of the window plus the
filter's reach (still fill there, so a tap clamped at the band's edge reads the fill it
would have read); its ROI puts every output pixel's centre where the whole window's resize
puts it. The band, resized, is then placed in an output of the fill. The result equals the
whole window's resize up to float rounding of the ROI. Only the band's part inside the
image is decoded (a region decode), then padded to the band.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from dali_pipes.augment.geometry import Geometry


class Bands(NamedTuple):
    """Each sample's band, in the columns DALI takes (``[B, 2]`` float32 each)."""

    region: np.ndarray  # x, y of the band's part inside the image: what is decoded
    region_shape: np.ndarray  # w, h of it (at least one pixel)
    anchor: np.ndarray  # x, y of the band in the region's pixels (may be negative: fill)
    shape: np.ndarray  # w, h of the band
    roi_start: np.ndarray  # y, x of the resize ROI in band pixels
    roi_end: np.ndarray  # y, x
    out: np.ndarray  # h, w of the resized band
    place: np.ndarray  # x, y where the output starts, in resized-band pixels (<= 0)
    size: np.ndarray  # w, h of the output


def _axis(
    start: np.ndarray,
    length: np.ndarray,
    resized: np.ndarray,
    crop: np.ndarray,
    n: np.ndarray,
    extent: np.ndarray,
    reach: float,
) -> tuple[np.ndarray, ...]:
    """One axis: the window's ``start`` and ``length`` (source pixels), its ``resized``
    length, the output's offset ``crop`` in it and its length ``n``, the image's
    ``extent``; ``reach``: the filter's radius in units of the source step."""
    scale = length / resized  # source pixels per output pixel
    radius = reach * np.maximum(scale, 1.0) + 1.0
    first = np.floor((-start - radius) / scale - crop - 0.5)
    last = np.ceil((extent - start + radius) / scale - crop - 0.5) + 1
    # output pixels past the resized window's far edge are the fill too
    j0 = np.clip(first, 0, n - 1)
    j1 = np.clip(np.minimum(last, resized - crop), j0 + 1, n)
    b0 = np.clip(np.floor((crop + j0) * scale - radius), 0, length - 1)
    b1 = np.clip(np.ceil((crop + j1) * scale + radius), b0 + 1, length)
    roi_start = (crop + j0) * scale - b0
    roi_end = (crop + j1) * scale - b0
    return start + b0, b1 - b0, roi_start, roi_end, j1 - j0, -j0


def band(geometry: Geometry, sizes: np.ndarray) -> Bands:
    """The bands of ``geometry``'s crops of images of ``sizes`` ([B, 2] height, width)."""
    g = geometry
    reach = 2.0 if g.interpolation == "bicubic" else 1.0
    window = g.window.astype(np.float64)
    resize = g.resize.astype(np.float64)
    crop = g.crop.astype(np.float64)
    shapes = g.shapes().astype(np.float64)
    oh, ow = shapes[:, 0], shapes[:, 1]
    x = _axis(window[:, 0], window[:, 2], resize[:, 1], crop[:, 1], ow, sizes[:, 1], reach)
    y = _axis(window[:, 1], window[:, 3], resize[:, 0], crop[:, 0], oh, sizes[:, 0], reach)

    def xy(k: int) -> np.ndarray:
        return np.stack([x[k], y[k]], axis=1).astype(np.float32)

    def yx(k: int) -> np.ndarray:
        return np.stack([y[k], x[k]], axis=1).astype(np.float32)

    size = np.stack([ow, oh], axis=1).astype(np.float32)
    start, shape = xy(0), xy(1)
    extent = sizes[:, ::-1].astype(np.float32)  # w, h
    region = np.clip(start, 0, extent - 1)
    region_shape = np.maximum(np.minimum(start + shape, extent) - region, 1)
    return Bands(region, region_shape, start - region, shape, yx(2), yx(3), yx(4), xy(5), size)
