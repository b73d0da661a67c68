"""Learning-rate schedules, stepped once per iteration after a linear warm-up, and the
one ``trainer.schedule`` names, built for a run."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.optim.lr_scheduler import LambdaLR

from dali_pipes.config.targets import build, locate, takes
from dali_pipes.config.trainer import TrainerSpec
from dali_pipes.errors import require


def make_scheduler(
    optimizer: torch.optim.Optimizer, spec: TrainerSpec, steps_per_epoch: int, total_steps: int
) -> Any:
    """``trainer.schedule`` for ``total_steps`` iterations, ``steps_per_epoch`` a epoch."""
    fn = locate(spec.schedule, "trainer.schedule")
    available = {
        "total_steps": total_steps,
        "warmup_steps": round(spec.warmup_epochs * steps_per_epoch),
        "steps_per_epoch": steps_per_epoch,
    }
    supplied = {k: v for k, v in available.items() if takes(fn, k)}
    scheduler = build(spec.schedule, "trainer.schedule", fn, optimizer=optimizer, **supplied)
    require(
        callable(getattr(scheduler, "step", None)) and hasattr(scheduler, "state_dict"),
        "trainer.schedule._target_",
        spec.schedule["_target_"],
        "must build a learning-rate scheduler (with step() and state_dict())",
    )
    return scheduler


def _warmup(step: int, warmup_steps: int) -> float | None:
    """The linear warm-up factor from ~0 to 1, or None once warm-up is over."""
    return (step + 1) / warmup_steps if step < warmup_steps else None


def warmup_cosine(
    optimizer: torch.optim.Optimizer, total_steps: int, warmup_steps: int
) -> LambdaLR:
    """Per-iteration schedule: linear from ~0 to the peak, then cosine down to 0."""

    def factor(step: int) -> float:
        warm = _warmup(step, warmup_steps)
        if warm is not None:
            return warm
        progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))

    return LambdaLR(optimizer, factor)


def warmup_linear(
    optimizer: torch.optim.Optimizer, total_steps: int, warmup_steps: int
) -> LambdaLR:
    """Per-iteration schedule: linear from ~0 to the peak, then linearly down to 0 at the
    last step."""

    def factor(step: int) -> float:
        warm = _warmup(step, warmup_steps)
        if warm is not None:
            return warm
        progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
        return max(0.0, 1.0 - progress)

    return LambdaLR(optimizer, factor)


def warmup_step(
    optimizer: torch.optim.Optimizer,
    warmup_steps: int,
    steps_per_epoch: int,
    milestones: tuple[float, ...] | list[float] = (30, 60, 80),
    gamma: float = 0.1,
) -> LambdaLR:
    """Per-iteration schedule: linear from ~0 to the peak, then the peak times ``gamma``
    for every milestone epoch passed (the classic ResNet recipe: 30, 60, 80 of 90 epochs).
    Milestones count from the start of training, warm-up included; one that falls inside
    the warm-up takes effect when warm-up ends."""
    marks = list(milestones)
    require(
        all(m > 0 for m in marks) and marks == sorted(set(marks)),
        "trainer.schedule.milestones",
        marks,
        "must be increasing epochs > 0",
    )
    require(0 < gamma <= 1, "trainer.schedule.gamma", gamma, "need 0 < gamma <= 1")
    boundaries = [round(m * steps_per_epoch) for m in marks]

    def factor(step: int) -> float:
        warm = _warmup(step, warmup_steps)
        if warm is not None:
            return warm
        return float(gamma ** sum(step >= b for b in boundaries))

    return LambdaLR(optimizer, factor)


def warmup_poly(
    optimizer: torch.optim.Optimizer, total_steps: int, warmup_steps: int, power: float = 0.9
) -> LambdaLR:
    """Per-iteration schedule: linear from ~0 to the peak, then torchvision's segmentation
    reference's poly decay, ``(1 - progress) ** power``, to 0 at the last step."""
    require(power > 0, "trainer.schedule.power", power, "must be > 0")

    def factor(step: int) -> float:
        warm = _warmup(step, warmup_steps)
        if warm is not None:
            return warm
        progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
        return max(0.0, 1.0 - progress) ** power

    return LambdaLR(optimizer, factor)
