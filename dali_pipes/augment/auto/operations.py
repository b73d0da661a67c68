"""The operations of AutoAugment, RandAugment and TrivialAugmentWide: one record each.

A record (:class:`Operation`) holds everything about one operation in one place: its
magnitude range in each table (torchvision's ``_AUGMENTATION_SPACE``: ``standard`` for
RandAugment and AutoAugment, ``wide`` for TrivialAugmentWide), its torch realisation
(``transforms.v2.functional``, as torchvision's ``_AutoAugmentBase`` calls it), and for
DALI its *kind*: the branch of the GPU graph and the case of the CPU's compiled kernel that
realise it (:data:`~dali_pipes.augment.auto.layout.KINDS`), fed the numbers that kind needs
-- for a geometric operation, ``F.affine``'s arguments, from which the warp matrix is
computed. An operation of an existing kind is added by registering one record
(:func:`register_operation`), from any module; the policies' default sets are the
built-in ones, and ``operations: [...]`` names any registered one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from dali_pipes.augment.auto.layout import (
    AFFINE,
    AUTOCONTRAST,
    BRIGHTNESS,
    COLOR,
    CONTRAST,
    EQUALIZE,
    IDENTITY,
    INVERT,
    KINDS,
    POSTERIZE,
    SHARPNESS,
    SOLARIZE,
)
from dali_pipes.augment.tv_functional import F
from dali_pipes.registry import Registry, where

#: torch realisation: (uint8 ``[3, H, W]`` image, signed magnitude value, interpolation,
#: fill as torchvision takes it) -> image.
TorchFn = Callable[[torch.Tensor, float, "F.InterpolationMode", list[float] | None], torch.Tensor]
#: ``F.affine``'s arguments for an array of magnitude values and the image size (h, w):
#: any of ``angle`` (degrees, as given to the inverse-matrix computation), ``tx``, ``ty``
#: (pixels), ``shx``, ``shy`` (degrees), ``scale``, ``corner`` (bool: about the top-left
#: corner, not the centre).
AffineFn = Callable[[np.ndarray, tuple[int, int]], Mapping[str, np.ndarray]]


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


@dataclass(frozen=True)
class Operation:
    """One auto-augment operation.

    ``ranges``: table name (``standard``, ``wide``) -> its magnitude range there (None: the
    operation takes no magnitude); absent from a table, the operation is not in it.
    ``defaults``: the policies whose default set includes it (``randaugment``,
    ``trivialaugment``); a user's operation is in none and is named in ``operations``.
    """

    name: str
    kind: int
    torch: TorchFn
    ranges: Mapping[str, Range | None] = field(default_factory=dict)
    affine: AffineFn | None = None
    defaults: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not 0 <= self.kind < len(KINDS):
            raise ValueError(f"operation {self.name}: kind {self.kind} is not one of {KINDS}")
        if (self.kind == AFFINE) != (self.affine is not None):
            raise ValueError(f"operation {self.name}: an affine kind needs affine arguments")


def _describe(operation: Operation) -> str:
    return f"the {KINDS[operation.kind]} operation whose torch call is {where(operation.torch)}"


#: Every registered operation, in registration order (its index is its ``op`` value).
REGISTRY: Registry[Operation] = Registry("auto-augment operation", _describe)


def register_operation(operation: Operation, *, replace: bool = False) -> Operation:
    """Make ``operation`` usable by name in ``operations`` lists; a name registers once
    (the same record again is accepted; another is refused unless ``replace=True``, which
    keeps the name's index)."""
    return REGISTRY.register(operation.name, operation, replace=replace)


# --------------------------------------------------------------------------- built-ins


def _affine(
    image: torch.Tensor,
    mode: F.InterpolationMode,
    fill: list[float] | None,
    *,
    angle: float = 0.0,
    translate: tuple[int, int] = (0, 0),
    shear: tuple[float, float] = (0.0, 0.0),
    center: list[int] | None = None,
) -> torch.Tensor:
    return F.affine(
        image,
        angle=angle,
        translate=list(translate),
        scale=1.0,
        shear=list(shear),
        interpolation=mode,
        fill=fill,
        center=center,
    )


def _shear_x(image: torch.Tensor, m: float, mode: Any, fill: Any) -> torch.Tensor:
    return _affine(image, mode, fill, shear=(math.degrees(math.atan(m)), 0.0), center=[0, 0])


def _shear_y(image: torch.Tensor, m: float, mode: Any, fill: Any) -> torch.Tensor:
    return _affine(image, mode, fill, shear=(0.0, math.degrees(math.atan(m))), center=[0, 0])


def _shear_deg(m: np.ndarray) -> np.ndarray:
    return np.degrees(np.arctan(m))


_ENHANCE = Range(0.0, 0.9, signed=True)
_WIDE_ENHANCE = Range(0.0, 0.99, signed=True)
_BOTH = ("randaugment", "trivialaugment")

for _record in (
    Operation(
        "Identity",
        IDENTITY,
        lambda x, m, mode, fill: x,
        {"standard": None, "wide": None},
        defaults=_BOTH,
    ),
    Operation(
        "ShearX",
        AFFINE,
        _shear_x,
        {"standard": Range(0.0, 0.3, True), "wide": Range(0.0, 0.99, True)},
        lambda m, size: {"shx": _shear_deg(m), "corner": np.ones(len(m), bool)},
        defaults=_BOTH,
    ),
    Operation(
        "ShearY",
        AFFINE,
        _shear_y,
        {"standard": Range(0.0, 0.3, True), "wide": Range(0.0, 0.99, True)},
        lambda m, size: {"shy": _shear_deg(m), "corner": np.ones(len(m), bool)},
        defaults=_BOTH,
    ),
    Operation(
        "TranslateX",
        AFFINE,
        lambda x, m, mode, fill: _affine(x, mode, fill, translate=(int(m), 0)),
        {"standard": Range(0.0, 150.0 / 331.0, True, "width"), "wide": Range(0.0, 32.0, True)},
        lambda m, size: {"tx": np.trunc(m)},
        defaults=_BOTH,
    ),
    Operation(
        "TranslateY",
        AFFINE,
        lambda x, m, mode, fill: _affine(x, mode, fill, translate=(0, int(m))),
        {"standard": Range(0.0, 150.0 / 331.0, True, "height"), "wide": Range(0.0, 32.0, True)},
        lambda m, size: {"ty": np.trunc(m)},
        defaults=_BOTH,
    ),
    Operation(
        "Rotate",
        AFFINE,
        lambda x, m, mode, fill: F.rotate(x, angle=m, interpolation=mode, fill=fill),
        {"standard": Range(0.0, 30.0, True), "wide": Range(0.0, 135.0, True)},
        lambda m, size: {"angle": -m},  # F.rotate passes -angle
        defaults=_BOTH,
    ),
    Operation(
        "Brightness",
        BRIGHTNESS,
        lambda x, m, mode, fill: F.adjust_brightness(x, 1.0 + m),
        {"standard": _ENHANCE, "wide": _WIDE_ENHANCE},
        defaults=_BOTH,
    ),
    Operation(
        "Color",
        COLOR,
        lambda x, m, mode, fill: F.adjust_saturation(x, 1.0 + m),
        {"standard": _ENHANCE, "wide": _WIDE_ENHANCE},
        defaults=_BOTH,
    ),
    Operation(
        "Contrast",
        CONTRAST,
        lambda x, m, mode, fill: F.adjust_contrast(x, 1.0 + m),
        {"standard": _ENHANCE, "wide": _WIDE_ENHANCE},
        defaults=_BOTH,
    ),
    Operation(
        "Sharpness",
        SHARPNESS,
        lambda x, m, mode, fill: F.adjust_sharpness(x, 1.0 + m),
        {"standard": _ENHANCE, "wide": _WIDE_ENHANCE},
        defaults=_BOTH,
    ),
    Operation(
        "Posterize",
        POSTERIZE,
        lambda x, m, mode, fill: F.posterize(x, bits=int(m)),
        {"standard": Range(bits=4), "wide": Range(bits=6)},
        defaults=_BOTH,
    ),
    Operation(
        "Solarize",
        SOLARIZE,
        lambda x, m, mode, fill: F.solarize(x, threshold=255.0 * m),
        {"standard": Range(1.0, 0.0), "wide": Range(1.0, 0.0)},
        defaults=_BOTH,
    ),
    Operation(
        "AutoContrast",
        AUTOCONTRAST,
        lambda x, m, mode, fill: F.autocontrast(x),
        {"standard": None, "wide": None},
        defaults=_BOTH,
    ),
    Operation(
        "Equalize",
        EQUALIZE,
        lambda x, m, mode, fill: F.equalize(x),
        {"standard": None, "wide": None},
        defaults=_BOTH,
    ),
    # AutoAugment's policies use Invert; torchvision's RandAugment does not.
    Operation("Invert", INVERT, lambda x, m, mode, fill: F.invert(x), {"standard": None}),
):
    register_operation(_record)
