"""Vertical flip with probability ``p`` (torchvision ``RandomVerticalFlip``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from dali_pipes.augment.base import Context, Op, Params, Row, number, register_op


@register_op
@dataclass(frozen=True)
class VerticalFlip(Op):
    """Mirror top-bottom when the sample's draw is below ``p``."""

    name = "vflip"
    p: float = 0.5

    def __post_init__(self) -> None:
        number(self, "p", 0.0, 1.0)

    def draws(self) -> int:
        return 1

    def sample(self, u: np.ndarray, ctx: Context) -> Params:
        return {"flip": (u[:, 0] < self.p).astype(np.int32)}

    def torch(self, image: torch.Tensor, p: Row, ctx: Context) -> torch.Tensor:
        import torchvision.transforms.v2.functional as F

        return F.vertical_flip(image) if p["flip"] else image

    def dali(self, images: Any, p: Mapping[str, Any], ctx: Context) -> Any:
        from nvidia.dali import fn

        return fn.flip(images, horizontal=0, vertical=p["flip"])

    def needs_conditionals(self, gpu: bool) -> bool:
        return False  # the flag is an argument of fn.flip

    def torchvision(self) -> Any:
        from torchvision.transforms import v2

        return v2.RandomVerticalFlip(self.p)
