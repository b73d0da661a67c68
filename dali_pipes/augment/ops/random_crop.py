"""Random crop after an optional resize: torchvision ``[Resize(resize)], RandomCrop(size,
padding, pad_if_needed, fill)`` (constant padding).

Without a resize the window is the crop itself, in the decoded image, and may reach past
its edge by the padding: those pixels are ``fill``, as torchvision pads (CIFAR's
``RandomCrop(32, padding=4)``). ``padding`` is torchvision's: one number for every side,
``[left/right, top/bottom]`` or ``[left, top, right, bottom]``. With ``pad_if_needed`` a
side still shorter than the crop is padded by the difference at both ends. After a resize
(the shorter side, an int, or ``[height, width]``) the crop lies inside the resized image
and there is no padding. The corner is uniform over the padded image, as torchvision's
``RandomCrop.get_params`` draws it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dali_pipes.augment.base import CropOp, register_op
from dali_pipes.augment.geometry import Geometry, padding_used, plan_random_crop
from dali_pipes.augment.ops.center_crop import check_fits
from dali_pipes.augment.params import fill_of, rgb, shape_of, side_or_shape
from dali_pipes.errors import require


def ltrb(value: Any) -> tuple[int, int, int, int] | None:
    """torchvision's padding forms as (left, top, right, bottom); None if malformed."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, Sequence) or isinstance(value, str) or len(value) not in (1, 2, 4):
        return None
    if not all(
        isinstance(v, int | float) and not isinstance(v, bool) and float(v).is_integer() and v >= 0
        for v in value
    ):
        return None
    sides = [int(v) for v in value]
    if len(sides) == 1:
        return (sides[0], sides[0], sides[0], sides[0])
    if len(sides) == 2:
        return (sides[0], sides[1], sides[0], sides[1])
    return (sides[0], sides[1], sides[2], sides[3])


@register_op
@dataclass(frozen=True)
class RandomCrop(CropOp):
    """torchvision ``Resize(resize, interpolation)`` (null: none) then ``RandomCrop(size, padding,
    pad_if_needed, fill)``."""

    name = "random_crop"
    size: Any = 224
    resize: Any = None
    interpolation: str = "bilinear"
    padding: Any = 0
    pad_if_needed: bool = False
    fill: Any = 0

    def __post_init__(self) -> None:
        shape = shape_of(side_or_shape(self, "size"))  # type: ignore[arg-type]
        side_or_shape(self, "resize", optional=True)
        self.check_interpolation()
        sides = ltrb(self.padding)
        require(
            sides is not None,
            "padding",
            self.padding,
            "expected whole pixels >= 0: one number, [left/right, top/bottom] or "
            "[left, top, right, bottom]",
        )
        object.__setattr__(self, "padding", sides)
        require(
            isinstance(self.pad_if_needed, bool), "pad_if_needed", self.pad_if_needed, "true|false"
        )
        fill_of(self, "fill")
        if self.resize is not None:
            require(
                not padding_used(self.padding, self.pad_if_needed),
                "padding",
                self.padding,
                "is not supported after a resize (pad_if_needed neither): crop within it",
            )
        check_fits(self, shape)

    def size_at(self, epoch: int) -> int:
        """The output's height (:meth:`shape_at` has both sides)."""
        return self.shape_at(epoch)[0]

    def shape_at(self, epoch: int) -> tuple[int, int]:
        return shape_of(self.size)

    def draws(self) -> int:
        return 2  # top, left

    @property
    def fill_rgb(self) -> tuple[int, int, int]:
        """``fill`` as one grey level per RGB channel."""
        return rgb(self.fill)

    def plan(self, sizes: np.ndarray, u: np.ndarray, epoch: int) -> Geometry:
        geometry = plan_random_crop(
            sizes,
            u,
            self.resize,
            shape_of(self.size),
            self.padding,
            self.pad_if_needed,
            self.fill_rgb,
        )
        return self.resampled(geometry)

    def pad_fill(self) -> tuple[int, int, int] | None:
        return self.fill_rgb if padding_used(self.padding, self.pad_if_needed) else None

    def torchvision(self) -> Any:
        from torchvision.transforms import v2

        crop = v2.RandomCrop(self.size, list(self.padding), self.pad_if_needed, self.fill)
        if self.resize is None:
            return crop
        return v2.Compose([self.resize_transform(self.resize), crop])
