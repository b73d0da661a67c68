"""The batch contract every backend implements (see the README's "batch contract")."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch

from dali_pipes.errors import ConfigError, DataError
from dali_pipes.normalize import Batch
from dali_pipes.sampling import sampler_for
from dali_pipes.spec import LoaderSpec

log = logging.getLogger("dali_pipes.data")


class BadFiles:
    """Files left out under ``on_error=skip``: each reported once, counted every epoch."""

    def __init__(self) -> None:
        self.reasons: dict[str, str] = {}
        self.epoch_paths: set[str] = set()  # distinct files left out in the current epoch

    @property
    def this_epoch(self) -> int:
        return len(self.epoch_paths)

    def add(self, path: str, reason: str | BaseException, *, count: bool = True) -> None:
        text = str(reason).removeprefix(f"{path}: ")
        if path not in self.reasons:
            self.reasons[path] = text
            log.warning("skipping %s: %s", path, text)
        if count:
            self.epoch_paths.add(path)

    def __contains__(self, path: object) -> bool:
        return path in self.reasons


@dataclass(frozen=True)
class EpochPlan:
    """One epoch of this rank: its number and its batches of sample indices, in order.

    ``first``: the epoch's batch number of ``batches[0]`` (non-zero when resuming).
    """

    epoch: int
    batches: list[np.ndarray]
    first: int = 0


class Loader(ABC):
    """Behaves like ``DataLoader(ImageFolder, sampler=DistributedSampler)`` with transforms.

    ``iter(loader)`` starts an epoch: the one given to :meth:`set_epoch`, else the one after
    the previous ``iter``. Breaking out early and iterating again is fine. ``len(loader)``
    is the number of batches this rank yields per epoch, the same on every rank.

    With ``on_error=skip`` a file that cannot be read or decoded is reported once
    (:attr:`bad_files`), counted (:attr:`skipped`) and left out of its batch.
    """

    device: torch.device

    def __init__(self, spec: LoaderSpec) -> None:
        self.spec = spec
        layout = getattr(spec.source, "layout", None)
        self.sampler = sampler_for(len(spec.source), spec.sampling, layout)
        self._next_epoch = 0
        self._start_batch = 0
        self.bad = BadFiles()
        for path, reason in getattr(spec.source, "rejected", ()):
            self.bad.add(path, reason, count=False)
        #: The split's batch ops (mixup/cutmix, random erasing), applied to every batch the
        #: loader yields, on its device; None without any.
        self.batch_stage = spec.augment.batch_stage(
            spec.train, self.num_classes, spec.sampling.seed, spec.sampling.rank
        )

    def __len__(self) -> int:
        return self.sampler.num_batches(self.spec.batch_size)

    @property
    def batch_size(self) -> int:
        return self.spec.batch_size

    @property
    def classes(self) -> tuple[str, ...]:
        return self.spec.source.classes

    @property
    def num_classes(self) -> int:
        return len(self.spec.source.classes)

    @property
    def skip(self) -> bool:
        return self.spec.on_error == "skip"

    @property
    def skipped(self) -> int:
        """Samples left out (unreadable or undecodable) in the current or last epoch."""
        return self.bad.this_epoch

    @property
    def bad_files(self) -> dict[str, str]:
        """Every file left out so far, with the reason."""
        return dict(self.bad.reasons)

    def set_epoch(self, epoch: int, start_batch: int = 0) -> None:
        """Make the next ``iter`` run ``epoch``: order and augmentation are f(seed, epoch).

        ``start_batch`` resumes an epoch part-way (after an interrupted run): the batches
        before it are not read.
        """
        if epoch < 0:
            raise ConfigError(f"epoch={epoch} is invalid: must be >= 0")
        if not 0 <= start_batch <= len(self):
            raise ConfigError(f"start_batch={start_batch} is invalid: must be in [0, {len(self)}]")
        self._next_epoch = int(epoch)
        self._start_batch = int(start_batch)

    def __iter__(self) -> Iterator[Batch]:
        plan = self._take_epoch()
        return self._staged(plan, self._epoch(plan))

    def _staged(self, plan: EpochPlan, batches: Iterator[Batch]) -> Iterator[Batch]:
        """``batches`` through the batch stage, batch ``k`` keyed as the epoch's batch
        ``plan.first + k`` (so a resumed epoch mixes as the uninterrupted one did)."""
        stage = self.batch_stage
        if stage is None:
            return batches

        def staged() -> Iterator[Batch]:
            for k, (images, labels) in enumerate(batches, start=plan.first):
                yield stage(images, labels, epoch=plan.epoch, position=k)

        return staged()

    def _take_epoch(self) -> EpochPlan:
        epoch, start = self._next_epoch, self._start_batch
        self._next_epoch, self._start_batch = epoch + 1, 0
        self.bad.epoch_paths = set()
        return EpochPlan(epoch, self.sampler.batches(epoch, self.spec.batch_size)[start:], start)

    @abstractmethod
    def _epoch(self, plan: EpochPlan) -> Iterator[Batch]:
        """Yield one epoch's batches."""

    def _report(self, path: str, error: DataError) -> None:
        """A bad file: raise, or (``on_error=skip``) record it and carry on."""
        if not self.skip:
            raise error
        self.bad.add(path, error)

    def close(self) -> None:  # noqa: B027 - optional hook, most loaders hold nothing
        """Release worker processes, threads and pipelines (also done on garbage collection)."""

    def __enter__(self) -> Loader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
