"""TrivialAugmentWide: one operation at a random magnitude (torchvision's semantics)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from dali_pipes.augment import auto
from dali_pipes.augment.base import Context, Op, Params, Row, number, register_op
from dali_pipes.draws import choice
from dali_pipes.errors import require

#: torchvision's TrivialAugmentWide operations.
OPERATIONS = tuple(auto.WIDE)


@register_op
@dataclass(frozen=True)
class TrivialAugment(Op):
    """torchvision ``TrivialAugmentWide(num_magnitude_bins, interpolation, fill)``;
    ``operations`` narrows the choice (null: torchvision's 14)."""

    name = "trivialaugment"
    num_magnitude_bins: int = 31
    interpolation: str = "nearest"
    fill: int = 0
    operations: Any = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "operations", auto.operations(self, OPERATIONS))
        number(self, "num_magnitude_bins", 2, integer=True)
        number(self, "fill", 0, 255, integer=True)
        require(
            self.interpolation in auto.INTERPOLATIONS,
            "interpolation",
            self.interpolation,
            f"choose one of {auto.INTERPOLATIONS}",
        )

    def draws(self) -> int:
        return 3  # operation, magnitude bin, sign

    def sample(self, u: np.ndarray, ctx: Context) -> Params:
        bins = self.num_magnitude_bins
        indices = np.array([auto.OP_INDEX[name] for name in self.operations])
        ops = indices[choice(u[:, 0], len(indices))]
        m = choice(u[:, 1], bins).astype(np.float64)
        mags = auto.magnitudes(auto.WIDE, ops, m, u[:, 2] <= 0.5, bins, ctx.size)
        return auto.slot_params("", ops, mags, ctx.size)

    def torch(self, image: torch.Tensor, p: Row, ctx: Context) -> torch.Tensor:
        return auto.torch_slot(image, p, "", self.interpolation, self.fill)

    def dali(self, images: Any, p: Mapping[str, Any], ctx: Context) -> Any:
        kinds = auto.kinds_of(self.operations)
        return auto.dali_slot(images, p, "", kinds, self.interpolation, self.fill, ctx)

    def dali_params(self, names: tuple[str, ...]) -> tuple[str, ...]:
        return auto.dali_params(names, auto.kinds_of(self.operations))

    def torchvision(self) -> Any:
        from torchvision.transforms import v2

        if self.operations != OPERATIONS:
            raise NotImplementedError("torchvision's TrivialAugmentWide has no operation subset")
        return v2.TrivialAugmentWide(
            self.num_magnitude_bins,
            interpolation=v2.InterpolationMode(self.interpolation),
            fill=None if self.fill == 0 else self.fill,
        )
