"""Classification: logits against class labels (hard, or the soft targets mixup/cutmix
make), top-1 while training, loss, top-1 and top-5 on evaluation."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from dali_pipes.backends.base import Loader
from dali_pipes.train.metrics import correct_topk, safe_div
from dali_pipes.train.step import StepConfig, prepare
from dali_pipes.train.tasks.base import Evaluated, StepOut, Task


def hard_labels(labels: torch.Tensor) -> torch.Tensor:
    """Class indices: the labels themselves, or each soft target's largest class."""
    return labels.argmax(dim=1) if labels.ndim == 2 else labels


@dataclass
class Classified(Evaluated):
    """A classification pass: sums of the loss, top-1 and top-5 hits, and samples."""

    def figures(self, sums: Sequence[float], records: Sequence[Any]) -> dict[str, float]:
        loss, top1, top5, n = sums
        return {"loss": safe_div(loss, n), "top1": safe_div(top1, n), "top5": safe_div(top5, n)}


class Classification(Task):
    """``criterion`` (``trainer.loss``: cross-entropy or BCE) on a model's logits."""

    name = "classification"
    train_figure = "top1"
    headline = "top1"

    def __init__(self, criterion: nn.Module) -> None:
        self.criterion = criterion
        self.loss_name = str(getattr(criterion, "kind", "ce"))  # trainer.loss

    def step(self, net: nn.Module, images: Any, labels: Any, step: StepConfig) -> StepOut:
        with step.autocasting(labels.device):
            logits = net(prepare(images, step))
            loss = self.criterion(logits, labels)
        correct = (logits.detach().argmax(dim=1) == hard_labels(labels)).sum()
        return StepOut(loss, len(labels), correct)

    @torch.no_grad()
    def evaluate(self, net: nn.Module, loader: Loader, step: StepConfig) -> Classified:
        net.eval()
        device = loader.device
        totals = torch.zeros(3, dtype=torch.float64, device=device)
        samples = 0.0
        for images, labels in loader:
            with step.autocasting(device):
                logits = net(prepare(images, step))
                loss = self.criterion(logits.float(), labels)
            top1, top5 = correct_topk(logits, hard_labels(labels), (1, 5))
            totals += torch.tensor(
                [float(loss) * len(labels), top1, top5], dtype=torch.float64, device=device
            )
            samples += len(labels)
        loss_sum, c1, c5 = (float(v) for v in totals.cpu())
        return Classified([loss_sum, c1, c5, samples])
