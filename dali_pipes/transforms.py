"""The torch realisation of a :class:`~dali_pipes.geometry.Geometry` row.

torchvision does the work (``transforms.v2.functional`` crop, antialiased bilinear resize,
flip). One detail is added so the torch backend and DALI agree pixel for pixel up to
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
import torchvision.transforms.v2.functional as F


def _clamped_weights(n_in: int, n_res: int, lines: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Triangle-filter weights of resized lines ``lines`` (an n_in -> n_res resize).

    Returns the dense ``[len(lines), n_in]`` weight matrix with taps outside the input
    clamped to the edge, and a mask of the lines that had such taps.
    """
    scale = n_in / n_res
    support = max(scale, 1.0)
    reach = math.ceil(support) + 1
    centres = (lines + 0.5) * scale
    taps = np.floor(centres)[:, None] + np.arange(-reach, reach + 1)[None, :]
    w = np.maximum(0.0, 1.0 - np.abs(taps + 0.5 - centres[:, None]) / support)
    w /= w.sum(axis=1, keepdims=True)
    outside = ((taps < 0) | (taps >= n_in)) & (w > 0)
    dense = np.zeros((len(lines), n_in), dtype=np.float64)
    rows = np.repeat(np.arange(len(lines)), taps.shape[1])
    np.add.at(dense, (rows, np.clip(taps, 0, n_in - 1).astype(np.int64).ravel()), w.ravel())
    return dense, np.asarray(outside.any(axis=1))


def _fix_edges(
    out: torch.Tensor, window: torch.Tensor, resize: tuple[int, int], crop: tuple[int, int]
) -> torch.Tensor:
    """Recompute the output lines whose filter crosses the window edge, DALI style."""
    (h, w), (oh, ow) = window.shape[-2:], out.shape[-2:]
    rows = np.arange(oh) + crop[0]
    cols = np.arange(ow) + crop[1]
    wy, fix_y = _clamped_weights(h, resize[0], rows)
    wx, fix_x = _clamped_weights(w, resize[1], cols)
    if not (fix_y.any() or fix_x.any()):
        return out
    src = window.to(torch.float64)
    my, mx = torch.from_numpy(wy), torch.from_numpy(wx)
    out = out.clone()
    # Contract the few fixed lines with the source first: that keeps the cost at a few
    # passes over the window instead of a dense resize.
    if fix_y.any():
        sel = torch.from_numpy(np.flatnonzero(fix_y))
        lines = torch.einsum("ry,cyx->crx", my[sel], src)
        lines = torch.einsum("crx,ox->cro", lines, mx)
        out[:, sel, :] = lines.round().clamp(0, 255).to(out.dtype)
    if fix_x.any():
        sel = torch.from_numpy(np.flatnonzero(fix_x))
        lines = torch.einsum("cyx,rx->cyr", src, mx[sel])
        lines = torch.einsum("oy,cyr->cor", my, lines)
        out[:, :, sel] = lines.round().clamp(0, 255).to(out.dtype)
    return out


def apply_geometry(
    image: torch.Tensor,
    window: tuple[int, int, int, int],
    resize: tuple[int, int],
    crop: tuple[int, int],
    out: tuple[int, int],
    flip: bool,
) -> torch.Tensor:
    """Decoded uint8 ``[3, H, W]`` image -> uint8 ``[3, oh, ow]`` sample."""
    x, y, w, h = window
    region = image[:, y : y + h, x : x + w]
    resized = F.resize(
        region, list(resize), interpolation=F.InterpolationMode.BILINEAR, antialias=True
    )
    result = resized[:, crop[0] : crop[0] + out[0], crop[1] : crop[1] + out[1]]
    result = _fix_edges(result, region, resize, crop)
    if flip:
        result = F.horizontal_flip(result)
    return result.contiguous()
