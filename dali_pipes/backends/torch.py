"""torch backend: torchvision decode + transforms v2 in DataLoader workers.

It is the fallback when DALI is not wanted and the reference the DALI path is checked
against. Workers decode with :mod:`dali_pipes.image.decode` (``torchvision.io``), apply the
shared crop geometry (realised by :mod:`dali_pipes.augment.geometry_torch`) and the split's ops
(torchvision's functional ops with the parameters :meth:`dali_pipes.augment.Pipeline.draw`
computes); batches travel as uint8 and are normalised in the main process, on a CUDA side
stream when on a GPU. The workers are not forked from the training process, whose DALI
and torch threads may be running: they start from a fresh interpreter
(:func:`dali_pipes.runtime.pools.fresh_context`), with the caller's environment and the
names its registries hold. A dataset or a registered plug-in that such an interpreter
cannot rebuild (a class defined in ``__main__`` or a notebook) is forked instead, as
``DataLoader`` does by default.

Decoding is always on the CPU here, so placement only decides where batches are handed over
(:func:`dali_pipes.backends.base.loader_devices`): with a GPU output -- ``backend.device=gpu``, or
``backend.device=cpu`` feeding a ``trainer.device=cuda`` model -- workers fill pinned
memory and the uint8 batch (4x less traffic than float) is copied and normalised on that
GPU's side stream, one batch ahead.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from functools import partial
from typing import Any, NamedTuple

import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from dali_pipes.augment.geometry_torch import apply_row
from dali_pipes.augment.targets.boxes import Boxes
from dali_pipes.backends.base import (
    Batch,
    EpochPlan,
    Images,
    Loader,
    has_views,
    loader_devices,
    stack_samples,
    views_of,
)
from dali_pipes.backends.handover import Handover, Normalizer
from dali_pipes.backends.specs import LoaderSpec, TorchBackend
from dali_pipes.backends.targets import Moved, batch_targets, moved_sample
from dali_pipes.data.interface import Annotated, images_of, mask_fill, misfit
from dali_pipes.data.sampling import draw_ids
from dali_pipes.data.substitutes import Filled, Slot
from dali_pipes.errors import ConfigError, DataError
from dali_pipes.image.decode import Blob, decode_bytes
from dali_pipes.runtime.distributed import cpu_share
from dali_pipes.runtime.pools import (
    CallersEnvironment,
    crashes_print_their_stack,
    fresh_context,
    importable_afresh,
)

#: What the workers' interpreter imports once, before any worker starts.
WORKER_MODULES = ("dali_pipes.backends.torch", "torchvision.io")

Key = tuple[int, int, int, int]  # (sample index, epoch, slot position, repeat): what it is handed
Failed = tuple[tuple[str, str], ...]  # (path, reason) of the bad files a sample met


class _Made(NamedTuple):
    """A sample decoded and augmented: its images, and its objects moved with them (data
    with targets only)."""

    images: Images
    targets: Moved | None


class _Sample(NamedTuple):
    made: _Made | None  # None: the file failed and is left out (on_error=drop)
    label: int
    failed: Failed  # the bad files met: the sample's own (and its substitutes' that failed)


class _Samples(Dataset[_Sample]):
    def __init__(self, spec: LoaderSpec) -> None:
        self.source = images_of(spec.source, "backend=torch decodes image files")
        self.labels = spec.source.labels
        self.views = spec.augment.views(spec.train)
        self.multi_view = spec.augment.multi_view(spec.train)
        self.seed = spec.sampling.seed
        self.policy = spec.policy
        self.max_pixels = spec.max_pixels
        self.annotated = spec.source if isinstance(spec.source, Annotated) else None
        self.min_box_size = spec.augment.min_box_size

    def __len__(self) -> int:
        return len(self.source)

    def __getitem__(self, key: Key) -> _Sample:
        return self.__getitems__([key])[0]

    def __getitems__(self, keys: list[Key]) -> list[_Sample]:
        """A whole batch at once: a packed dataset reads neighbouring samples in one call."""
        blobs = self.source.read([key[0] for key in keys])
        return [self._sample(key, blob) for key, blob in zip(keys, blobs, strict=True)]

    def _sample(self, key: Key, blob: Blob) -> _Sample:
        index, epoch, position, repeat = key
        failed: list[tuple[str, str]] = []
        # A bad sample's slot: a substitute (skip), or nothing.
        filled: Filled[_Made] | None = self.policy.fill(
            index,
            self._augmented(index, blob, epoch, failed, repeat),
            Slot(epoch, position, len(self.source)),
            lambda i: self._augmented(i, self.source.read([i])[0], epoch, failed, repeat),
            self.source.name,
        )
        if filled is None:
            return _Sample(None, int(self.labels[index]), tuple(failed))
        return _Sample(filled.found, int(self.labels[filled.index]), tuple(failed))

    def _augmented(
        self, index: int, blob: Blob, epoch: int, failed: list[tuple[str, str]], repeat: int
    ) -> _Made | None:
        """Sample ``index`` decoded once and augmented (each view cut from the one decode),
        with its objects for data with targets; None (added to ``failed``, sent back to the
        loader with the batch) when its file is bad under on_error=skip|drop."""
        path = self.source.name(index)
        image = self.policy.attempt(
            path,
            lambda: self._decoded(index, blob, path),
            lambda name, exc: failed.append((name, str(exc))),
        )
        if image is None:
            return None
        ids = draw_ids(self.source.identity([index]), repeat)
        sample = None if self.annotated is None else self.annotated.targets(index)
        boxes = None if sample is None else Boxes.of_samples([(sample.boxes, sample.labels)])
        draws = self.views.draw([image.shape[-2:]], ids, self.seed, epoch, boxes)
        views = [
            pipeline.apply_torch(
                apply_row(pipeline.apply_before_torch(image, draw, 0), draw.geometry, 0), draw, 0
            )
            for pipeline, draw in zip(self.views.pipelines, draws, strict=True)
        ]
        targets = None
        if sample is not None:
            pipeline = self.views.pipelines[0]
            fill = mask_fill(self.annotated) if self.annotated is not None else 0
            targets = moved_sample(pipeline, draws[0], 0, sample, self.min_box_size, fill)
        return _Made(views if self.multi_view else views[0], targets)

    def _decoded(self, index: int, blob: Blob, path: str) -> torch.Tensor:
        """Sample ``index``'s image; a :class:`DataError` when it is bad, or when its
        targets do not fit it (:func:`~dali_pipes.data.interface.misfit`)."""
        image = decode_bytes(blob, path, self.max_pixels)
        if self.annotated is not None:
            size = (int(image.shape[-2]), int(image.shape[-1]))
            if (why := misfit(self.annotated, index, size)) is not None:
                raise DataError(why)
        return image


class _PlannedBatches(Sampler[list[Key]]):
    """Batches of (index, epoch, position, repeat) keys of the epoch plan set just before
    iteration."""

    def __init__(self, num_batches: int) -> None:
        self.num_batches = num_batches  # not the loader itself: no reference cycle
        self.plan = EpochPlan(0, [])

    def __iter__(self) -> Iterator[list[Key]]:
        plan = self.plan
        for k, (batch, where) in enumerate(zip(plan.batches, plan.positions, strict=True)):
            repeats = plan.repeats_of(k)
            again = [0] * len(batch) if repeats is None else repeats.tolist()
            yield [
                (int(i), plan.epoch, int(p), r)
                for i, p, r in zip(batch.tolist(), where.tolist(), again, strict=True)
            ]

    def __len__(self) -> int:
        return self.num_batches


class _Collated(NamedTuple):
    images: Images
    labels: Any  # int64 [N], or a target dict per image (data with targets)
    failed: list[tuple[str, str]]  # (path, reason) of the bad files met


def _collate(samples: list[_Sample], task: str, own_sizes: bool) -> _Collated:
    """The batch of ``samples``: its labels, or for data with targets (``task``:
    detection or segmentation) its targets in torchvision's references' form;
    ``own_sizes``: the images have sizes of their own (an :class:`ImageList`)."""
    made = [s.made for s in samples if s.made is not None]
    images = stack_samples([m.images for m in made], own_sizes)
    labels: Any = torch.tensor([s.label for s in samples if s.made is not None], dtype=torch.int64)
    moved = [m.targets for m in made if m.targets is not None]
    if moved and not has_views(images):
        sizes = [(int(x.shape[-2]), int(x.shape[-1])) for x in views_of(images)]
        sizes = sizes if own_sizes else sizes[:1] * len(moved)
        labels = batch_targets(task, moved, sizes, own_sizes)
    return _Collated(images, labels, [bad for s in samples for bad in s.failed])


def _worker_error(exc: BaseException) -> DataError | None:
    """DataLoader re-raises worker errors with the worker traceback folded into the
    message; recover the original one-line DataError message from its last line."""
    last = str(exc).strip().splitlines()[-1] if str(exc).strip() else ""
    prefix = f"{DataError.__module__}.{DataError.__name__}: "
    if isinstance(exc, DataError) and last.startswith(prefix):
        return DataError(last[len(prefix) :])
    return None


class TorchLoader(Loader):
    def __init__(self, spec: LoaderSpec) -> None:
        super().__init__(spec)
        opts = spec.backend
        if not isinstance(opts, TorchBackend):
            raise ConfigError(f"backend={opts.name!r} options given to the torch backend")
        images_of(spec.source, "backend=torch decodes image files")
        _, self.device = loader_devices(spec)  # decoding is on the CPU whatever is asked
        workers = cpu_share() if opts.num_workers is None else opts.num_workers
        self._batches = _PlannedBatches(len(self))
        samples = _Samples(spec)
        extra: dict[str, Any] = {}
        if workers > 0:
            extra = {
                "persistent_workers": opts.persistent_workers,
                "prefetch_factor": opts.prefetch_factor,
            }
            start = CallersEnvironment()
            if start.portable and importable_afresh(samples):
                # Not forked from this process, whose DALI and torch threads may be running
                # (a fork of it is not safe): from a fresh interpreter that has imported
                # this module (and torchvision's decoder) once.
                extra["multiprocessing_context"] = fresh_context(WORKER_MODULES)
                extra["worker_init_fn"] = start
            else:  # forked: each worker starts with torchvision's decoder imported here
                importlib.import_module("torchvision.io")
                extra["worker_init_fn"] = crashes_print_their_stack
        self._loader = DataLoader(
            samples,
            batch_sampler=self._batches,
            num_workers=workers,
            pin_memory=opts.pin_memory and self.device.type == "cuda",
            collate_fn=partial(
                _collate,
                task=getattr(spec.source, "task", "classification"),
                own_sizes=spec.augment.own_sizes(spec.train),
            ),
            **extra,
        )
        self._handover = Handover(self.device, Normalizer(spec.augment, self.device))

    def _epoch(self, plan: EpochPlan) -> Iterator[Batch]:
        self._batches.plan = plan
        try:
            yield from self._handover(self._kept())
        except DataError as exc:
            raise (_worker_error(exc) or exc) from None

    def _kept(self) -> Iterator[Batch]:
        """The collated batches; the bad files met are reported once each (under
        ``on_error=drop`` they are left out, a batch of only bad files is passed over)."""
        for batch in self._loader:
            for path, reason in batch.failed:
                self.bad.add(path, reason)
            if len(batch.labels):
                yield batch.images, batch.labels

    def close(self) -> None:
        # Dropping the persistent iterator shuts its worker processes down.
        self._loader._iterator = None
