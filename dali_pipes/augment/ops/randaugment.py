"""RandAugment: ``num_ops`` operations, each picked uniformly, at one magnitude.

torchvision's ``RandAugment(num_ops, magnitude, num_magnitude_bins, interpolation, fill)``
semantics (its operation set and magnitude table), plus timm's magnitude noise: with
``mstd > 0`` each application draws its magnitude from N(magnitude, mstd) (``inf``: uniform
in [0, magnitude]) and clips it to [0, num_magnitude_bins - 1]. ``mstd=0`` is torchvision's
transform exactly. Note the scale: torchvision's magnitude 9 of 31 bins is about a third
of timm's ``m9`` (of 10); ``num_magnitude_bins=11`` gives timm's scale.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dali_pipes.augment.auto import slots as auto
from dali_pipes.augment.base import Context, Params, register_op
from dali_pipes.augment.keyed import choice, normal
from dali_pipes.augment.params import number

#: torchvision's RandAugment operations (AutoAugment's table without Invert).
OPERATIONS = auto.defaults("randaugment", "standard")


@register_op
@dataclass(frozen=True)
class RandAugment(auto.SlotOp):
    """``num_ops`` random operations at ``magnitude`` (of ``num_magnitude_bins``).

    ``operations`` narrows the choice (names as torchvision's, e.g. ``[Rotate, ShearX]``) or
    names operations registered outside the package; null is torchvision's 14.
    """

    name = "randaugment"
    previews = ({"magnitude": 5}, {"magnitude": 15}, {"magnitude": 28})
    num_ops: int = 2
    magnitude: float = 9
    num_magnitude_bins: int = 31
    mstd: float = 0.0
    interpolation: str = "nearest"
    fill: int = 0
    operations: Any = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "operations", auto.operations(self, OPERATIONS, "standard"))
        number(self, "num_ops", 0, integer=True)
        bins = number(self, "num_magnitude_bins", 2, integer=True)
        number(self, "magnitude", 0, bins - 1)
        number(self, "mstd", 0)
        self.check_warp()

    def prefixes(self) -> list[str]:
        return [f"{k}." for k in range(self.num_ops)]

    def kinds(self) -> tuple[int, ...]:
        return auto.kinds_of(self.operations)

    def draws(self) -> int:
        return 4 * self.num_ops  # operation, sign, two for the magnitude noise

    def sample(self, u: np.ndarray, ctx: Context) -> Params:
        params: Params = {}
        top = self.num_magnitude_bins - 1
        standard = auto.table("standard")
        ranges = {name: standard[name] for name in self.operations}
        indices = np.array([auto.index(name) for name in self.operations])
        for k, prefix in enumerate(self.prefixes()):
            slot = u[:, 4 * k : 4 * k + 4]
            ops = indices[choice(slot[:, 0], len(indices))]
            m = np.full(len(u), float(self.magnitude))
            if math.isinf(self.mstd):
                m = slot[:, 2] * m
            elif self.mstd > 0:
                m = m + self.mstd * normal(slot[:, 2], slot[:, 3])
            m = np.clip(m, 0.0, top)
            mags = auto.magnitudes(ranges, ops, m, slot[:, 1] <= 0.5, top + 1, ctx.size)
            params.update(
                auto.slot_params(prefix, ops, mags, ctx.size, self.interpolation, self.fill)
            )
        return params

    def torchvision(self) -> Any:
        from torchvision.transforms import v2

        if self.operations != OPERATIONS:
            raise NotImplementedError("torchvision's RandAugment cannot narrow its operations")
        return v2.RandAugment(
            self.num_ops, round(self.magnitude), self.num_magnitude_bins, **self.warp_options()
        )
