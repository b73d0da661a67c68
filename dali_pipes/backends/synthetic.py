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
        self._images = self._make(0)
        self._labels = torch.from_numpy(spec.source.labels)

    def _make(self, epoch: int) -> list[torch.Tensor]:
        """One random batch per view at the view's size in ``epoch`` (a resolution schedule
        moves it)."""
        spec = self.spec
        fmt = torch.channels_last if spec.augment.channels_last else torch.contiguous_format
        g = torch.Generator().manual_seed(spec.sampling.seed)
        made = []
        for size in spec.augment.views(spec.train).sizes(epoch):
            shape = (spec.batch_size, 3, *size)
            if spec.augment.normalizes:
                images = torch.randn(shape, generator=g)
            else:  # pixels
                images = torch.randint(0, 256, shape, generator=g, dtype=torch.uint8)
            dtype = TORCH_DTYPES[spec.augment.dtype]
            made.append(images.to(self.device, dtype=dtype, memory_format=fmt))
        return made

    def _epoch(self, plan: EpochPlan) -> Iterator[Batch]:
        sizes = self.spec.augment.views(self.spec.train).sizes(plan.epoch)
        if [tuple(x.shape[-2:]) for x in self._images] != list(sizes):  # a schedule moved on
            self._images = self._make(plan.epoch)
        multi = self.spec.augment.multi_view(self.spec.train)
        for batch in plan.batches:
            labels = self._labels[torch.from_numpy(batch)].to(self.device, non_blocking=True)
            views = [images[: len(batch)] for images in self._images]
            yield (views if multi else views[0]), labels
