"""SSD's photometric distortion: torchvision ``RandomPhotometricDistort(brightness, contrast,
saturation, hue, p)``.

Each of brightness, contrast, saturation and hue is applied with probability ``p``, a
factor (hue: a shift) drawn from its range; contrast comes before saturation and hue or
after them, a coin flip per sample; then, with probability ``p``, the channels are put in
a random order. The colour steps are colour jitter's (:mod:`.color_jitter`: the same
packed row, the same compiled CPU kernel and GPU arithmetic), a step a sample did not
draw naming the unchanged branch. The CPU kernel also writes the channels in their
order; the GPU's graph applies it as a 3x3 permutation matrix (DALI's ``coord_transform``).
It keeps every pixel in place, so boxes and masks pass through.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import torch

from dali_pipes.augment.base import Context, Op, Params, Row, register_op
from dali_pipes.augment.ops.color_jitter import FIELDS, jitter_steps, pack
from dali_pipes.augment.params import number, pair
from dali_pipes.errors import require

_PARTS = ("brightness", "contrast", "saturation", "hue")
#: The steps' order when contrast comes first, and when it comes last.
_BEFORE, _AFTER = (0, 1, 2, 3), (0, 2, 3, 1)
#: The branch a skipped step takes in the GPU's graph (after the four components).
_SKIP = 4


@register_op
@dataclass(frozen=True)
class PhotometricDistort(Op):
    """torchvision ``RandomPhotometricDistort(brightness, contrast, saturation, hue, p)``."""

    name = "photometric_distort"
    keeps_places = True
    previews = ({"p": 1.0},)
    brightness: Any = (0.875, 1.125)
    contrast: Any = (0.5, 1.5)
    saturation: Any = (0.5, 1.5)
    hue: Any = (-0.05, 0.05)
    p: float = 0.5

    def __post_init__(self) -> None:
        for part in _PARTS:
            lo, hi = pair(self, part)
            low, high = (-0.5, 0.5) if part == "hue" else (0.0, float("inf"))
            within = f"[{low}, {high}]" if part == "hue" else ">= 0"
            require(low <= lo and hi <= high, part, getattr(self, part), f"expected {within}")
        number(self, "p", 0.0, 1.0)

    @cached_property
    def ranges(self) -> tuple[tuple[float, float], ...]:
        """Each component's (low, high) range."""
        return tuple(getattr(self, part) for part in _PARTS)

    def draws(self) -> int:
        return 13  # 4 whether, 4 factors, contrast first, whether to permute, 3 for the order

    def sample(self, u: np.ndarray, ctx: Context) -> Params:
        n = len(u)
        params: Params = {}
        applied = u[:, 0:4] < self.p
        for i, (part, (lo, hi)) in enumerate(zip(_PARTS, self.ranges, strict=True)):
            factor = (lo + u[:, 4 + i] * (hi - lo)).astype(np.float32)
            params[part] = factor
            if part in ("contrast", "saturation"):  # torchvision: 1 - factor in double
                params[f"{part}_inv"] = (1.0 - factor.astype(np.float64)).astype(np.float32)
        before = u[:, 8] < 0.5
        order = np.where(before[:, None], _BEFORE, _AFTER)
        # a component not drawn takes the unchanged branch (_SKIP) at its place
        steps = np.where(np.take_along_axis(applied, order, 1), order, _SKIP).astype(np.int32)
        for k in range(4):
            params[f"at{k}"] = steps[:, k]
        params["apply"] = np.ones(n, bool)
        permute = u[:, 9] < self.p
        perm = np.argsort(u[:, 10:13], axis=1, kind="stable")
        perm = np.where(permute[:, None], perm, np.arange(3))
        params["permutation"] = perm.astype(np.int32)
        for c in range(3):
            params[f"perm{c}"] = perm[:, c]
        params["packed"] = pack(params, (False,) * 4)
        return params

    def torch(self, image: torch.Tensor, p: Row, ctx: Context) -> torch.Tensor:
        import torchvision.transforms.v2.functional as F

        for part in (int(p[f"at{k}"]) for k in range(4)):
            if part == _SKIP:
                continue
            factor = float(p[_PARTS[part]])
            if part == 0:
                image = F.adjust_brightness(image, factor)
            elif part == 1:
                image = F.adjust_contrast(image, factor)
            elif part == 2:
                image = F.adjust_saturation(image, factor)
            else:
                image = F.adjust_hue(image, factor)
        perm = [int(c) for c in p["permutation"]]
        if perm != [0, 1, 2]:
            image = F.permute_channels(image, perm)
        return image

    def dali(self, images: Any, p: Mapping[str, Any], ctx: Context) -> Any:
        packed = p["packed"]
        if not ctx.gpu_graph:  # one compiled kernel per sample, the channel order included
            from dali_pipes.augment.ops import cpu_kernels

            return cpu_kernels.jitter(images, packed)
        from nvidia.dali import fn, types

        images = jitter_steps(images, packed, ctx, (False,) * 4, unchanged=_SKIP)
        first = FIELDS.index("perm0")
        order = fn.cast(packed[first : first + 3], dtype=types.INT32)
        # row c of the matrix picks input channel perm<c>
        return fn.coord_transform(images, M=fn.one_hot(order, num_classes=3, dtype=types.FLOAT))

    def needs_conditionals(self, gpu: bool) -> bool:
        """The GPU's realisation picks each step per sample with conditionals; the CPU's
        kernel reads them from the packed row."""
        return gpu

    def dali_params(self, names: tuple[str, ...]) -> tuple[str, ...]:
        return ("packed",)

    def torchvision(self) -> Any:
        from torchvision.transforms import v2

        return v2.RandomPhotometricDistort(
            self.brightness, self.contrast, self.saturation, self.hue, self.p
        )
