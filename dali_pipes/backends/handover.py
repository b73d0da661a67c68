"""uint8 batches -> normalised tensors, and the CUDA side-stream prefetcher.

The torch backend moves uint8 batches (4x less traffic than float) and normalises where
they land, with DALI's arithmetic: ``(x - 255 * mean) / (255 * std)``. On a GPU the copy
and the normalisation run on a side stream one batch ahead of the training step (the
timm ``PrefetchLoader`` idea), so the step never waits for a host-to-device copy.
:class:`Handover` is that hand-over, one per loader, for any loader that makes batches on
the CPU for a model on the GPU.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import torch

from dali_pipes.augment.spec import AugmentSpec
from dali_pipes.backends.base import Batch, Images, each_view, views_of
from dali_pipes.backends.targets import labels_to, tensors_of

TORCH_DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "uint8": torch.uint8,
}


class Normalizer:
    """Applies mean/std, output dtype and memory format to a uint8 ``[N, 3, H, W]`` batch
    (``dtype=uint8``: the memory format alone)."""

    def __init__(self, augment: AugmentSpec, device: torch.device) -> None:
        self.normalizes = augment.normalizes
        self.mean = torch.tensor(augment.mean, device=device).view(1, 3, 1, 1) * 255
        self.std = torch.tensor(augment.std, device=device).view(1, 3, 1, 1) * 255
        self.dtype = TORCH_DTYPES[augment.dtype]
        self.memory_format = (
            torch.channels_last if augment.channels_last else torch.contiguous_format
        )

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        if not self.normalizes:
            return images.contiguous(memory_format=self.memory_format)
        x = images.to(torch.float32).sub_(self.mean).div_(self.std)
        return x.to(dtype=self.dtype, memory_format=self.memory_format)


def pixels(images: torch.Tensor, augment: AugmentSpec) -> torch.Tensor:
    """The inverse of :class:`Normalizer`: a normalised ``[N, C, H, W]`` batch (any dtype,
    layout or device; ``C``: ``augment.channels``) as uint8 pixels on the CPU, rounded and
    clipped to [0, 255] (random erasing's noise leaves the range), for looking at what a
    model is fed."""
    x = images.detach().to(device="cpu", dtype=torch.float32).contiguous()
    c = augment.channels
    mean = torch.tensor(augment.mean[:c]).view(1, c, 1, 1) * 255
    std = torch.tensor(augment.std[:c]).view(1, c, 1, 1) * 255
    return x.mul(std).add_(mean).round_().clamp_(0, 255).to(torch.uint8)


class Handover:
    """Hands a loader's CPU-made batches over on ``device``, with ``prepare`` (if any)
    applied to the images (to each view's of a batch of views): the one hand-over of every
    placement that makes batches on the CPU for a model on the GPU (torch workers, the RAM
    cache). A loader keeps one.

    On CUDA each batch is copied and prepared on a side stream while the training step
    consumes the previous one. The side stream is made at the first epoch and serves every
    later one: torch's caching allocator keeps the blocks freed by a stream's work for that
    stream alone, and each ``torch.cuda.Stream()`` is the next of a pool of 32, so a new
    stream per epoch cached every epoch's batches apart from the next one's, and the GPU
    memory in use grew by a working set per epoch. The copy is asynchronous only from
    pinned memory, so producers should hand over pinned tensors (pinning here would cost
    the main thread a copy of its own).
    """

    def __init__(
        self,
        device: torch.device,
        prepare: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ) -> None:
        self.device = device
        self.prepare = prepare
        self._stream: torch.cuda.Stream | None = None

    def side_stream(self) -> torch.cuda.Stream:
        """The CUDA stream batches are copied and prepared on: one for this hand-over's
        life (made on first use, so building a loader does not touch the GPU)."""
        if self._stream is None:
            self._stream = torch.cuda.Stream(self.device)
        return self._stream

    def __call__(self, batches: Iterable[Batch]) -> Iterator[Batch]:
        """Yield ``batches`` on the device, prepared; on CUDA one batch ahead."""
        if self.device.type != "cuda":
            return self._plain(batches)
        return self._ahead(batches, self.side_stream())

    def _ready(self, images: Images) -> Images:
        """On the device (a no-op where they are), prepared; each view of a batch of views."""
        device, prepare = self.device, self.prepare

        def one(x: torch.Tensor) -> torch.Tensor:
            x = x.to(device, non_blocking=True)
            return x if prepare is None else prepare(x)

        return each_view(one, images)

    def _plain(self, batches: Iterable[Batch]) -> Iterator[Batch]:
        for images, labels in batches:
            yield self._ready(images), labels_to(labels, self.device)

    def _ahead(self, batches: Iterable[Batch], stream: torch.cuda.Stream) -> Iterator[Batch]:
        device = self.device
        it = iter(batches)

        def load() -> Batch | None:
            try:
                images, labels = next(it)
            except StopIteration:
                return None
            with torch.cuda.stream(stream):
                images = self._ready(images)
                labels = labels_to(labels, device, non_blocking=True)
                return images, labels

        upcoming = load()
        while upcoming is not None:
            current = torch.cuda.current_stream(device)
            current.wait_stream(stream)
            images, labels = upcoming
            for view in views_of(images):
                view.record_stream(current)  # the caching allocator must not reuse them early
            for tensor in tensors_of(labels):
                tensor.record_stream(current)
            upcoming = load()
            yield images, labels
