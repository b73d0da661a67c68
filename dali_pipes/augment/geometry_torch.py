"""The torch realisation of a :class:`~dali_pipes.augment.geometry.Geometry` row.

torchvision does the work (``transforms.v2.functional`` crop, antialiased bilinear
resize). One detail is added so the torch backend and DALI agree pixel for pixel up to
rounding: at the edges of the resized window, DALI's resampling filter clamps to the edge
pixel while torchvision drops the taps that fall outside and renormalises the rest. The two
differ only on output lines whose filter reaches past the window (the first and last row
and column when downscaling), by up to ~20 grey levels there. Those few lines are
recomputed here with DALI's clamped triangle filter; everything else is torchvision's.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from dali_pipes.augment.geometry import Geometry
from dali_pipes.augment.tv_functional import F


def _taps(n_in: int, n_res: int, lines: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """DALI's triangle filter for resized ``lines`` of an ``n_in -> n_res`` resize.

    Returns tap indices clamped to the input and normalised weights, ``[k, T]`` each, and
    for every line whether its filter reaches past either end of the input.
    """
    scale = n_in / n_res
    support = max(scale, 1.0)
    reach = math.ceil(support) + 1
    centres = (lines + 0.5) * scale
    taps = np.floor(centres)[:, None] + np.arange(-reach, reach + 1)[None, :]
    w = np.maximum(0.0, 1.0 - np.abs(taps + 0.5 - centres[:, None]) / support)
    w /= w.sum(axis=1, keepdims=True)
    crosses = np.asarray((((taps < 0) | (taps >= n_in)) & (w > 0)).any(axis=1))
    return np.clip(taps, 0, n_in - 1).astype(np.int64), w.astype(np.float32), crosses


def _fix_edges(
    out: torch.Tensor, window: torch.Tensor, resize: tuple[int, int], crop: tuple[int, int]
) -> torch.Tensor:
    """Recompute the output lines whose filter crosses the window edge, DALI style.

    A fixed row is the clamped vertical filter applied to the few source rows under it,
    then the clamped horizontal filter; fixed columns the other way round. Both use
    DALI's filter everywhere, so corners (clamped both ways) come out right as well.
    The arithmetic is in NumPy: a few small arrays per image, where torch's per-operation
    overhead would cost more than the work.
    """
    (h, w), (oh, ow) = window.shape[-2:], out.shape[-2:]
    ry, wy, fix_rows = _taps(h, resize[0], np.arange(oh) + crop[0])
    cx, wx, fix_cols = _taps(w, resize[1], np.arange(ow) + crop[1])
    if not (fix_rows.any() or fix_cols.any()):
        return out
    src = window.numpy()
    fixed = out.numpy().copy()
    if fix_rows.any():
        rows = np.flatnonzero(fix_rows)
        lines = _filter(src, ry[rows], wy[rows])  # [3, k, w]
        fixed[:, rows, :] = _to_uint8((lines[:, :, cx] * wx).sum(-1))  # [3, k, ow]
    if fix_cols.any():
        cols = np.flatnonzero(fix_cols)
        lines = _filter(src.transpose(0, 2, 1), cx[cols], wx[cols])  # [3, k, h]
        fixed[:, :, cols] = _to_uint8((lines[:, :, ry] * wy).sum(-1)).transpose(0, 2, 1)
    return torch.from_numpy(fixed)


def _filter(src: np.ndarray, idx: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Weighted sums of rows of ``src`` ``[3, n, m]``: ``[3, k, m]`` for ``[k, T]`` taps.

    Taps sit near one end or the other, so each side converts one contiguous band of
    rows to float rather than the whole image.
    """
    n = src.shape[1]
    result = np.empty((3, len(idx), src.shape[2]), dtype=np.float32)
    low = idx.max(axis=1) < n // 2
    for side in (low, ~low):
        if side.any():
            first, last = int(idx[side].min()), int(idx[side].max())
            band = src[:, first : last + 1].astype(np.float32)
            taps = band[:, idx[side] - first]  # [3, k, T, m]
            result[:, side] = (taps * weights[side][..., None]).sum(axis=2)
    return result


def _resample_direct(
    region: torch.Tensor, resize: tuple[int, int], crop: tuple[int, int], out: tuple[int, int]
) -> torch.Tensor:
    """Only the ``out`` pixels of resizing ``region`` to ``resize``, DALI's filter throughout."""
    (h, w) = region.shape[-2:]
    ry, wy, _ = _taps(h, resize[0], np.arange(out[0]) + crop[0])
    cx, wx, _ = _taps(w, resize[1], np.arange(out[1]) + crop[1])
    columns = (region.numpy()[:, :, cx].astype(np.float32) * wx).sum(-1)  # [3, h, ow]
    rows = (columns[:, ry] * wy[..., None]).sum(axis=2)  # [3, oh, ow]
    return torch.from_numpy(_to_uint8(rows))


def _to_uint8(x: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(x), 0, 255).astype(np.uint8)


def window_of(
    image: torch.Tensor, window: tuple[int, int, int, int], fill: tuple[int, ...] | None
) -> torch.Tensor:
    """The ``window`` (x, y, w, h) of a ``[C, H, W]`` image (or mask); with ``fill`` (one
    value per channel, or one for all), the window's pixels past the image are ``fill``
    (torchvision's constant padding), else a window lies inside its image (the crops
    without padding plan no other)."""
    x, y, w, h = window
    height, width = image.shape[-2:]
    inside = x >= 0 and y >= 0 and x + w <= width and y + h <= height
    if fill is None or inside:
        return image[:, y : y + h, x : x + w]
    region = torch.empty((image.shape[0], h, w), dtype=image.dtype)
    region[:] = torch.tensor(fill, dtype=image.dtype).view(-1, 1, 1)
    top, left = max(y, 0), max(x, 0)
    bottom, right = min(y + h, height), min(x + w, width)
    if top < bottom and left < right:
        region[:, top - y : bottom - y, left - x : right - x] = image[:, top:bottom, left:right]
    return region


def apply_geometry(
    image: torch.Tensor,
    window: tuple[int, int, int, int],
    resize: tuple[int, int],
    crop: tuple[int, int],
    out: tuple[int, int],
    fill: tuple[int, int, int] | None = None,
    interpolation: str = "bilinear",
) -> torch.Tensor:
    """Decoded uint8 ``[3, H, W]`` image -> uint8 ``[3, oh, ow]`` sample.

    ``bicubic`` is torchvision's antialiased bicubic resize as it is (DALI's cubic filter
    differs from it by more than the edge lines: :mod:`dali_pipes.selfcheck.bounds`)."""
    region = window_of(image, window, fill)
    h, w = region.shape[-2:]
    inside = (min(out[0], resize[0] - crop[0]), min(out[1], resize[1] - crop[1]))
    if interpolation == "bicubic":
        resized = F.resize(
            region, list(resize), interpolation=F.InterpolationMode.BICUBIC, antialias=True
        )
        result = resized[:, crop[0] : crop[0] + inside[0], crop[1] : crop[1] + inside[1]]
    elif resize[0] * resize[1] > 16 * max(h * w, out[0] * out[1]):
        # An extreme aspect ratio (say 1 x 60000) would make the full resize enormous;
        # compute just the output pixels instead, with the same (DALI) filter.
        result = _resample_direct(region, resize, crop, inside)
    else:
        resized = F.resize(
            region, list(resize), interpolation=F.InterpolationMode.BILINEAR, antialias=True
        )
        result = resized[:, crop[0] : crop[0] + inside[0], crop[1] : crop[1] + inside[1]]
        result = _fix_edges(result, region, resize, crop)
    return pad_far_edges(result.contiguous(), out, fill)


def pad_far_edges(
    image: torch.Tensor, out: tuple[int, int], fill: tuple[int, ...] | None
) -> torch.Tensor:
    """``image`` padded at the bottom and right to ``out`` with ``fill`` (one value per
    channel, or one for all): a crop that reached past its resized window."""
    h, w = image.shape[-2:]
    if (h, w) == tuple(out):
        return image
    assert fill is not None, "a crop past its resized window needs a fill"
    padded = torch.empty((image.shape[0], *out), dtype=image.dtype)
    padded[:] = torch.tensor(fill, dtype=image.dtype).view(-1, 1, 1)
    padded[:, :h, :w] = image
    return padded


def apply_row(image: torch.Tensor, geometry: Geometry, j: int) -> torch.Tensor:
    """Sample ``j`` of a batch's ``geometry`` realised on its decoded uint8 ``[3, H, W]``
    ``image`` (:func:`apply_geometry`): what the torch backend and the caches do per sample."""
    window, resize, crop = geometry.row(j)
    return apply_geometry(
        image, window, resize, crop, geometry.shape(j), geometry.fill, geometry.interpolation
    )
