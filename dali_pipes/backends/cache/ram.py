"""``data.cache=ram``: decode every image once, augment from host memory every epoch.

The split is decoded once into host memory (:class:`~dali_pipes.backends.cache.store.
DecodedImages`: the memory check, and one copy per node under torchrun); every epoch
applies the split's crop geometry and ops with the torch backend's per-sample transform
(including its DALI-style edge lines), on a thread pool, so outputs equal the torch
backend's exactly. Order, sharding and augmentation are those of the other backends for
the same (seed, epoch, sample). The batches go to the model's device through the
side-stream prefetcher. (``data.cache=gpu`` is :mod:`dali_pipes.backends.cache.gpu`.)
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import torch

from dali_pipes.augment.geometry_torch import apply_row
from dali_pipes.backends.base import Batch, EpochPlan, Loader, loader_devices
from dali_pipes.backends.cache.store import DecodedImages, cached_batch
from dali_pipes.backends.handover import Handover, Normalizer
from dali_pipes.backends.specs import LoaderSpec
from dali_pipes.data.interface import images_of
from dali_pipes.data.sampling import draw_ids
from dali_pipes.runtime.distributed import cpu_share


class CachedLoader(Loader):
    def __init__(self, spec: LoaderSpec) -> None:
        super().__init__(spec)
        _, self.device = loader_devices(spec)  # batches are made on the CPU, handed here
        self._pool = ThreadPoolExecutor(cpu_share(), thread_name_prefix="dali-pipes-cache")
        try:
            self.store = DecodedImages(spec, torch.device("cpu"), self.bad, self._pool)
        except BaseException:
            self._pool.shutdown(wait=False, cancel_futures=True)
            raise
        self.images = self.store.images
        self._handover = Handover(self.device, Normalizer(spec.augment, self.device))

    @property
    def decoded_here(self) -> int:
        """Images this process decoded: all of them, or its part of the node's copy."""
        return self.store.decoded_here

    # ----------------------------------------------------------------- epochs

    def _epoch(self, plan: EpochPlan) -> Iterator[Batch]:
        yield from self._handover(self._batches(plan))

    def _batches(self, plan: EpochPlan) -> Iterator[Batch]:
        ahead: Future[Batch | None] | None = None
        for k in range(len(plan.batches) + 1):
            upcoming = self._pool.submit(self._assemble, plan, k) if k < len(plan.batches) else None
            if ahead is not None and (batch := ahead.result()) is not None:
                yield batch
            ahead = upcoming

    def _assemble(self, plan: EpochPlan, k: int) -> Batch | None:
        keep, repeats = cached_batch(
            self.spec,
            self.bad,
            self.images,
            plan.epoch,
            plan.batches[k],
            plan.positions[k],
            plan.repeats_of(k),
        )
        if not keep:
            return None
        images = [self.images[i] for i in keep]
        sizes = [img.shape[-2:] for img in images]  # type: ignore[union-attr]
        spec = self.spec
        source = images_of(spec.source, "data.cache holds decoded images", "use data.cache=null")
        views = spec.augment.views(spec.train)
        ids = draw_ids(source.identity(keep), repeats)
        draws = views.draw(sizes, ids, spec.sampling.seed, plan.epoch)
        stacked = []
        for pipeline, draw in zip(views.pipelines, draws, strict=True):
            out = []
            for j, image in enumerate(images):
                assert image is not None
                sample = apply_row(image, draw.geometry, j)
                out.append(pipeline.apply_torch(sample, draw, j))
            stacked.append(self._stack(out))
        labels = torch.as_tensor(source.labels[keep], dtype=torch.int64)
        if self.device.type == "cuda":
            labels = labels.pin_memory()
        return (stacked if spec.augment.multi_view(spec.train) else stacked[0]), labels

    def _stack(self, out: list[torch.Tensor]) -> torch.Tensor:
        """One view's samples as a batch; for a GPU, straight into pinned memory (the
        prefetcher's copy is asynchronous only from there), on the pool's thread, at no
        extra copy."""
        if self.device.type != "cuda":
            return torch.stack(out)
        pinned = torch.empty((len(out), *out[0].shape), dtype=out[0].dtype, pin_memory=True)
        return torch.stack(out, out=pinned)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        self.store.images.clear()  # the one list holding the images (or the node's mapping)
