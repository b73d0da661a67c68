"""The image operations of AutoAugment, RandAugment and TrivialAugmentWide, shared by the three.

A *slot* is one application: which operation (an index into :data:`OPS`) and its signed
magnitude value (torchvision's: a shear factor, pixels, degrees, an enhance offset, bits,
a threshold fraction). The policy ops (:mod:`~dali_pipes.augment.ops.randaugment`,
:mod:`~dali_pipes.augment.ops.trivialaugment`, :mod:`~dali_pipes.augment.ops.autoaugment`) draw
slots; this module turns slots into

- the torch result, calling ``transforms.v2.functional`` exactly as torchvision's
  ``_AutoAugmentBase._apply_image_or_video_transform`` does;
- the DALI feed: per slot a branch ``kind`` and the numbers that branch needs (the affine
  matrix computed here in NumPy, enhance factors, posterize step, solarize threshold), and
  the DALI graph that picks the branch per sample with DALI conditionals.

Magnitude tables are torchvision's (``_AUGMENTATION_SPACE``), written as (low, high) of a
linear range over ``num_magnitude_bins``, evaluated at a possibly fractional bin so that
RandAugment's magnitude noise (timm's ``mstd``) moves along the same line.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from dali_pipes.augment import dali_ops
from dali_pipes.augment.auto import layout as slot_layout
from dali_pipes.augment.auto.layout import KINDS
from dali_pipes.augment.base import Context, Op, Params, Row, number
from dali_pipes.errors import require

OPS = (
    "Identity",
    "ShearX",
    "ShearY",
    "TranslateX",
    "TranslateY",
    "Rotate",
    "Brightness",
    "Color",
    "Contrast",
    "Sharpness",
    "Posterize",
    "Solarize",
    "AutoContrast",
    "Equalize",
    "Invert",
)
OP_INDEX = {name: i for i, name in enumerate(OPS)}

_KIND_OF = {
    "Identity": 0,
    "ShearX": 1,
    "ShearY": 1,
    "TranslateX": 1,
    "TranslateY": 1,
    "Rotate": 1,
    "Brightness": 2,
    "Color": 3,
    "Contrast": 4,
    "Sharpness": 5,
    "Posterize": 6,
    "Solarize": 7,
    "AutoContrast": 8,
    "Equalize": 9,
    "Invert": 10,
}
_KIND_TABLE = np.array([_KIND_OF[name] for name in OPS], dtype=np.int32)  # op index -> kind
INTERPOLATIONS = ("nearest", "bilinear")


@dataclass(frozen=True)
class Range:
    """A magnitude table: ``low + (high - low) * bin / (bins - 1)`` (times the image width
    or height for translations); ``bits`` is posterize's ``8 - round(bin / ((bins-1)/bits))``."""

    low: float = 0.0
    high: float = 0.0
    signed: bool = False
    per: str = ""  # "width" | "height": the range is a fraction of that side
    bits: int = 0

    def value(self, m: np.ndarray, bins: int, size: tuple[int, int]) -> np.ndarray:
        """Magnitude values at (fractional) bins ``m``, before the random sign."""
        t = m / (bins - 1)
        if self.bits:
            return np.round(8.0 - t * self.bits)
        side = {"width": size[1], "height": size[0]}.get(self.per, 1.0)
        return (self.low + (self.high - self.low) * t) * side


_ENHANCE = Range(0.0, 0.9, signed=True)
#: RandAugment's and AutoAugment's table (torchvision).
STANDARD: dict[str, Range | None] = {
    "Identity": None,
    "ShearX": Range(0.0, 0.3, signed=True),
    "ShearY": Range(0.0, 0.3, signed=True),
    "TranslateX": Range(0.0, 150.0 / 331.0, signed=True, per="width"),
    "TranslateY": Range(0.0, 150.0 / 331.0, signed=True, per="height"),
    "Rotate": Range(0.0, 30.0, signed=True),
    "Brightness": _ENHANCE,
    "Color": _ENHANCE,
    "Contrast": _ENHANCE,
    "Sharpness": _ENHANCE,
    "Posterize": Range(bits=4),
    "Solarize": Range(1.0, 0.0),
    "AutoContrast": None,
    "Equalize": None,
    "Invert": None,
}
_WIDE_ENHANCE = Range(0.0, 0.99, signed=True)
#: TrivialAugmentWide's table (torchvision).
WIDE: dict[str, Range | None] = {
    "Identity": None,
    "ShearX": Range(0.0, 0.99, signed=True),
    "ShearY": Range(0.0, 0.99, signed=True),
    "TranslateX": Range(0.0, 32.0, signed=True),
    "TranslateY": Range(0.0, 32.0, signed=True),
    "Rotate": Range(0.0, 135.0, signed=True),
    "Brightness": _WIDE_ENHANCE,
    "Color": _WIDE_ENHANCE,
    "Contrast": _WIDE_ENHANCE,
    "Sharpness": _WIDE_ENHANCE,
    "Posterize": Range(bits=6),
    "Solarize": Range(1.0, 0.0),
    "AutoContrast": None,
    "Equalize": None,
}


def magnitudes(
    table: Mapping[str, Range | None],
    ops: np.ndarray,
    m: np.ndarray,
    negate: np.ndarray,
    bins: int,
    size: tuple[int, int],
) -> np.ndarray:
    """Signed magnitude values of slots: op ``ops`` at bin ``m``, negated where ``negate``
    and the op is signed (torchvision's random sign); 0 for ops without a magnitude."""
    out = np.zeros(len(ops), dtype=np.float64)
    for name, rng in table.items():
        if rng is None:
            continue
        rows = ops == OP_INDEX[name]
        if rows.any():
            value = rng.value(m[rows], bins, size)
            out[rows] = np.where(negate[rows], -value, value) if rng.signed else value
    return out


# --------------------------------------------------------------------------- torch


def apply_torch(
    image: torch.Tensor, op: int, magnitude: float, interpolation: str, fill: int
) -> torch.Tensor:
    """One slot on a uint8 ``[3, H, W]`` image, as torchvision's auto-augment transforms do."""
    import torchvision.transforms.v2.functional as F

    name = OPS[op]
    mode = F.InterpolationMode(interpolation)
    fill_: list[float] | None = None if fill == 0 else [float(fill)] * 3
    if name == "Identity":
        return image
    if name in ("ShearX", "ShearY"):
        degrees = math.degrees(math.atan(magnitude))
        shear = [degrees, 0.0] if name == "ShearX" else [0.0, degrees]
        return F.affine(
            image,
            angle=0.0,
            translate=[0, 0],
            scale=1.0,
            shear=shear,
            interpolation=mode,
            fill=fill_,
            center=[0, 0],
        )
    if name in ("TranslateX", "TranslateY"):
        shift = [int(magnitude), 0] if name == "TranslateX" else [0, int(magnitude)]
        return F.affine(
            image,
            angle=0.0,
            translate=shift,
            scale=1.0,
            interpolation=mode,
            shear=[0.0, 0.0],
            fill=fill_,
        )
    if name == "Rotate":
        return F.rotate(image, angle=magnitude, interpolation=mode, fill=fill_)
    enhance: dict[str, Callable[[torch.Tensor, float], torch.Tensor]] = {
        "Brightness": F.adjust_brightness,
        "Color": F.adjust_saturation,
        "Contrast": F.adjust_contrast,
        "Sharpness": F.adjust_sharpness,
    }
    if name in enhance:
        return enhance[name](image, 1.0 + magnitude)
    if name == "Posterize":
        return F.posterize(image, bits=int(magnitude))
    if name == "Solarize":
        return F.solarize(image, threshold=255.0 * magnitude)
    if name == "AutoContrast":
        return F.autocontrast(image)
    if name == "Equalize":
        return F.equalize(image)
    return F.invert(image)


# --------------------------------------------------------------------------- DALI


def _inverse_affine(
    center: tuple[np.ndarray, np.ndarray],
    angle: np.ndarray,
    translate: tuple[np.ndarray, np.ndarray],
    shear: tuple[np.ndarray, np.ndarray],
) -> np.ndarray:
    """torchvision's ``_get_inverse_affine_matrix`` (scale 1), vectorised: ``[B, 2, 3]``
    mapping output to input coordinates, both relative to the image centre."""
    rot, sx, sy = np.radians(angle), np.radians(shear[0]), np.radians(shear[1])
    (cx, cy), (tx, ty) = center, translate
    a = np.cos(rot - sy) / np.cos(sy)
    b = -np.cos(rot - sy) * np.tan(sx) / np.cos(sy) - np.sin(rot)
    c = np.sin(rot - sy) / np.cos(sy)
    d = -np.sin(rot - sy) * np.tan(sx) / np.cos(sy) + np.cos(rot)
    m = np.zeros((len(angle), 2, 3), dtype=np.float64)
    m[:, 0, 0], m[:, 0, 1], m[:, 1, 0], m[:, 1, 1] = d, -b, -c, a
    m[:, 0, 2] = d * (-cx - tx) + (-b) * (-cy - ty) + cx
    m[:, 1, 2] = (-c) * (-cx - tx) + a * (-cy - ty) + cy
    return m


def warp_matrices(ops: np.ndarray, mags: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """The DALI ``warp_affine`` matrix of each slot (identity for non-geometric ops).

    torchvision works in coordinates centred on the image, DALI from the top-left pixel
    corner; both sample at pixel centres, so the matrix is conjugated by a shift of half
    the image.
    """
    h, w = size
    n = len(ops)
    zero = np.zeros(n)
    center_x, center_y = zero.copy(), zero.copy()
    angle, tx, ty, shx, shy = zero.copy(), zero.copy(), zero.copy(), zero.copy(), zero.copy()
    shear = (ops == OP_INDEX["ShearX"]) | (ops == OP_INDEX["ShearY"])
    center_x[shear], center_y[shear] = -w / 2.0, -h / 2.0  # center=[0, 0]: the corner
    degrees = np.degrees(np.arctan(mags))
    shx = np.where(ops == OP_INDEX["ShearX"], degrees, 0.0)
    shy = np.where(ops == OP_INDEX["ShearY"], degrees, 0.0)
    tx = np.where(ops == OP_INDEX["TranslateX"], np.trunc(mags), 0.0)
    ty = np.where(ops == OP_INDEX["TranslateY"], np.trunc(mags), 0.0)
    angle = np.where(ops == OP_INDEX["Rotate"], -mags, 0.0)  # F.rotate passes -angle
    inv = _inverse_affine((center_x, center_y), angle, (tx, ty), (shx, shy))
    shift = np.array([[1.0, 0.0, w / 2.0], [0.0, 1.0, h / 2.0], [0.0, 0.0, 1.0]])
    unshift = np.array([[1.0, 0.0, -w / 2.0], [0.0, 1.0, -h / 2.0], [0.0, 0.0, 1.0]])
    full = np.concatenate([inv, np.broadcast_to([[[0.0, 0.0, 1.0]]], (n, 1, 3))], axis=1)
    return (shift @ full @ unshift)[:, :2].astype(np.float32)


def slot_params(
    prefix: str,
    ops: np.ndarray,
    mags: np.ndarray,
    size: tuple[int, int],
    interpolation: str,
    fill: int,
) -> Params:
    """A slot's parameters for both backends, keys prefixed with ``prefix``.

    ``op``/``magnitude`` are what the torch realisation reads; ``packed`` is the DALI feed,
    one row per sample laid out as :data:`~dali_pipes.augment.auto.layout.FIELDS` (computed
    here, in double precision where torchvision uses Python floats, then as the float32
    values torchvision's kernels compute with).
    """
    factor = 1.0 + mags
    bits = np.clip(np.where(ops == OP_INDEX["Posterize"], mags, 8), 0, 8).astype(np.int64)
    packed = slot_layout.pack(
        _KIND_TABLE[ops],
        warp_matrices(ops, mags, size),
        factor.astype(np.float32),
        (1.0 - factor).astype(np.float32),
        (2.0 ** (8 - bits)).astype(np.float32),  # posterize: round down to a multiple
        (255.0 * mags).astype(np.float32),
        bilinear=interpolation == "bilinear",
        fill=fill,
    )
    return {
        f"{prefix}op": ops.astype(np.int32),
        f"{prefix}magnitude": mags,
        f"{prefix}packed": packed,
    }


def dali_params(names: tuple[str, ...], kinds: tuple[int, ...]) -> tuple[str, ...]:
    """The slot parameters DALI reads: the packed rows, unless every slot is an identity
    (``op`` and ``magnitude`` are the torch realisation's)."""
    if kinds == (slot_layout.IDENTITY,):
        return ()
    return tuple(n for n in names if n.rsplit(".", 1)[-1] == "packed")


def torch_slot(image: torch.Tensor, p: Row, prefix: str, interpolation: str, fill: int) -> Any:
    """:func:`apply_torch` for the slot stored under ``prefix`` in a sample's row."""
    return apply_torch(
        image, int(p[f"{prefix}op"]), float(p[f"{prefix}magnitude"]), interpolation, fill
    )


def dali_slot(
    images: Any,
    p: Mapping[str, Any],
    prefix: str,
    kinds: tuple[int, ...],
    interpolation: str,
    fill: int,
    ctx: Context,
) -> Any:
    """The DALI graph of one slot: per sample, the operation of its packed row.

    In the CPU's realisation one compiled kernel (:mod:`~dali_pipes.augment.auto.kernel`);
    in the GPU's (on the GPU or its CPU twin) the pieces of
    :mod:`~dali_pipes.augment.dali_ops`, the branch of each sample's kind picked with DALI
    conditionals (``kinds`` lists the branches the op can reach; others are not built).
    """
    if kinds == (slot_layout.IDENTITY,):
        return images
    packed = p[f"{prefix}packed"]
    if not ctx.gpu_graph:
        from dali_pipes.augment.auto import (
            kernel as slot_kernel,  # imports numba: only for CPU pipelines
        )

        return slot_kernel.apply(images, packed)
    fields = slot_layout.FIELDS

    def field(name: str) -> Any:
        from nvidia.dali import fn, types

        return ctx.operand(fn.cast(packed[fields.index(name)], dtype=types.FLOAT))

    def branch(kind: int) -> Callable[[Any], Any]:
        name = KINDS[kind]

        def run(x: Any) -> Any:
            from nvidia.dali import fn, types

            if name == "affine":
                start = fields.index("m00")
                flat = fn.cast(packed[start : start + 6], dtype=types.FLOAT)
                matrix = fn.reshape(flat, shape=[2, 3])
                return dali_ops.affine(x, matrix, interpolation, fill)
            if name == "brightness":
                return dali_ops.brightness(x, field("factor"))
            if name == "color":
                return dali_ops.saturation(x, field("factor"), field("inv"), ctx)
            if name == "contrast":
                return dali_ops.contrast(x, field("factor"), field("inv"), ctx)
            if name == "sharpness":
                return dali_ops.sharpness(x, field("inv"), ctx)
            if name == "posterize":
                return dali_ops.posterize(x, field("step"))
            if name == "solarize":
                return dali_ops.solarize(x, field("threshold"))
            if name == "autocontrast":
                return dali_ops.autocontrast(x)
            if name == "equalize":
                return dali_ops.equalize(x)
            if name == "invert":
                return dali_ops.invert(x)
            return x

        return run

    if len(kinds) == 1:  # no choice to make
        return branch(kinds[0])(images)
    return select(packed[fields.index("kind")], [(k, branch(k)) for k in kinds], images)


def select(index: Any, branches: list[tuple[int, Callable[[Any], Any]]], images: Any) -> Any:
    """Per sample, the branch whose key equals ``index`` (DALI conditionals).

    Splits the batch in halves of the sorted keys, so a sample passes through log2(n)
    conditions rather than up to n.
    """
    if len(branches) == 1:
        return branches[0][1](images)
    mid = len(branches) // 2
    if index < branches[mid][0]:
        images = select(index, branches[:mid], images)
    else:
        images = select(index, branches[mid:], images)
    return images


def operations(op: Any, default: tuple[str, ...]) -> tuple[str, ...]:
    """Validate an op's ``operations`` field: a subset of ``default`` (None: all of it)."""
    chosen = op.operations
    if chosen is None:
        return default
    ok = isinstance(chosen, list | tuple) and len(chosen) > 0
    ok = ok and all(isinstance(name, str) and name in default for name in chosen)
    require(ok, "operations", chosen, f"choose a non-empty list from {', '.join(default)}")
    return tuple(dict.fromkeys(chosen))


def kinds_of(table: Mapping[str, Range | None] | tuple[str, ...]) -> tuple[int, ...]:
    """The DALI branches needed for the operations named in ``table``."""
    return tuple(sorted({_KIND_OF[name] for name in table}))


class SlotOp(Op):
    """What the policy ops share: their slots' torch and DALI realisations.

    A subclass is a frozen dataclass with ``interpolation`` and ``fill`` fields; it draws
    its slots in :meth:`sample` (parameters under the prefixes of :meth:`prefixes`) and
    says which DALI branches they can reach (:meth:`kinds`).
    """

    interpolation: str
    fill: int

    def check_warp(self) -> None:
        """Validate ``interpolation`` and ``fill`` (for __post_init__)."""
        number(self, "fill", 0, 255, integer=True)
        require(
            self.interpolation in INTERPOLATIONS,
            "interpolation",
            self.interpolation,
            f"choose one of {INTERPOLATIONS}",
        )

    def prefixes(self) -> list[str]:
        """The parameter-name prefix of each slot, in the order they are applied."""
        return [""]

    def kinds(self) -> tuple[int, ...]:
        """The DALI branches the slots can reach."""
        return tuple(range(len(KINDS)))

    def torch(self, image: torch.Tensor, p: Row, ctx: Context) -> torch.Tensor:
        for prefix in self.prefixes():
            image = torch_slot(image, p, prefix, self.interpolation, self.fill)
        return image

    def dali(self, images: Any, p: Mapping[str, Any], ctx: Context) -> Any:
        kinds = self.kinds()
        for prefix in self.prefixes():
            images = dali_slot(images, p, prefix, kinds, self.interpolation, self.fill, ctx)
        return images

    def needs_conditionals(self, gpu: bool) -> bool:
        """The GPU's realisation picks each sample's branch with conditionals; the CPU's
        kernel reads the kind itself (see :func:`dali_slot`)."""
        return gpu and len(self.kinds()) > 1

    def dali_params(self, names: tuple[str, ...]) -> tuple[str, ...]:
        return dali_params(names, self.kinds())

    def warp_options(self) -> dict[str, Any]:
        """``interpolation`` and ``fill`` as torchvision's auto-augment transforms take them."""
        from torchvision.transforms import v2

        return {
            "interpolation": v2.InterpolationMode(self.interpolation),
            "fill": None if self.fill == 0 else self.fill,
        }
