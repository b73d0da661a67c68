"""The batch contract every backend implements (see the README's "batch contract")."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator

import torch

from dali_pipes.errors import ConfigError
from dali_pipes.normalize import Batch
from dali_pipes.sampling import ShardSampler
from dali_pipes.spec import LoaderSpec


class Loader(ABC):
    """Behaves like ``DataLoader(ImageFolder, sampler=DistributedSampler)`` with transforms.

    ``iter(loader)`` starts an epoch: the one given to :meth:`set_epoch`, else the one after
    the previous ``iter``. Breaking out early and iterating again is fine. ``len(loader)``
    is the number of batches this rank yields per epoch, the same on every rank.
    """

    device: torch.device

    def __init__(self, spec: LoaderSpec) -> None:
        self.spec = spec
        self.sampler = ShardSampler(len(spec.source), spec.sampling)
        self._next_epoch = 0

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
    def num_samples(self) -> int:
        """Samples this rank yields per epoch (including DistributedSampler padding)."""
        return min(len(self) * self.batch_size, self.sampler.num_samples)

    def set_epoch(self, epoch: int) -> None:
        """Make the next ``iter`` run ``epoch``: order and augmentation are f(seed, epoch)."""
        if epoch < 0:
            raise ConfigError(f"epoch={epoch} is invalid: must be >= 0")
        self._next_epoch = int(epoch)

    def __iter__(self) -> Iterator[Batch]:
        return self._epoch(self._take_epoch())

    def _take_epoch(self) -> int:
        epoch = self._next_epoch
        self._next_epoch = epoch + 1
        return epoch

    @abstractmethod
    def _epoch(self, epoch: int) -> Iterator[Batch]:
        """Yield one epoch's batches."""

    def close(self) -> None:  # noqa: B027 - optional hook, most loaders hold nothing
        """Release worker processes, threads and pipelines (also done on garbage collection)."""

    def __enter__(self) -> Loader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
