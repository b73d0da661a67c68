"""DALI graph pieces that compute what ``torchvision.transforms.v2.functional`` computes.

The auto-augment slots use them in the GPU's realisation only (on the GPU, or its CPU
twin); the CPU's realisation runs a slot as one compiled kernel
(:mod:`~dali_pipes.augment.auto.kernel`), exact where these pieces are off by a grey
level. Colour jitter, grayscale and blur use them in both.

Images between ops are *pixels*: float32 HWC DataNodes holding whole numbers in [0, 255],
the values torchvision's uint8 tensors hold. Every function here takes and returns pixels;
the arithmetic follows torchvision's on uint8 tensors step by step: float32 intermediates,
``floor`` where torchvision floors, truncation where it converts to uint8 (values are
clamped to [0, 255] first, so truncation is ``floor``). Float32 rather than uint8 between
ops because converting float to uint8 is DALI's slowest CPU step (slower than the
arithmetic around it); ``crop_mirror_normalize`` takes either.

DALI's own ``fn.brightness``, ``fn.contrast``, ``fn.saturation`` and ``fn.hue`` round
differently, use a fixed contrast centre or rotate hue in YIQ space (mean 11 grey levels
from torchvision's HSV hue on the photos), so they are not used. Measured against
torchvision on real photos, the pieces here agree exactly or to one grey level on a
fraction of a percent of the values (PyTorch fuses a multiply-add where DALI rounds twice);
the exceptions are stated where they are.

None has an ``if`` on a DataNode, so AutoGraph calls them as they are
(:mod:`~dali_pipes.augment.unconverted`). Parameters arrive as DataNodes fed from NumPy
(already combined where torchvision combines Python floats in double precision, e.g.
``1 - factor``), so both backends use the same float32 values.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dali_pipes.augment.base import Context
from dali_pipes.augment.unconverted import unconverted
from dali_pipes.errors import DaliPipesError

# torchvision's grayscale weights (_rgb_to_grayscale_image).
_LUMA = np.array([[[0.2989, 0.587, 0.114]]], dtype=np.float32)


@unconverted
def pixels(images: Any) -> Any:
    """uint8 images (a decoder's or resize's output) as pixels."""
    from nvidia.dali import fn, types

    return fn.cast(images, dtype=types.FLOAT)


@unconverted
def truncate(x: Any, low: bool = True) -> Any:
    """float -> pixels as torchvision's ``clamp_(0, 255).to(uint8)``: clamp, then floor.

    ``low=False`` skips the lower bound for values that cannot be negative. (``min`` and
    ``max`` rather than ``math.clamp``: a third of the cost on DALI's CPU.)"""
    from nvidia.dali import math as dmath

    top = dmath.min(x, 255.0)
    return dmath.floor(dmath.max(top, 0.0) if low else top)


@unconverted
def blend(images: Any, other: Any, ratio: Any, inv: Any) -> Any:
    """torchvision ``_blend``: ``images * ratio + other * (1 - ratio)``, clamped, truncated.

    ``inv`` is ``1 - ratio`` computed in double precision before it was fed.
    """
    return truncate(images * ratio + other * inv)


@unconverted
def gray(images: Any, ctx: Context) -> Any:
    """Luma as float32 ``[H, W]`` (before torchvision's conversion back to an integer):
    one weighted reduction over the channels instead of three channel slices."""
    from nvidia.dali import fn

    return fn.reductions.sum(images * ctx.constant(_LUMA), axes=[2])


@unconverted
def grayscale(images: Any, ctx: Context) -> Any:
    """``rgb_to_grayscale(images, num_output_channels=3)``."""
    from nvidia.dali import fn
    from nvidia.dali import math as dmath

    luma = dmath.floor(gray(images, ctx))
    return fn.stack(luma, luma, luma, axis=2, axis_name="C")


@unconverted
def brightness(images: Any, factor: Any) -> Any:
    """``adjust_brightness``: a blend with black."""
    return truncate(images * factor, low=False)


@unconverted
def saturation(images: Any, factor: Any, inv: Any, ctx: Context) -> Any:
    """``adjust_saturation``: a blend with the floored grayscale image."""
    from nvidia.dali import fn
    from nvidia.dali import math as dmath

    luma = fn.expand_dims(dmath.floor(gray(images, ctx)), axes=[2], new_axis_names="C")
    return blend(images, luma, factor, inv)


@unconverted
def contrast(images: Any, factor: Any, inv: Any, ctx: Context) -> Any:
    """``adjust_contrast``: a blend with the mean of the floored grayscale image."""
    from nvidia.dali import fn
    from nvidia.dali import math as dmath

    return blend(images, fn.reductions.mean(dmath.floor(gray(images, ctx))), factor, inv)


@unconverted
def hue(images: Any, shift: Any) -> Any:
    """``adjust_hue``: RGB -> HSV, hue + shift (mod 1), HSV -> RGB, all in float32.

    torchvision's ``_rgb_to_hsv`` / ``_hsv_to_rgb`` written as DALI arithmetic.
    """
    from nvidia.dali import fn
    from nvidia.dali import math as dmath

    x = images * np.float32(1.0 / 255.0)
    r, g, b = x[:, :, 0], x[:, :, 1], x[:, :, 2]
    maxc = dmath.max(dmath.max(r, g), b)
    minc = dmath.min(dmath.min(r, g), b)
    eqc = maxc == minc
    span = maxc - minc
    sat = span / (maxc + eqc * (1.0 - maxc))  # where(eqc, 1, maxc)
    div = span + eqc * (1.0 - span)  # where(eqc, 1, span)
    rc, gc, bc = (maxc - r) / div, (maxc - g) / div, (maxc - b) / div
    max_is_r = maxc == r
    max_is_g = maxc == g
    hr = (bc - gc) * max_is_r
    hg = ((rc + 2.0) - bc) * (max_is_g & (max_is_r == False))  # noqa: E712 - DALI nodes
    hb = ((gc + 4.0) - rc) * ((max_is_r == False) & (max_is_g == False))  # noqa: E712
    h = ((hr + hg) + hb) * np.float32(1.0 / 6.0) + 1.0
    h = h - dmath.floor(h)  # fmod(h, 1) for h >= 0
    h = h + shift
    h = h - dmath.floor(h)  # torch's remainder(h, 1)
    value = maxc
    h6 = h * 6.0
    sector = dmath.floor(h6)
    frac = h6 - sector
    sxf = sat * frac
    one_minus_s = 1.0 - sat
    q = dmath.max(dmath.min((1.0 - sxf) * value, 1.0), 0.0)  # torch's clamp(0, 1)
    t = dmath.max(dmath.min((sxf + one_minus_s) * value, 1.0), 0.0)
    p = dmath.max(dmath.min(one_minus_s * value, 1.0), 0.0)
    sector = sector - dmath.floor(sector / 6.0) * 6.0
    masks = [sector == k for k in range(6)]

    def pick(choices: list[Any]) -> Any:
        total = masks[0] * choices[0]
        for mask, choice in zip(masks[1:], choices[1:], strict=True):
            total = total + mask * choice
        return total

    red = pick([value, q, p, p, t, value])
    green = pick([t, value, value, q, p, p])
    blue = pick([p, p, t, value, value, q])
    rgb = fn.stack(red, green, blue, axis=2, axis_name="C")
    return truncate(rgb * np.float32(255.0 + 1.0 - 1e-3), low=False)  # to_dtype(uint8)


@unconverted
def sharpness(images: Any, inv: Any, ctx: Context) -> Any:
    """``adjust_sharpness``: blend with the rounded 3x3 smoothing filter, border kept.

    ``inv`` is ``1 - factor``; the one-pixel border is left as it is, like torchvision.
    """
    from nvidia.dali import fn, types
    from nvidia.dali import math as dmath

    kernel = np.full((3, 3), np.float32(1.0 / 13.0), dtype=np.float32)
    kernel[1, 1] = np.float32(5.0 / 13.0)
    blurred = fn.filter(images, ctx.constant(kernel), dtype=types.FLOAT)
    blurred = dmath.floor(blurred + 0.5)  # torch.round (half-way values do not occur here)
    # The interior, found per sample (image sizes may change between epochs): a 3x3 box
    # sum of ones with zeros outside is 9 exactly where the whole neighbourhood is inside.
    ones = images[:, :, 0:1] * 0.0 + 1.0
    box = fn.filter(ones, ctx.constant(np.ones((3, 3), dtype=np.float32)), border="constant")
    interior = box > 8.5
    return truncate(images + (blurred - images) * (inv * interior))


@unconverted
def posterize(images: Any, step: Any) -> Any:
    """``posterize``: keep the high bits, i.e. round down to a multiple of ``step`` =
    2 ** (8 - bits) (exact on whole numbers in float32)."""
    from nvidia.dali import math as dmath

    return dmath.floor(images / step) * step


@unconverted
def solarize(images: Any, threshold: Any) -> Any:
    """``solarize``: invert the values at or above ``threshold``."""
    return images + (images >= threshold) * (255.0 - 2.0 * images)


@unconverted
def invert(images: Any) -> Any:
    """``invert``: 255 minus each value."""
    return 255.0 - images


@unconverted
def autocontrast(images: Any) -> Any:
    """``autocontrast``: stretch each channel's [min, max] to [0, 255] (flat ones kept)."""
    from nvidia.dali import fn

    lo = fn.reductions.min(images, axes=[0, 1], keep_dims=True)
    hi = fn.reductions.max(images, axes=[0, 1], keep_dims=True)
    flat = hi == lo
    inv_scale = (hi - lo) * np.float32(1.0 / 255.0)
    lo = lo * (flat == False)  # noqa: E712 - DALI nodes
    inv_scale = inv_scale + flat * (1.0 - inv_scale)
    return truncate((images - lo) / inv_scale, low=False)


@unconverted
def equalize(images: Any) -> Any:
    """Histogram equalisation per channel, in the GPU's realisation (on the GPU or its CPU
    twin): DALI's ``fn.equalize``.

    It builds its lookup table like OpenCV (inclusive cumulative histogram shifted by the
    first bin), not like PIL, whose rule torchvision follows: on random crops of the photos
    the two differ where one histogram bin holds many pixels (benchmarks/RESULTS.md has
    the figures). DALI has no histogram or per-sample lookup table to write PIL's rule
    with; in the CPU's realisation the slot kernel computes PIL's rule itself.
    """
    from nvidia.dali import fn, types

    return pixels(fn.equalize(fn.cast(images, dtype=types.UINT8)))


def require_cpu(what: str, *nodes: Any) -> None:
    """Refuse, while the graph is defined, to give a CPU kernel of ours (Python or numba
    code, which reads host memory) a node on the GPU: one line naming the kernel."""
    on_gpu = [i for i, node in enumerate(nodes) if getattr(node, "device", "cpu") != "cpu"]
    if on_gpu:
        raise DaliPipesError(
            f"{what} is a CPU kernel but its input {on_gpu[0]} is on the GPU: the GPU "
            "graph must use a DALI operator with a GPU implementation instead"
        )


def cpu_kernel(what: str, *inputs: Any, **options: Any) -> Any:
    """``fn.python_function(*inputs, **options)`` on the CPU, refused for GPU inputs
    (:func:`require_cpu`): DALI would place it on the GPU and hand it device memory."""
    from nvidia.dali import fn

    require_cpu(what, *inputs)
    return fn.python_function(*inputs, device="cpu", **options)


@unconverted
def affine(images: Any, matrix: Any, interpolation: str, fill: int) -> Any:
    """Warp by ``matrix`` (2x3, output pixel corner coordinates -> input) with ``fill``.

    Bilinear with a non-zero ``fill`` differs from torchvision at the border: torchvision
    blends the fill in by the warped coverage a second time, DALI interpolates with it.
    """
    from nvidia.dali import fn, types
    from nvidia.dali import math as dmath

    if interpolation == "nearest":
        return fn.warp_affine(
            images,
            matrix=matrix,
            fill_value=float(fill),
            interp_type=types.INTERP_NN,
            inverse_map=True,
        )
    warped = fn.warp_affine(
        images,
        matrix=matrix,
        fill_value=float(fill),
        interp_type=types.INTERP_LINEAR,
        inverse_map=True,
    )
    return dmath.floor(warped + 0.5)  # torchvision rounds the interpolated value
