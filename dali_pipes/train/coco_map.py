"""COCO's mean average precision of a detector's predictions, by pycocotools' own
evaluator (``COCOeval``), as torchvision's detection reference computes it.

The ground truth is the evaluation batches' targets as the loader hands them over, so
boxes and predictions share one set of pixel coordinates (the reference builds its ground
truth from the transformed dataset the same way): each target's boxes (XYXY) become COCO
annotations (``[x, y, w, h]``, area from the box or from the mask, not crowd), its masks
RLE when asked for. Predictions are torchvision's detection outputs (``boxes``, ``scores``,
``labels``, ``masks`` of probabilities for Mask R-CNN, thresholded at 0.5 as the reference
does). Each rank keeps its images' records; the evaluation gathers them once.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dali_pipes.errors import ConfigError

#: ``COCOeval.stats``' first two: AP at IoU 0.50:0.95 and at 0.50 (all areas, 100 dets).
NAMES = ("map", "map50")


def require_pycocotools() -> None:
    """One line when pycocotools, the COCO evaluator, is not installed."""
    try:
        import pycocotools.cocoeval  # noqa: F401
    except ImportError:
        raise ConfigError(
            "COCO's mAP is computed by pycocotools, which is not installed: "
            "pip install 'dali_pipes[coco]'"
        ) from None


def _rle(mask: np.ndarray) -> dict[str, Any]:
    """A binary ``[H, W]`` mask as COCO's compressed RLE (JSON-ready counts)."""
    from pycocotools import mask as coco_mask

    rle = coco_mask.encode(np.asfortranarray(mask.astype(np.uint8)))
    rle["counts"] = rle["counts"].decode("ascii")
    return dict(rle)


def _xywh(boxes: np.ndarray) -> np.ndarray:
    out = boxes.astype(np.float64).copy()
    out[:, 2:] -= out[:, :2]
    return out


@dataclass
class CocoRecords:
    """One rank's evaluation images: their ground truth and the detector's predictions, as
    COCO records (plain lists, cheap to gather)."""

    masks: bool = False
    images: list[dict[str, Any]] = field(default_factory=list)
    truth: list[dict[str, Any]] = field(default_factory=list)
    found: list[dict[str, Any]] = field(default_factory=list)

    def add(self, targets: Sequence[dict[str, Any]], outputs: Sequence[dict[str, Any]]) -> None:
        """A batch: each image's target (its ``image_id``, ``boxes``, ``labels``,
        ``masks``) and the detector's output for it."""
        for target, output in zip(targets, outputs, strict=True):
            image_id = int(target["image_id"])
            if any(image["id"] == image_id for image in self.images):
                continue  # a padded epoch repeats it: scored once
            h, w = (int(v) for v in target["boxes"].canvas_size)
            self.images.append({"id": image_id, "height": h, "width": w})
            self._truth(image_id, target)
            self._found(image_id, output)

    def _truth(self, image_id: int, target: dict[str, Any]) -> None:
        boxes = target["boxes"].detach().cpu().numpy().reshape(-1, 4)
        labels = target["labels"].detach().cpu().numpy().reshape(-1)
        masks = target["masks"].detach().cpu().numpy() if self.masks else None
        for k, (box, label) in enumerate(zip(_xywh(boxes), labels, strict=True)):
            record: dict[str, Any] = {
                "image_id": image_id,
                "bbox": [float(v) for v in box],
                "category_id": int(label),
                "area": float(box[2] * box[3]),
                "iscrowd": 0,
            }
            if masks is not None:
                record["segmentation"] = _rle(masks[k] > 0)
                record["area"] = float((masks[k] > 0).sum())
            self.truth.append(record)

    def _found(self, image_id: int, output: dict[str, Any]) -> None:
        boxes = output["boxes"].detach().float().cpu().numpy().reshape(-1, 4)
        scores = output["scores"].detach().float().cpu().numpy().reshape(-1)
        labels = output["labels"].detach().cpu().numpy().reshape(-1)
        masks = None
        if self.masks:  # Mask R-CNN: [K, 1, H, W] probabilities
            masks = (output["masks"].detach().float().cpu().numpy() > 0.5).reshape(
                len(scores), *output["masks"].shape[-2:]
            )
        for k, (box, score, label) in enumerate(zip(_xywh(boxes), scores, labels, strict=True)):
            record: dict[str, Any] = {
                "image_id": image_id,
                "bbox": [float(v) for v in box],
                "score": float(score),
                "category_id": int(label),
            }
            if masks is not None:
                record["segmentation"] = _rle(masks[k])
            self.found.append(record)


def coco_map(parts: Sequence[CocoRecords], categories: Sequence[int]) -> dict[str, float]:
    """Every rank's records (``parts``) evaluated as one set by ``COCOeval``: ``map`` and
    ``map50`` of boxes, and ``mask_map``, ``mask_map50`` when the records have masks. An
    evaluation with no prediction at all scores 0 (pycocotools cannot load an empty result)."""
    require_pycocotools()
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    masks = any(p.masks for p in parts)
    # A padded epoch (DistributedSampler's) gives some images to two ranks: each image is
    # scored once, from the first rank that evaluated it, as one process scores it.
    owner: dict[int, int] = {}
    for k, part in enumerate(parts):
        for image in part.images:
            owner.setdefault(int(image["id"]), k)
    images = {im["id"]: im for p in parts for im in p.images}
    kept = [[r for r in part.truth if owner[r["image_id"]] == k] for k, part in enumerate(parts)]
    truth = [dict(r, id=i + 1) for i, r in enumerate(r for part in kept for r in part)]
    found = [r for k, p in enumerate(parts) for r in p.found if owner[r["image_id"]] == k]
    kinds = ("bbox", "segm") if masks else ("bbox",)
    out: dict[str, float] = {}
    for kind in kinds:
        prefix = "" if kind == "bbox" else "mask_"
        if not found:
            out |= {f"{prefix}{name}": 0.0 for name in NAMES}
            continue
        with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints its progress
            gt = COCO()
            gt.dataset = {
                "images": list(images.values()),
                "annotations": truth,
                "categories": [{"id": int(c)} for c in categories],
            }
            gt.createIndex()
            dt = gt.loadRes([dict(r) for r in found])
            evaluator = COCOeval(gt, dt, iouType=kind)
            evaluator.evaluate()
            evaluator.accumulate()
            evaluator.summarize()
        stats = [max(float(v), 0.0) for v in evaluator.stats[:2]]  # -1: nothing to score
        out |= {f"{prefix}{name}": value for name, value in zip(NAMES, stats, strict=True)}
    return out
