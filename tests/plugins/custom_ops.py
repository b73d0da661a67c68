"""An augmentation op defined outside the package, the way a user adds one.

Importing this module registers ``random_invert``; a config names the module in
``augment.imports`` and the op in ``augment.train.ops``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torchvision.transforms.v2.functional as F

from dali_pipes.augment import Context, Op, Params, Row, register_op
from dali_pipes.errors import ConfigError


@register_op
@dataclass(frozen=True)
class RandomInvert(Op):
    """Invert the colours with probability ``p`` (torchvision ``RandomInvert``)."""

    name = "random_invert"
    pointwise = True
    p: float = 0.5

    def __post_init__(self) -> None:
        if not 0.0 <= self.p <= 1.0:
            raise ConfigError(f"p={self.p!r} is invalid: need 0..1")

    def draws(self) -> int:
        return 1  # one uniform per sample, from the (seed, epoch, sample) hash

    def sample(self, u: np.ndarray, ctx: Context) -> Params:
        return {"invert": u[:, 0] < self.p}

    def torch(self, image: torch.Tensor, p: Row, ctx: Context) -> torch.Tensor:
        return F.invert(image) if p["invert"] else image

    def dali(self, images: Any, p: Mapping[str, Any], ctx: Context) -> Any:
        if p["invert"]:  # a DALI conditional on the fed flag
            images = 255.0 - images  # float32 pixels in [0, 255] in and out
        return images

    def torchvision(self) -> Any:
        from torchvision.transforms import v2

        return v2.RandomInvert(self.p)
