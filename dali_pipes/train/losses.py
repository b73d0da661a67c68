"""``trainer.loss``: cross-entropy or binary cross-entropy, against hard labels or the
soft targets mixup/cutmix make."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from dali_pipes.augment.batch import one_hot
from dali_pipes.config.trainer import LOSSES, TrainerSpec
from dali_pipes.errors import require


def soft_target_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``(-targets * log_softmax(logits)).sum(-1).mean()`` (timm's SoftTargetCrossEntropy)."""
    return (-targets * F.log_softmax(logits, dim=-1)).sum(dim=-1).mean()


class TargetLoss(nn.Module):
    """``trainer.loss`` against hard labels (int64 ``[N]``) or soft targets (float
    ``[N, C]``, rows summing to 1, as mixup/cutmix make them), whichever the batch has.

    - ``ce``: hard labels -> cross-entropy with ``label_smoothing``; soft targets ->
      soft-target cross-entropy, not smoothed again (the batch stage already smoothed).
    - ``bce`` (timm's BinaryCrossEntropy, ResNet strikes back): binary cross-entropy with
      logits against the targets, hard labels made a one-hot smoothed by
      ``label_smoothing``, soft targets as given.

    The loss is computed in float32 whatever the autocast dtype of the logits.
    """

    def __init__(self, kind: str = "ce", label_smoothing: float = 0.0) -> None:
        super().__init__()
        require(kind in LOSSES, "trainer.loss", kind, f"choose one of {LOSSES}")
        self.kind = kind
        self.label_smoothing = label_smoothing

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = logits.float()
        soft = targets.is_floating_point()
        if self.kind == "ce":
            if soft:
                return soft_target_cross_entropy(logits, targets.float())
            return F.cross_entropy(logits, targets, label_smoothing=self.label_smoothing)
        if not soft:
            targets = one_hot(targets, logits.shape[1], self.label_smoothing)
        return F.binary_cross_entropy_with_logits(logits, targets.float())


def make_criterion(spec: TrainerSpec) -> TargetLoss:
    """The loss ``spec.loss`` names, with its label smoothing."""
    return TargetLoss(spec.loss, spec.label_smoothing)
