"""The model a config names (``model.arch``), and one torchvision lacks: a small CNN for
the embedded sample dataset.

ResNets come straight from torchvision (``conf/model/resnet*.yaml``); the small CNN exists
so the default ``python -m dali_pipes.train`` learns something real in CPU minutes.
"""

from __future__ import annotations

import hydra
import torch
from hydra.errors import InstantiationException
from omegaconf import DictConfig
from torch import nn

from dali_pipes.errors import ConfigError


def block(cin: int, cout: int) -> nn.Sequential:
    """A stride-2 convolution and a plain one, each with batch norm and ReLU."""
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
            block(3, w), block(w, 2 * w), block(2 * w, 4 * w), block(4 * w, 4 * w)
        )
        self.head = nn.Linear(4 * w, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).mean(dim=(2, 3)))


def build_model(cfg: DictConfig, num_classes: int) -> nn.Module:
    """``cfg.model.arch`` built for ``num_classes`` (one line if it cannot be)."""
    try:
        model: nn.Module = hydra.utils.instantiate(cfg.model.arch, num_classes=num_classes)
    except InstantiationException as exc:
        raise ConfigError(
            f"model={cfg.model.name!r} cannot be built: {str(exc).splitlines()[0]}"
        ) from None
    return model
