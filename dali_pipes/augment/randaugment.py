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
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from dali_pipes.augment import auto
from dali_pipes.augment.base import Context, Op, Params, Row, number, register_op
from dali_pipes.draws import choice, normal
from dali_pipes.errors import require

#: torchvision's RandAugment operations (AutoAugment's table without Invert).
OPERATIONS = tuple(name for name in auto.STANDARD if name != "Invert")


@register_op
@dataclass(frozen=True)
class RandAugment(Op):
    """``num_ops`` random operations at ``magnitude`` (of ``num_magnitude_bins``).

    ``operations`` narrows the choice (names as torchvision's, e.g. ``[Rotate, ShearX]``);
    null is torchvision's 14.
    """

    name = "randaugment"
    num_ops: int = 2
    magnitude: float = 9
    num_magnitude_bins: int = 31
    mstd: float = 0.0
    interpolation: str = "nearest"
    fill: int = 0
    operations: Any = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "operations", auto.operations(self, OPERATIONS))
        number(self, "num_ops", 0, integer=True)
        bins = number(self, "num_magnitude_bins", 2, integer=True)
        number(self, "magnitude", 0, bins - 1)
        number(self, "mstd", 0)
        number(self, "fill", 0, 255, integer=True)
        require(
            self.interpolation in auto.INTERPOLATIONS,
            "interpolation",
            self.interpolation,
            f"choose one of {auto.INTERPOLATIONS}",
        )

    def draws(self) -> int:
        return 4 * self.num_ops  # operation, sign, two for the magnitude noise

    def sample(self, u: np.ndarray, ctx: Context) -> Params:
        params: Params = {}
        top = self.num_magnitude_bins - 1
        table = {name: auto.STANDARD[name] for name in self.operations}
        indices = np.array([auto.OP_INDEX[name] for name in self.operations])
        for k in range(self.num_ops):
            slot = u[:, 4 * k : 4 * k + 4]
            ops = indices[choice(slot[:, 0], len(indices))]
            m = np.full(len(u), float(self.magnitude))
            if math.isinf(self.mstd):
                m = slot[:, 2] * m
            elif self.mstd > 0:
                m = m + self.mstd * normal(slot[:, 2], slot[:, 3])
            m = np.clip(m, 0.0, top)
            mags = auto.magnitudes(table, ops, m, slot[:, 1] <= 0.5, top + 1, ctx.size)
            params.update(auto.slot_params(f"{k}.", ops, mags, ctx.size))
        return params

    def torch(self, image: torch.Tensor, p: Row, ctx: Context) -> torch.Tensor:
        for k in range(self.num_ops):
            image = auto.torch_slot(image, p, f"{k}.", self.interpolation, self.fill)
        return image

    def dali(self, images: Any, p: Mapping[str, Any], ctx: Context) -> Any:
        kinds = auto.kinds_of(self.operations)
        for k in range(self.num_ops):
            images = auto.dali_slot(images, p, f"{k}.", kinds, self.interpolation, self.fill, ctx)
        return images

    def dali_params(self, names: tuple[str, ...]) -> tuple[str, ...]:
        return auto.dali_params(names, auto.kinds_of(self.operations))

    def torchvision(self) -> Any:
        from torchvision.transforms import v2

        if self.operations != OPERATIONS:
            raise NotImplementedError("torchvision's RandAugment cannot narrow its operations")
        return v2.RandAugment(
            self.num_ops,
            round(self.magnitude),
            self.num_magnitude_bins,
            interpolation=v2.InterpolationMode(self.interpolation),
            fill=None if self.fill == 0 else self.fill,
        )
