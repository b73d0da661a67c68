"""Object detection (and instance segmentation) with torchvision's detection models: the
sum of the model's own losses while training, COCO's box mAP (and mask mAP for Mask
R-CNN) on evaluation, by pycocotools over every rank's predictions gathered once
(:mod:`dali_pipes.train.coco_map`).

A batch is ``(images, targets)`` as the loaders hand it over: images one tensor or a list
of ``[3, H, W]`` (each its own size), targets a dict per image. torchvision's detectors
take the images as a list and resize and normalise them themselves (build them with
``image_mean`` 0 and ``image_std`` 1 when the loader normalises, as the configs here
do). In eval mode they return predictions, not losses, so no validation loss is reported.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from dali_pipes.backends.base import Loader
from dali_pipes.train.coco_map import CocoRecords, coco_map, require_pycocotools
from dali_pipes.train.step import StepConfig
from dali_pipes.train.tasks.base import Evaluated, StepOut, Task


def _listed(images: Any) -> list[torch.Tensor]:
    """A batch's images as the list a torchvision detector takes."""
    return list(images.unbind(0)) if isinstance(images, torch.Tensor) else list(images)


@dataclass
class Detected(Evaluated):
    """A detection pass: its sample count, and its images' COCO records."""

    categories: tuple[int, ...] = ()
    found: CocoRecords = field(default_factory=CocoRecords)

    def records(self) -> Any:
        return self.found

    def figures(self, sums: Sequence[float], records: Sequence[Any]) -> dict[str, float]:
        return coco_map(records, self.categories)


class Detection(Task):
    """A torchvision detector trained on its own losses, evaluated by COCO's mAP over
    labels 1 to ``classes - 1`` (0 is the background); ``masks``: Mask R-CNN, scored on
    its masks too."""

    name = "detection"
    train_figure = None
    headline = "map"
    loss_name = "the detector's own"

    def __init__(self, classes: int, masks: bool = False) -> None:
        require_pycocotools()
        self.categories = tuple(range(1, classes))
        self.masks = masks

    def step(self, net: nn.Module, images: Any, labels: Any, step: StepConfig) -> StepOut:
        listed = _listed(images)
        with step.autocasting(listed[0].device):
            losses = net(listed, list(labels))
        loss = sum(losses.values(), torch.zeros((), device=listed[0].device))
        return StepOut(loss, len(listed), torch.zeros((), device=listed[0].device))

    @torch.no_grad()
    def evaluate(self, net: nn.Module, loader: Loader, step: StepConfig) -> Detected:
        net.eval()
        records = CocoRecords(masks=self.masks)
        samples = 0.0
        for images, targets in loader:
            listed = _listed(images)
            with step.autocasting(loader.device):
                outputs = net(listed)
            records.add(targets, outputs)
            samples += len(listed)
        return Detected([samples], self.categories, records)
