"""Gaussian blur with a random sigma (torchvision ``GaussianBlur``).

``kernel_size`` is an odd size or (width, height) pair; ``sigma`` a fixed value or the
[low, high] range it is drawn from per sample (the same sigma both ways, like torchvision).
``p`` < 1 applies it with that probability (``RandomApply([GaussianBlur(...)], p)``).
DALI's ``gaussian_blur`` (a conditional for ``p``) on the GPU, a compiled kernel per sample
on the CPU (:mod:`~dali_pipes.augment.ops.cpu_kernels`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from dali_pipes.augment.base import Context, Op, Params, Row, register_op
from dali_pipes.augment.params import number, pair
from dali_pipes.errors import require


@register_op
@dataclass(frozen=True)
class GaussianBlur(Op):
    """torchvision ``GaussianBlur(kernel_size, sigma)``, in ``RandomApply`` when ``p`` < 1: one
    sigma per sample, the same in both directions."""

    name = "gaussian_blur"
    keeps_places = True  # blurs in place: boxes and masks are unchanged
    previews = ({"sigma": 1.0}, {"sigma": 2.5}, {"sigma": 5.0})
    p_gates_all = True
    graph_params: ClassVar[Mapping[str, Any]] = {"p": 0.5}  # p < 1: the branch that skips it
    kernel_size: Any = 23
    sigma: Any = (0.1, 2.0)
    p: float = 1.0

    def __post_init__(self) -> None:
        size = self.kernel_size
        if isinstance(size, int | float) and not isinstance(size, bool):
            size = (size, size)
        ok = isinstance(size, Sequence) and len(size) == 2
        ok = ok and all(isinstance(k, int | float) and float(k).is_integer() for k in size)
        ok = ok and all(int(k) > 0 and int(k) % 2 == 1 for k in size)
        require(ok, "kernel_size", self.kernel_size, "expected odd positive size(s), e.g. 23")
        object.__setattr__(self, "kernel_size", (int(size[0]), int(size[1])))
        if isinstance(self.sigma, int | float) and not isinstance(self.sigma, bool):
            number(self, "sigma", 1e-6)
            object.__setattr__(self, "sigma", (self.sigma, self.sigma))
        lo, _ = pair(self, "sigma")
        require(lo > 0, "sigma", self.sigma, "must be > 0")
        number(self, "p", 0.0, 1.0)

    def draws(self) -> int:
        return 2  # sigma, whether to apply

    def sample(self, u: np.ndarray, ctx: Context) -> Params:
        lo, hi = self.sigma
        sigma = (lo + u[:, 0] * (hi - lo)).astype(np.float32)
        apply = u[:, 1] < self.p
        packed = np.empty((len(sigma), 4), dtype=np.float64)
        packed[:, 0], packed[:, 1] = apply, sigma
        packed[:, 2], packed[:, 3] = self.kernel_size
        return {"sigma": sigma, "apply": apply, "packed": packed}

    def torch(self, image: torch.Tensor, p: Row, ctx: Context) -> torch.Tensor:
        import torchvision.transforms.v2.functional as F

        if not p["apply"]:
            return image
        sigma = float(p["sigma"])
        return F.gaussian_blur(image, list(self.kernel_size), [sigma, sigma])

    def dali(self, images: Any, p: Mapping[str, Any], ctx: Context) -> Any:
        packed = p["packed"]
        if not ctx.gpu_graph:  # one compiled kernel per sample (imports numba: CPU only)
            from dali_pipes.augment.ops import cpu_kernels

            return cpu_kernels.blur(images, packed)
        if self.p < 1.0:
            if packed[0] > 0.5:
                images = self._blur(images, packed)
        else:
            images = self._blur(images, packed)
        return images

    def _blur(self, images: Any, packed: Any) -> Any:
        from nvidia.dali import fn, types
        from nvidia.dali import math as dmath

        kx, ky = self.kernel_size
        # DALI orders the window like the data's axes: height, then width.
        sigma = fn.cast(packed[1], dtype=types.FLOAT)
        blurred = fn.gaussian_blur(images, window_size=[ky, kx], sigma=sigma, dtype=types.FLOAT)
        return dmath.floor(blurred + 0.5)  # torchvision rounds the filtered value

    def needs_conditionals(self, gpu: bool) -> bool:
        return gpu and self.p < 1.0  # the CPU's kernel reads whether from the row

    def dali_params(self, names: tuple[str, ...]) -> tuple[str, ...]:
        return ("packed",)  # [apply, sigma, kernel width, height]: what both realisations read

    def torchvision(self) -> Any:
        from torchvision.transforms import v2

        blur = v2.GaussianBlur(self.kernel_size, self.sigma)
        return blur if self.p >= 1.0 else v2.RandomApply([blur], p=self.p)
