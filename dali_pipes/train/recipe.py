"""The ``trainer`` node of a run, checked in full: its values and ``_target_`` nodes when
it becomes a :class:`~dali_pipes.config.trainer.TrainerSpec`, then its optimizer and
schedule built once on a probe parameter, so a value their constructors refuse (AdamW's
betas out of range, a schedule's milestones out of order) fails in one line before any
data is read or any model is built."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from dali_pipes.config.specs import to_spec
from dali_pipes.config.trainer import TrainerSpec
from dali_pipes.train.optimizers import make_optimizer
from dali_pipes.train.schedules import make_scheduler


def trainer_spec(node: Any) -> TrainerSpec:
    """``node`` (a ``trainer`` config node) as a checked spec."""
    spec = to_spec(node, TrainerSpec)
    # A zero parameter, not a layer: initialising one would draw from torch's RNG.
    probe = nn.Module()
    probe.register_parameter("weight", nn.Parameter(torch.zeros(1)))
    make_scheduler(make_optimizer(probe, spec, spec.lr_reference_batch), spec, 10, 100)
    return spec
