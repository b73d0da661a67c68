"""TrivialAugmentWide: one operation at a random magnitude (torchvision's semantics)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dali_pipes.augment.auto import slots as auto
from dali_pipes.augment.base import Context, Params, register_op
from dali_pipes.augment.keyed import choice
from dali_pipes.augment.params import number

#: torchvision's TrivialAugmentWide operations.
OPERATIONS = auto.defaults("trivialaugment", "wide")


@register_op
@dataclass(frozen=True)
class TrivialAugment(auto.SlotOp):
    """torchvision ``TrivialAugmentWide(num_magnitude_bins, interpolation, fill)``;
    ``operations`` narrows the choice (null: torchvision's 14)."""

    name = "trivialaugment"
    num_magnitude_bins: int = 31
    interpolation: str = "nearest"
    fill: int = 0
    operations: Any = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "operations", auto.operations(self, OPERATIONS, "wide"))
        number(self, "num_magnitude_bins", 2, integer=True)
        self.check_warp()

    def kinds(self) -> tuple[int, ...]:
        return auto.kinds_of(self.operations)

    def draws(self) -> int:
        return 3  # operation, magnitude bin, sign

    def sample(self, u: np.ndarray, ctx: Context) -> Params:
        bins = self.num_magnitude_bins
        indices = np.array([auto.index(name) for name in self.operations])
        ops = indices[choice(u[:, 0], len(indices))]
        m = choice(u[:, 1], bins).astype(np.float64)
        mags = auto.magnitudes(auto.table("wide"), ops, m, u[:, 2] <= 0.5, bins, ctx.size)
        return auto.slot_params("", ops, mags, ctx.size, self.interpolation, self.fill)

    def torchvision(self) -> Any:
        from torchvision.transforms import v2

        if self.operations != OPERATIONS:
            raise NotImplementedError("torchvision's TrivialAugmentWide has no operation subset")
        return v2.TrivialAugmentWide(self.num_magnitude_bins, **self.warp_options())
