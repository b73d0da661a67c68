"""A slot of AutoAugment, RandAugment and TrivialAugmentWide, realised by each backend.

A *slot* is one application: which operation (an index into the registry of
:mod:`~dali_pipes.augment.auto.operations`, one record per operation) and its signed
magnitude value (torchvision's: a shear factor, pixels, degrees, an enhance offset, bits,
a threshold fraction). The policy ops (:mod:`~dali_pipes.augment.ops.randaugment`,
:mod:`~dali_pipes.augment.ops.trivialaugment`, :mod:`~dali_pipes.augment.ops.autoaugment`)
draw slots; this module turns slots into

- the torch result: the operation's record's torchvision call;
- the DALI feed: per slot a branch ``kind`` and the numbers that branch needs (the affine
  matrix computed here in NumPy from the record's ``F.affine`` arguments, enhance factors,
  posterize step, solarize threshold), and the DALI graph that picks the branch per
  sample with DALI conditionals (on the CPU, the compiled kernel instead).

Magnitude tables are torchvision's (``_AUGMENTATION_SPACE``), a linear range over
``num_magnitude_bins`` evaluated at a possibly fractional bin, so that RandAugment's
magnitude noise (timm's ``mstd``) moves along the same line.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from dali_pipes.augment import dali_ops
from dali_pipes.augment.auto import layout as slot_layout
from dali_pipes.augment.auto.layout import KINDS
from dali_pipes.augment.auto.operations import REGISTRY, Range
from dali_pipes.augment.base import Context, Op, Params, Row
from dali_pipes.augment.params import number
from dali_pipes.augment.tv_functional import F
from dali_pipes.errors import require

INTERPOLATIONS = ("nearest", "bilinear")


def __getattr__(name: str) -> Any:
    """Views of the registry, current whenever read (an operation registered later is in
    them): ``OPS`` (names by index), ``OP_INDEX``, and the ``STANDARD`` (RandAugment,
    AutoAugment) and ``WIDE`` (TrivialAugmentWide) magnitude tables."""
    if name == "OPS":
        return tuple(REGISTRY)
    if name == "OP_INDEX":
        return {op: i for i, op in enumerate(REGISTRY)}
    if name in ("STANDARD", "WIDE"):
        return table(name.lower())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def table(which: str) -> dict[str, Range | None]:
    """The operations in table ``which`` (``standard``, ``wide``), with their ranges."""
    return {name: op.ranges[which] for name, op in REGISTRY.items() if which in op.ranges}


def index(name: str) -> int:
    """The registry index (the slot's ``op`` value) of operation ``name``."""
    return list(REGISTRY).index(name)


def defaults(policy: str, which: str) -> tuple[str, ...]:
    """The built-in operations ``policy`` uses by default, from table ``which``."""
    return tuple(n for n, op in REGISTRY.items() if policy in op.defaults and which in op.ranges)


def magnitudes(
    ranges: Mapping[str, Range | None],
    ops: np.ndarray,
    m: np.ndarray,
    negate: np.ndarray,
    bins: int,
    size: tuple[int, int],
) -> np.ndarray:
    """Signed magnitude values of slots: op ``ops`` at bin ``m``, negated where ``negate``
    and the op is signed (torchvision's random sign); 0 for ops without a magnitude."""
    out = np.zeros(len(ops), dtype=np.float64)
    for name, rng in ranges.items():
        if rng is None:
            continue
        rows = ops == index(name)
        if rows.any():
            value = rng.value(m[rows], bins, size)
            out[rows] = np.where(negate[rows], -value, value) if rng.signed else value
    return out


def apply_torch(
    image: torch.Tensor, op: int, magnitude: float, interpolation: str, fill: int
) -> torch.Tensor:
    """One slot on a uint8 ``[3, H, W]`` image, as torchvision's auto-augment transforms do."""
    record = REGISTRY[tuple(REGISTRY)[op]]
    fill_: list[float] | None = None if fill == 0 else [float(fill)] * 3
    return record.torch(image, magnitude, F.InterpolationMode(interpolation), fill_)


# --------------------------------------------------------------------------- DALI


def _inverse_affine(args: Mapping[str, np.ndarray], size: tuple[int, int], n: int) -> np.ndarray:
    """torchvision's ``_get_inverse_affine_matrix``, vectorised: ``[n, 2, 3]`` mapping output
    to input coordinates, both relative to the image centre (or the corner: ``corner``)."""
    zero, one = np.zeros(n), np.ones(n)
    corner = args.get("corner", np.zeros(n, bool))
    h, w = size
    cx, cy = np.where(corner, -w / 2.0, 0.0), np.where(corner, -h / 2.0, 0.0)
    tx, ty = args.get("tx", zero), args.get("ty", zero)
    rot = np.radians(args.get("angle", zero))
    sx, sy = np.radians(args.get("shx", zero)), np.radians(args.get("shy", zero))
    scale = args.get("scale", one)
    a = np.cos(rot - sy) / np.cos(sy)
    b = -np.cos(rot - sy) * np.tan(sx) / np.cos(sy) - np.sin(rot)
    c = np.sin(rot - sy) / np.cos(sy)
    d = -np.sin(rot - sy) * np.tan(sx) / np.cos(sy) + np.cos(rot)
    m = np.zeros((n, 2, 3), dtype=np.float64)
    m[:, 0, 0], m[:, 0, 1], m[:, 1, 0], m[:, 1, 1] = d / scale, -b / scale, -c / scale, a / scale
    m[:, 0, 2] = m[:, 0, 0] * (-cx - tx) + m[:, 0, 1] * (-cy - ty) + cx
    m[:, 1, 2] = m[:, 1, 0] * (-cx - tx) + m[:, 1, 1] * (-cy - ty) + cy
    return m


def warp_matrices(ops: np.ndarray, mags: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """The DALI ``warp_affine`` matrix of each slot (identity for non-geometric ops).

    torchvision works in coordinates centred on the image, DALI from the top-left pixel
    corner; both sample at pixel centres, so the matrix is conjugated by a shift of half
    the image.
    """
    h, w = size
    n = len(ops)
    inv = np.tile(np.eye(3)[:2], (n, 1, 1))
    for i, op in enumerate(REGISTRY.values()):
        rows = np.flatnonzero(ops == i)
        if op.affine is not None and len(rows):
            inv[rows] = _inverse_affine(op.affine(mags[rows], size), size, len(rows))
    shift = np.array([[1.0, 0.0, w / 2.0], [0.0, 1.0, h / 2.0], [0.0, 0.0, 1.0]])
    unshift = np.array([[1.0, 0.0, -w / 2.0], [0.0, 1.0, -h / 2.0], [0.0, 0.0, 1.0]])
    full = np.concatenate([inv, np.broadcast_to([[[0.0, 0.0, 1.0]]], (n, 1, 3))], axis=1)
    return (shift @ full @ unshift)[:, :2].astype(np.float32)


def kind_table() -> np.ndarray:
    """Operation index -> its DALI branch kind."""
    return np.array([op.kind for op in REGISTRY.values()], dtype=np.int32)


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
    kinds = kind_table()[ops]
    bits = np.clip(np.where(kinds == slot_layout.POSTERIZE, mags, 8), 0, 8).astype(np.int64)
    packed = slot_layout.pack(
        kinds,
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
    slot = _Fields(packed, ctx, interpolation, fill)
    if len(kinds) == 1:  # no choice to make
        return _BRANCHES[kinds[0]](images, slot)
    branches = [(k, _branch(k, slot)) for k in kinds]
    return select(packed[slot_layout.FIELDS.index("kind")], branches, images)


class _Fields:
    """A slot's packed row as the DALI graph's operands, and its warp options."""

    def __init__(self, packed: Any, ctx: Context, interpolation: str, fill: int) -> None:
        self.packed, self.ctx = packed, ctx
        self.interpolation, self.fill = interpolation, fill

    def __call__(self, name: str) -> Any:
        """Field ``name`` as a float operand beside the images."""
        from nvidia.dali import fn, types

        field = self.packed[slot_layout.FIELDS.index(name)]
        return self.ctx.operand(fn.cast(field, dtype=types.FLOAT))

    def matrix(self) -> Any:
        """The 2x3 warp matrix (a CPU node: ``warp_affine`` takes it as a named argument)."""
        from nvidia.dali import fn, types

        start = slot_layout.FIELDS.index("m00")
        return fn.reshape(fn.cast(self.packed[start : start + 6], dtype=types.FLOAT), shape=[2, 3])


#: The GPU graph's realisation of each kind (:data:`~dali_pipes.augment.auto.layout.KINDS`).
_BRANCHES: dict[int, Callable[[Any, _Fields], Any]] = {
    slot_layout.IDENTITY: lambda x, f: x,
    slot_layout.AFFINE: lambda x, f: dali_ops.affine(x, f.matrix(), f.interpolation, f.fill),
    slot_layout.BRIGHTNESS: lambda x, f: dali_ops.brightness(x, f("factor")),
    slot_layout.COLOR: lambda x, f: dali_ops.saturation(x, f("factor"), f("inv"), f.ctx),
    slot_layout.CONTRAST: lambda x, f: dali_ops.contrast(x, f("factor"), f("inv"), f.ctx),
    slot_layout.SHARPNESS: lambda x, f: dali_ops.sharpness(x, f("inv"), f.ctx),
    slot_layout.POSTERIZE: lambda x, f: dali_ops.posterize(x, f("step")),
    slot_layout.SOLARIZE: lambda x, f: dali_ops.solarize(x, f("threshold")),
    slot_layout.AUTOCONTRAST: lambda x, f: dali_ops.autocontrast(x),
    slot_layout.EQUALIZE: lambda x, f: dali_ops.equalize(x),
    slot_layout.INVERT: lambda x, f: dali_ops.invert(x),
}
assert set(_BRANCHES) == set(range(len(KINDS)))


def _branch(kind: int, slot: _Fields) -> Callable[[Any], Any]:
    return lambda x: _BRANCHES[kind](x, slot)


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


def operations(op: Any, default: tuple[str, ...], which: str) -> tuple[str, ...]:
    """Validate an op's ``operations`` field: registered operations of table ``which``
    (None: ``default``, the built-in set)."""
    chosen = op.operations
    if chosen is None:
        return default
    known = tuple(table(which))
    ok = isinstance(chosen, list | tuple) and len(chosen) > 0
    ok = ok and all(isinstance(name, str) and name in known for name in chosen)
    require(ok, "operations", chosen, f"choose a non-empty list from {', '.join(known)}")
    return tuple(dict.fromkeys(chosen))


def kinds_of(names: Mapping[str, Any] | tuple[str, ...]) -> tuple[int, ...]:
    """The DALI branches needed for the operations ``names``."""
    return tuple(sorted({REGISTRY[name].kind for name in names}))


class SlotOp(Op):
    """What the policy ops share: their slots' torch and DALI realisations.

    A subclass is a frozen dataclass with ``interpolation`` and ``fill`` fields; it draws
    its slots in :meth:`sample` (parameters under the prefixes of :meth:`prefixes`) and
    says which DALI branches they can reach (:meth:`kinds`).
    """

    sized = True  # translations in pixels of the batch's one size
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
