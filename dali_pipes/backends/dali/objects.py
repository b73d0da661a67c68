"""Data with targets on the DALI backend: each batch's objects on the feed's side, and
the batch handed over in torchvision's detection form.

Boxes move on the host, in NumPy, from the batch's draw (the same numbers every backend
uses); they never enter the graph. Instance masks do: the feed gives each sample's kept
masks as one uint8 ``[H, W, K]`` column (``K`` the batch's largest count, at least one,
so the output is one tensor), the graph slices, resizes and flips them with the image's
parameters (:meth:`Feed._columns`, :meth:`DaliGraph._graph`), and the hand-over cuts each
sample's own ``K`` back out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from dali_pipes.augment.geometry import Geometry
from dali_pipes.augment.pipeline import Draw, Pipeline
from dali_pipes.augment.spec import AugmentSpec
from dali_pipes.augment.targets.boxes import Boxes
from dali_pipes.backends.base import Batch, views_of
from dali_pipes.backends.dali.columns import Masks
from dali_pipes.backends.dali.outputs import each_sample, masks_tensor, to_torch
from dali_pipes.backends.targets import Moved, labels_to, target_dicts
from dali_pipes.data.interface import Annotated
from dali_pipes.data.targets import SampleTargets
from dali_pipes.errors import DataError


def batch_targets(source: Annotated, indices: np.ndarray) -> tuple[list[SampleTargets], Boxes]:
    """The targets of samples ``indices`` and their boxes as one batch (what a crop that
    places itself by the boxes is planned with)."""
    samples = [source.targets(int(i)) for i in indices]
    return samples, Boxes.of_samples([(t.boxes, t.labels) for t in samples])


def batch_objects(
    source: Annotated,
    name: Callable[[int], str],
    pipeline: Pipeline,
    min_size: float,
    draw: Draw,
    targets: tuple[list[SampleTargets], Boxes],
    indices: np.ndarray,
    sizes: np.ndarray,
) -> tuple[list[Moved], Masks | None]:
    """The objects of samples ``indices`` (of header ``sizes``, their ``targets`` from
    :func:`batch_targets`; ``name``: what a sample is called in an error) moved by
    ``draw``, their masks not yet (None each), and the masks' columns for data with masks."""
    samples, boxes = targets
    if source.task == "segmentation":  # each sample's one mask, a column of one channel
        g = draw.geometry
        columns = [np.ascontiguousarray(np.asarray(t.semantic)[..., None]) for t in samples]
        return [Moved(t.boxes, t.labels, None, t.image_id) for t in samples], _masks(columns, g)
    kept, keep = pipeline.targets.boxes(draw, boxes, min_size)
    moved = []
    for j, sample in enumerate(samples):
        xyxy, labels = kept.of(j)
        moved.append(Moved(xyxy, labels, None, sample.image_id))
    if not source.has_masks:
        return moved, None
    starts = np.searchsorted(boxes.sample, np.arange(len(samples) + 1))
    chosen = []
    for j, sample in enumerate(samples):
        masks = sample.masks
        assert masks is not None
        if masks.shape[1:] != tuple(sizes[j]):
            raise DataError(
                f"{name(int(indices[j]))}: masks of size {masks.shape[1:]} for an "
                f"image of size {tuple(int(v) for v in sizes[j])}; fix its annotations"
            )
        chosen.append(masks[keep[starts[j] : starts[j + 1]]])
    depth = max(1, max(len(m) for m in chosen))
    columns = []
    for masks in chosen:
        hwk = np.zeros((*masks.shape[1:], depth), np.uint8)
        hwk[..., : len(masks)] = masks.transpose(1, 2, 0)
        columns.append(hwk)
    return moved, _masks(columns, draw.geometry)


def _masks(columns: list[np.ndarray], g: Geometry) -> Masks:
    """The masks' columns: each sample's masks (``[H, W, K]``) and the crop's geometry."""
    anchor, shape = g.decode_window()
    start, end = g.nearest_roi()
    inside = g.inside().astype(np.float32)
    size = np.ascontiguousarray(g.shapes()[:, ::-1], dtype=np.float32)
    return Masks(columns, anchor, shape, start, end, inside, size)


def with_masks(moved: list[Moved], masks: Any) -> list[Moved]:
    """Each sample's objects with its masks cut out of the graph's ``[N, H, W, K]`` output
    (or of each sample's ``[H, W, K]`` one)."""
    return [
        m._replace(masks=masks[j][:, :, : len(m.labels)].permute(2, 0, 1))
        for j, m in enumerate(moved)
    ]


def detection_batch(
    outputs: Any,
    objects: list[Moved],
    masks: bool,
    device: torch.device,
    augment: AugmentSpec,
    dlpack: bool,
    task: str = "detection",
    own_sizes: bool = False,
) -> Batch:
    """DALI's ``outputs`` (the images, the masks when ``masks``, the labels) and the
    batch's ``objects`` as ``(images, targets)``: a target dict per image, or for
    segmentation the masks as one int64 ``[N, H, W]`` tensor, on ``device`` like the
    images; ``own_sizes``: each image (and mask) a size of its own, lists of them."""
    moved = objects
    if masks:  # the masks' output sits between the images and the labels
        if own_sizes:
            made: Any = each_sample(outputs[1], device, torch.uint8, dlpack)
        else:
            made = masks_tensor(outputs[1], device, dlpack)
        outputs = (outputs[0], outputs[2])
        if task == "segmentation":
            images, _ = to_torch(outputs, device, augment, dlpack=dlpack, own_sizes=own_sizes)
            if own_sizes:
                return images, [mask[..., 0].long() for mask in made]
            return images, made[..., 0].long()
        moved = with_masks(objects, made)
    images, _ = to_torch(outputs, device, augment, dlpack=dlpack, own_sizes=own_sizes)
    sizes = [(int(image.shape[-2]), int(image.shape[-1])) for image in views_of(images)]
    sizes = sizes if own_sizes else sizes[:1] * len(moved)
    return images, labels_to(target_dicts(moved, sizes), device)
