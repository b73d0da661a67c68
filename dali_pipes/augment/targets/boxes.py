"""Boxes of a batch moved by the batch's drawn geometry, in NumPy, once for every backend.

A sample's boxes are XYXY in pixel coordinates (float32), each with a class label. An
image is realised as: the ``window`` (x, y, w, h) of the source, resized to ``resize``
(nh, nw), then the output crop at ``crop`` (top, left) of size ``out``
(:class:`~dali_pipes.augment.geometry.Geometry`); a flip mirrors the output. A box moves
by the same affine map, is clipped to the output and dropped with its label (and its mask)
when it has become degenerate, as torchvision v2's ``ClampBoundingBoxes`` followed by
``SanitizeBoundingBoxes`` do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dali_pipes.augment.geometry import Geometry


@dataclass(frozen=True, eq=False)
class Boxes:
    """The boxes of a batch, every sample's one after another (a struct of arrays).

    ``sample`` says which sample of the batch a box belongs to (ascending), so that a
    batch's boxes move in one vectorised step whatever the number per image.
    """

    xyxy: np.ndarray  # float32 [K, 4]: x1, y1, x2, y2 in pixels
    labels: np.ndarray  # int64 [K]
    sample: np.ndarray  # int64 [K], ascending
    count: int  # how many samples the batch has (some may have no box)

    @classmethod
    def of_samples(cls, per_sample: Sequence[tuple[np.ndarray, np.ndarray]]) -> Boxes:
        """A batch's boxes from each sample's ``(xyxy [k, 4], labels [k])``."""
        xyxy = [np.asarray(b, np.float32).reshape(-1, 4) for b, _ in per_sample]
        labels = [np.asarray(y, np.int64).reshape(-1) for _, y in per_sample]
        for j, (b, y) in enumerate(zip(xyxy, labels, strict=True)):
            if len(b) != len(y):
                raise ValueError(f"sample {j}: {len(b)} boxes but {len(y)} labels")
        sample = np.repeat(np.arange(len(per_sample), dtype=np.int64), [len(b) for b in xyxy])
        return cls(
            xyxy=np.concatenate(xyxy) if xyxy else np.zeros((0, 4), np.float32),
            labels=np.concatenate(labels) if labels else np.zeros(0, np.int64),
            sample=sample,
            count=len(per_sample),
        )

    @classmethod
    def empty(cls, count: int) -> Boxes:
        """No box in any of ``count`` samples."""
        none = np.zeros(0, np.int64)
        return cls(np.zeros((0, 4), np.float32), none, none, count)

    def of(self, j: int) -> tuple[np.ndarray, np.ndarray]:
        """Sample ``j``'s boxes and labels."""
        lo, hi = np.searchsorted(self.sample, [j, j + 1])
        return self.xyxy[lo:hi], self.labels[lo:hi]

    def take(self, keep: np.ndarray) -> Boxes:
        """The boxes where ``keep`` (bool [K]) holds, with their labels."""
        return Boxes(self.xyxy[keep], self.labels[keep], self.sample[keep], self.count)

    def with_xyxy(self, xyxy: np.ndarray) -> Boxes:
        """The same boxes at new coordinates."""
        return Boxes(xyxy.astype(np.float32), self.labels, self.sample, self.count)


def through_geometry(boxes: Boxes, geometry: Geometry) -> Boxes:
    """``boxes`` in the output images of ``geometry`` (window, resize, crop), unclipped."""
    s = boxes.sample
    window = geometry.window[s].astype(np.float64)
    resize = geometry.resize[s].astype(np.float64)
    crop = geometry.crop[s].astype(np.float64)
    scale_x = resize[:, 1] / window[:, 2]
    scale_y = resize[:, 0] / window[:, 3]
    xyxy = boxes.xyxy.astype(np.float64)
    x = (xyxy[:, [0, 2]] - window[:, 0:1]) * scale_x[:, None] - crop[:, 1:2]
    y = (xyxy[:, [1, 3]] - window[:, 1:2]) * scale_y[:, None] - crop[:, 0:1]
    return boxes.with_xyxy(np.stack([x[:, 0], y[:, 0], x[:, 1], y[:, 1]], axis=1))


def _per_box(sizes: np.ndarray | tuple[int, int], boxes: Boxes) -> np.ndarray:
    """Each box's image size, ``[K, 2]``, from the samples' ``sizes`` ([B, 2]) or one
    (height, width) for all."""
    table = np.asarray(sizes, dtype=np.float64).reshape(-1, 2)
    return table[np.zeros_like(boxes.sample)] if len(table) == 1 else table[boxes.sample]


def flipped(
    boxes: Boxes, flags: np.ndarray, sizes: np.ndarray | tuple[int, int], horizontal: bool
) -> Boxes:
    """``boxes`` mirrored in the samples whose flag (int [B]) is set, in images of
    ``sizes`` ([B, 2] height, width, or one for all): left-right when ``horizontal``,
    else top-bottom."""
    on = np.asarray(flags, bool)[boxes.sample]
    xyxy = boxes.xyxy.copy()
    first = 0 if horizontal else 1
    extent = _per_box(sizes, boxes)[:, 1 if horizontal else 0][on]
    a, b = xyxy[on, first], xyxy[on, first + 2]
    xyxy[on, first], xyxy[on, first + 2] = extent - b, extent - a
    return boxes.with_xyxy(xyxy)


def sanitized(
    boxes: Boxes,
    sizes: np.ndarray | tuple[int, int],
    min_size: float = 1.0,
    min_area: float = 1.0,
) -> tuple[Boxes, np.ndarray]:
    """``boxes`` clipped to images of ``sizes`` ([B, 2] height, width, or one for all),
    and those still at least ``min_size`` wide and high and ``min_area`` large: the kept
    boxes and which were kept (bool [K], for their masks). torchvision v2's
    ``ClampBoundingBoxes`` then ``SanitizeBoundingBoxes(min_size, min_area)``."""
    per_box = _per_box(sizes, boxes)
    h, w = per_box[:, 0], per_box[:, 1]
    xyxy = boxes.xyxy.copy()
    xyxy[:, [0, 2]] = np.clip(xyxy[:, [0, 2]], 0, w[:, None])
    xyxy[:, [1, 3]] = np.clip(xyxy[:, [1, 3]], 0, h[:, None])
    ws, hs = xyxy[:, 2] - xyxy[:, 0], xyxy[:, 3] - xyxy[:, 1]
    keep = (ws >= min_size) & (hs >= min_size) & (ws * hs >= min_area)
    return boxes.with_xyxy(xyxy).take(keep), keep
