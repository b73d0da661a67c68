"""The model inside its wrappers, and an exponential moving average of its weights."""

from __future__ import annotations

from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn


def unwrap(model: nn.Module) -> nn.Module:
    """The plain model inside ``torch.compile`` and DDP wrappers: the one whose
    ``state_dict`` has no ``_orig_mod.`` / ``module.`` prefix and loads either way."""
    inner = getattr(model, "_orig_mod", model)
    return inner.module if isinstance(inner, DistributedDataParallel) else inner


def make_ema(model: nn.Module, decay: float) -> AveragedModel:
    """An exponential moving average of ``model``'s weights *and* buffers (BatchNorm
    statistics), so the average evaluates as a model of its own; update it with
    ``ema.update_parameters(model)`` after each optimizer step."""
    return AveragedModel(unwrap(model), multi_avg_fn=get_ema_multi_avg_fn(decay), use_buffers=True)
