"""One auto-augment slot as one compiled CPU kernel: DALI's CPU realisation of the slot ops.

On the CPU, DALI's arithmetic operators make a pass over the image per operator (an enhance
op is 4-8 of them), and choosing each sample's operation with conditionals splits and
merges the batch. Both cost more than the operation itself (benchmarks/RESULTS.md has the
rates with and without this kernel). Here a slot is one ``numba_function`` call
per sample: the kernel reads the slot's packed parameters (the same NumPy draws the torch
backend reads, laid out as :data:`~dali_pipes.augment.auto.layout.FIELDS`) and computes
the chosen operation in one pass, with torchvision's arithmetic on uint8 images:

- float32 products and sums where torchvision computes in float32; its ``add_(x, alpha)``
  is a fused multiply-add on the CPU, done here in double precision and rounded once
  (a float32 product is exact in double);
- truncation where torchvision converts a clamped float to uint8, ``round`` half to even
  where it rounds (``grid_sample``'s nearest neighbour and the rounded blur and warp);
- the affine warp samples at pixel centres like ``grid_sample`` with ``align_corners=False``
  and zero padding, the fill blended in by the sampled coverage as torchvision does;
- equalize is PIL's table as torchvision computes it, in integers.

The GPU keeps the graph of :mod:`dali_pipes.augment.dali_ops` (cheap there). This module
imports numba (about a second), so :mod:`~dali_pipes.augment.auto.slots` imports it only when a
CPU pipeline is built; numba caches the compiled kernel on disk.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dali_pipes.augment.auto.layout import (
    AFFINE,
    AUTOCONTRAST,
    BRIGHTNESS,
    COLOR,
    CONTRAST,
    EQUALIZE,
    INVERT,
    POSTERIZE,
    SHARPNESS,
    SOLARIZE,
)
from dali_pipes.augment.auto.numba_callbacks import operator, run_callback, sample_arrays
from dali_pipes.image.compiled import caching_jit

# --------------------------------------------------------------------------- kernel
# Each function's plain Python stays reachable as ``.py_func``.


_jit = caching_jit()


@_jit
def _f32(x: Any) -> Any:
    return np.float32(x)


@_jit
def fma32(a: Any, b: Any, c: Any) -> Any:
    """float32 ``a * b + c`` rounded once (a product of float32s is exact in double)."""
    return np.float32(np.float64(a) * np.float64(b) + np.float64(c))


@_jit
def _to_uint8(x: Any) -> Any:
    """torchvision's ``clamp_(0, 255).to(uint8)``: clamp, then truncate."""
    if x < 0.0:
        return 0.0
    if x > 255.0:
        return 255.0
    return float(math.floor(x))


@_jit
def gray(r: Any, g: Any, b: Any) -> Any:
    """``_rgb_to_grayscale_image`` in float32: ``r*0.2989`` then two fused multiply-adds."""
    return fma32(b, _f32(0.114), fma32(g, _f32(0.587), _f32(r * _f32(0.2989))))


@_jit
def grey_mean(img: Any) -> Any:
    """``adjust_contrast``'s centre: the mean of the floored grey image, as float32."""
    h, w = img.shape[0], img.shape[1]
    total = 0.0
    for y in range(h):
        for x in range(w):
            total += math.floor(gray(img[y, x, 0], img[y, x, 1], img[y, x, 2]))
    return np.float32(total / (h * w))


@_jit
def _affine(out: Any, img: Any, p: Any) -> None:
    h, w = img.shape[0], img.shape[1]
    m00, m01, m02, m10, m11, m12 = p[1], p[2], p[3], p[4], p[5], p[6]
    bilinear, fill = p[11] != 0.0, np.float32(p[12])
    for y in range(out.shape[0]):
        for x in range(out.shape[1]):
            # source position in pixel-index coordinates (pixel centres at integers)
            sx = m00 * (x + 0.5) + m01 * (y + 0.5) + m02 - 0.5
            sy = m10 * (x + 0.5) + m11 * (y + 0.5) + m12 - 0.5
            if not bilinear:
                ix, iy = int(np.rint(sx)), int(np.rint(sy))
                inside = 0 <= ix < w and 0 <= iy < h
                for c in range(3):
                    out[y, x, c] = img[iy, ix, c] if inside else fill
                continue
            x0, y0 = math.floor(sx), math.floor(sy)
            fx, fy = np.float32(sx - x0), np.float32(sy - y0)
            mask = np.float32(0.0)
            acc0, acc1, acc2 = np.float32(0.0), np.float32(0.0), np.float32(0.0)
            for dy in range(2):
                wy = fy if dy else np.float32(1.0) - fy
                yy = y0 + dy
                for dx in range(2):
                    wx = fx if dx else np.float32(1.0) - fx
                    xx = x0 + dx
                    if 0 <= xx < w and 0 <= yy < h:
                        wt = np.float32(wx * wy)
                        mask += wt
                        acc0 += img[yy, xx, 0] * wt
                        acc1 += img[yy, xx, 1] * wt
                        acc2 += img[yy, xx, 2] * wt
            if fill != 0.0:  # torchvision: (v - fill) * mask + fill
                acc0 = fma32(acc0 - fill, mask, fill)
                acc1 = fma32(acc1 - fill, mask, fill)
                acc2 = fma32(acc2 - fill, mask, fill)
            out[y, x, 0] = np.rint(acc0)
            out[y, x, 1] = np.rint(acc1)
            out[y, x, 2] = np.rint(acc2)


@_jit
def _blend_pixels(out: Any, img: Any, factor: Any, inv: Any, kind: int) -> None:
    """brightness (blend with 0), colour (with the floored grey), contrast (with its mean)."""
    h, w = img.shape[0], img.shape[1]
    other = np.float32(0.0)
    if kind == CONTRAST:
        other = grey_mean(img)
    for y in range(h):
        for x in range(w):
            if kind == COLOR:
                other = np.float32(math.floor(gray(img[y, x, 0], img[y, x, 1], img[y, x, 2])))
            for c in range(3):
                scaled = np.float32(img[y, x, c] * factor)
                if kind != BRIGHTNESS:
                    scaled = fma32(other, inv, scaled)
                out[y, x, c] = _to_uint8(scaled)


@_jit
def _sharpness(out: Any, img: Any, inv: Any) -> None:
    h, w = img.shape[0], img.shape[1]
    a, b = np.float32(1.0 / 13.0), np.float32(5.0 / 13.0)
    for y in range(h):
        for x in range(w):
            for c in range(3):
                v = img[y, x, c]
                if y == 0 or x == 0 or y == h - 1 or x == w - 1:
                    out[y, x, c] = v
                    continue
                s = np.float32(0.0)
                for dy in range(-1, 2):
                    for dx in range(-1, 2):
                        s += img[y + dy, x + dx, c] * (b if dy == 0 and dx == 0 else a)
                blurred = np.float32(np.rint(s))
                out[y, x, c] = _to_uint8(fma32(blurred - v, inv, v))


@_jit
def _autocontrast(out: Any, img: Any) -> None:
    h, w = img.shape[0], img.shape[1]
    for c in range(3):
        lo, hi = img[0, 0, c], img[0, 0, c]
        for y in range(h):
            for x in range(w):
                v = img[y, x, c]
                lo = min(lo, v)
                hi = max(hi, v)
        inv_scale = np.float32((hi - lo) * np.float32(1.0 / 255.0))
        if hi == lo:
            lo, inv_scale = np.float32(0.0), np.float32(1.0)
        for y in range(h):
            for x in range(w):
                out[y, x, c] = _to_uint8(np.float32(np.float32(img[y, x, c] - lo) / inv_scale))


@_jit
def _equalize(out: Any, img: Any) -> None:
    h, w = img.shape[0], img.shape[1]
    hist = np.zeros(256, dtype=np.int64)
    lut = np.zeros(256, dtype=np.float32)
    for c in range(3):
        hist[:] = 0
        for y in range(h):
            for x in range(w):
                hist[int(img[y, x, c])] += 1
        last = 255
        while hist[last] == 0:
            last -= 1
        step = (h * w - hist[last]) // 255
        if step == 0:  # one level (or nearly): torchvision returns the channel unchanged
            for y in range(h):
                for x in range(w):
                    out[y, x, c] = img[y, x, c]
            continue
        cum = 0
        lut[0] = 0.0
        for k in range(1, 256):
            cum += hist[k - 1]
            lut[k] = min((cum + step // 2) // step, 255)
        for y in range(h):
            for x in range(w):
                out[y, x, c] = lut[int(img[y, x, c])]


@_jit
def run_slot(out: Any, img: Any, p: Any) -> None:
    """The kernel: ``out`` and ``img`` float32 HWC pixels, ``p`` one packed row."""
    kind = int(p[0])
    h, w = img.shape[0], img.shape[1]
    if kind == AFFINE:
        _affine(out, img, p)
    elif kind in (BRIGHTNESS, COLOR, CONTRAST):
        _blend_pixels(out, img, np.float32(p[7]), np.float32(p[8]), kind)
    elif kind == SHARPNESS:
        _sharpness(out, img, np.float32(p[8]))
    elif kind == AUTOCONTRAST:
        _autocontrast(out, img)
    elif kind == EQUALIZE:
        _equalize(out, img)
    else:  # pointwise on each value
        step, threshold = np.float32(p[9]), np.float32(p[10])
        for y in range(h):
            for x in range(w):
                for c in range(3):
                    v = img[y, x, c]
                    if kind == POSTERIZE:
                        v = math.floor(v / step) * step
                    elif kind == SOLARIZE:
                        v = 255.0 - v if v >= threshold else v
                    elif kind == INVERT:
                        v = 255.0 - v
                    out[y, x, c] = v


@run_callback()
def _slot_callback(
    out_ptrs: Any, out_shapes: Any, out_ndims: Any, n_outs: Any,
    in_ptrs: Any, in_shapes: Any, in_ndims: Any, n_ins: Any,
) -> None:  # fmt: skip
    """DALI's per-sample call of :func:`run_slot` (:mod:`.numba_callbacks`)."""
    out, img, p = sample_arrays(out_ptrs, out_shapes, in_ptrs, in_shapes)
    run_slot(out, img, p)


def apply_kernel(what: str, callback: Any, images: Any, packed: Any) -> Any:
    """The DALI CPU node running ``callback`` (a kernel's compiled per-sample call,
    :func:`~dali_pipes.augment.auto.numba_callbacks.run_callback`) on each sample of
    ``images`` (float32 HWC pixels) with its row of ``packed``; refused for GPU nodes."""
    from nvidia.dali import fn

    from dali_pipes.augment.dali_ops import require_cpu

    require_cpu(what, images, packed)
    return fn.reshape(operator(callback)(images, packed), layout="HWC")


def apply(images: Any, packed: Any) -> Any:
    """The DALI CPU node: each sample's slot applied to ``images`` (float32 HWC pixels)."""
    return apply_kernel("the auto-augment slot kernel", _slot_callback, images, packed)
