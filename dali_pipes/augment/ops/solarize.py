"""Random solarisation with probability ``p`` (torchvision ``RandomSolarize``).

``F.solarize(image, threshold)`` inverts every value at or above ``threshold`` (uint8
levels: 128 inverts the upper half, as PIL's ``ImageOps.solarize`` and the BYOL/DINO
recipes do). The draw is turned into a per-sample threshold before it is fed, the
configured one when the sample is solarised and 256 (which no value reaches) when it is
not, so the DALI graph is one arithmetic expression with no conditional.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from dali_pipes.augment import dali_ops
from dali_pipes.augment.base import Context, Op, Params, Row, register_op
from dali_pipes.augment.params import number

#: The threshold a sample that is not solarised is fed: above every uint8 value.
NEVER = 256.0


@register_op
@dataclass(frozen=True)
class Solarize(Op):
    """Invert the values ``>= threshold`` when the sample's draw is below ``p``."""

    name = "solarize"
    pointwise = True
    previews = ({"threshold": 192}, {"threshold": 128}, {"threshold": 64})
    p_gates_all = True
    threshold: float = 128.0
    p: float = 0.5

    def __post_init__(self) -> None:
        number(self, "threshold", 0.0, 255.0)
        number(self, "p", 0.0, 1.0)

    def draws(self) -> int:
        return 1

    def sample(self, u: np.ndarray, ctx: Context) -> Params:
        apply = u[:, 0] < self.p
        threshold = np.where(apply, np.float32(self.threshold), np.float32(NEVER))
        return {"apply": apply, "threshold": threshold.astype(np.float32)}

    def torch(self, image: torch.Tensor, p: Row, ctx: Context) -> torch.Tensor:
        import torchvision.transforms.v2.functional as F

        return F.solarize(image, threshold=self.threshold) if p["apply"] else image

    def dali(self, images: Any, p: Mapping[str, Any], ctx: Context) -> Any:
        return dali_ops.solarize(images, ctx.operand(p["threshold"]))

    def needs_conditionals(self, gpu: bool) -> bool:
        return False  # a sample left alone is fed a threshold no value reaches

    def dali_params(self, names: tuple[str, ...]) -> tuple[str, ...]:
        return ("threshold",)

    def torchvision(self) -> Any:
        from torchvision.transforms import v2

        return v2.RandomSolarize(self.threshold, p=self.p)
