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


def _edge_taps(
    n_in: int, n_res: int, lines: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """DALI's clamped triangle filter for the resized ``lines`` whose filter leaves the input.

    Returns the positions (into ``lines``) of those lines, their tap indices (clamped to the
    input) and weights, ``[k]``, ``[k, T]``, ``[k, T]``. Only lines near either end can
    qualify, so only those are computed.
    """
    scale = n_in / n_res
    support = max(scale, 1.0)
    reach = math.ceil(support) + 1
    near = np.flatnonzero((lines < reach + 1) | (lines >= n_res - reach - 1))
    centres = (lines[near] + 0.5) * scale
    taps = np.floor(centres)[:, None] + np.arange(-reach, reach + 1)[None, :]
    w = np.maximum(0.0, 1.0 - np.abs(taps + 0.5 - centres[:, None]) / support)
    w /= w.sum(axis=1, keepdims=True)
    crosses = (((taps < 0) | (taps >= n_in)) & (w > 0)).any(axis=1)
    idx = np.clip(taps[crosses], 0, n_in - 1).astype(np.int64)
    return near[crosses], idx, w[crosses].astype(np.float32)


def _fix_edges(
    out: torch.Tensor, window: torch.Tensor, resize: tuple[int, int], crop: tuple[int, int]
) -> torch.Tensor:
    """Recompute the output lines whose filter crosses the window edge, DALI style.

    A fixed row is the clamped vertical filter applied to a few source rows, then resized
    horizontally by torchvision (right except in its own edge columns); fixed columns
    likewise; the corner pixels, where both filters clamp, are computed last, directly.
    """
    (h, w), (oh, ow) = window.shape[-2:], out.shape[-2:]
    rows, ry, wy = _edge_taps(h, resize[0], np.arange(oh) + crop[0])
    cols, cx, wx = _edge_taps(w, resize[1], np.arange(ow) + crop[1])
    if not (len(rows) or len(cols)):
        return out
    out = out.clone()
    if len(rows):  # [3, k, T, w] weighted over T -> [3, k, w] -> horizontal resize
        taps = window[:, torch.from_numpy(ry)].to(torch.float32)
        lines = (taps * torch.from_numpy(wy)[None, :, :, None]).sum(2)
        lines = F.resize(lines, [len(rows), resize[1]], antialias=True)[..., crop[1] : crop[1] + ow]
        out[:, torch.from_numpy(rows), :] = _to_uint8(lines, out.dtype)
    if len(cols):  # [3, h, k, T] weighted over T -> [3, h, k] -> vertical resize
        taps = window[:, :, torch.from_numpy(cx)].to(torch.float32)
        lines = (taps * torch.from_numpy(wx)[None, None]).sum(3)
        lines = F.resize(lines, [resize[0], len(cols)], antialias=True)[:, crop[0] : crop[0] + oh]
        out[:, :, torch.from_numpy(cols)] = _to_uint8(lines, out.dtype)
    for i, r in enumerate(rows):
        for j, c in enumerate(cols):
            block = window[:, torch.from_numpy(ry[i])][:, :, torch.from_numpy(cx[j])].float()
            value = torch.einsum(
                "y,cyx,x->c", torch.from_numpy(wy[i]), block, torch.from_numpy(wx[j])
            )
            out[:, r, c] = _to_uint8(value, out.dtype)
    return out


def _to_uint8(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return x.round().clamp(0, 255).to(dtype)


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
