"""Random grayscale with probability ``p`` (torchvision ``RandomGrayscale``): DALI arithmetic
picked by a conditional on the GPU, a compiled kernel per sample on the CPU
(:mod:`~dali_pipes.augment.ops.cpu_kernels`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from dali_pipes.augment import dali_ops
from dali_pipes.augment.base import Context, Op, Params, Row, register_op
from dali_pipes.augment.params import number


@register_op
@dataclass(frozen=True)
class Grayscale(Op):
    """Replace the image by its luma in all three channels when the draw is below ``p``."""

    name = "grayscale"
    pointwise = True
    p_gates_all = True
    graph_params: ClassVar[Mapping[str, Any]] = {"p": 0.2}
    p: float = 0.1

    def __post_init__(self) -> None:
        number(self, "p", 0.0, 1.0)

    def draws(self) -> int:
        return 1

    def sample(self, u: np.ndarray, ctx: Context) -> Params:
        gray = u[:, 0] < self.p
        return {"gray": gray, "packed": gray.astype(np.float64)[:, None]}

    def torch(self, image: torch.Tensor, p: Row, ctx: Context) -> torch.Tensor:
        import torchvision.transforms.v2.functional as F

        return F.rgb_to_grayscale(image, num_output_channels=3) if p["gray"] else image

    def dali(self, images: Any, p: Mapping[str, Any], ctx: Context) -> Any:
        packed = p["packed"]
        if not ctx.gpu_graph:  # one compiled kernel per sample (imports numba: CPU only)
            from dali_pipes.augment.ops import cpu_kernels

            return cpu_kernels.grayscale(images, packed)
        if packed[0] > 0.5:
            images = dali_ops.grayscale(images, ctx)
        return images

    def needs_conditionals(self, gpu: bool) -> bool:
        return gpu  # the GPU's realisation branches; the CPU's kernel reads the row

    def dali_params(self, names: tuple[str, ...]) -> tuple[str, ...]:
        return ("packed",)  # ``gray`` as the one-number row both realisations read

    def torchvision(self) -> Any:
        from torchvision.transforms import v2

        return v2.RandomGrayscale(self.p)
