"""What a task is to the training loop: how one batch gives a loss, and how an evaluation
pass gives the epoch's figures.

The loop (:mod:`dali_pipes.train.loop`) calls a task and never asks which one it is:
classification (logits against labels, top-1/top-5), detection (a torchvision detector's
losses, COCO's mAP) or segmentation (per-pixel cross-entropy, mean IoU). Each pass's
figures come in two parts so that ranks combine them once: numbers every rank adds
(:attr:`Evaluated.sums`) and records gathered from every rank (:attr:`Evaluated.records`,
a detector's predictions); :meth:`Evaluated.figures` turns the combined parts into the
row's values.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from torch import nn

from dali_pipes.backends.base import Loader
from dali_pipes.train.step import StepConfig


class StepOut(NamedTuple):
    """One training batch: its loss (what is minimised), its sample count and the
    samples (or share of pixels) it got right, for the epoch's training figure."""

    loss: torch.Tensor
    samples: int
    correct: torch.Tensor


@dataclass
class Evaluated(ABC):
    """One rank's evaluation pass, before ranks are combined: ``sums``, the numbers to add
    over ranks (a sum of losses, counts, a confusion matrix)."""

    sums: list[float]

    def records(self) -> Any:
        """What to gather from every rank (None: nothing)."""
        return None

    @abstractmethod
    def figures(self, sums: Sequence[float], records: Sequence[Any]) -> dict[str, float]:
        """The pass's figures (``loss``, ``top1``, ``map``, ...) from the ranks' added
        :attr:`sums` and gathered :meth:`records`."""


class Task(ABC):
    """A kind of training: its loss per batch and its evaluation."""

    #: The config's ``task.name``.
    name: str
    #: The training figure :attr:`StepOut.correct` counts (``top1``), or None.
    train_figure: str | None = None
    #: The validation figure a run's summary reports (``top1``, ``map``, ``miou``).
    headline: str = "top1"
    #: The loss it trains, as the run's first log line names it.
    loss_name: str = ""

    @abstractmethod
    def step(self, net: nn.Module, images: Any, labels: Any, step: StepConfig) -> StepOut:
        """One training batch through ``net`` (in train mode) under ``step``'s autocast."""

    @abstractmethod
    def evaluate(self, net: nn.Module, loader: Loader, step: StepConfig) -> Evaluated:
        """One pass over ``loader`` without gradients (``net`` in eval mode)."""
