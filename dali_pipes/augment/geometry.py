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

from dataclasses import dataclass

import numpy as np

ATTEMPTS = 10  # torchvision's RandomResizedCrop tries 10 times before its fallback


@dataclass(frozen=True)
class Geometry:
    """Geometry of a batch, one row per sample (a struct of arrays)."""

    window: np.ndarray  # [B, 4] int64: x, y, w, h of the decoded region, source pixels
    resize: np.ndarray  # [B, 2] int64: nh, nw the window is resized to
    crop: np.ndarray  # [B, 2] int64: top, left of the output inside the resized window
    out: tuple[int, int]  # oh, ow
    interpolation: str = "bilinear"  # the resize's antialiased filter: bilinear | bicubic

    def roi(self) -> tuple[np.ndarray, np.ndarray]:
        """The output region in window pixels, (y, x) order: DALI ``fn.resize`` ROI."""
        scale = self.window[:, [3, 2]] / self.resize  # source pixels per resized pixel
        start = self.crop * scale
        end = (self.crop + np.asarray(self.out)) * scale
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
