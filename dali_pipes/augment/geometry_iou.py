"""SSD's crop, planned in NumPy once for every backend: zoom out, IoU crop, resize.

torchvision's SSD reference runs ``RandomZoomOut`` (place the image on a larger canvas of
the fill colour), ``RandomIoUCrop`` (a random crop that keeps at least one box's centre
and overlaps some box by at least a minimum IoU chosen per sample) and, in the model,
a resize to a fixed size. The three compose into one window of the source image, reaching
past its edge where the canvas is fill, resized to the output: a
:class:`~dali_pipes.augment.geometry.Geometry` like any crop's, so both backends realise it
as they realise a padded random crop, and boxes and masks move with it.

The draws follow torchvision's algorithm, with its integer truncations. torchvision
retries until a crop is accepted; here every sample owns a fixed run of draws
(:meth:`IoUCrop.draws`), and a sample whose draws accept no crop in that many rounds keeps
the whole canvas -- the outcome torchvision's "leave as is" option gives, and the only one
an image without boxes can have.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ZoomOut:
    """``RandomZoomOut(side_range, p)``: with probability ``p`` the canvas is the image's
    size times a factor from ``side_range``, the image at a random place on it."""

    p: float
    side_range: tuple[float, float]

    def canvas(self, size: tuple[int, int], u: np.ndarray) -> tuple[int, int, int, int]:
        """(left, top, width, height) of the image's place and the canvas, from 4 draws."""
        h, w = size
        if not u[0] < self.p:
            return 0, 0, w, h
        lo, hi = self.side_range
        r = lo + u[1] * (hi - lo)
        cw, ch = int(w * r), int(h * r)
        return int((cw - w) * u[2]), int((ch - h) * u[3]), cw, ch


@dataclass(frozen=True)
class IoUCrop:
    """``RandomIoUCrop(min_scale, max_scale, min_aspect_ratio, max_aspect_ratio,
    sampler_options, trials)``, with at most ``rounds`` choices of the minimum IoU."""

    scale: tuple[float, float]
    aspect: tuple[float, float]
    options: tuple[float, ...]
    trials: int
    rounds: int

    def draws(self) -> int:
        """Uniforms per sample: each round, the option, then 4 per trial."""
        return self.rounds * (1 + 4 * self.trials)

    def choose(self, canvas: tuple[int, int], boxes: np.ndarray, u: np.ndarray) -> np.ndarray:
        """(left, top, width, height) of the crop in a canvas of (width, height) holding
        ``boxes`` (XYXY, canvas pixels): the first accepted trial of the first round that
        accepts one; the whole canvas when a round draws the "as is" option (>= 1) or none
        accepts."""
        cw, ch = canvas
        whole = np.array([0, 0, cw, ch], np.int64)
        if len(boxes) == 0:
            return whole  # torchvision accepts no crop of an image without boxes
        b = boxes.astype(np.float64)
        cx, cy = 0.5 * (b[:, 0] + b[:, 2]), 0.5 * (b[:, 1] + b[:, 3])
        area = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
        per_round = 1 + 4 * self.trials
        (s_lo, s_hi), (a_lo, a_hi) = self.scale, self.aspect
        for r in range(self.rounds):
            row = u[r * per_round : (r + 1) * per_round]
            minimum = self.options[min(int(row[0] * len(self.options)), len(self.options) - 1)]
            if minimum >= 1.0:
                return whole
            t = row[1:].reshape(self.trials, 4)
            nw = np.floor(cw * (s_lo + (s_hi - s_lo) * t[:, 0])).astype(np.int64)
            nh = np.floor(ch * (s_lo + (s_hi - s_lo) * t[:, 1])).astype(np.int64)
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = nw / nh
            left = np.floor((cw - nw) * t[:, 2]).astype(np.int64)
            top = np.floor((ch - nh) * t[:, 3]).astype(np.int64)
            ok = (nw > 0) & (nh > 0) & (a_lo <= ratio) & (ratio <= a_hi)
            right, bottom = left + nw, top + nh
            inside = (
                (left[:, None] < cx)
                & (cx < right[:, None])
                & (top[:, None] < cy)
                & (cy < bottom[:, None])
            )  # [trials, K]
            iw = np.minimum(b[:, 2], right[:, None]) - np.maximum(b[:, 0], left[:, None])
            ih = np.minimum(b[:, 3], bottom[:, None]) - np.maximum(b[:, 1], top[:, None])
            inter = np.clip(iw, 0, None) * np.clip(ih, 0, None)
            with np.errstate(divide="ignore", invalid="ignore"):
                iou = inter / (area + (nw * nh)[:, None] - inter)
            best = np.where(inside, iou, -1.0).max(axis=1)
            ok &= inside.any(axis=1) & (best >= minimum)
            if ok.any():
                k = int(np.argmax(ok))
                return np.array([left[k], top[k], nw[k], nh[k]], np.int64)
        return whole


def plan_ssd(
    sizes: np.ndarray,
    boxes: list[np.ndarray],
    u: np.ndarray,
    zoom: ZoomOut,
    crop: IoUCrop,
) -> np.ndarray:
    """Each sample's window (x, y, w, h in source pixels, [B, 4]) for images of ``sizes``
    ([B, 2] height, width) holding ``boxes`` (XYXY, source pixels, one array per sample);
    ``u`` holds 4 draws for the zoom, then :meth:`IoUCrop.draws`."""
    windows = np.empty((len(sizes), 4), np.int64)
    for j, (h, w) in enumerate(sizes):
        left, top, cw, ch = zoom.canvas((int(h), int(w)), u[j, :4])
        shift = np.array([left, top, left, top], np.float64)
        shifted = boxes[j].astype(np.float64).reshape(-1, 4) + shift
        x, y, nw, nh = crop.choose((cw, ch), shifted, u[j, 4:])
        windows[j] = (x - left, y - top, nw, nh)
    return windows
