"""Semantic segmentation: per-pixel cross-entropy with the ignore index (plus half the
auxiliary head's, as torchvision's segmentation reference adds it), pixel accuracy while
training, and on evaluation the loss, the mean IoU and the pixel accuracy from a confusion
matrix summed over ranks (:mod:`dali_pipes.train.confusion`).

A model gives either the logits or torchvision's segmentation models' dict (``out``, and
``aux`` when built with an auxiliary head), at the input's size."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from dali_pipes.backends.base import Loader
from dali_pipes.errors import ConfigError
from dali_pipes.train.confusion import Confusion, scores
from dali_pipes.train.metrics import safe_div
from dali_pipes.train.step import StepConfig, prepare
from dali_pipes.train.tasks.base import Evaluated, StepOut, Task

#: The auxiliary head's weight in the loss (torchvision's segmentation reference).
AUX_WEIGHT = 0.5


def _heads(output: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(the main logits, the auxiliary head's or None) of a model's output."""
    if isinstance(output, dict):
        return output["out"], output.get("aux")
    return output, None


def _masks(labels: Any) -> torch.Tensor:
    if not isinstance(labels, torch.Tensor):
        raise ConfigError(
            "task=segmentation trains on batches of one size: choose a crop that gives one "
            "(augment=seg), not images of their own sizes"
        )
    return labels


@dataclass
class Segmented(Evaluated):
    """A segmentation pass: the loss sum, the samples, then the confusion matrix."""

    def figures(self, sums: Sequence[float], records: Sequence[Any]) -> dict[str, float]:
        loss, samples, *matrix = sums
        classes = round(len(matrix) ** 0.5)
        table = torch.tensor(matrix, dtype=torch.float64).reshape(classes, classes)
        return {"loss": safe_div(loss, samples), **scores(table)}


class Segmentation(Task):
    """Per-pixel classification into ``classes`` classes (background included), pixels
    marked ``ignore_index`` left out of the loss and the figures."""

    name = "segmentation"
    train_figure = "pixel_acc"
    headline = "miou"
    loss_name = "per-pixel ce"

    def __init__(self, classes: int, ignore_index: int = 255) -> None:
        self.classes = classes
        self.ignore_index = ignore_index

    def loss(self, output: Any, masks: torch.Tensor) -> torch.Tensor:
        """Cross-entropy of the main head, plus :data:`AUX_WEIGHT` times the auxiliary's."""
        main, aux = _heads(output)
        loss = F.cross_entropy(main.float(), masks, ignore_index=self.ignore_index)
        if aux is not None:
            loss = loss + AUX_WEIGHT * F.cross_entropy(
                aux.float(), masks, ignore_index=self.ignore_index
            )
        return loss

    def step(self, net: nn.Module, images: Any, labels: Any, step: StepConfig) -> StepOut:
        masks = _masks(labels)
        with step.autocasting(masks.device):
            output = net(prepare(images, step))
            loss = self.loss(output, masks)
        main, _ = _heads(output)
        counted = masks != self.ignore_index
        right = (main.detach().argmax(1) == masks) & counted
        # each image's share of right pixels, summed: the epoch's mean over images
        share = right.flatten(1).sum(1) / counted.flatten(1).sum(1).clamp(min=1)
        return StepOut(loss, len(masks), share.sum())

    @torch.no_grad()
    def evaluate(self, net: nn.Module, loader: Loader, step: StepConfig) -> Segmented:
        net.eval()
        confusion = Confusion(self.classes, self.ignore_index)
        loss_sum, samples = 0.0, 0.0
        for images, labels in loader:
            masks = _masks(labels)
            with step.autocasting(masks.device):
                output = net(prepare(images, step))
                loss = self.loss(output, masks)
            main, _ = _heads(output)
            confusion.add(masks, main.argmax(1))
            loss_sum += float(loss) * len(masks)
            samples += len(masks)
        matrix = [float(v) for v in confusion.matrix.flatten()]
        return Segmented([loss_sum, samples, *matrix])
