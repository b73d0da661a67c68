"""Optimizers: the one ``trainer.optimizer`` names, built over a model's parameter groups,
and one torch does not ship (LARS) for ``trainer.optimizer._target_``.

LARS is the optimizer of large-batch ResNet training (batches of 8k-32k images), where
one learning rate for every layer either diverges in the layers whose gradients are large
relative to their weights or crawls in the others.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn

from dali_pipes.config.targets import build, locate, takes
from dali_pipes.config.trainer import TrainerSpec
from dali_pipes.errors import require


class LARS(torch.optim.Optimizer):
    """SGD with momentum whose step for each parameter tensor ``w`` is scaled by its own
    trust ratio (Layer-wise Adaptive Rate Scaling; You, Gitman and Ginsburg, "Large Batch
    Training of Convolutional Networks", arXiv:1708.03888, 2017, Algorithm 1)::

        trust = eta * ||w|| / (||g|| + weight_decay * ||w||)
        v     = momentum * v + trust * (g + weight_decay * w)
        w     = w - lr * v

    The trust ratio keeps each layer's update a fixed fraction (about ``eta * lr``) of its
    weight norm whatever the scale of its gradient. It applies only to parameter groups
    with ``weight_decay > 0``: :func:`dali_pipes.train.optimizers.param_groups` puts norm layers'
    affine parameters and biases in a group without weight decay, and those take a plain
    momentum step, as in the paper's and later large-batch recipes (adapting biases and
    norm scales, whose norms are tiny or zero, destabilises training). A tensor whose
    weight or gradient norm is zero (e.g. zero-initialised) takes the plain step too.

    The learning rate multiplies the momentum buffer, as in ``torch.optim.SGD``, rather
    than entering the buffer as in the paper's Algorithm 1; the two are identical while
    the learning rate is constant and differ only in how a schedule's change reaches
    steps already in the buffer.
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict[str, Any]],
        lr: float = 0.1,
        momentum: float = 0.9,
        weight_decay: float = 0.0,
        eta: float = 0.001,
    ) -> None:
        if not lr >= 0:
            raise ValueError(f"invalid learning rate {lr}: need lr >= 0")
        if not 0 <= momentum < 1:
            raise ValueError(f"invalid momentum {momentum}: need 0 <= momentum < 1")
        if not weight_decay >= 0:
            raise ValueError(f"invalid weight_decay {weight_decay}: need weight_decay >= 0")
        if not eta > 0:
            raise ValueError(f"invalid eta {eta}: need eta > 0")
        defaults = {"lr": lr, "momentum": momentum, "weight_decay": weight_decay, "eta": eta}
        super().__init__(params, defaults)

    @staticmethod
    def trust_ratio(
        weight: torch.Tensor, grad: torch.Tensor, weight_decay: float, eta: float
    ) -> torch.Tensor:
        """``eta * ||w|| / (||g|| + weight_decay * ||w||)``, or 1 where either norm is 0;
        a 0-d tensor on the parameter's device (no host synchronisation)."""
        w_norm = torch.linalg.vector_norm(weight)
        g_norm = torch.linalg.vector_norm(grad)
        ratio = eta * w_norm / (g_norm + weight_decay * w_norm)
        return torch.where((w_norm > 0) & (g_norm > 0), ratio, torch.ones_like(ratio))

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, momentum = group["lr"], group["momentum"]
            weight_decay, eta = group["weight_decay"], group["eta"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                update = p.grad
                if weight_decay > 0:
                    trust = self.trust_ratio(p, update, weight_decay, eta)
                    update = update.add(p, alpha=weight_decay).mul_(trust)
                if momentum > 0:
                    state = self.state[p]
                    if "momentum_buffer" not in state:
                        state["momentum_buffer"] = torch.zeros_like(p)
                    update = state["momentum_buffer"].mul_(momentum).add_(update)
                p.add_(update, alpha=-lr)
        return loss


# --------------------------------------------------------------------------- parameter groups

#: The norm layers whose affine weights take no weight decay: torch's public batch, instance
#: (with their lazy forms), group and layer norms.
NORM_LAYERS: tuple[type[nn.Module], ...] = (
    nn.BatchNorm1d,
    nn.BatchNorm2d,
    nn.BatchNorm3d,
    nn.LazyBatchNorm1d,
    nn.LazyBatchNorm2d,
    nn.LazyBatchNorm3d,
    nn.SyncBatchNorm,
    nn.InstanceNorm1d,
    nn.InstanceNorm2d,
    nn.InstanceNorm3d,
    nn.LazyInstanceNorm1d,
    nn.LazyInstanceNorm2d,
    nn.LazyInstanceNorm3d,
    nn.GroupNorm,
    nn.LayerNorm,
)


def param_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Weight decay on conv/linear weights only: not on norm layers' affine or any bias."""
    decay: list[nn.Parameter] = []
    no_decay: list[nn.Parameter] = []
    for module in model.modules():
        for name, param in module.named_parameters(recurse=False):
            if not param.requires_grad:
                continue
            is_norm = isinstance(module, NORM_LAYERS)
            (no_decay if is_norm or name == "bias" else decay).append(param)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def make_optimizer(model: nn.Module, spec: TrainerSpec, global_batch: int) -> torch.optim.Optimizer:
    """``trainer.optimizer`` over ``model``'s parameter groups at the peak learning rate."""
    cls = locate(spec.optimizer, "trainer.optimizer")
    supplied: dict[str, Any] = {
        "params": param_groups(model, spec.weight_decay),
        "lr": spec.peak_lr(global_batch),
    }
    if takes(cls, "momentum"):
        supplied["momentum"] = spec.momentum
    if takes(cls, "nesterov"):  # SGD refuses Nesterov without momentum
        supplied["nesterov"] = spec.nesterov and spec.momentum > 0
    optimizer = build(spec.optimizer, "trainer.optimizer", cls, **supplied)
    require(
        isinstance(optimizer, torch.optim.Optimizer),
        "trainer.optimizer._target_",
        spec.optimizer["_target_"],
        "must build a torch.optim.Optimizer",
    )
    built: torch.optim.Optimizer = optimizer
    return built
