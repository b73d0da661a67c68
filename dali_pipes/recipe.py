"""The training recipe: trainer settings, optimizer, learning-rate schedule, precision.

Standard large-batch ImageNet practice (Goyal et al., torchvision's reference recipe):
SGD with Nesterov momentum, learning rate ``base_lr * global_batch / 256``, linear warm-up
then cosine decay (stepped every iteration), label smoothing, no weight decay on
normalisation and bias parameters, bf16 autocast and channels_last on the GPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

from dali_pipes.spec import require

AMP = ("auto", "bf16", "fp16", "off")
SWITCH = ("auto", "on", "off")


@dataclass(frozen=True)
class TrainerSpec:
    """``trainer`` config group (defaults: the ResNet-50 ImageNet recipe)."""

    epochs: int = 90
    base_lr: float = 0.1  # at a global batch of lr_reference_batch
    lr_reference_batch: int = 256
    momentum: float = 0.9
    nesterov: bool = True
    weight_decay: float = 1e-4
    label_smoothing: float = 0.1
    warmup_epochs: float = 5.0
    amp: str = "auto"  # auto = bf16 on the GPU, off on the CPU
    channels_last: str = "auto"  # auto = on for the GPU
    max_steps_per_epoch: int | None = None  # cap for smoke runs and the doctor
    keep_checkpoints: int = 2

    def __post_init__(self) -> None:
        require(self.epochs >= 1, "trainer.epochs", self.epochs, "must be >= 1")
        require(self.base_lr > 0, "trainer.base_lr", self.base_lr, "must be > 0")
        require(
            self.lr_reference_batch >= 1,
            "trainer.lr_reference_batch",
            self.lr_reference_batch,
            "must be >= 1",
        )
        require(0 <= self.momentum < 1, "trainer.momentum", self.momentum, "need 0 <= m < 1")
        require(self.weight_decay >= 0, "trainer.weight_decay", self.weight_decay, "must be >= 0")
        require(
            0 <= self.label_smoothing < 1,
            "trainer.label_smoothing",
            self.label_smoothing,
            "need 0..1",
        )
        require(self.warmup_epochs >= 0, "trainer.warmup_epochs", self.warmup_epochs, ">= 0")
        require(self.amp in AMP, "trainer.amp", self.amp, f"choose one of {AMP}")
        require(
            self.channels_last in SWITCH,
            "trainer.channels_last",
            self.channels_last,
            f"choose one of {SWITCH}",
        )
        if self.max_steps_per_epoch is not None:
            require(
                self.max_steps_per_epoch >= 1,
                "trainer.max_steps_per_epoch",
                self.max_steps_per_epoch,
                "must be >= 1 or null",
            )
        require(
            self.keep_checkpoints >= 1, "trainer.keep_checkpoints", self.keep_checkpoints, ">= 1"
        )

    def autocast_dtype(self, device: torch.device) -> torch.dtype | None:
        """None = full precision."""
        if self.amp == "off" or (self.amp == "auto" and device.type != "cuda"):
            return None
        return torch.float16 if self.amp == "fp16" else torch.bfloat16

    def use_channels_last(self, device: torch.device) -> bool:
        return self.channels_last == "on" or (
            self.channels_last == "auto" and device.type == "cuda"
        )

    def peak_lr(self, global_batch: int) -> float:
        return self.base_lr * global_batch / self.lr_reference_batch


def param_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Weight decay on conv/linear weights only: not on norm layers' affine or any bias."""
    decay: list[nn.Parameter] = []
    no_decay: list[nn.Parameter] = []
    for module in model.modules():
        for name, param in module.named_parameters(recurse=False):
            if not param.requires_grad:
                continue
            is_norm = isinstance(
                module, (nn.modules.batchnorm._NormBase, nn.GroupNorm, nn.LayerNorm)
            )
            (no_decay if is_norm or name == "bias" else decay).append(param)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def make_optimizer(model: nn.Module, spec: TrainerSpec, global_batch: int) -> torch.optim.SGD:
    return torch.optim.SGD(
        param_groups(model, spec.weight_decay),
        lr=spec.peak_lr(global_batch),
        momentum=spec.momentum,
        nesterov=spec.nesterov and spec.momentum > 0,
    )


def warmup_cosine(
    optimizer: torch.optim.Optimizer, total_steps: int, warmup_steps: int
) -> LambdaLR:
    """Per-iteration schedule: linear from ~0 to the peak, then cosine down to 0."""

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))

    return LambdaLR(optimizer, factor)
