"""Multi-scale resizing as detection references train: torchvision ``RandomShortestSize(
min_size, max_size)``, with DETR's random crop branch and padding to a multiple or a size.

- The shorter side is drawn from ``min_size`` and the image scaled so that its longer side
  stays within ``max_size`` (torchvision's arithmetic: ``r = min(side / short, max_size /
  long)``, each side ``int(side * r)``), so every image keeps its own size and aspect.
- ``crop_p`` > 0: with that probability a sample first takes DETR's crop branch: the image
  as if resized to a shorter side drawn from ``crop_sizes``, a ``RandomSizeCrop`` of
  ``crop_range`` pixels there (width and height each uniform, the place uniform), mapped
  back to source pixels (rounded to whole pixels), and that window resized as above.
- ``pad_multiple``: each image padded at the bottom and right up to a multiple of it (as
  torchvision's ``GeneralizedRCNNTransform`` batches images for a backbone's strides);
  ``pad_to``: every image padded to one size, so a batch is one tensor again.

Without ``pad_to`` a batch's images are a list of ``[3, H, W]`` tensors (torchvision's
detection models take that). Planned in NumPy (:class:`~dali_pipes.augment.geometry.
Geometry` with ``outs``); boxes and masks move with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dali_pipes.augment.base import CropOp, register_op
from dali_pipes.augment.geometry import Geometry, resize_shorter
from dali_pipes.augment.params import fill_of, number, pair, rgb, shape_of, side_or_shape
from dali_pipes.errors import require


def _sides(op: Any, name: str) -> tuple[int, ...]:
    """Coerce field ``name`` (an int or a list of ints >= 1) to a tuple of ints."""
    value = getattr(op, name)
    values = [value] if isinstance(value, int) and not isinstance(value, bool) else value
    ok = isinstance(values, Sequence) and not isinstance(values, str) and len(values) > 0
    ok = ok and all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in values)
    require(ok, name, value, "expected a side in pixels or a list of them (integers >= 1)")
    object.__setattr__(op, name, tuple(int(v) for v in values))
    return tuple(values)


def shortest_size(sizes: np.ndarray, side: np.ndarray, max_size: int | None) -> np.ndarray:
    """torchvision ``RandomShortestSize``'s output (nh, nw) for images of ``sizes``
    ([B, 2] height, width) and the drawn shorter ``side`` ([B])."""
    h, w = sizes[:, 0].astype(np.float64), sizes[:, 1].astype(np.float64)
    r = side / np.minimum(h, w)
    if max_size is not None:
        r = np.minimum(r, max_size / np.maximum(h, w))
    # int(orig * r) in Python: truncation of the same double product
    return np.maximum(np.stack([np.trunc(h * r), np.trunc(w * r)], axis=1), 1).astype(np.int64)


def pick(choices: Sequence[int], u: np.ndarray) -> np.ndarray:
    """One of ``choices`` per uniform draw in ``u``, each equally likely."""
    table = np.asarray(choices, dtype=np.float64)
    return table[np.minimum((u * len(table)).astype(np.int64), len(table) - 1)]


def size_crop(
    sizes: np.ndarray, u: np.ndarray, sides: Sequence[int], span: tuple[int, int]
) -> np.ndarray:
    """DETR's crop branch in source pixels, ``[B, 4]`` x, y, w, h: each image as if resized
    to a shorter side from ``sides`` (``u[:, 0]``), a ``RandomSizeCrop(*span)`` there
    (width ``u[:, 1]``, height ``u[:, 2]``, top ``u[:, 3]``, left ``u[:, 4]``), mapped
    back and rounded to whole pixels, at least one."""
    mid = resize_shorter_each(sizes, pick(sides, u[:, 0]))
    lo = float(span[0])
    top_w, top_h = np.minimum(mid[:, 1], span[1]), np.minimum(mid[:, 0], span[1])
    cw = np.minimum(lo, top_w) + np.floor(u[:, 1] * (np.maximum(top_w - lo, 0) + 1))
    ch = np.minimum(lo, top_h) + np.floor(u[:, 2] * (np.maximum(top_h - lo, 0) + 1))
    i = np.floor(u[:, 3] * (mid[:, 0] - ch + 1))
    j = np.floor(u[:, 4] * (mid[:, 1] - cw + 1))
    sy, sx = sizes[:, 0] / mid[:, 0], sizes[:, 1] / mid[:, 1]
    x0, y0 = np.rint(j * sx), np.rint(i * sy)
    x1 = np.minimum(np.maximum(np.rint((j + cw) * sx), x0 + 1), sizes[:, 1])
    y1 = np.minimum(np.maximum(np.rint((i + ch) * sy), y0 + 1), sizes[:, 0])
    x0, y0 = np.minimum(x0, x1 - 1), np.minimum(y0, y1 - 1)
    return np.stack([x0, y0, x1 - x0, y1 - y0], axis=1).astype(np.int64)


def resize_shorter_each(sizes: np.ndarray, side: np.ndarray) -> np.ndarray:
    """torchvision ``Resize(side)`` (no maximum) per image: the shorter side ``side[j]``,
    the longer truncated."""
    out = np.empty((len(sizes), 2), np.int64)
    for value in np.unique(side):
        at = side == value
        out[at] = resize_shorter(sizes[at], int(value))
    return out


@register_op
@dataclass(frozen=True)
class ShortestSize(CropOp):
    """torchvision ``RandomShortestSize(min_size, max_size)``, with DETR's crop branch
    (``crop_p``) and padding to a multiple (``pad_multiple``) or a size (``pad_to``)."""

    name = "shortest_size"
    min_size: Any = 800
    max_size: Any = 1333
    crop_p: float = 0.0
    crop_sizes: Any = (400, 500, 600)
    crop_range: Any = (384, 600)
    pad_multiple: int = 0
    pad_to: Any = None
    fill: Any = 0
    interpolation: str = "bilinear"

    def __post_init__(self) -> None:
        sides = _sides(self, "min_size")
        if self.max_size is not None:
            top = number(self, "max_size", 1, integer=True)
            require(top >= max(sides), "max_size", self.max_size, "expected >= every min_size")
        number(self, "crop_p", 0.0, 1.0)
        _sides(self, "crop_sizes")
        lo, hi = pair(self, "crop_range")
        require(
            lo >= 1 and float(lo).is_integer() and float(hi).is_integer(),
            "crop_range",
            self.crop_range,
            "expected [low, high] in whole pixels >= 1",
        )
        object.__setattr__(self, "crop_range", (int(lo), int(hi)))
        number(self, "pad_multiple", 0, integer=True)
        if side_or_shape(self, "pad_to", optional=True) is not None:
            require(
                self.max_size is not None,
                "pad_to",
                self.pad_to,
                "padding every image to one size needs max_size (no side may exceed it)",
            )
            limit = int(self.max_size)
            ok = min(shape_of(self.pad_to)) >= limit
            require(ok, "pad_to", self.pad_to, f"expected both sides >= max_size={limit}")
        fill_of(self, "fill")
        self.check_interpolation()

    @property
    def size(self) -> int:  # type: ignore[override]
        """The largest output side (the batch's bound)."""
        return max(self.shape_at(0))

    def varies_in_size(self) -> bool:
        return self.pad_to is None

    def shape_at(self, epoch: int) -> tuple[int, int]:
        if self.pad_to is not None:
            return shape_of(self.pad_to)
        top = int(self.max_size) if self.max_size is not None else 4 * max(self.min_size)
        return _padded(np.array([[top, top]]), self.pad_multiple)[0]

    def size_at(self, epoch: int) -> int:
        return max(self.shape_at(epoch))

    @property
    def fill_rgb(self) -> tuple[int, int, int]:
        """``fill`` as one grey level per RGB channel."""
        return rgb(self.fill)

    def pad_fill(self) -> tuple[int, int, int] | None:
        pads = self.pad_to is not None or self.pad_multiple > 1
        return self.fill_rgb if pads else None

    def draws(self) -> int:
        return 7  # the side; the crop branch's coin, side, width, height, top, left

    def plan(self, sizes: np.ndarray, u: np.ndarray, epoch: int) -> Geometry:
        n = len(sizes)
        window = np.zeros((n, 4), np.int64)
        window[:, 2], window[:, 3] = sizes[:, 1], sizes[:, 0]
        if self.crop_p > 0:
            cropped = u[:, 1] < self.crop_p
            branch = size_crop(sizes, u[:, 2:7], self.crop_sizes, self.crop_range)
            window = np.where(cropped[:, None], branch, window)
        seen = window[:, [3, 2]]
        resized = shortest_size(seen, pick(self.min_size, u[:, 0]), self.max_size)
        if self.pad_to is not None:
            out = shape_of(self.pad_to)
            outs = None
        else:
            outs = _padded(resized, self.pad_multiple)
            out = (int(outs[:, 0].max()), int(outs[:, 1].max())) if n else self.shape_at(epoch)
        return Geometry(
            window=window,
            resize=resized,
            crop=np.zeros((n, 2), np.int64),
            out=out,
            fill=self.pad_fill(),
            interpolation=self.interpolation,
            outs=outs,
        )

    def torchvision(self) -> Any:
        from torchvision.transforms import v2

        mode = v2.InterpolationMode(self.interpolation)
        resize = v2.RandomShortestSize(list(self.min_size), self.max_size, mode, antialias=True)
        if self.crop_p == 0:
            return resize
        first = v2.RandomShortestSize(list(self.crop_sizes), None, mode, antialias=True)
        branch = v2.Compose([first, _RandomSizeCrop(*self.crop_range), resize])
        return v2.RandomChoice([resize, branch], p=[1 - self.crop_p, self.crop_p])


def _padded(resized: np.ndarray, multiple: int) -> np.ndarray:
    """Sizes rounded up to a ``multiple`` (0 or 1: as they are)."""
    if multiple <= 1:
        return resized.astype(np.int64)
    return (-(-resized // multiple) * multiple).astype(np.int64)


def _RandomSizeCrop(low: int, high: int) -> Any:
    """DETR's ``RandomSizeCrop(low, high)`` as a torchvision v2 transform (the bench's
    baseline of the crop branch): a crop of width and height each uniform in
    ``[low, min(side, high)]``, placed uniformly."""
    import torch
    from torchvision.transforms import v2
    from torchvision.transforms.v2 import functional as F
    from torchvision.transforms.v2._utils import query_size

    class RandomSizeCrop(v2.Transform):
        def make_params(self, flat_inputs: list[Any]) -> dict[str, Any]:
            h, w = query_size(flat_inputs)
            cw = int(torch.randint(min(low, w), min(w, high) + 1, ()))
            ch = int(torch.randint(min(low, h), min(h, high) + 1, ()))
            top = int(torch.randint(0, h - ch + 1, ()))
            left = int(torch.randint(0, w - cw + 1, ()))
            return {"top": top, "left": left, "height": ch, "width": cw}

        def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
            return self._call_kernel(F.crop, inpt, **params)

    return RandomSizeCrop()
