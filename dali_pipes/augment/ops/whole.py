"""Each image whole, at the size it was decoded at: no crop and no resize.

torchvision's detection references hand their models images as they are (the ``hflip``
preset has no resize; the evaluation preset neither) and let the model resize them
(``GeneralizedRCNNTransform``). This is that head of a pipeline: a torchvision pipeline
without a resize or crop maps to it. The images of a batch are then a list of ``[3, H, W]``
tensors (:meth:`~dali_pipes.augment.base.CropOp.varies_in_size`); ``pad_multiple`` pads each
at the bottom and right up to a multiple of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dali_pipes.augment.base import CropOp, register_op
from dali_pipes.augment.geometry import Geometry
from dali_pipes.augment.params import fill_of, number, rgb

#: The nominal output side (the size a preview or a bench reports; images keep theirs).
NOMINAL = 512


@register_op
@dataclass(frozen=True)
class Whole(CropOp):
    """The whole decoded image, unresized (torchvision: no geometry transform at all)."""

    name = "whole"
    pad_multiple: int = 0
    fill: Any = 0

    def __post_init__(self) -> None:
        number(self, "pad_multiple", 0, integer=True)
        fill_of(self, "fill")

    @property
    def size(self) -> int:  # type: ignore[override]
        """A nominal side: each image keeps its own (:meth:`varies_in_size`)."""
        return NOMINAL

    def varies_in_size(self) -> bool:
        return True

    def pad_fill(self) -> tuple[int, int, int] | None:
        return rgb(self.fill) if self.pad_multiple > 1 else None

    def draws(self) -> int:
        return 0

    def plan(self, sizes: np.ndarray, u: np.ndarray, epoch: int) -> Geometry:
        n = len(sizes)
        own = np.asarray(sizes, np.int64).reshape(n, 2)
        window = np.zeros((n, 4), np.int64)
        window[:, 2], window[:, 3] = own[:, 1], own[:, 0]
        outs = own if self.pad_multiple <= 1 else -(-own // self.pad_multiple) * self.pad_multiple
        out = (int(outs[:, 0].max()), int(outs[:, 1].max())) if n else self.shape_at(epoch)
        return Geometry(
            window=window,
            resize=own.copy(),
            crop=np.zeros((n, 2), np.int64),
            out=out,
            fill=self.pad_fill(),
            interpolation=self.interpolation,
            outs=np.ascontiguousarray(outs, dtype=np.int64),
        )

    def torchvision(self) -> Any:
        from torchvision.transforms import v2

        return v2.Identity()
