"""Detection batches: each sample's objects moved with its image, handed over in the form
torchvision's detection references give (``(images, targets)``, a dict per image) or its
segmentation references give (``(images, masks)``).

A sample's boxes move in NumPy from the same draw as its image
(:attr:`~dali_pipes.augment.pipeline.Pipeline.targets`), so every backend hands over the
same boxes; its instance masks are resampled by the backend, nearest neighbour. The
batch's targets are a list with one dict per image: ``boxes`` (``tv_tensors.BoundingBoxes``,
XYXY, in the output image's pixels), ``labels`` (int64), ``masks`` (``tv_tensors.Mask``,
``[K, H, W]``, when the data has them) and ``image_id``; an image with no objects keeps
its place with empty ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import torch

from dali_pipes.augment.pipeline import Draw, Pipeline
from dali_pipes.augment.targets.boxes import Boxes
from dali_pipes.backends.specs import LoaderSpec
from dali_pipes.data.interface import Annotated
from dali_pipes.data.targets import SampleTargets
from dali_pipes.errors import ConfigError

#: One image's targets as the batch holds them.
Target = dict[str, Any]


class Moved(NamedTuple):
    """One sample's objects in its output image: boxes (float32 ``[K, 4]``), labels,
    masks (uint8 ``[K, H, W]`` tensor, or None) and its image id."""

    boxes: np.ndarray
    labels: np.ndarray
    masks: torch.Tensor | None
    image_id: int


def check_targets(spec: LoaderSpec) -> None:
    """For data with targets, refuse in one line what cannot give them: a backend that
    reads no images, views or a cache (not yet), an op that cannot move boxes and masks.
    Every loader asks when it is built (:class:`~dali_pipes.backends.base.Loader`)."""
    if not isinstance(spec.source, Annotated):
        return
    backend = spec.backend
    if not backend.reads_images:
        raise ConfigError(
            f"backend={backend.name} reads no images, so it has no boxes or masks to give; "
            "use backend=dali or backend=torch"
        )
    multi_view = spec.augment.multi_view(spec.train)
    if multi_view or spec.cache:
        what = "views" if multi_view else f"data.cache={spec.cache}"
        raise ConfigError(f"data with targets (boxes, masks) takes no {what} yet; remove it")
    for pipeline in spec.augment.views(spec.train).pipelines:
        pipeline.targets  # noqa: B018 - raises, naming an op that cannot move them


def moved_sample(
    pipeline: Pipeline, draw: Draw, j: int, sample: SampleTargets, min_size: float, fill: int = 0
) -> Moved:
    """Sample ``j`` of ``draw``'s objects through ``pipeline`` (the torch realisation of
    its masks, padded with ``fill``); boxes left with less than ``min_size`` are dropped
    with their masks. A segmentation sample's one mask is moved as ``[1, H, W]``."""
    if sample.semantic is not None:
        mask = torch.from_numpy(np.ascontiguousarray(sample.semantic[None]))
        moved = pipeline.targets.mask_torch(mask, draw, j, fill)
        return Moved(sample.boxes, sample.labels, moved, sample.image_id)
    boxes = Boxes(
        sample.boxes,
        sample.labels,
        np.full(sample.count, j, np.int64),
        count=len(draw.geometry.window),
    )
    kept, keep = pipeline.targets.boxes(draw, boxes, min_size)
    masks = None
    if sample.masks is not None:
        chosen = torch.from_numpy(np.ascontiguousarray(sample.masks[keep]))
        masks = pipeline.targets.mask_torch(chosen, draw, j)
    return Moved(kept.xyxy, kept.labels, masks, sample.image_id)


def target_dicts(moved: Sequence[Moved], sizes: Sequence[tuple[int, int]]) -> list[Target]:
    """The batch's targets: one dict per image (of ``sizes``, height and width each), in
    torchvision's detection form."""
    from torchvision import tv_tensors

    out = []
    for sample, size in zip(moved, sizes, strict=True):
        target: Target = {
            "boxes": tv_tensors.BoundingBoxes(
                torch.from_numpy(np.ascontiguousarray(sample.boxes)),
                format="XYXY",
                canvas_size=size,
            ),
            "labels": torch.from_numpy(np.ascontiguousarray(sample.labels)),
            "image_id": sample.image_id,
        }
        if sample.masks is not None:
            target["masks"] = tv_tensors.Mask(sample.masks)
        out.append(target)
    return out


def batch_targets(
    task: str, moved: Sequence[Moved], sizes: Sequence[tuple[int, int]], own_sizes: bool = False
) -> Any:
    """The batch's targets as torchvision's references take them: a dict per image
    (:func:`target_dicts`; ``sizes``: each image's height and width) for detection, the
    masks as one int64 ``[N, H, W]`` tensor for segmentation (a list of ``[H, W]`` ones
    with ``own_sizes``, images of sizes of their own)."""
    if task == "segmentation":
        masks = [m.masks[0].long() for m in moved if m.masks is not None]
        return masks if own_sizes else torch.stack(masks)
    return target_dicts(moved, sizes)


def labels_to(labels: Any, device: torch.device, non_blocking: bool = False) -> Any:
    """A batch's labels on ``device``: a tensor of class labels, or detection targets
    (each tensor of each dict; torchvision's tensor types keep their type)."""
    if isinstance(labels, torch.Tensor):
        return labels.to(device, non_blocking=non_blocking)
    if labels and isinstance(labels[0], torch.Tensor):  # segmentation masks of own sizes
        return [mask.to(device, non_blocking=non_blocking) for mask in labels]
    return [
        {
            k: v.to(device, non_blocking=non_blocking) if isinstance(v, torch.Tensor) else v
            for k, v in target.items()
        }
        for target in labels
    ]


def tensors_of(labels: Any) -> list[torch.Tensor]:
    """Every tensor a batch's labels hold (for a stream to record them)."""
    if isinstance(labels, torch.Tensor):
        return [labels]
    if labels and isinstance(labels[0], torch.Tensor):
        return list(labels)
    return [v for target in labels for v in target.values() if isinstance(v, torch.Tensor)]
