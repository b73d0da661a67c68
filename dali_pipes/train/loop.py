"""One training epoch and one evaluation pass. Backend-agnostic by construction: the
loop only ever sees ``for images, labels in loader`` and ``loader.device``.

Labels come in two kinds, and the loop tells them apart by the tensor alone: int64 ``[N]``
class indices, or float ``[N, C]`` soft targets (mixup/cutmix). The criterion takes
either; accuracy counts a soft target's largest class as the label."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel
from tqdm import tqdm

from dali_pipes.backends.base import Batch, Loader
from dali_pipes.train.ema import unwrap
from dali_pipes.train.metrics import correct_topk


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
BatchHook = Callable[[int, torch.Tensor, torch.Tensor], None]


@dataclass(frozen=True)
class StepConfig:
    """How a step runs: autocast dtype, memory format, a step cap, the progress bar, clipping."""

    autocast: torch.dtype | None
    channels_last: bool
    max_steps: int | None = None
    progress: bool = False
    clip_grad_norm: float | None = None  # max norm of all gradients together; None = off


def _prepare(images: torch.Tensor, cfg: StepConfig) -> torch.Tensor:
    if cfg.channels_last:  # a no-op when the loader already returns channels_last
        return images.contiguous(memory_format=torch.channels_last)
    return images


def hard_labels(labels: torch.Tensor) -> torch.Tensor:
    """Class indices: the labels themselves, or each soft target's largest class."""
    return labels.argmax(dim=1) if labels.ndim == 2 else labels


def train_one_epoch(
    model: nn.Module,
    loader: Loader,
    criterion: nn.Module,
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
        logits, loss = _forward(model, criterion, images, labels, cfg, device)
        _optimizer_step(loss, optimizer, scheduler, scaler, params, cfg.clip_grad_norm)
        if ema is not None:
            ema.update_parameters(unwrap(model))
        loss_sum += loss.detach().double() * len(labels)
        correct += (logits.detach().argmax(dim=1) == hard_labels(labels)).sum()
        stats.count(len(labels), began, waited)
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


def _forward(
    model: nn.Module,
    criterion: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    cfg: StepConfig,
    device: torch.device,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(logits, loss) of one batch, under autocast when the step config asks for it."""
    with torch.autocast(device.type, dtype=cfg.autocast, enabled=cfg.autocast is not None):
        logits = model(_prepare(images, cfg))
        loss = criterion(logits, labels)
    return logits, loss


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


@torch.no_grad()
def evaluate(model: nn.Module, loader: Loader, criterion: nn.Module, cfg: StepConfig) -> EpochStats:
    """One pass over ``loader`` without gradients: the loss and top-1/top-5 sums."""
    model.eval()
    device = loader.device
    totals = torch.zeros(3, dtype=torch.float64, device=device)
    stats = EpochStats()
    start = time.perf_counter()
    for images, labels in loader:
        with torch.autocast(device.type, dtype=cfg.autocast, enabled=cfg.autocast is not None):
            logits = model(_prepare(images, cfg))
            loss = criterion(logits.float(), labels)
        top1, top5 = correct_topk(logits, hard_labels(labels), (1, 5))
        totals += torch.tensor(
            [float(loss) * len(labels), top1, top5], dtype=torch.float64, device=device
        )
        stats.samples += len(labels)
    stats.loss_sum, stats.correct1, stats.correct5 = (float(v) for v in totals.cpu())
    stats.seconds = time.perf_counter() - start
    return stats
