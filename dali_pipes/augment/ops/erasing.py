"""Random erasing on the normalised batch, with timm's ``RandomErasing`` semantics.

Each image is erased with probability ``p``: ``count`` boxes (``min_count``..``max_count``,
uniform), each of area ``U(min_area, max_area) * H * W / count`` and aspect ratio
``exp(U(log min_aspect, log max_aspect))``, ``h = round(sqrt(area * aspect))``,
``w = round(sqrt(area / aspect))``; a box that does not fit (``h >= H`` or ``w >= W``) is
drawn again, up to 10 attempts, then given up, as timm does. A fitting box gets a uniform
top-left corner and is filled, like ``torchvision.transforms.v2.functional.erase``, with
``mode``: ``pixel`` -- per-pixel standard normal noise (on the normalised image, so noise
of the data's own scale; DeiT's ``remode=pixel``), ``rand`` -- one normal value per
channel, ``const`` -- ``value`` (one number, or one per channel, on the batch's scale: the
default 0 is the mean colour of a normalised batch), as torchvision's ``RandomErasing``
fills its ``value``.

The boxes are drawn in NumPy for the whole batch at once (every attempt is drawn whether
used or not, so the stream's use is fixed); the noise comes from the batch stage's torch
generator.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from dali_pipes.augment.batch import BatchOp, register_batch_op
from dali_pipes.augment.params import number
from dali_pipes.errors import require

ATTEMPTS = 10
MODES = ("pixel", "rand", "const")


@register_batch_op
@dataclass(frozen=True)
class RandomErasing(BatchOp):
    """timm ``RandomErasing(probability, min_area, max_area, min_aspect, max_aspect, mode,
    min_count, max_count)``; ``max_aspect=None`` is ``1 / min_aspect``, ``max_count=None``
    is ``min_count``; ``value``: the fill of ``mode=const``. With one box it is torchvision's
    ``RandomErasing(p, scale=(min_area, max_area), ratio=(min_aspect, max_aspect), value)``
    (``value='random'``: ``mode=pixel``)."""

    name = "random_erasing"
    p: float = 0.25
    min_area: float = 0.02
    max_area: float = 1.0 / 3.0
    min_aspect: float = 0.3
    max_aspect: float | None = None
    mode: str = "pixel"
    min_count: int = 1
    max_count: int | None = None
    value: Any = 0.0

    def __post_init__(self) -> None:
        number(self, "p", 0, 1)
        lo = number(self, "min_area", 0, 1)
        hi = number(self, "max_area", 0, 1)
        require(0 < lo <= hi, "min_area", self.min_area, f"need 0 < min_area <= max_area ({hi})")
        number(self, "min_aspect", 1e-6)
        if self.max_aspect is None:
            object.__setattr__(self, "max_aspect", 1.0 / self.min_aspect)
        number(self, "max_aspect", self.min_aspect)
        require(self.mode in MODES, "mode", self.mode, f"choose one of {MODES}")
        number(self, "min_count", 1, integer=True)
        if self.max_count is None:
            object.__setattr__(self, "max_count", self.min_count)
        number(self, "max_count", self.min_count, integer=True)
        value = self.value
        if isinstance(value, int | float) and not isinstance(value, bool):
            value = [value] * 3
        ok = isinstance(value, list | tuple) and len(value) == 3
        ok = ok and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
        require(ok, "value", self.value, "expected a number or three, one per channel")
        values = tuple(float(v) for v in value)
        object.__setattr__(self, "value", values[0] if len(set(values)) == 1 else values)

    @property
    def integer_safe(self) -> bool:
        """A constant fill is right on uint8 pixels too; noise is not."""
        return self.mode == "const"

    def draw(self, rng: np.random.Generator, n: int, size: tuple[int, int]) -> dict[str, Any]:
        """``boxes``: ``[n, max_count, 4]`` int64 (top, left, h, w); h = 0 where none."""
        height, width = size
        assert self.max_aspect is not None and self.max_count is not None
        apply = rng.random(n) < self.p
        count = rng.integers(self.min_count, self.max_count + 1, size=n)
        shape = (n, self.max_count, ATTEMPTS)
        area = rng.uniform(self.min_area, self.max_area, size=shape) * (height * width)
        area = area / count[:, None, None]
        log_aspect = rng.uniform(np.log(self.min_aspect), np.log(self.max_aspect), size=shape)
        aspect = np.exp(log_aspect)
        h = np.rint(np.sqrt(area * aspect)).astype(np.int64)  # round half to even, as Python
        w = np.rint(np.sqrt(area / aspect)).astype(np.int64)
        corner = rng.random((n, self.max_count, ATTEMPTS, 2))
        fits = (h < height) & (w < width)
        first = np.argmax(fits, axis=2)  # the first attempt that fits (timm stops there)
        found = fits.any(axis=2)
        take = np.arange(n)[:, None], np.arange(self.max_count)[None, :], first
        bh, bw = np.where(found, h[take], 0), np.where(found, w[take], 0)
        # timm's randint(0, H - h), both ends included.
        top = np.minimum((corner[take][..., 0] * (height - bh + 1)).astype(np.int64), height - bh)
        left = np.minimum((corner[take][..., 1] * (width - bw + 1)).astype(np.int64), width - bw)
        used = apply[:, None] & (np.arange(self.max_count)[None, :] < count[:, None]) & found
        boxes = np.stack([top, left, bh, bw], axis=-1) * used[..., None]
        return {"boxes": boxes}

    def fill(self, images: torch.Tensor, h: int, w: int, noise: torch.Generator) -> torch.Tensor:
        """The values of one ``h x w`` box, ``[C, h, w]`` in the images' dtype and device."""
        c = images.shape[1]
        if self.mode == "pixel":
            values = torch.randn((c, h, w), generator=noise, device=images.device)
        elif self.mode == "rand":
            values = torch.randn((c, 1, 1), generator=noise, device=images.device)
            values = values.expand(c, h, w)
        else:
            fill = self.value if isinstance(self.value, tuple) else (self.value,) * c
            values = torch.tensor(fill, device=images.device).view(c, 1, 1).expand(c, h, w)
        return values.to(images.dtype)

    def apply(
        self,
        images: torch.Tensor,
        targets: torch.Tensor,
        params: Mapping[str, Any],
        noise: torch.Generator,
        num_classes: int,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        import torchvision.transforms.v2.functional as F

        boxes = params["boxes"]
        if boxes[:, :, 2].any():
            images = images.clone()  # the caller's tensor is left as it was
        for i, k in zip(*np.nonzero(boxes[:, :, 2]), strict=True):
            top, left, h, w = (int(v) for v in boxes[i, k])
            F.erase(images[i], top, left, h, w, self.fill(images, h, w, noise), inplace=True)
        return images, targets
