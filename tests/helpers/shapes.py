"""Drawn objects whose exact masks and boxes are known: filled rectangles and ellipses."""

from __future__ import annotations

import numpy as np
import torch


def shapes(rng: np.random.Generator, h: int, w: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``k`` filled objects, rectangles at even indices and ellipses at odd ones: their
    instance masks (uint8 ``[k, h, w]``) and the tight box of each (x1, y1, x2, y2: the
    pixels' outer edges, float32 ``[k, 4]``)."""
    yy, xx = np.mgrid[0:h, 0:w]
    masks, boxes = [], []
    for i in range(k):
        cy, cx = rng.uniform(0.2, 0.8) * h, rng.uniform(0.2, 0.8) * w
        ry, rx = rng.uniform(0.08, 0.3) * h, rng.uniform(0.08, 0.3) * w
        if i % 2:
            inside = ((yy + 0.5 - cy) / ry) ** 2 + ((xx + 0.5 - cx) / rx) ** 2 <= 1
        else:
            inside = (abs(yy + 0.5 - cy) <= ry) & (abs(xx + 0.5 - cx) <= rx)
        ys, xs = np.nonzero(inside)
        masks.append(inside.astype(np.uint8))
        boxes.append([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1])
    return np.stack(masks), np.asarray(boxes, np.float32)


def tight_box(mask: torch.Tensor) -> np.ndarray | None:
    """The tight box (x1, y1, x2, y2) of a ``[H, W]`` mask's pixels; None when it has none."""
    ys, xs = np.nonzero(mask.numpy())
    if len(ys) == 0:
        return None
    return np.array([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1], np.float64)


def iou(a: np.ndarray, b: np.ndarray) -> float:
    """The IoU of two XYXY boxes."""
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    area = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1])
    return float(inter / (area - inter))
