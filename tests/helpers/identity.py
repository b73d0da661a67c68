"""The identity tree's sizes and normalisation, which samples a batch holds, and a
loader's whole epoch as one batch."""

from __future__ import annotations

from typing import Any

import torch
from conftest import IDENTITY_CLASSES, colour_id

N = sum(IDENTITY_CLASSES.values())  # 17
SIZE, RESIZE = 32, 36
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def ids(images: torch.Tensor) -> list[int]:
    """Sample indices of a batch of identity images."""
    std = torch.tensor(STD).view(1, 3, 1, 1) * 255
    mean = torch.tensor(MEAN).view(1, 3, 1, 1) * 255
    rgb = (images.float().cpu() * std + mean).mean(dim=(2, 3)).numpy()
    return [colour_id(c) for c in rgb]


def epoch(loader: Any, number: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Epoch ``number`` of ``loader``: its images and labels, every batch joined."""
    loader.set_epoch(number)
    images, labels = zip(*loader, strict=True)
    return torch.cat(images), torch.cat(labels)


def levels(images: torch.Tensor) -> torch.Tensor:
    """Normalised batches back on the 0-255 scale of the parity bounds."""
    return (images * torch.tensor(STD).view(1, 3, 1, 1) + torch.tensor(MEAN).view(1, 3, 1, 1)) * 255
