"""The ``trainer`` config node as a frozen spec: the ResNet-50 ImageNet recipe by default.

Standard large-batch ImageNet practice (Goyal et al., torchvision's reference recipe):
SGD with Nesterov momentum, learning rate ``base_lr * global_batch / 256``, linear warm-up
then cosine decay (stepped every iteration), label smoothing, no weight decay on
normalisation and bias parameters, bf16 autocast and channels_last on the GPU.

The optimizer and the schedule are Hydra-style ``_target_`` nodes (:mod:`dali_pipes.config.
targets` resolves them when the node becomes this spec; :mod:`dali_pipes.train` builds
them). The constructor checks values only; it imports nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from dali_pipes.errors import require
from dali_pipes.runtime.devices import check_trainer_device

AMP = ("auto", "bf16", "fp16", "off")
SWITCH = ("auto", "on", "off")
LOSSES = ("ce", "bce")

# Arguments the trainer supplies; a node that sets them would be silently overridden.
OPTIMIZER_SUPPLIED = {
    "params": "the parameter groups",
    "lr": "trainer.base_lr (scaled by the global batch)",
    "weight_decay": "trainer.weight_decay (applied to conv/linear weights only)",
    "momentum": "trainer.momentum",
    "nesterov": "trainer.nesterov",
}
SCHEDULE_SUPPLIED = {
    "optimizer": "the optimizer",
    "total_steps": "trainer.epochs x the steps per epoch",
    "warmup_steps": "trainer.warmup_epochs x the steps per epoch",
    "steps_per_epoch": "the loader's length (or trainer.max_steps_per_epoch)",
}


def _default_optimizer() -> dict[str, Any]:
    return {"_target_": "torch.optim.SGD"}


def _default_schedule() -> dict[str, Any]:
    return {"_target_": "dali_pipes.train.schedules.warmup_cosine"}


@dataclass(frozen=True)
class TrainerSpec:
    """``trainer`` config group (defaults: the ResNet-50 ImageNet recipe)."""

    epochs: int = 90
    base_lr: float = 0.1  # at a global batch of lr_reference_batch
    lr_reference_batch: int = 256
    momentum: float = 0.9  # for optimizers that take it (SGD, LARS)
    nesterov: bool = True  # for optimizers that take it (SGD)
    weight_decay: float = 1e-4
    label_smoothing: float = 0.1  # hard labels only: soft targets come smoothed
    warmup_epochs: float = 5.0
    optimizer: dict[str, Any] = field(default_factory=_default_optimizer)
    schedule: dict[str, Any] = field(default_factory=_default_schedule)
    loss: str = "ce"  # ce | bce
    ema_decay: float | None = None  # e.g. 0.9998; null = no EMA of the weights
    clip_grad_norm: float | None = None  # max global grad norm; null = no clipping
    compile: bool = False  # torch.compile the model
    amp: str = "auto"  # auto = bf16 on the GPU, off on the CPU
    channels_last: str = "auto"  # auto = on for the GPU
    max_steps_per_epoch: int | None = None  # cap for smoke runs and the doctor
    keep_checkpoints: int = 2
    # Seconds SIGTERM/SIGINT may wait for a step boundary before the process exits without
    # a checkpoint (dali_pipes.runtime.preemption); null: wait forever (a notebook).
    stop_timeout: float | None = 30.0
    # Where the model trains: auto | cuda | cpu. auto = where the loader makes batches (the
    # GPU when CUDA is usable, the CPU with backend.device=cpu); cuda with
    # backend.device=cpu hands CPU-made batches to a GPU model (dali_pipes.runtime.devices).
    device: str = "auto"
    # Debugging: every rank saves the batches of the run's first save_batches steps, as
    # trained on, to <output_dir>/batches/step_<n>_rank_<r>.pt (python -m dali_pipes.show
    # show.run=... show.step=n renders the same batch); 0 = none.
    save_batches: int = 0

    def __post_init__(self) -> None:
        check_trainer_device(self.device)
        self._check_optimisation()
        self._check_run()

    def _check_optimisation(self) -> None:
        """The schedule's and the loss's numbers (each with its key in the message)."""
        require(self.epochs >= 1, "trainer.epochs", self.epochs, "must be >= 1")
        require(0 < self.base_lr < math.inf, "trainer.base_lr", self.base_lr, "must be > 0")
        require(
            self.lr_reference_batch >= 1,
            "trainer.lr_reference_batch",
            self.lr_reference_batch,
            "must be >= 1",
        )
        require(0 <= self.momentum < 1, "trainer.momentum", self.momentum, "need 0 <= m < 1")
        require(
            0 <= self.weight_decay < math.inf,
            "trainer.weight_decay",
            self.weight_decay,
            "must be a finite number >= 0",
        )
        require(
            0 <= self.label_smoothing < 1,
            "trainer.label_smoothing",
            self.label_smoothing,
            "need 0..1",
        )
        require(
            0 <= self.warmup_epochs < math.inf,
            "trainer.warmup_epochs",
            self.warmup_epochs,
            "must be a finite number >= 0",
        )
        require(self.loss in LOSSES, "trainer.loss", self.loss, f"choose one of {LOSSES}")
        if self.ema_decay is not None:
            require(
                0 < self.ema_decay < 1,
                "trainer.ema_decay",
                self.ema_decay,
                "need 0 < decay < 1 (e.g. 0.9998) or null",
            )
        if self.clip_grad_norm is not None:
            require(
                0 < self.clip_grad_norm < math.inf,
                "trainer.clip_grad_norm",
                self.clip_grad_norm,
                "must be a finite number > 0 or null",
            )

    def _check_run(self) -> None:
        """Precision, memory format, steps, checkpoints kept, the stop's grace period."""
        if self.stop_timeout is not None:
            require(
                0 < self.stop_timeout < math.inf,
                "trainer.stop_timeout",
                self.stop_timeout,
                "must be a finite number of seconds > 0, or null",
            )
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
        require(self.save_batches >= 0, "trainer.save_batches", self.save_batches, ">= 0")

    def autocast_dtype(self, device: torch.device) -> torch.dtype | None:
        """None = full precision."""
        if self.amp == "off" or (self.amp == "auto" and device.type != "cuda"):
            return None
        return torch.float16 if self.amp == "fp16" else torch.bfloat16

    def use_channels_last(self, device: torch.device) -> bool:
        """Whether the model (and the loader's output) use channels_last on ``device``."""
        return self.channels_last == "on" or (
            self.channels_last == "auto" and device.type == "cuda"
        )

    def steps_per_epoch(self, batches: int) -> int:
        """Optimizer steps in an epoch of ``batches`` batches (``max_steps_per_epoch`` caps it)."""
        cap = self.max_steps_per_epoch
        return batches if cap is None else min(batches, cap)

    def step_at(self, step: int, batches: int) -> tuple[int, int]:
        """(epoch, the epoch's batch number) that the run's optimizer step ``step`` (counted
        from 0 over the whole run) trained on, for an epoch of ``batches`` batches: the
        mapping the trainer names saved batches by and ``show`` replays with."""
        per_epoch = self.steps_per_epoch(batches)
        require(step >= 0, "step", step, "must be >= 0")
        require(per_epoch >= 1, "step", step, "the epoch has no batches")
        epoch, batch = divmod(step, per_epoch)
        return epoch, batch

    def peak_lr(self, global_batch: int) -> float:
        """The learning rate after warm-up: ``base_lr`` scaled by the global batch."""
        return self.base_lr * global_batch / self.lr_reference_batch
