"""Colour jitter, grayscale and Gaussian blur as compiled CPU kernels: DALI's CPU
realisation of ``color_jitter``, ``grayscale`` and ``gaussian_blur``.

The GPU's realisation is DALI arithmetic (:mod:`dali_pipes.augment.dali_ops`), one
operator per step of each adjustment and conditionals for the order and the probability:
cheap on a GPU, but on DALI's CPU each operator is a pass over the image and the
conditionals split and merge the batch, which made colour jitter the larger part of a
self-supervised recipe's CPU time (benchmarks/RESULTS.md); grayscale and blur, applied with
a probability, paid for the conditionals as well. Here each sample's op is one
``numba_function`` call, in torchvision's uint8 arithmetic:
``adjust_brightness``, ``adjust_saturation`` and ``adjust_contrast`` are the auto-augment
kernel's blends (the grey of :func:`dali_pipes.augment.auto.kernel.gray`) as tight loops of
their own, ``adjust_hue`` is torchvision's ``_rgb_to_hsv`` / ``_hsv_to_rgb`` in float32,
step by step (:func:`hue`); ``rgb_to_grayscale`` is the auto-augment kernel's luma; the
blur is torchvision's Gaussian kernel (its float32 weights, reflected borders, rounded)
applied separably (torchvision convolves with the 2-D outer product: the sums differ in
float32 rounding only).

Each sample's parameters arrive as one float64 row, its op's ``packed`` parameter (the
jitter's laid out as :data:`dali_pipes.augment.ops.color_jitter.FIELDS`). This module
imports numba, so the ops import it only when a CPU pipeline is built.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dali_pipes.augment.auto.kernel import apply_kernel, fma32, gray, grey_mean
from dali_pipes.augment.auto.numba_callbacks import run_callback, sample_arrays
from dali_pipes.image.compiled import caching_jit

_jit = caching_jit()
_vector_jit = caching_jit(error_model="numpy")


@_jit
def hue(out: Any, img: Any, shift: Any) -> None:
    """torchvision's ``adjust_hue`` on uint8 values held as float32 HWC: the pixels laid
    out as three channel planes, so that :func:`hue_planes` runs vectorised, and back."""
    height, width = img.shape[0], img.shape[1]
    planes = np.empty((3, height * width), dtype=np.float32)
    result = np.empty((3, height * width), dtype=np.float32)
    for y in range(height):
        for x in range(width):
            for c in range(3):
                planes[c, y * width + x] = img[y, x, c]
    hue_planes(planes[0], planes[1], planes[2], np.float32(shift), result)
    for y in range(height):
        for x in range(width):
            for c in range(3):
                out[y, x, c] = result[c, y * width + x]


@_vector_jit
def hue_planes(r_in: Any, g_in: Any, b_in: Any, shift: Any, out: Any) -> None:
    """``adjust_hue`` on channel planes of uint8 values held as float32: to [0, 1], RGB ->
    HSV, hue + ``shift`` modulo 1, HSV -> RGB, back to uint8 by ``* 255.999`` and
    truncation, every step in float32 as torchvision's ``_rgb_to_hsv`` / ``_hsv_to_rgb``
    compute it. Selects, not branches, so that the loop is vectorised; ``out`` is
    ``[3, n]``."""
    one, zero = np.float32(1.0), np.float32(0.0)
    to_unit, sixth = np.float32(1.0 / 255.0), np.float32(1.0 / 6.0)
    two, four, six = np.float32(2.0), np.float32(4.0), np.float32(6.0)
    to_byte, top = np.float32(255.0 + 1.0 - 1e-3), np.float32(255.0)
    for n in range(r_in.shape[0]):
        r, g, b = r_in[n] * to_unit, g_in[n] * to_unit, b_in[n] * to_unit
        maxc = r if r > g else g
        maxc = maxc if maxc > b else b
        minc = r if r < g else g
        minc = minc if minc < b else b
        span = maxc - minc
        eqc = maxc == minc
        s = span / (one if eqc else maxc)
        div = one if eqc else span
        # (maxc - channel) / div; the hue's sector picks two of them
        rc, gc, bc = (maxc - r) / div, (maxc - g) / div, (maxc - b) / div
        h = (bc - gc) if maxc == r else (((rc + two) - bc) if maxc == g else ((gc + four) - rc))
        h = h * sixth + one
        h = h - np.floor(h)  # fmod(h, 1) for h >= 0
        h = h + shift
        h = h - np.floor(h)  # torch's remainder(h, 1)
        h6 = h * six
        sector = np.floor(h6)
        f = h6 - sector
        sxf = s * f
        oms = one - s
        q = (one - sxf) * maxc
        q = zero if q < zero else (one if q > one else q)
        t = (sxf + oms) * maxc
        t = zero if t < zero else (one if t > one else t)
        p = oms * maxc
        p = zero if p < zero else (one if p > one else p)
        i = sector - six if sector >= six else sector
        rr = maxc if (i == 0 or i == 5) else (q if i == 1 else (t if i == 4 else p))
        gg = t if i == 0 else (maxc if (i == 1 or i == 2) else (q if i == 3 else p))
        bb = p if (i == 0 or i == 1) else (t if i == 2 else (maxc if (i == 3 or i == 4) else q))
        v = np.floor(rr * to_byte)
        out[0, n] = top if v > top else v
        v = np.floor(gg * to_byte)
        out[1, n] = top if v > top else v
        v = np.floor(bb * to_byte)
        out[2, n] = top if v > top else v


@_jit
def _copy(out: Any, img: Any) -> None:
    """``out[...] = img`` (element by element: DALI's numba arrays take no slices)."""
    for y in range(img.shape[0]):
        for x in range(img.shape[1]):
            for c in range(img.shape[2]):
                out[y, x, c] = img[y, x, c]


@_jit
def _to_byte(x: Any) -> Any:
    """torchvision's ``clamp_(0, 255).to(uint8)`` as a float32: clamp, then truncate."""
    return np.floor(min(max(x, np.float32(0.0)), np.float32(255.0)))


@_jit
def _brightness(out: Any, img: Any, factor: Any) -> None:
    """``adjust_brightness``: each value times ``factor``, clamped and truncated."""
    for y in range(img.shape[0]):
        for x in range(img.shape[1]):
            for c in range(3):
                out[y, x, c] = _to_byte(np.float32(img[y, x, c] * factor))


@_jit
def _saturation(out: Any, img: Any, factor: Any, inv: Any) -> None:
    """``adjust_saturation``: a blend with the floored grey of each pixel."""
    for y in range(img.shape[0]):
        for x in range(img.shape[1]):
            grey = np.floor(gray(img[y, x, 0], img[y, x, 1], img[y, x, 2]))
            for c in range(3):
                out[y, x, c] = _to_byte(fma32(grey, inv, np.float32(img[y, x, c] * factor)))


@_jit
def _contrast(out: Any, img: Any, factor: Any, inv: Any) -> None:
    """``adjust_contrast``: a blend with the mean of the floored grey image."""
    mean = grey_mean(img)
    for y in range(img.shape[0]):
        for x in range(img.shape[1]):
            for c in range(3):
                out[y, x, c] = _to_byte(fma32(mean, inv, np.float32(img[y, x, c] * factor)))


@_jit
def run_jitter(out: Any, img: Any, p: Any) -> None:
    """The kernel: ``out`` and ``img`` float32 HWC pixels, ``p`` one packed row. Each step
    reads the previous one's result from one of two buffers and writes the other; the last
    step writes ``out``, whose channels are then put in the row's order."""
    skipped = int(p[11])  # components skipped in every step; a step of 4 is skipped too
    steps = [int(p[1 + k]) for k in range(4) if p[1 + k] < 4 and not (skipped >> int(p[1 + k])) & 1]
    if p[0] == 0.0 or len(steps) == 0:
        _copy(out, img)
    else:
        shape = (img.shape[0], img.shape[1], img.shape[2])
        a = np.empty(shape, dtype=np.float32)
        b = np.empty(shape, dtype=np.float32)
        source = img
        for k in range(len(steps)):
            target = out if k == len(steps) - 1 else (a if k % 2 == 0 else b)
            part = steps[k]
            if part == 0:
                _brightness(target, source, np.float32(p[5]))
            elif part == 1:
                _contrast(target, source, np.float32(p[6]), np.float32(p[7]))
            elif part == 2:
                _saturation(target, source, np.float32(p[8]), np.float32(p[9]))
            else:
                hue(target, source, np.float32(p[10]))
            source = target
    if p[0] != 0.0 and not (p[12] == 0 and p[13] == 1 and p[14] == 2):
        _permute(out, int(p[12]), int(p[13]), int(p[14]))


@_jit
def _permute(img: Any, c0: int, c1: int, c2: int) -> None:
    """``img``'s channels in place: channel ``c`` takes channel ``c<c>`` (torchvision's
    ``permute_channels``)."""
    for y in range(img.shape[0]):
        for x in range(img.shape[1]):
            v0, v1, v2 = img[y, x, c0], img[y, x, c1], img[y, x, c2]
            img[y, x, 0], img[y, x, 1], img[y, x, 2] = v0, v1, v2


@_jit
def run_grayscale(out: Any, img: Any, p: Any) -> None:
    """``rgb_to_grayscale(img, num_output_channels=3)`` when ``p[0]`` is set, else a copy."""
    if p[0] == 0.0:
        _copy(out, img)
        return
    for y in range(img.shape[0]):
        for x in range(img.shape[1]):
            luma = math.floor(gray(img[y, x, 0], img[y, x, 1], img[y, x, 2]))
            out[y, x, 0] = luma
            out[y, x, 1] = luma
            out[y, x, 2] = luma


@_jit
def _gaussian(size: int, sigma: Any) -> Any:
    """torchvision's ``_get_gaussian_kernel1d`` in float32: ``softmax(-(x / sigma)^2)``
    over ``linspace(-lim, lim, size)``, ``lim = (size - 1) / (2 sqrt 2)``."""
    lim = np.float32((size - 1) / (2.0 * math.sqrt(2.0)))
    step = np.float32(np.float32(lim + lim) / np.float32(max(size - 1, 1)))
    weights = np.empty(size, dtype=np.float32)
    total = np.float32(0.0)
    for t in range(size):  # torch's linspace: from the start, then back from the end
        if t < size // 2:
            x = np.float32(-lim + np.float32(step * t))
        else:
            x = np.float32(lim - np.float32(step * (size - 1 - t)))
        x = np.float32(x / sigma)
        weights[t] = np.float32(np.exp(-np.float32(x * x)))
        total += weights[t]
    for t in range(size):
        weights[t] = np.float32(weights[t] / total)
    return weights


@_jit
def _reflect(i: int, n: int) -> int:
    """Index ``i`` reflected into ``[0, n)`` without repeating the edge (torch's "reflect")."""
    if i < 0:
        i = -i
    if i >= n:
        i = 2 * (n - 1) - i
    return min(max(i, 0), n - 1)


@_jit
def run_blur(out: Any, img: Any, p: Any) -> None:
    """``gaussian_blur(img, [p[2], p[3]], [p[1], p[1]])`` when ``p[0]`` is set: the vertical
    pass over rows of the image, then the horizontal pass over each row padded by
    reflection, both as runs over contiguous memory; rounded half to even."""
    if p[0] == 0.0:
        _copy(out, img)
        return
    h, w = img.shape[0], img.shape[1]
    sigma = np.float32(p[1])
    kx, ky = int(p[2]), int(p[3])
    wx, wy = _gaussian(kx, sigma), _gaussian(ky, sigma)
    rx, ry = kx // 2, ky // 2
    n = w * 3
    flat = np.empty((h, n), dtype=np.float32)
    for y in range(h):
        for x in range(w):
            for c in range(3):
                flat[y, 3 * x + c] = img[y, x, c]
    line = np.empty((w + 2 * rx) * 3, dtype=np.float32)
    row = np.empty(n, dtype=np.float32)
    for y in range(h):
        line[:] = 0.0
        for t in range(ky):  # the vertical pass, into the middle of a padded line
            weight = wy[t]
            source = flat[_reflect(y + t - ry, h)]
            for k in range(n):
                line[3 * rx + k] += weight * source[k]
        for x in range(rx):  # torch's "reflect" padding of the line
            for c in range(3):
                line[3 * (rx - 1 - x) + c] = line[3 * (rx + x + 1) + c]
                line[3 * (rx + w + x) + c] = line[3 * (rx + w - 2 - x) + c]
        row[:] = 0.0
        for t in range(kx):  # the horizontal pass
            weight = wx[t]
            for k in range(n):
                row[k] += weight * line[3 * t + k]
        for x in range(w):
            for c in range(3):
                out[y, x, c] = min(max(np.rint(row[3 * x + c]), 0.0), 255.0)


# DALI's per-sample calls of the kernels (module level, compiled once and cached:
# :mod:`dali_pipes.augment.auto.numba_callbacks`).
@run_callback()
def _jitter_callback(
    out_ptrs: Any, out_shapes: Any, out_ndims: Any, n_outs: Any,
    in_ptrs: Any, in_shapes: Any, in_ndims: Any, n_ins: Any,
) -> None:  # fmt: skip
    out, img, p = sample_arrays(out_ptrs, out_shapes, in_ptrs, in_shapes)
    run_jitter(out, img, p)


@run_callback()
def _grayscale_callback(
    out_ptrs: Any, out_shapes: Any, out_ndims: Any, n_outs: Any,
    in_ptrs: Any, in_shapes: Any, in_ndims: Any, n_ins: Any,
) -> None:  # fmt: skip
    out, img, p = sample_arrays(out_ptrs, out_shapes, in_ptrs, in_shapes)
    run_grayscale(out, img, p)


@run_callback()
def _blur_callback(
    out_ptrs: Any, out_shapes: Any, out_ndims: Any, n_outs: Any,
    in_ptrs: Any, in_shapes: Any, in_ndims: Any, n_ins: Any,
) -> None:  # fmt: skip
    out, img, p = sample_arrays(out_ptrs, out_shapes, in_ptrs, in_shapes)
    run_blur(out, img, p)


def jitter(images: Any, packed: Any) -> Any:
    """The DALI CPU node: each sample's jitter applied to ``images`` (float32 HWC pixels)."""
    return apply_kernel("the colour jitter kernel", _jitter_callback, images, packed)


def grayscale(images: Any, packed: Any) -> Any:
    """The DALI CPU node: the samples whose row says so turned to grayscale."""
    return apply_kernel("the grayscale kernel", _grayscale_callback, images, packed)


def blur(images: Any, packed: Any) -> Any:
    """The DALI CPU node: the samples whose row says so blurred with its sigma."""
    return apply_kernel("the Gaussian blur kernel", _blur_callback, images, packed)
