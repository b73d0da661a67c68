"""The detection baseline ``bench`` measures against: what users of torchvision's detection
references write.

torchvision's ``CocoDetection`` wrapped for transforms v2 (boxes as ``BoundingBoxes``,
masks as ``Mask`` when the data has them), the training split's ops as v2 transforms on
the PIL image and its targets, then ``ToDtype``, ``Normalize`` and
``SanitizeBoundingBoxes`` as the reference's presets end, over the images that have
objects (as the reference trains); a ``DataLoader`` with the
reference's collate (a tuple per field), the images stacked in the loop when the split
gives one size, as a model's batching would (a list when each has its own).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch

from dali_pipes.augment.spec import AugmentSpec
from dali_pipes.data.coco import CocoSource
from dali_pipes.errors import DaliPipesError


def collate(batch: list[Any]) -> tuple[Any, ...]:
    """torchvision's detection reference's ``collate_fn``: one tuple per field."""
    return tuple(zip(*batch, strict=True))


def detection_transform(augment: AugmentSpec) -> Any:
    """The training split as torchvision v2 transforms on a PIL image and its targets."""
    from torchvision.transforms import v2

    pipeline = augment.pipeline(True)
    try:
        steps = pipeline.torchvision()
    except NotImplementedError as exc:
        raise DaliPipesError(
            f"bench baseline: {exc}; leave baseline out of bench.candidates"
        ) from None
    return v2.Compose(
        [
            v2.PILToTensor(),
            *steps,
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(augment.mean, augment.std),
            v2.SanitizeBoundingBoxes(min_size=augment.min_box_size),
            v2.ToPureTensor(),
        ]
    )


def detection_baseline(
    source: CocoSource, augment: AugmentSpec, batch: int, workers: int, cuda: bool
) -> Callable[[], Iterable[Any]]:
    """``CocoDetection`` + v2 transforms + ``DataLoader`` over ``source``'s split."""
    from torch.utils.data import DataLoader, Subset
    from torchvision.datasets import CocoDetection, wrap_dataset_for_transforms_v2

    keys = ("image_id", "boxes", "labels", *(("masks",) if source.has_masks else ()))
    transforms = detection_transform(augment)
    dataset = CocoDetection(source.root, source.annotations, transforms=transforms)
    wrapped = wrap_dataset_for_transforms_v2(dataset, target_keys=keys)
    # The reference trains on the images with objects only (RandomIoUCrop needs boxes).
    with_objects = [i for i, image_id in enumerate(dataset.ids) if dataset.coco.getAnnIds(image_id)]
    loader = DataLoader(
        Subset(wrapped, with_objects),
        batch_size=batch,
        shuffle=True,
        num_workers=workers,
        collate_fn=collate,
        pin_memory=cuda,
        persistent_workers=workers > 0,
    )

    own_sizes = augment.own_sizes(True)

    def epoch() -> Iterable[Any]:
        for images, targets in loader:
            # images of their own sizes go to the model as the list they are
            batch: Any = list(images) if own_sizes else torch.stack(images)
            if cuda:  # the copy the user's loop would make
                batch = (
                    [x.cuda(non_blocking=True) for x in batch]
                    if own_sizes
                    else batch.cuda(non_blocking=True)
                )
                targets = [{k: _to_cuda(v) for k, v in t.items()} for t in targets]
            yield batch, targets

    return epoch


def _to_cuda(value: Any) -> Any:
    return value.cuda(non_blocking=True) if torch.is_tensor(value) else value
