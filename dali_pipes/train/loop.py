"""One training epoch. Backend- and task-agnostic by construction: the loop only ever sees
``for images, labels in loader`` and ``loader.device``, and hands each batch to the task
(:mod:`dali_pipes.train.tasks`), which says what its loss is; the evaluation pass is the
task's."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel
from tqdm import tqdm

from dali_pipes.backends.base import Batch
from dali_pipes.train.ema import unwrap
from dali_pipes.train.step import StepConfig
from dali_pipes.train.tasks.base import Task

__all__ = ["BatchHook", "Batches", "EpochStats", "StepConfig", "train_one_epoch"]


class Batches(Protocol):
    """What the loop reads from a loader: its batches, how many, and their device (every
    :class:`~dali_pipes.backends.base.Loader`; ``doctor`` also replays one batch)."""

    device: torch.device

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[Batch]: ...


@dataclass
class EpochStats:
    """One pass's sums (loss, top-1/top-5 hits, samples, data wait, time) and where it stopped."""

    loss_sum: float = 0.0
    correct1: float = 0.0
    correct5: float = 0.0
    samples: float = 0.0
    data_wait: float = 0.0  # seconds spent waiting in next(loader)
    seconds: float = 0.0  # wall time of the whole pass
    steps: int = 0  # optimizer steps taken (read after an interruption)
    stopped: bool = False  # the pass ended early because a stop was requested
    #: per step, when a list is given: (seconds waiting for the batch, seconds of the whole
    #: step); ``doctor`` draws it. None: not recorded.
    timeline: list[tuple[float, float]] | None = None

    def count(self, samples: int, began: float, waited: float) -> None:
        """One step of ``samples`` done: it began at ``began`` (``perf_counter``), when
        the data wait stood at ``waited``."""
        self.steps += 1
        self.samples += samples
        if self.timeline is not None:
            self.timeline.append((self.data_wait - waited, time.perf_counter() - began))


#: Called with (the pass's step index, images, labels) before each step trains on them.
BatchHook = Callable[[int, Any, Any], None]


def train_one_epoch(
    model: nn.Module,
    loader: Batches,
    task: Task,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    scaler: torch.amp.GradScaler,
    cfg: StepConfig,
    desc: str,
    stats: EpochStats | None = None,
    ema: AveragedModel | None = None,
    stop: Callable[[], bool] | None = None,
    on_batch: BatchHook | None = None,
) -> EpochStats:
    """One pass over ``loader`` (at most ``cfg.max_steps`` steps), accumulated in ``stats``
    as it goes, so a caller interrupted mid-epoch still knows how far it got.

    ``ema``, if given, is updated from the (unwrapped) model after every optimizer step.
    With ``cfg.clip_grad_norm`` the gradients are unscaled (AMP) and clipped to that norm
    before the step. ``stop`` is asked after every whole step (never inside one); when it
    says so the pass ends there with ``stats.stopped`` set (preemption, see
    :mod:`dali_pipes.runtime.preemption`). ``on_batch`` sees each batch before its step."""
    params = [p for group in optimizer.param_groups for p in group["params"]]
    model.train()
    device = loader.device
    steps = len(loader) if cfg.max_steps is None else min(len(loader), cfg.max_steps)
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    correct = torch.zeros((), dtype=torch.float64, device=device)
    stats = EpochStats() if stats is None else stats
    # disable=None: a bar on a terminal, nothing in log files (the epoch summary covers it)
    bar = tqdm(total=steps, desc=desc, unit="batch", disable=None if cfg.progress else True)
    start = time.perf_counter()
    batches = iter(loader)
    for step in range(steps):
        began, waited = time.perf_counter(), stats.data_wait
        batch = _next_batch(batches, stats)
        if batch is None:
            break
        images, labels = batch
        if on_batch is not None:
            on_batch(step, images, labels)
        out = task.step(model, images, labels, cfg)
        _optimizer_step(out.loss, optimizer, scheduler, scaler, params, cfg.clip_grad_norm)
        if ema is not None:
            ema.update_parameters(unwrap(model))
        loss_sum += out.loss.detach().double() * out.samples
        correct += out.correct
        stats.count(out.samples, began, waited)
        _show_progress(bar, stats, start, step, steps, cfg.progress)
        if stop is not None and stop():
            stats.stopped = step < steps - 1  # after the epoch's last step it is just done
            break
    del batches  # an epoch cut short by max_steps is released here, not at the next iter
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    stats.seconds += time.perf_counter() - start
    stats.loss_sum += float(loss_sum)  # on top of what a resumed epoch already had
    stats.correct1 += float(correct)
    bar.close()
    return stats


def _next_batch(batches: Iterator[Batch], stats: EpochStats) -> Batch | None:
    """The loader's next batch (None at the end of the epoch), its wait counted in ``stats``."""
    waited = time.perf_counter()
    try:
        batch = next(batches)
    except StopIteration:
        return None
    stats.data_wait += time.perf_counter() - waited
    return batch


def _optimizer_step(
    loss: torch.Tensor,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    scaler: torch.amp.GradScaler,
    params: list[torch.Tensor],
    clip_grad_norm: float | None,
) -> None:
    """Backward (loss-scaled), optional clipping of the true gradients, optimizer and
    schedule step."""
    optimizer.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()
    if clip_grad_norm is not None:
        scaler.unscale_(optimizer)  # clip the true gradients, not the loss-scaled ones
        nn.utils.clip_grad_norm_(params, clip_grad_norm)
    scaler.step(optimizer)
    scaler.update()
    scheduler.step()


def _show_progress(
    bar: tqdm, stats: EpochStats, start: float, step: int, steps: int, progress: bool
) -> None:
    """Advance the bar; every 10 steps (and at the last) show images/s and the data wait."""
    bar.update(1)
    if progress and (step % 10 == 0 or step == steps - 1):
        elapsed = time.perf_counter() - start
        bar.set_postfix(
            img_s=f"{stats.samples / elapsed:.0f}",
            wait=f"{100 * stats.data_wait / elapsed:.0f}%",
        )
