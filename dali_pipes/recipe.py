"""The training recipe: trainer settings, optimizer, learning-rate schedule, loss, EMA.

Standard large-batch ImageNet practice (Goyal et al., torchvision's reference recipe) is
the default: SGD with Nesterov momentum, learning rate ``base_lr * global_batch / 256``,
linear warm-up then cosine decay (stepped every iteration), label smoothing, no weight
decay on normalisation and bias parameters, bf16 autocast and channels_last on the GPU.

The optimizer and the schedule are Hydra-style ``_target_`` nodes, so a recipe can name
``torch.optim.AdamW``, :class:`dali_pipes.optim.LARS` or its own class without code here:

- ``trainer.optimizer``: ``_target_`` is called with the parameter groups (weight decay
  ``trainer.weight_decay`` on conv/linear weights, none on norm/bias), ``lr`` (the peak
  learning rate), ``momentum`` / ``nesterov`` from ``trainer.momentum`` /
  ``trainer.nesterov`` when its constructor takes them, and the node's other keys.
- ``trainer.schedule``: ``_target_`` is called with the optimizer, whichever of
  ``total_steps``, ``warmup_steps`` and ``steps_per_epoch`` it takes, and the node's other
  keys, and returns a scheduler stepped once per iteration.

Both are resolved (imported) and checked against their constructor's signature, and built
once on a probe parameter, when the ``trainer`` node becomes a :class:`TrainerSpec`, so a
misspelt class or argument fails with one line before any data is read.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from hydra._internal.utils import _locate
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.optim.lr_scheduler import LambdaLR
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

from dali_pipes.augment.batch import one_hot
from dali_pipes.device import check_trainer_device
from dali_pipes.errors import ConfigError, require

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
    return {"_target_": "dali_pipes.recipe.warmup_cosine"}


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
    # Where the model trains: auto | cuda | cpu. auto = where the loader makes batches (the
    # GPU when CUDA is usable, the CPU with backend.device=cpu); cuda with
    # backend.device=cpu hands CPU-made batches to a GPU model (dali_pipes.device).
    device: str = "auto"

    def __post_init__(self) -> None:
        check_trainer_device(self.device)
        self._check_optimisation()
        self._check_run()
        self._check_factories()

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
        """Precision, memory format, steps and checkpoints kept."""
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

    def _check_factories(self) -> None:
        """The optimizer and schedule ``_target_`` nodes: known arguments, and values their
        constructors accept."""
        _check_target(self.optimizer, "trainer.optimizer", OPTIMIZER_SUPPLIED)
        _check_target(self.schedule, "trainer.schedule", SCHEDULE_SUPPLIED)
        # Build both once on a probe parameter: a value the constructor refuses (AdamW's
        # betas out of range, a schedule's milestones out of order) fails here, too.
        # (A zero parameter, not a layer: initialising one would draw from torch's RNG.)
        probe = nn.Module()
        probe.register_parameter("weight", nn.Parameter(torch.zeros(1)))
        make_scheduler(make_optimizer(probe, self, self.lr_reference_batch), self, 10, 100)

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


# --------------------------------------------------------------------------- _target_ nodes


def locate(node: Mapping[str, Any], key: str) -> Callable[..., Any]:
    """The callable a ``_target_`` node names (imported as Hydra's ``instantiate`` does), or
    a one-line :class:`ConfigError` naming ``<key>._target_``."""
    target = node.get("_target_")
    if not isinstance(target, str) or not target:
        raise ConfigError(
            f"{key}._target_={target!r} is invalid: must name a class or function, "
            "e.g. torch.optim.SGD"
        )
    try:
        obj = _locate(target)
    except Exception as exc:  # ImportError, or whatever the imported module raises
        reason = [ln.strip() for ln in str(exc).splitlines() if ln.strip()] or [type(exc).__name__]
        raise ConfigError(
            f"{key}._target_={target!r} is invalid: cannot import it ({reason[-1]})"
        ) from None
    require(callable(obj), f"{key}._target_", target, "is not a class or function")
    fn: Callable[..., Any] = obj
    return fn


def _parameters(fn: Callable[..., Any]) -> Mapping[str, inspect.Parameter] | None:
    """``fn``'s parameters, or None when it accepts any keyword or has no signature."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return None
    return params


def takes(fn: Callable[..., Any], name: str) -> bool:
    """Whether ``fn`` has a parameter ``name`` (a ``**kwargs`` catch-all does not count)."""
    params = _parameters(fn)
    return params is not None and name in params


def _kwargs(node: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in node.items() if k != "_target_"}


def _check_target(node: Any, key: str, supplied: Mapping[str, str]) -> None:
    require(
        isinstance(node, Mapping),
        key,
        node,
        "must be a node with a _target_ (e.g. {_target_: torch.optim.SGD})",
    )
    fn = locate(node, key)
    for name in _kwargs(node):
        require(
            name not in supplied,
            f"{key}.{name}",
            node[name],
            f"is set by the trainer from {supplied.get(name)}; remove it from {key}",
        )
    params = _parameters(fn)
    if params is not None:
        for name in _kwargs(node):
            require(
                name in params,
                f"{key}.{name}",
                node[name],
                f"{node['_target_']} takes no such argument "
                f"(it takes {', '.join(p for p in params if p not in supplied and p != 'self')})",
            )


def _build(node: Mapping[str, Any], key: str, fn: Callable[..., Any], **supplied: Any) -> Any:
    try:
        return fn(**supplied, **_kwargs(node))
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"{key}={dict(node)!r} cannot be built: {reason}") from None


# --------------------------------------------------------------------------- optimizer


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
    optimizer = _build(spec.optimizer, "trainer.optimizer", cls, **supplied)
    require(
        isinstance(optimizer, torch.optim.Optimizer),
        "trainer.optimizer._target_",
        spec.optimizer["_target_"],
        "must build a torch.optim.Optimizer",
    )
    built: torch.optim.Optimizer = optimizer
    return built


# --------------------------------------------------------------------------- schedules


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
    scheduler = _build(spec.schedule, "trainer.schedule", fn, optimizer=optimizer, **supplied)
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


# --------------------------------------------------------------------------- loss


def soft_target_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``(-targets * log_softmax(logits)).sum(-1).mean()`` (timm's SoftTargetCrossEntropy)."""
    return (-targets * F.log_softmax(logits, dim=-1)).sum(dim=-1).mean()


class TargetLoss(nn.Module):
    """``trainer.loss`` against hard labels (int64 ``[N]``) or soft targets (float
    ``[N, C]``, rows summing to 1, as mixup/cutmix make them), whichever the batch has.

    - ``ce``: hard labels -> cross-entropy with ``label_smoothing``; soft targets ->
      soft-target cross-entropy, not smoothed again (the batch stage already smoothed).
    - ``bce`` (timm's BinaryCrossEntropy, ResNet strikes back): binary cross-entropy with
      logits against the targets, hard labels made a one-hot smoothed by
      ``label_smoothing``, soft targets as given.

    The loss is computed in float32 whatever the autocast dtype of the logits.
    """

    def __init__(self, kind: str = "ce", label_smoothing: float = 0.0) -> None:
        super().__init__()
        require(kind in LOSSES, "trainer.loss", kind, f"choose one of {LOSSES}")
        self.kind = kind
        self.label_smoothing = label_smoothing

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = logits.float()
        soft = targets.is_floating_point()
        if self.kind == "ce":
            if soft:
                return soft_target_cross_entropy(logits, targets.float())
            return F.cross_entropy(logits, targets, label_smoothing=self.label_smoothing)
        if not soft:
            targets = one_hot(targets, logits.shape[1], self.label_smoothing)
        return F.binary_cross_entropy_with_logits(logits, targets.float())


def make_criterion(spec: TrainerSpec) -> TargetLoss:
    return TargetLoss(spec.loss, spec.label_smoothing)


# --------------------------------------------------------------------------- model wrappers


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
