"""What a training run builds before its first step: the model (on its device, in its
memory format), its EMA, the DDP and ``torch.compile`` wrappers, the optimizer, the
schedule, the AMP scaler, the task (its loss and evaluation) and the step's settings.

:func:`trainer_spec` checks the ``trainer`` node in full first: its values and ``_target_``
nodes when it becomes a :class:`~dali_pipes.config.trainer.TrainerSpec`, then its optimizer
and schedule built once on a probe parameter, so a value their constructors refuse (AdamW's
betas out of range, a schedule's milestones out of order) fails in one line before any
data is read or any model is built.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from omegaconf import DictConfig
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.optim.swa_utils import AveragedModel

from dali_pipes.config.specs import to_spec
from dali_pipes.config.trainer import TrainerSpec
from dali_pipes.runtime import distributed
from dali_pipes.train.ema import make_ema
from dali_pipes.train.models import build_model
from dali_pipes.train.optimizers import make_optimizer
from dali_pipes.train.schedules import make_scheduler
from dali_pipes.train.step import StepConfig
from dali_pipes.train.tasks import Task, make_task


@dataclass
class TrainingState:
    """Everything a checkpoint saves and a step uses; ``net`` is what the step calls (the
    model inside DDP and ``torch.compile``), ``model`` the plain one checkpoints hold."""

    spec: TrainerSpec
    model: nn.Module
    net: nn.Module
    ema: AveragedModel | None
    optimizer: torch.optim.Optimizer
    scheduler: Any
    scaler: torch.amp.GradScaler
    task: Task
    step: StepConfig
    autocast: torch.dtype | None
    channels_last: bool
    global_batch: int
    world: int


def build_state(
    cfg: DictConfig, spec: TrainerSpec, loader: Any, device: torch.device, main: bool
) -> TrainingState:
    """The run's state for ``loader`` (the training split's) on ``device``."""
    world = distributed.ranks().world_size
    channels_last = spec.use_channels_last(device)
    model = build_model(cfg, loader.num_classes).to(device)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    # The EMA copies the plain model, before DDP attaches anything to its parameters.
    ema = make_ema(model, spec.ema_decay) if spec.ema_decay is not None else None
    ddp = (
        DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
        if distributed.active()
        else model
    )
    global_batch = loader.batch_size * world
    steps = spec.steps_per_epoch(len(loader))
    optimizer = make_optimizer(model, spec, global_batch)
    autocast = spec.autocast_dtype(device)
    step = StepConfig(
        autocast,
        channels_last,
        spec.max_steps_per_epoch,
        progress=main,
        clip_grad_norm=spec.clip_grad_norm,
    )
    # Compiled on top of DDP (Dynamo splits the graph at DDP's buckets, so the all-reduce
    # still overlaps the backward); checkpoints keep the plain ``model``'s state_dict (no
    # ``_orig_mod.`` prefix), so they load with or without compile.
    net: nn.Module = torch.compile(ddp) if spec.compile else ddp  # type: ignore[assignment]
    return TrainingState(
        spec=spec,
        model=model,
        net=net,
        ema=ema,
        optimizer=optimizer,
        scheduler=make_scheduler(optimizer, spec, steps, spec.epochs * steps),
        scaler=torch.amp.GradScaler(device.type, enabled=autocast == torch.float16),
        task=make_task(cfg, spec, loader.num_classes),
        step=step,
        autocast=autocast,
        channels_last=channels_last,
        global_batch=global_batch,
        world=world,
    )


def trainer_spec(node: Any) -> TrainerSpec:
    """``node`` (a ``trainer`` config node) as a checked spec."""
    spec = to_spec(node, TrainerSpec)
    # A zero parameter, not a layer: initialising one would draw from torch's RNG.
    probe = nn.Module()
    probe.register_parameter("weight", nn.Parameter(torch.zeros(1)))
    make_scheduler(make_optimizer(probe, spec, spec.lr_reference_batch), spec, 10, 100)
    return spec
