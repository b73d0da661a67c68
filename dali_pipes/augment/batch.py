"""The batch stage: ops on whole batches after the per-sample ops, one torch implementation.

Mixup, cutmix and random erasing need the batch (mixup pairs samples) or act on the
normalised image (erasing's per-pixel noise), so they run on the loader's output, on its
device, as timm's ``PrefetchLoader`` + ``Mixup`` and torchvision v2's ``MixUp``/``CutMix``
do -- the same code for every backend, so the training loop never branches on one.

A batch op is a frozen dataclass whose fields are its parameters (the config schema:
``augment.train.batch.<name>.<param>``). Its random parameters are drawn in NumPy from a
generator keyed by (seed, epoch, batch position, rank), never from a global RNG, so the
same batch gets the same mixing on every backend, a resumed epoch replays exactly and
``set_epoch`` is reproducible; per-pixel noise comes from a torch generator seeded from
the same key (its values depend on the device type, CPU or CUDA, like any torch RNG).

Without a batch op, labels stay int64 ``[N]``; with mixup/cutmix they become float32 soft
targets ``[N, num_classes]`` whose rows sum to 1 (the batch contract, docs/reference/loader.md).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, TypeVar, overload

import numpy as np
import torch

from dali_pipes.augment.base import construct, register_class
from dali_pipes.errors import ConfigError
from dali_pipes.registry import Registry

BatchOpClass = TypeVar("BatchOpClass", bound="type[BatchOp]")

# Keeps the batch stage's draws apart from any other user of the same seed.
_STREAM = 0xBA7C


class BatchOp(ABC):
    """One op of the batch stage (subclasses are frozen dataclasses)."""

    #: The name the config uses.
    name: ClassVar[str]
    #: True when the op turns labels into soft targets ``[N, num_classes]``.
    soft_targets: ClassVar[bool] = False

    @property
    def integer_safe(self) -> bool:
        """Whether the op is right on uint8 batches (``augment.dtype=uint8``) too."""
        return False

    def check(self, num_classes: int, key: str) -> None:  # noqa: B027 - optional hook
        """Refuse data the op cannot work with (called when a loader is built)."""

    @abstractmethod
    def draw(self, rng: np.random.Generator, n: int, size: tuple[int, int]) -> dict[str, Any]:
        """The batch's random parameters for ``n`` images of ``size`` (height, width)."""

    @abstractmethod
    def apply(
        self,
        images: torch.Tensor,
        targets: torch.Tensor,
        params: Mapping[str, Any],
        noise: torch.Generator,
        num_classes: int,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The op on a batch; returns new tensors (the caller's are left as they were)."""


#: Every batch op by its config name (:mod:`dali_pipes.registry`).
BATCH_OPS: Registry[type[BatchOp]] = Registry("batch op")


@overload
def register_batch_op(cls: BatchOpClass, *, replace: bool = False) -> BatchOpClass: ...
@overload
def register_batch_op(
    cls: None = None, *, replace: bool = False
) -> Callable[[BatchOpClass], BatchOpClass]: ...
def register_batch_op(cls: BatchOpClass | None = None, *, replace: bool = False) -> Any:
    """Class decorator: make ``cls`` usable by its ``name`` under ``augment.<split>.batch``
    (another class under a taken name is refused unless ``replace=True``)."""
    if cls is None:
        return lambda c: register_batch_op(c, replace=replace)
    register_class(BATCH_OPS, cls, replace=replace)
    return cls


def batch_op_names() -> tuple[str, ...]:
    """Registered batch-op names, sorted (the config's choices)."""
    return tuple(sorted(BATCH_OPS))


def parse_batch(entries: Any, key: str) -> tuple[tuple[BatchOp, ...], tuple[str, ...]]:
    """Batch ops from config: a mapping ``name -> parameters`` in order (``null`` disables
    one; an ``op`` key names the op when the name is a label). Errors name the key."""
    if entries is None:
        return (), ()
    if not isinstance(entries, Mapping):
        raise ConfigError(f"{key}={entries!r} is invalid: expected a mapping of op -> parameters")
    ops: list[BatchOp] = []
    labels: list[str] = []
    for label, entry in entries.items():
        if entry is None:
            continue
        where = f"{key}.{label}"
        if isinstance(entry, BatchOp):
            ops.append(entry)
            labels.append(str(label))
            continue
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{where}={entry!r} is invalid: expected the op's parameters")
        params = {str(k): v for k, v in entry.items()}
        name = str(params.pop("op", label))
        cls = BATCH_OPS.get(name)
        if cls is None:
            raise ConfigError(
                f"{where}: unknown batch op {name!r}; known batch ops: "
                f"{', '.join(batch_op_names())}"
            )
        ops.append(construct(cls, params, where, name))
        labels.append(str(label))
    return tuple(ops), tuple(labels)


def batch_config(ops: tuple[BatchOp, ...], labels: tuple[str, ...]) -> dict[str, Any]:
    """The canonical config form of batch ops (every parameter given, ``op`` named)."""
    return {
        label: {"op": op.name, **asdict(op)}  # type: ignore[call-overload]
        for label, op in zip(labels, ops, strict=True)
    }


@dataclass(frozen=True)
class BatchStage:
    """The batch ops of a split, ready to call on a loader's batches.

    ``stage(images, labels, epoch=e, position=b)`` applies them to batch ``b`` of epoch
    ``e`` (of ``rank``) and returns ``(images, targets)``; the loaders call it for you, and
    it works as well on any other loader's output in your own loop (like timm's ``Mixup``).
    ``images`` are normalised ``[N, 3, H, W]`` (any float dtype, any memory format); they
    are not changed in place.
    """

    ops: tuple[BatchOp, ...]
    num_classes: int
    seed: int = 0
    rank: int = 0
    key: str = "augment.train.batch"
    labels: tuple[str, ...] = ()  # the ops' keys in the config (default: their names)

    def __post_init__(self) -> None:
        labels = self.labels or tuple(op.name for op in self.ops)
        for label, op in zip(labels, self.ops, strict=True):
            op.check(self.num_classes, f"{self.key}.{label}")

    @property
    def soft_targets(self) -> bool:
        """Whether labels come out as float32 ``[N, num_classes]``."""
        return any(op.soft_targets for op in self.ops)

    def rng(self, epoch: int, position: int) -> np.random.Generator:
        """The batch's NumPy generator: a pure function of (seed, epoch, position, rank)."""
        return np.random.default_rng([_STREAM, self.seed, epoch, position, self.rank])

    def __call__(
        self, images: torch.Tensor, labels: torch.Tensor, *, epoch: int, position: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        rng = self.rng(epoch, position)
        noise = torch.Generator(device=images.device)
        noise.manual_seed(int(rng.integers(2**63 - 1)))
        size = (int(images.shape[-2]), int(images.shape[-1]))
        targets = labels
        for op in self.ops:
            params = op.draw(rng, len(images), size)
            images, targets = op.apply(images, targets, params, noise, self.num_classes)
        return images, targets


def one_hot(labels: torch.Tensor, num_classes: int, smoothing: float = 0.0) -> torch.Tensor:
    """float32 ``[N, num_classes]``: ``1 - smoothing + smoothing/C`` on the label, ``smoothing/C``
    elsewhere (timm's ``one_hot`` with label smoothing); soft targets pass through."""
    if labels.is_floating_point():
        return labels
    off = smoothing / num_classes
    out = torch.full((len(labels), num_classes), off, dtype=torch.float32, device=labels.device)
    return out.scatter_(1, labels.view(-1, 1), 1.0 - smoothing + off)
