"""The model a config names (``model.arch``), and one torchvision lacks: a small CNN for
the embedded sample dataset.

ResNets come straight from torchvision (``conf/model/resnet*.yaml``); the small CNN exists
so the default ``python -m dali_pipes.train`` learns something real in CPU minutes.
"""

from __future__ import annotations

import logging
from pathlib import Path

import hydra
import torch
from hydra.errors import InstantiationException
from omegaconf import DictConfig
from torch import nn

from dali_pipes.errors import ConfigError

log = logging.getLogger("dali_pipes.train")


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
    """``cfg.model.arch`` built for ``num_classes`` (one line if it cannot be), then the
    tensors of ``cfg.model.weights_file`` loaded into it when one is given."""
    try:
        model: nn.Module = hydra.utils.instantiate(cfg.model.arch, num_classes=num_classes)
    except InstantiationException as exc:
        raise ConfigError(
            f"model={cfg.model.name!r} cannot be built: {str(exc).splitlines()[0]}"
        ) from None
    weights = cfg.model.get("weights_file")
    if weights:
        load_weights(model, Path(str(weights)).expanduser())
    return model


def load_weights(model: nn.Module, path: Path) -> None:
    """Load a local state dict (torchvision's published weights as downloaded, or a
    checkpoint's ``model``) into ``model``: every tensor whose name and shape match. The
    ones that do not -- a head for another number of classes -- keep their fresh values,
    and a line says which; nothing is downloaded."""
    if not path.is_file():
        raise ConfigError(f"model.weights_file={path} is not a file; give a local .pth file")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # a corrupt file or a pickle of objects: one line either way
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(
            f"model.weights_file={path} cannot be read as weights ({reason}); give a state "
            "dict saved with torch.save"
        ) from None
    if isinstance(state, dict) and isinstance(state.get("model"), dict):
        state = state["model"]  # a dali_pipes checkpoint
    own = model.state_dict()
    fitting = {k: v for k, v in state.items() if k in own and own[k].shape == v.shape}
    if not fitting:
        raise ConfigError(
            f"model.weights_file={path} has no tensor that fits model={model.__class__.__name__} "
            "(names and shapes differ); give weights of this architecture"
        )
    model.load_state_dict(fitting, strict=False)
    left = sorted(set(own) - set(fitting))
    log.info(
        "loaded %d of the model's %d tensors from %s%s",
        len(fitting),
        len(own),
        path,
        f"; kept fresh (not in the file or another shape): {', '.join(left[:6])}"
        + (f" and {len(left) - 6} more" if len(left) > 6 else "")
        if left
        else "",
    )
