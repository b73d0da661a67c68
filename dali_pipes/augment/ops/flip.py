"""Horizontal flip with probability ``p`` (torchvision ``RandomHorizontalFlip``), and what
every flip shares (:class:`Flip`; the vertical one is :mod:`.vflip`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from torch import Tensor

from dali_pipes.augment.base import Context, Op, Params, Row, register_op
from dali_pipes.augment.params import number
from dali_pipes.augment.targets.boxes import Boxes, flipped


@dataclass(frozen=True)
class Flip(Op):
    """Mirror the image when the sample's draw is below ``p``: left-right when
    ``horizontal``, else top-bottom."""

    horizontal: ClassVar[bool] = True
    p_gates_all = True
    p: float = 0.5

    def __post_init__(self) -> None:
        number(self, "p", 0.0, 1.0)

    def draws(self) -> int:
        return 1

    def sample(self, u: np.ndarray, ctx: Context) -> Params:
        return {"flip": (u[:, 0] < self.p).astype(np.int32)}

    def torch(self, image: torch.Tensor, p: Row, ctx: Context) -> torch.Tensor:
        import torchvision.transforms.v2.functional as F

        if not p["flip"]:
            return image
        return F.horizontal_flip(image) if self.horizontal else F.vertical_flip(image)

    def dali(self, images: Any, p: Mapping[str, Any], ctx: Context) -> Any:
        from nvidia.dali import fn

        if self.horizontal:
            return fn.flip(images, horizontal=p["flip"], vertical=0)
        return fn.flip(images, horizontal=0, vertical=p["flip"])

    def needs_conditionals(self, gpu: bool) -> bool:
        return False  # the flag is an argument of fn.flip (or crop_mirror_normalize)

    def moves_targets(self) -> bool:
        return True

    def move_boxes(self, boxes: Boxes, params: Params, ctx: Context) -> Boxes:
        return flipped(boxes, params["flip"], ctx.shapes(boxes.count), self.horizontal)

    def move_mask_torch(self, mask: Tensor, p: Row, ctx: Context) -> Tensor:
        return self.torch(mask, p, ctx)  # a flip moves a mask's pixels as an image's

    def move_masks_dali(self, masks: Any, p: Mapping[str, Any], ctx: Context) -> Any:
        return self.dali(masks, p, ctx)


@register_op
@dataclass(frozen=True)
class HorizontalFlip(Flip):
    """Mirror left-right when the sample's draw is below ``p``.

    When only pointwise ops follow it, the DALI backend fuses the flip into
    ``crop_mirror_normalize`` (the same pixels, one pass fewer).
    """

    name = "hflip"

    def torchvision(self) -> Any:
        from torchvision.transforms import v2

        return v2.RandomHorizontalFlip(self.p)
