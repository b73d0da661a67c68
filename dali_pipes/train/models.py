"""Models not in torchvision: a small CNN for the embedded sample dataset.

ResNets come straight from torchvision (``conf/model/resnet*.yaml``); this one exists so
the default ``python -m dali_pipes.train`` learns something real in CPU minutes.
"""

from __future__ import annotations

import torch
from torch import nn


def _block(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride=2, padding=1, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
        nn.Conv2d(cout, cout, 3, padding=1, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
    )


class SmallCNN(nn.Module):
    """Four stride-2 conv blocks, global average pooling, a linear classifier."""

    def __init__(self, num_classes: int, width: int = 32) -> None:
        super().__init__()
        w = width
        self.features = nn.Sequential(
            _block(3, w), _block(w, 2 * w), _block(2 * w, 4 * w), _block(4 * w, 4 * w)
        )
        self.head = nn.Linear(4 * w, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).mean(dim=(2, 3)))
