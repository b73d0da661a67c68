"""Opening the embedded sample data with targets: written on first use into ``data.root``
(:mod:`dali_pipes.data.sample_objects`), then read as ``data=coco`` and
``data=segmentation`` read a dataset of that layout."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from dali_pipes.data.sample_objects import ensure_sample_objects, ensure_sample_segmentation
from dali_pipes.data.specs import SampleObjectsData, SampleSegmentationData


def open_sample_objects(data: SampleObjectsData, split: str) -> Any:
    """A split of the sample objects, generated on first use."""
    from dali_pipes.data.coco import open_coco

    root = ensure_sample_objects(data.root, data.train_images, data.val_images)
    return open_coco(replace(data, root=str(root)), split)


def open_sample_segmentation(data: SampleSegmentationData, split: str) -> Any:
    """A split of the sample data with masks, generated on first use."""
    from dali_pipes.data.segmentation import open_segmentation

    root = ensure_sample_segmentation(data.root, data.train_images, data.val_images)
    return open_segmentation(replace(data, root=str(root)), split)
