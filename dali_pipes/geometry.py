"""Per-sample geometry, computed once in Python and given to every backend.

Both backends realise an image as: decode ``window`` (x, y, w, h) of the source, resize
that window to ``resize`` (nh, nw), take the ``out``-sized crop at ``crop`` (top, left) and
mirror it when ``flip``. Training uses torchvision's ``RandomResizedCrop`` algorithm (the
window is the random crop, resized straight to the output); evaluation uses ``Resize`` of
the shorter side + ``CenterCrop`` (the window is the whole image). Because the numbers come
from here, the two backends cannot disagree on geometry; only resampling arithmetic may
differ.

Randomness is counter-based: every draw is a hash of (seed, epoch, sample index, draw
number), so a sample's crop and flip do not depend on the batch size, the world size, the
number of workers or what ran before. That is what makes ``set_epoch`` reproducible and
lets a resumed run see exactly the augmentation it would have seen.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from dali_pipes.spec import AugmentSpec, EvalAugment, TrainAugment

_ATTEMPTS = 10  # torchvision's RandomResizedCrop tries 10 times before its fallback
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@dataclass(frozen=True)
class Geometry:
    """Geometry of a batch, one row per sample (a struct of arrays)."""

    window: np.ndarray  # [B, 4] int64: x, y, w, h of the decoded region, source pixels
    resize: np.ndarray  # [B, 2] int64: nh, nw the window is resized to
    crop: np.ndarray  # [B, 2] int64: top, left of the output inside the resized window
    out: tuple[int, int]  # oh, ow
    flip: np.ndarray  # [B] bool

    def roi(self) -> tuple[np.ndarray, np.ndarray]:
        """The output region in window pixels, (y, x) order: DALI ``fn.resize`` ROI."""
        scale = self.window[:, [3, 2]] / self.resize  # source pixels per resized pixel
        start = self.crop * scale
        end = (self.crop + np.asarray(self.out)) * scale
        return start.astype(np.float32), end.astype(np.float32)


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a bijective 64-bit hash with good avalanche."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def uniforms(seed: int, epoch: int, ids: np.ndarray, n: int) -> np.ndarray:
    """``[len(ids), n]`` floats in [0, 1): draw k of sample i = hash(seed, epoch, i, k)."""
    with np.errstate(over="ignore"):
        key = _mix(np.array([seed], dtype=np.uint64) * _GOLDEN + np.uint64(1))
        key = _mix(key ^ (np.array([epoch], dtype=np.uint64) * _GOLDEN + np.uint64(2)))
        per = _mix(key ^ (np.asarray(ids, dtype=np.uint64) * _GOLDEN))[:, None]
        bits = _mix(per + np.arange(1, n + 1, dtype=np.uint64) * _GOLDEN)
    return (bits >> np.uint64(11)).astype(np.float64) * (2.0**-53)


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


def plan_train(
    aug: TrainAugment, sizes: np.ndarray, ids: np.ndarray, seed: int, epoch: int
) -> Geometry:
    u = uniforms(seed, epoch, ids, _ATTEMPTS * 4 + 1)
    window = random_resized_crop(sizes, u[:, :-1].reshape(-1, _ATTEMPTS, 4), aug.scale, aug.ratio)
    n = len(sizes)
    return Geometry(
        window=window,
        resize=np.full((n, 2), aug.size, dtype=np.int64),
        crop=np.zeros((n, 2), dtype=np.int64),
        out=(aug.size, aug.size),
        flip=u[:, -1] < aug.flip_prob,
    )


def plan_eval(aug: EvalAugment, sizes: np.ndarray) -> Geometry:
    resized = resize_shorter(sizes, aug.resize)
    crop = np.rint((resized - aug.crop) / 2.0).astype(np.int64)  # CenterCrop's rounding
    n = len(sizes)
    window = np.zeros((n, 4), dtype=np.int64)
    window[:, 2] = sizes[:, 1]
    window[:, 3] = sizes[:, 0]
    return Geometry(
        window=window,
        resize=resized,
        crop=crop,
        out=(aug.crop, aug.crop),
        flip=np.zeros(n, dtype=bool),
    )


def plan(
    aug: AugmentSpec, train: bool, sizes: ArrayLike, ids: ArrayLike, seed: int, epoch: int
) -> Geometry:
    """Geometry for images of ``sizes`` ([B, 2] height, width) with sample ids ``ids``."""
    hw = np.asarray(sizes, dtype=np.int64).reshape(-1, 2)
    if train:
        return plan_train(aug.train, hw, np.asarray(ids), seed, epoch)
    return plan_eval(aug.val, hw)
