"""Per-sample geometry of the decode-fused crop, computed once in NumPy for every backend.

Both backends realise an image as: decode ``window`` (x, y, w, h) of the source, resize
that window to ``resize`` (nh, nw) and take the ``out``-sized crop at ``crop`` (top,
left). Training's random-resized-crop uses torchvision's ``RandomResizedCrop`` algorithm
(the window is the random crop, resized straight to the output); resize + centre crop is
torchvision's ``Resize`` of the shorter side + ``CenterCrop`` (the window is the whole
image). Because the numbers come from here, the backends cannot disagree on geometry; only
resampling arithmetic may differ. The crop ops (:mod:`dali_pipes.augment.ops.crop`) call these
with their uniform draws from :mod:`dali_pipes.augment.keyed`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dali_pipes.errors import DataError

ATTEMPTS = 10  # torchvision's RandomResizedCrop tries 10 times before its fallback


@dataclass(frozen=True)
class Geometry:
    """Geometry of a batch, one row per sample (a struct of arrays)."""

    window: np.ndarray  # [B, 4] int64: x, y, w, h of the decoded region, source pixels
    resize: np.ndarray  # [B, 2] int64: nh, nw the window is resized to
    crop: np.ndarray  # [B, 2] int64: top, left of the output inside the resized window
    out: tuple[int, int]  # oh, ow
    #: The colour of window pixels past the image's edge (torchvision's padding ``fill``),
    #: and of output pixels past the resized window's far edges (a crop larger than the
    #: resized image, padded at the bottom and right as detection and segmentation
    #: references pad); None: every window lies inside its image, every output inside its
    #: resized window.
    fill: tuple[int, int, int] | None = None
    interpolation: str = "bilinear"  # the resize's antialiased filter: bilinear | bicubic
    #: Each sample's own output size ``[B, 2]`` (height, width) when a recipe's images
    #: have sizes of their own (a shorter side with a maximum, as detection references
    #: resize); ``out`` is then the largest of them. None: every output is ``out``.
    outs: np.ndarray | None = None

    def shapes(self) -> np.ndarray:
        """Each sample's output size, ``[B, 2]`` int64 (height, width)."""
        if self.outs is not None:
            return self.outs
        return np.tile(np.asarray(self.out, dtype=np.int64), (len(self.window), 1))

    def shape(self, j: int) -> tuple[int, int]:
        """Sample ``j``'s output size (height, width)."""
        if self.outs is None:
            return self.out
        return int(self.outs[j, 0]), int(self.outs[j, 1])

    def roi(self) -> tuple[np.ndarray, np.ndarray]:
        """The output region in window pixels, (y, x) order: DALI ``fn.resize`` ROI."""
        scale = self.window[:, [3, 2]] / self.resize  # source pixels per resized pixel
        start = self.crop * scale
        end = (self.crop + self.shapes()) * scale
        return start.astype(np.float32), end.astype(np.float32)

    def inside(self) -> np.ndarray:
        """The part of each output inside its resized window, ``[B, 2]`` (height, width):
        the output, unless the crop reaches past the resized window (the rest is fill)."""
        return np.minimum(self.shapes(), self.resize - self.crop)

    def nearest_roi(self) -> tuple[np.ndarray, np.ndarray]:
        """The ROI at which DALI's nearest-neighbour resize samples the source pixels
        torchvision's ``NEAREST`` resize of the whole window then the crop takes: output
        pixel ``o`` takes source pixel ``floor((o + crop) * scale)``. DALI samples pixel
        centres, so the ROI starts half a source pixel early; and half the step between the
        positions that can occur (multiples of ``1 / resize``) later, so that no position
        sits on a pixel edge where float rounding could pick either side. What masks are
        resampled with."""
        scale = self.window[:, [3, 2]] / self.resize
        start = (self.crop - 0.5) * scale + 0.5 / self.resize
        end = start + self.inside() * scale  # the output's part inside the resized window
        return start.astype(np.float32), end.astype(np.float32)

    def decode_window(self) -> tuple[np.ndarray, np.ndarray]:
        """The window as DALI's decoders slice it: anchor (x, y) and shape (w, h), float32."""
        return self.window[:, :2].astype(np.float32), self.window[:, 2:].astype(np.float32)

    def row(self, j: int) -> tuple[tuple[int, int, int, int], tuple[int, int], tuple[int, int]]:
        """Sample ``j``'s window, resize and crop as plain ints (for the torch realisation,
        :func:`dali_pipes.augment.geometry_torch.apply_row`)."""
        x, y, w, h = (int(v) for v in self.window[j])
        return (
            (x, y, w, h),
            (int(self.resize[j, 0]), int(self.resize[j, 1])),
            (int(self.crop[j, 0]), int(self.crop[j, 1])),
        )


def random_resized_crop(
    sizes: np.ndarray, u: np.ndarray, scale: tuple[float, float], ratio: tuple[float, float]
) -> np.ndarray:
    """torchvision ``RandomResizedCrop.get_params``, vectorised; returns [B, 4] x, y, w, h.

    ``u`` holds 4 uniforms per attempt (area, log-ratio, top, left), ``[B, 10, 4]``.
    """
    height = sizes[:, 0:1].astype(np.float64)
    width = sizes[:, 1:2].astype(np.float64)
    area = height * width
    log_lo, log_hi = np.log(ratio[0]), np.log(ratio[1])
    target = area * (scale[0] + u[..., 0] * (scale[1] - scale[0]))
    aspect = np.exp(log_lo + u[..., 1] * (log_hi - log_lo))
    w = np.rint(np.sqrt(target * aspect))  # Python's round() is half-to-even, like rint
    h = np.rint(np.sqrt(target / aspect))
    ok = (w > 0) & (w <= width) & (h > 0) & (h <= height)
    top = np.floor(u[..., 2] * (height - h + 1))
    left = np.floor(u[..., 3] * (width - w + 1))
    found = ok.any(axis=1)
    first = ok.argmax(axis=1)
    rows = np.arange(len(sizes))
    cand = np.stack([left, top, w, h], axis=-1)[rows, first]

    # torchvision's fallback: the largest central crop within the ratio bounds.
    hh, ww = sizes[:, 0].astype(np.float64), sizes[:, 1].astype(np.float64)
    in_ratio = ww / hh
    fw = np.where(in_ratio > ratio[1], np.rint(hh * ratio[1]), ww)
    fh = np.where(in_ratio < ratio[0], np.rint(ww / ratio[0]), hh)
    fallback = np.stack([(ww - fw) // 2, (hh - fh) // 2, fw, fh], axis=-1)
    return np.where(found[:, None], cand, fallback).astype(np.int64)


def resize_shorter(sizes: np.ndarray, size: int) -> np.ndarray:
    """torchvision ``Resize(size)`` output (nh, nw): shorter side = size, longer truncated."""
    h, w = sizes[:, 0].astype(np.float64), sizes[:, 1].astype(np.float64)
    portrait = w <= h
    short = np.where(portrait, w, h)
    long_ = np.where(portrait, h, w)
    new_long = np.floor(size * long_ / short)
    nh = np.where(portrait, new_long, size)
    nw = np.where(portrait, size, new_long)
    return np.stack([nh, nw], axis=-1).astype(np.int64)


def plan_random_resized_crop(
    sizes: np.ndarray,
    u: np.ndarray,
    size: int,
    scale: tuple[float, float],
    ratio: tuple[float, float],
) -> Geometry:
    """``RandomResizedCrop(size, scale, ratio)``: ``u`` holds ``4 * ATTEMPTS`` draws."""
    window = random_resized_crop(sizes, u.reshape(-1, ATTEMPTS, 4), scale, ratio)
    n = len(sizes)
    return Geometry(
        window=window,
        resize=np.full((n, 2), size, dtype=np.int64),
        crop=np.zeros((n, 2), dtype=np.int64),
        out=(size, size),
    )


def plan_resize_center_crop(sizes: np.ndarray, resize: int, size: int) -> Geometry:
    """``Resize(resize)`` (shorter side) then ``CenterCrop(size)``."""
    resized = resize_shorter(sizes, resize)
    crop = np.rint((resized - size) / 2.0).astype(np.int64)  # CenterCrop's rounding
    n = len(sizes)
    window = np.zeros((n, 4), dtype=np.int64)
    window[:, 2] = sizes[:, 1]
    window[:, 3] = sizes[:, 0]
    return Geometry(window=window, resize=resized, crop=crop, out=(size, size))


def resized(sizes: np.ndarray, resize: int | tuple[int, int] | None) -> np.ndarray:
    """torchvision ``Resize(resize)``'s output (nh, nw): the shorter side for an int, the
    size itself for (height, width); None: no resize."""
    if resize is None:
        return sizes.astype(np.int64)
    if isinstance(resize, int):
        return resize_shorter(sizes, resize)
    return np.tile(np.asarray(resize, dtype=np.int64), (len(sizes), 1))


def whole(sizes: np.ndarray) -> np.ndarray:
    """Each image's whole extent as a window, ``[B, 4]`` x, y, w, h."""
    window = np.zeros((len(sizes), 4), dtype=np.int64)
    window[:, 2], window[:, 3] = sizes[:, 1], sizes[:, 0]
    return window


def _planned(
    sizes: np.ndarray,
    resize: int | tuple[int, int] | None,
    corner: np.ndarray,
    out: tuple[int, int],
    fill: tuple[int, int, int] | None,
) -> Geometry:
    """The geometry of an ``out`` crop at ``corner`` ([B, 2] top, left) of the resized
    images; without a resize the corner may lie outside the image (padding), and the
    window is the crop itself."""
    n = len(sizes)
    if resize is None:
        window = np.stack([corner[:, 1], corner[:, 0], np.full(n, out[1]), np.full(n, out[0])], 1)
        shape = np.tile(np.asarray(out, dtype=np.int64), (n, 1))
        return Geometry(window.astype(np.int64), shape, np.zeros((n, 2), np.int64), out, fill)
    return Geometry(whole(sizes), resized(sizes, resize), corner.astype(np.int64), out, fill)


def plan_center_crop(
    sizes: np.ndarray, resize: int | tuple[int, int] | None, out: tuple[int, int]
) -> Geometry:
    """torchvision ``Resize(resize)`` (None: none) then ``CenterCrop(out)``: the corner is
    ``round((side - crop) / 2)``; a side shorter than the crop is padded with zeros,
    ``(crop - side) // 2`` before it (torchvision's ``center_crop``)."""
    side = resized(sizes, resize)
    crop = np.asarray(out, dtype=np.int64)[None, :]
    corner = np.where(side >= crop, np.rint((side - crop) / 2.0), -((crop - side) // 2))
    fill = (0, 0, 0) if resize is None else None
    return _planned(sizes, resize, corner.astype(np.int64), out, fill)


def plan_random_crop(
    sizes: np.ndarray,
    u: np.ndarray,
    resize: int | tuple[int, int] | None,
    out: tuple[int, int],
    padding: Sequence[int],
    pad_if_needed: bool,
    fill: tuple[int, int, int],
) -> Geometry:
    """torchvision ``Resize(resize)`` (None: none) then ``RandomCrop(out, padding,
    pad_if_needed, fill)``: pad by ``padding`` (left, top, right, bottom); with
    ``pad_if_needed`` a side still shorter than the crop is padded by the difference on both
    ends; the corner is uniform over the padded image, from ``u`` ([B, 2]: top, left)."""
    side = resized(sizes, resize)
    left, top, right, bottom = (int(p) for p in padding)
    before = np.tile(np.array([top, left], dtype=np.int64), (len(sizes), 1))
    padded = side + np.array([top + bottom, left + right])
    crop = np.asarray(out, dtype=np.int64)[None, :]
    if pad_if_needed:
        short = np.maximum(crop - padded, 0)
        before, padded = before + short, padded + 2 * short
    if (padded < crop).any():
        h, w = (int(v) for v in padded[np.argmax((padded < crop).any(axis=1))])
        raise DataError(
            f"an image of {h}x{w} pixels (after RandomCrop's padding) is smaller than the "
            f"{out[0]}x{out[1]} crop; set pad_if_needed=True or pad more"
        )
    corner = np.minimum(np.floor(u * (padded - crop + 1)), padded - crop) - before
    pads = padding_used(padding, pad_if_needed)
    return _planned(sizes, resize, corner.astype(np.int64), out, fill if pads else None)


def plan_resized_crop(
    sizes: np.ndarray,
    resized_to: np.ndarray,
    corner: np.ndarray,
    out: tuple[int, int],
    fill: tuple[int, int, int],
) -> Geometry:
    """Each whole image resized to ``resized_to`` ([B, 2] nh, nw), then the ``out`` crop
    at ``corner`` ([B, 2] top, left, within :func:`crop_room`); the part past a resized
    image smaller than ``out`` padded with ``fill`` at the bottom and right (the
    segmentation reference's ``PadIfSmaller``, the detection reference's
    ``FixedSizeCrop``)."""
    return Geometry(whole(sizes), resized_to.astype(np.int64), corner.astype(np.int64), out, fill)


def crop_room(resized_to: np.ndarray, out: tuple[int, int]) -> np.ndarray:
    """How far an ``out`` crop's corner may move in images resized to ``resized_to``
    ([B, 2]): none along a side shorter than the crop."""
    return np.maximum(resized_to - np.asarray(out), 0)


def padding_used(padding: Sequence[int], pad_if_needed: bool) -> bool:
    """Whether a random crop's windows can reach past the image."""
    return pad_if_needed or any(int(p) for p in padding)
