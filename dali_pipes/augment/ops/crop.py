"""The decode-fused crops: random-resized-crop and resize + centre crop.

Each plans a :class:`~dali_pipes.augment.geometry.Geometry` (the math is torchvision's, in
:mod:`dali_pipes.augment.geometry`); the DALI backend realises it by decoding only the window and
resizing it, the torch backend with :func:`dali_pipes.augment.geometry_torch.apply_geometry`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dali_pipes.augment.base import CropOp, register_op
from dali_pipes.augment.geometry import (
    ATTEMPTS,
    Geometry,
    plan_random_resized_crop,
    plan_resize_center_crop,
)
from dali_pipes.augment.params import number, pair
from dali_pipes.errors import require


@register_op
@dataclass(frozen=True)
class RandomResizedCrop(CropOp):
    """torchvision ``RandomResizedCrop(size, scale, ratio, interpolation)``, antialiased;
    ``interpolation`` bilinear (the default) or bicubic (DINO's crops).

    With ``start_size`` set, the output size follows FFCV's progressive-resizing schedule:
    ``start_size`` up to epoch ``start_ramp``, ``size`` from epoch ``end_ramp`` on, and in
    between the linear interpolation rounded to a multiple of ``size_multiple``. The
    backends take each epoch's size as data (DALI is fed it), so nothing is rebuilt.
    """

    name = "random_resized_crop"
    size: int = 224
    scale: Any = (0.08, 1.0)
    ratio: Any = (3.0 / 4.0, 4.0 / 3.0)
    start_size: int | None = None
    start_ramp: int = 0
    end_ramp: int = 0
    size_multiple: int = 32
    interpolation: str = "bilinear"

    def __post_init__(self) -> None:
        number(self, "size", 1, integer=True)
        self.check_interpolation()
        lo, hi = pair(self, "scale")
        require(0 < lo <= hi <= 1, "scale", self.scale, "need 0 < low <= high <= 1")
        lo, hi = pair(self, "ratio")
        require(0 < lo <= hi, "ratio", self.ratio, "need 0 < low <= high")
        multiple = number(self, "size_multiple", 1, integer=True)
        start = number(self, "start_ramp", 0, integer=True)
        number(self, "end_ramp", int(start), integer=True)
        if self.start_size is not None:
            number(self, "start_size", int(multiple), integer=True)

    def size_at(self, epoch: int) -> int:
        """FFCV's ``get_resolution``: the ramp's size at ``epoch``."""
        if self.start_size is None or epoch >= self.end_ramp:
            return self.size
        if epoch <= self.start_ramp:
            return self.start_size
        size = np.interp(epoch, [self.start_ramp, self.end_ramp], [self.start_size, self.size])
        return int(np.round(size / self.size_multiple)) * self.size_multiple

    def draws(self) -> int:
        return 4 * ATTEMPTS

    def plan(self, sizes: np.ndarray, u: np.ndarray, epoch: int) -> Geometry:
        size = self.size_at(epoch)
        return self.resampled(plan_random_resized_crop(sizes, u, size, self.scale, self.ratio))

    def torchvision(self) -> Any:
        from torchvision.transforms import v2

        mode = v2.InterpolationMode(self.interpolation)
        return v2.RandomResizedCrop(
            self.size, self.scale, self.ratio, interpolation=mode, antialias=True
        )


@register_op
@dataclass(frozen=True)
class ResizeCenterCrop(CropOp):
    """torchvision ``Resize(resize, interpolation)`` of the shorter side, then
    ``CenterCrop(size)``."""

    name = "resize_center_crop"
    size: int = 224
    resize: int = 256
    interpolation: str = "bilinear"

    def __post_init__(self) -> None:
        number(self, "size", 1, integer=True)
        self.check_interpolation()
        number(self, "resize", 1, integer=True)
        require(
            self.resize >= self.size,
            "resize",
            self.resize,
            f"must be >= size ({self.size}) so the centre crop fits",
        )

    def plan(self, sizes: np.ndarray, u: np.ndarray, epoch: int) -> Geometry:
        return self.resampled(plan_resize_center_crop(sizes, self.resize, self.size))

    def torchvision(self) -> Any:
        from torchvision.transforms import v2

        return v2.Compose([self.resize_transform(self.resize), v2.CenterCrop(self.size)])
