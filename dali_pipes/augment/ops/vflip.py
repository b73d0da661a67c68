"""Vertical flip with probability ``p`` (torchvision ``RandomVerticalFlip``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dali_pipes.augment.base import register_op
from dali_pipes.augment.ops.flip import Flip


@register_op
@dataclass(frozen=True)
class VerticalFlip(Flip):
    """Mirror top-bottom when the sample's draw is below ``p`` (never fused: DALI's
    ``crop_mirror_normalize`` mirrors left-right only)."""

    name = "vflip"
    horizontal = False

    def torchvision(self) -> Any:
        from torchvision.transforms import v2

        return v2.RandomVerticalFlip(self.p)
