"""Crops of a fixed size from a randomly resized image, padded where it is smaller: what
the detection and segmentation references train with.

- ``scale_jitter``: large-scale jitter (LSJ): torchvision ``ScaleJitter(size,
  scale_range)`` (the image fitted into ``size``, times a factor drawn from
  ``scale_range``), then the detection reference's ``FixedSizeCrop(size, fill)``
  (``crop: false``: no crop, each image at its jittered size, as ``ScaleJitter`` alone);
- ``shorter_side_crop``: the segmentation reference: ``RandomResize(min_size, max_size)``
  (the shorter side drawn from [min_size, max_size)), ``PadIfSmaller(size, fill)``,
  ``RandomCrop(size)``.

The crop's corner is uniform over the room the resized image leaves; where it is smaller
than the crop, the bottom and right are padded (the image with ``fill``, masks with 0 or
the data's ignore index). Planned in NumPy (:func:`~dali_pipes.augment.geometry.
plan_resized_crop`); boxes and masks move with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dali_pipes.augment.base import CropOp, register_op
from dali_pipes.augment.geometry import Geometry, crop_room, plan_resized_crop, whole
from dali_pipes.augment.params import fill_of, number, pair, rgb, shape_of, side_or_shape
from dali_pipes.errors import require


class FixedSizeCrop(CropOp):
    """What both crops share: the output ``size``, the ``fill``, the corner's draws."""

    size: Any
    fill: Any
    pads_past_resize = True

    def size_at(self, epoch: int) -> int:
        """The output's height (:meth:`shape_at` has both sides)."""
        return self.shape_at(epoch)[0]

    def shape_at(self, epoch: int) -> tuple[int, int]:
        return shape_of(self.size)

    @property
    def fill_rgb(self) -> tuple[int, int, int]:
        """``fill`` as one grey level per RGB channel."""
        return rgb(self.fill)

    def pad_fill(self) -> tuple[int, int, int] | None:
        return self.fill_rgb

    def draws(self) -> int:
        return 3  # the scale, then the corner's top and left

    def resized_to(self, sizes: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Each image's size after the random resize, ``[B, 2]`` (nh, nw), from ``u``."""
        raise NotImplementedError

    def corner(self, room: np.ndarray, u: np.ndarray) -> np.ndarray:
        """The crop's corner (top, left) within ``room`` from ``u`` ([B, 2]): uniform over
        every place, as ``RandomCrop`` draws it."""
        return np.minimum(np.floor(u * (room + 1)), room)

    def plan(self, sizes: np.ndarray, u: np.ndarray, epoch: int) -> Geometry:
        resized = np.maximum(self.resized_to(sizes, u[:, 0]), 1)
        out = self.shape_at(epoch)
        corner = self.corner(crop_room(resized, out), u[:, 1:3])
        return self.resampled(plan_resized_crop(sizes, resized, corner, out, self.fill_rgb))

    def padded_crop(self) -> Any:
        """torchvision's nearest crop: ``RandomCrop(size, pad_if_needed=True)``, which pads
        both sides where the references pad the bottom and right (the bench baseline)."""
        from torchvision import tv_tensors
        from torchvision.transforms import v2

        fill = {tv_tensors.Mask: 0, "others": list(self.fill_rgb)}
        return v2.RandomCrop(list(shape_of(self.size)), pad_if_needed=True, fill=fill)


@register_op
@dataclass(frozen=True)
class ScaleJitter(FixedSizeCrop):
    """torchvision ``ScaleJitter(size, scale_range)`` then ``FixedSizeCrop(size, fill)``."""

    name = "scale_jitter"
    size: Any = 1024
    scale_range: Any = (0.1, 2.0)
    fill: Any = 0
    interpolation: str = "bilinear"
    crop: bool = True

    def varies_in_size(self) -> bool:
        return not self.crop

    def pad_fill(self) -> tuple[int, int, int] | None:
        return self.fill_rgb if self.crop else None

    def plan(self, sizes: np.ndarray, u: np.ndarray, epoch: int) -> Geometry:
        if self.crop:
            return super().plan(sizes, u, epoch)
        resized = np.maximum(self.resized_to(sizes, u[:, 0]), 1)  # ScaleJitter alone
        n = len(sizes)
        out = (int(resized[:, 0].max()), int(resized[:, 1].max())) if n else (1, 1)
        return self.resampled(
            Geometry(whole(sizes), resized, np.zeros((n, 2), np.int64), out, outs=resized)
        )

    def __post_init__(self) -> None:
        side_or_shape(self, "size")
        lo, _ = pair(self, "scale_range")
        require(lo > 0, "scale_range", self.scale_range, "the factors must be > 0")
        require(isinstance(self.crop, bool), "crop", self.crop, "expected true or false")
        fill_of(self, "fill")
        self.check_interpolation()

    def corner(self, room: np.ndarray, u: np.ndarray) -> np.ndarray:
        """One draw for both offsets, as the detection reference's ``FixedSizeCrop``:
        ``top = int(room_h * r)``, ``left = int(room_w * r)``."""
        return np.floor(room * u[:, :1])

    def resized_to(self, sizes: np.ndarray, u: np.ndarray) -> np.ndarray:
        th, tw = shape_of(self.size)
        h, w = sizes[:, 0].astype(np.float64), sizes[:, 1].astype(np.float64)
        lo, hi = self.scale_range
        scale = np.minimum(th / h, tw / w) * (lo + u * (hi - lo))
        return np.stack([np.floor(h * scale), np.floor(w * scale)], axis=1).astype(np.int64)

    def torchvision(self) -> Any:
        from torchvision.transforms import v2

        th, tw = shape_of(self.size)  # torchvision's target_size is (width, height)
        jitter = v2.ScaleJitter((tw, th), tuple(self.scale_range), antialias=True)
        return v2.Compose([jitter, self.padded_crop()]) if self.crop else jitter


@register_op
@dataclass(frozen=True)
class ShorterSideCrop(FixedSizeCrop):
    """torchvision ``RandomResize(min_size, max_size)``, then ``PadIfSmaller(size, fill)``
    and ``RandomCrop(size)`` (the segmentation reference's)."""

    name = "shorter_side_crop"
    size: Any = 480
    min_size: int = 260
    max_size: int = 1040
    fill: Any = 0
    interpolation: str = "bilinear"

    def __post_init__(self) -> None:
        side_or_shape(self, "size")
        lo = number(self, "min_size", 1, integer=True)
        number(self, "max_size", lo + 1, integer=True)
        fill_of(self, "fill")
        self.check_interpolation()

    def resized_to(self, sizes: np.ndarray, u: np.ndarray) -> np.ndarray:
        side = self.min_size + np.floor(u * (self.max_size - self.min_size))
        h, w = sizes[:, 0].astype(np.float64), sizes[:, 1].astype(np.float64)
        short = np.minimum(h, w)
        longer = np.floor(side * np.maximum(h, w) / short)  # torchvision's Resize(int)
        nh = np.where(h <= w, side, longer)
        nw = np.where(h <= w, longer, side)
        return np.stack([nh, nw], axis=1).astype(np.int64)

    def torchvision(self) -> Any:
        from torchvision.transforms import v2

        resize = v2.RandomResize(self.min_size, self.max_size, antialias=True)
        return v2.Compose([resize, self.padded_crop()])
