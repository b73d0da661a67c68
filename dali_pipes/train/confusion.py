"""Segmentation's figures from a confusion matrix, as torchvision's segmentation reference
computes them: pixel accuracy and the mean IoU over classes.

Each rank adds its batches' pixels (the ignore index left out) to a ``[C, C]`` matrix of
(true class, predicted class) counts; the ranks' matrices are summed once, and the figures
read from the sum. A class that neither the truth nor the predictions hold has no IoU and
is left out of the mean (the reference's mean would be NaN).
"""

from __future__ import annotations

import torch


class Confusion:
    """(true, predicted) pixel counts over ``classes`` classes."""

    def __init__(self, classes: int, ignore_index: int = 255) -> None:
        self.classes = classes
        self.ignore_index = ignore_index
        self.matrix = torch.zeros((classes, classes), dtype=torch.int64)

    def add(self, truth: torch.Tensor, predicted: torch.Tensor) -> None:
        """A batch: int64 true classes and predicted classes of the same shape."""
        keep = truth != self.ignore_index
        t = truth[keep].to("cpu", torch.int64)
        p = predicted[keep].to("cpu", torch.int64)
        inside = (t >= 0) & (t < self.classes)
        index = t[inside] * self.classes + p[inside]
        counts = torch.bincount(index, minlength=self.classes**2)
        self.matrix += counts.reshape(self.classes, self.classes)


def scores(matrix: torch.Tensor) -> dict[str, float]:
    """``miou`` (mean IoU over the classes present in truth or predictions) and
    ``pixel_acc`` of a confusion matrix (rows: truth, columns: predictions)."""
    m = matrix.to(torch.float64)
    hits = torch.diag(m)
    union = m.sum(0) + m.sum(1) - hits
    present = union > 0
    iou = hits[present] / union[present]
    total = m.sum()
    return {
        "miou": float(iou.mean()) if len(iou) else 0.0,
        "pixel_acc": float(hits.sum() / total) if total > 0 else 0.0,
    }
