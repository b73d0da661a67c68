"""Centre crop after an optional resize: torchvision ``[Resize(resize)], CenterCrop(size)``.

``resize`` is the shorter side (an int, torchvision's ``Resize(int)``), a fixed
``[height, width]``, or null (no resize: the centre of the decoded image, a side shorter
than the crop padded with zeros as torchvision's ``CenterCrop`` pads it). ``size`` is one
side or ``[height, width]``; a fixed ``resize`` equal to ``size`` is ``Resize((h, w))``
alone. The ImageNet evaluation recipe (square, shorter side) is
:class:`~dali_pipes.augment.ops.crop.ResizeCenterCrop`; this op covers the other forms a
torchvision script writes. Both are decode-fused: one resize of the decoded window.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dali_pipes.augment.base import CropOp, register_op
from dali_pipes.augment.geometry import Geometry, plan_center_crop
from dali_pipes.augment.params import shape_of, side_or_shape
from dali_pipes.errors import require


def check_fits(op: Any, shape: tuple[int, int]) -> None:
    """A crop of ``shape`` must fit in the op's ``resize`` (torchvision would pad the
    resized image, which the decode-fused crop does not do)."""
    resize = op.resize
    if resize is None:
        return
    least = (resize, resize) if isinstance(resize, int) else resize
    require(
        shape[0] <= least[0] and shape[1] <= least[1],
        "resize",
        resize,
        f"must be at least the crop's {shape[0]}x{shape[1]} (padding a resized image "
        "is not supported)",
    )


@register_op
@dataclass(frozen=True)
class CenterCrop(CropOp):
    """torchvision ``Resize(resize, interpolation)`` (null: none) then ``CenterCrop(size)``."""

    name = "center_crop"
    size: Any = 224
    resize: Any = None
    interpolation: str = "bilinear"

    def __post_init__(self) -> None:
        shape = shape_of(side_or_shape(self, "size"))  # type: ignore[arg-type]
        side_or_shape(self, "resize", optional=True)
        self.check_interpolation()
        check_fits(self, shape)

    def size_at(self, epoch: int) -> int:
        """The output's height (:meth:`shape_at` has both sides)."""
        return self.shape_at(epoch)[0]

    def shape_at(self, epoch: int) -> tuple[int, int]:
        return shape_of(self.size)

    def plan(self, sizes: np.ndarray, u: np.ndarray, epoch: int) -> Geometry:
        return self.resampled(plan_center_crop(sizes, self.resize, shape_of(self.size)))

    def pad_fill(self) -> tuple[int, int, int] | None:
        return (0, 0, 0) if self.resize is None else None

    def torchvision(self) -> Any:
        from torchvision.transforms import v2

        crop = v2.CenterCrop(self.size)
        if self.resize is None:
            return crop
        return v2.Compose([self.resize_transform(self.resize), crop])
