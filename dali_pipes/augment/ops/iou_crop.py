"""SSD's crop for detection: torchvision ``RandomZoomOut(fill, side_range, p)`` (when
``zoom_p`` > 0), ``RandomIoUCrop(...)``, then ``Resize(size)`` to a fixed size (``size``
null: no resize, each crop kept at its own size, as torchvision's SSD reference pipeline
hands them to the model, which resizes them itself).

The crop keeps at least one box's centre and overlaps some box by at least a minimum IoU
drawn per sample from ``options`` (1.0: no crop); boxes whose centre falls outside the
crop are dropped, as torchvision's ``RandomIoUCrop`` followed by
``SanitizeBoundingBoxes`` drops them. It needs the sample's boxes to plan, so it serves
data with targets. Planned in NumPy (:mod:`dali_pipes.augment.geometry_iou`); both
backends realise it as a padded window resized to ``size``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dali_pipes.augment.base import CropOp, register_op
from dali_pipes.augment.geometry import Geometry
from dali_pipes.augment.geometry_iou import IoUCrop as IoUPlan
from dali_pipes.augment.geometry_iou import ZoomOut, plan_ssd
from dali_pipes.augment.params import fill_of, number, pair, rgb, shape_of, side_or_shape
from dali_pipes.augment.targets.boxes import Boxes
from dali_pipes.errors import require

#: torchvision's ``RandomIoUCrop`` sampler options: the minimum IoUs, 1.0 meaning no crop.
OPTIONS = (0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0)


@register_op
@dataclass(frozen=True)
class IoUCrop(CropOp):
    """torchvision ``RandomZoomOut(fill, zoom_range, zoom_p)``, ``RandomIoUCrop(min_scale,
    max_scale, min_aspect_ratio, max_aspect_ratio, options, trials)``, ``Resize(size)``."""

    name = "iou_crop"
    needs_boxes = True
    size: Any = 300
    zoom_p: float = 0.0
    zoom_range: Any = (1.0, 4.0)
    fill: Any = 0
    min_scale: float = 0.3
    max_scale: float = 1.0
    min_aspect_ratio: float = 0.5
    max_aspect_ratio: float = 2.0
    options: Any = OPTIONS
    trials: int = 40
    rounds: int = 10
    interpolation: str = "bilinear"

    def __post_init__(self) -> None:
        side_or_shape(self, "size", optional=True)
        self.check_interpolation()
        number(self, "zoom_p", 0.0, 1.0)
        lo, _ = pair(self, "zoom_range")
        require(lo >= 1.0, "zoom_range", self.zoom_range, "a zoom out needs [low, high] >= 1")
        fill_of(self, "fill")
        lo = number(self, "min_scale", 0.0, 1.0)
        number(self, "max_scale", lo, 1.0)
        lo = number(self, "min_aspect_ratio", 0.0)
        number(self, "max_aspect_ratio", lo)
        options = self.options
        ok = isinstance(options, Sequence) and not isinstance(options, str) and len(options) > 0
        ok = ok and all(isinstance(v, int | float) and not isinstance(v, bool) for v in options)
        require(ok, "options", options, "expected a list of minimum IoUs (1.0: no crop)")
        object.__setattr__(self, "options", tuple(float(v) for v in options))
        number(self, "trials", 1, integer=True)
        number(self, "rounds", 1, integer=True)

    @property
    def plans(self) -> tuple[ZoomOut, IoUPlan]:
        """The zoom and the crop this op draws."""
        zoom = ZoomOut(self.zoom_p, self.zoom_range)
        scale = (self.min_scale, self.max_scale)
        aspect = (self.min_aspect_ratio, self.max_aspect_ratio)
        return zoom, IoUPlan(scale, aspect, self.options, self.trials, self.rounds)

    def size_at(self, epoch: int) -> int:
        """The output's height (:meth:`shape_at` has both sides)."""
        return self.shape_at(epoch)[0]

    def shape_at(self, epoch: int) -> tuple[int, int]:
        # without a resize, a nominal size: each crop keeps its own (varies_in_size)
        return shape_of(300 if self.size is None else self.size)

    def varies_in_size(self) -> bool:
        return self.size is None

    def draws(self) -> int:
        return 4 + self.plans[1].draws()

    @property
    def fill_rgb(self) -> tuple[int, int, int]:
        """``fill`` as one grey level per RGB channel."""
        return rgb(self.fill)

    def pad_fill(self) -> tuple[int, int, int] | None:
        return self.fill_rgb if self.zoom_p > 0 else None

    def plan(self, sizes: np.ndarray, u: np.ndarray, epoch: int) -> Geometry:
        return self.plan_around(sizes, u, epoch, Boxes.empty(len(sizes)))

    def plan_around(self, sizes: np.ndarray, u: np.ndarray, epoch: int, boxes: Boxes) -> Geometry:
        per_sample = [boxes.of(j)[0] for j in range(len(sizes))]
        window = plan_ssd(sizes, per_sample, u, *self.plans)
        n = len(sizes)
        if self.size is None:  # each crop at its own size
            own = np.ascontiguousarray(window[:, [3, 2]], dtype=np.int64)
            out = (int(own[:, 0].max()), int(own[:, 1].max())) if n else self.shape_at(epoch)
            resize, outs = own, own
        else:
            out = self.shape_at(epoch)
            resize, outs = np.tile(np.asarray(out, np.int64), (n, 1)), None
        return Geometry(
            window=window,
            resize=resize,
            crop=np.zeros((n, 2), np.int64),
            out=out,
            fill=self.pad_fill(),
            interpolation=self.interpolation,
            outs=outs,
        )

    def boxes_kept(self, boxes: Boxes, geometry: Geometry) -> np.ndarray:
        """The boxes whose centre lies inside their sample's window (strictly)."""
        window = geometry.window[boxes.sample].astype(np.float64)
        xyxy = boxes.xyxy.astype(np.float64)
        cx, cy = 0.5 * (xyxy[:, 0] + xyxy[:, 2]), 0.5 * (xyxy[:, 1] + xyxy[:, 3])
        return (
            (window[:, 0] < cx)
            & (cx < window[:, 0] + window[:, 2])
            & (window[:, 1] < cy)
            & (cy < window[:, 1] + window[:, 3])
        )

    def torchvision(self) -> Any:
        from torchvision.transforms import v2

        crop = v2.RandomIoUCrop(
            self.min_scale,
            self.max_scale,
            self.min_aspect_ratio,
            self.max_aspect_ratio,
            list(self.options),
            self.trials,
        )
        resize = [] if self.size is None else [self.resize_transform(list(shape_of(self.size)))]
        if self.zoom_p == 0:
            return v2.Compose([crop, *resize])
        from torchvision import tv_tensors

        # Masks pad with 0 (no object), everything else with the fill. (The reference's
        # defaultdict pads images with 0: torchvision looks a type up with `in`.)
        fill = {tv_tensors.Mask: 0, "others": list(self.fill_rgb)}
        zoom = v2.RandomZoomOut(fill, self.zoom_range, self.zoom_p)
        return v2.Compose([zoom, crop, *resize])
