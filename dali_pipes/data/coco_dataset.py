"""torchvision's ``CocoDetection`` (wrapped for transforms v2 or not) as a source:
``DALIIterator(CocoDetection(root, annFile, transforms=...))``.

The dataset's own listing is read as it is: its images in its ``ids`` order (a user who
drops images without objects, as the detection reference does, keeps that order), boxes
as XYXY and labels as the category ids themselves (what the v2 wrapper gives and
torchvision's detection models are trained on, ``num_classes=91`` for COCO), crowd
annotations kept as the dataset keeps them, and instance masks when the v2 wrapper was
asked for ``masks`` (``target_keys``). Bad annotations are handled as ``data=coco``
handles them (:mod:`dali_pipes.data.coco`). Its transforms are the loader's augmentation
(``DALIIterator`` maps them, :mod:`dali_pipes.augment.from_torchvision`).
"""

from __future__ import annotations

import sys
from typing import Any

from dali_pipes.data.coco import CocoSource, Listing, require_pycocotools
from dali_pipes.data.specs import CocoData, DataSpec
from dali_pipes.errors import ConfigError


def coco_dataset(obj: Any) -> Any | None:
    """The ``CocoDetection`` ``obj`` is or wraps (the v2 wrapper); None for anything else.
    Imports nothing: such an object exists only once torchvision is imported."""
    datasets = sys.modules.get("torchvision.datasets")
    if datasets is None:
        return None
    inner = getattr(obj, "_dataset", obj)  # the v2 wrapper keeps the dataset here
    return inner if isinstance(inner, datasets.CocoDetection) else None


def coco_transforms(obj: Any) -> Any | None:
    """What ``obj`` (a ``CocoDetection``, wrapped or not) transforms its samples with: its
    joint ``transforms``, else its image ``transform``; None: none."""
    if coco_dataset(obj) is None:
        return None
    if getattr(obj, "target_transform", None) is not None:
        raise ConfigError(
            "the CocoDetection has a target_transform, which the loader would not run; give "
            "one transforms pipeline (torchvision.transforms.v2) instead"
        )
    joint = getattr(obj, "transforms", None)
    image = getattr(obj, "transform", None)
    if image is not None:  # a StandardTransform around it, or the image transform alone
        return image
    return joint


def _wants_masks(obj: Any) -> bool:
    """Whether the v2 wrapper was asked for instance masks (``target_keys``)."""
    keys = getattr(obj, "_target_keys", None)
    return keys == "all" or (keys is not None and "masks" in keys)


def adapt(obj: Any, data: DataSpec) -> CocoSource | None:
    """The source of a torchvision ``CocoDetection`` (or its v2 wrapper) with ``data``'s
    bad-file settings; None for anything else (``DALIIterator``'s adapter)."""
    dataset = coco_dataset(obj)
    if dataset is None:
        return None
    masks = _wants_masks(obj)
    if masks:
        require_pycocotools()
    spec = CocoData(
        root=str(dataset.root),
        masks=masks,
        crowd=True,
        on_error=data.on_error,
        read_timeout=data.read_timeout,
    )
    where = f"{dataset.root} (the CocoDetection's annotations)"
    listing = Listing(where, str(dataset.root), spec, order=list(dataset.ids), raw_labels=True)
    listing.read(dataset.coco.dataset)
    return listing.source()
