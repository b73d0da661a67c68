"""synthetic backend: one random batch already on the device, real labels and order.

This is the throughput ceiling (what training reaches when input costs nothing). Labels,
order, sharding and ``len`` follow the dataset exactly like the real backends, so a
training run on it is a fair stand-in; only the pixels are random. Nothing is decoded, so
the batch lives where batches are handed over (the model's device,
:func:`dali_pipes.backends.base.loader_devices`).
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from dali_pipes.backends.base import Batch, EpochPlan, Loader, loader_devices
from dali_pipes.backends.handover import TORCH_DTYPES
from dali_pipes.backends.specs import LoaderSpec


class SyntheticLoader(Loader):
    def __init__(self, spec: LoaderSpec) -> None:
        super().__init__(spec)
        _, self.device = loader_devices(spec)
        self._images = self._make(spec.augment.out_shape(spec.train))
        self._labels = torch.from_numpy(spec.source.labels)

    def _make(self, size: tuple[int, int]) -> torch.Tensor:
        spec = self.spec
        g = torch.Generator().manual_seed(spec.sampling.seed)
        shape = (spec.batch_size, 3, *size)
        if spec.augment.normalizes:
            images = torch.randn(shape, generator=g)
        else:  # pixels
            images = torch.randint(0, 256, shape, generator=g, dtype=torch.uint8)
        fmt = torch.channels_last if spec.augment.channels_last else torch.contiguous_format
        return images.to(self.device, dtype=TORCH_DTYPES[spec.augment.dtype], memory_format=fmt)

    def _epoch(self, plan: EpochPlan) -> Iterator[Batch]:
        size = self.spec.augment.out_shape(self.spec.train, plan.epoch)
        if tuple(self._images.shape[-2:]) != size:  # a resolution schedule moved on
            self._images = self._make(size)
        for batch in plan.batches:
            labels = self._labels[torch.from_numpy(batch)].to(self.device, non_blocking=True)
            yield self._images[: len(batch)], labels
