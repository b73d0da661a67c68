"""uint8 batches -> normalised tensors, and the CUDA side-stream prefetcher.

The torch backend moves uint8 batches (4x less traffic than float) and normalises where
they land, with DALI's arithmetic: ``(x - 255 * mean) / (255 * std)``. On a GPU the copy
and the normalisation run on a side stream one batch ahead of the training step (the
timm ``PrefetchLoader`` idea), so the step never waits for a host-to-device copy.
:func:`prefetched` is that side-stream hand-over on its own, for any loader that makes
batches on the CPU for a model on the GPU.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import torch

from dali_pipes.augment.spec import AugmentSpec
from dali_pipes.backends.base import Batch, Images, each_view

TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


class Normalizer:
    """Applies mean/std, output dtype and memory format to a uint8 ``[N, 3, H, W]`` batch."""

    def __init__(self, augment: AugmentSpec, device: torch.device) -> None:
        self.mean = torch.tensor(augment.mean, device=device).view(1, 3, 1, 1) * 255
        self.std = torch.tensor(augment.std, device=device).view(1, 3, 1, 1) * 255
        self.dtype = TORCH_DTYPES[augment.dtype]
        self.memory_format = (
            torch.channels_last if augment.channels_last else torch.contiguous_format
        )

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        x = images.to(torch.float32).sub_(self.mean).div_(self.std)
        return x.to(dtype=self.dtype, memory_format=self.memory_format)


def pixels(images: torch.Tensor, augment: AugmentSpec) -> torch.Tensor:
    """The inverse of :class:`Normalizer`: a normalised ``[N, 3, H, W]`` batch (any dtype,
    layout or device) as uint8 pixels on the CPU, rounded and clipped to [0, 255] (random
    erasing's noise leaves the range), for looking at what a model is fed."""
    x = images.detach().to(device="cpu", dtype=torch.float32).contiguous()
    mean = torch.tensor(augment.mean).view(1, 3, 1, 1) * 255
    std = torch.tensor(augment.std).view(1, 3, 1, 1) * 255
    return x.mul(std).add_(mean).round_().clamp_(0, 255).to(torch.uint8)


def normalized(batches: Iterable[Batch], norm: Normalizer, device: torch.device) -> Iterator[Batch]:
    """Yield normalised batches on ``device``; on CUDA, prepared on a side stream."""
    return prefetched(batches, device, norm)


def prefetched(
    batches: Iterable[Batch],
    device: torch.device,
    prepare: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> Iterator[Batch]:
    """Yield ``batches`` on ``device`` with ``prepare`` (if any) applied to the images
    (to each view's of a batch of views).

    On CUDA each batch is copied and prepared on a side stream while the training step
    consumes the previous one: the hand-over of every placement that makes batches on the
    CPU for a model on the GPU (torch workers, DALI on the CPU, the RAM cache) is this one
    function. The copy is asynchronous only from pinned memory, so producers should hand
    over pinned tensors (pinning here would cost the main thread a copy of its own).
    """

    def ready(images: Images) -> Images:
        """On ``device`` (a no-op where they are), prepared."""
        return each_view(lambda x: x.to(device, non_blocking=True), images)

    if device.type != "cuda":
        for images, labels in batches:
            images, labels = ready(images), labels.to(device)
            yield (images if prepare is None else each_view(prepare, images)), labels
        return
    stream = torch.cuda.Stream(device)
    it = iter(batches)

    def load() -> Batch | None:
        try:
            images, labels = next(it)
        except StopIteration:
            return None
        with torch.cuda.stream(stream):
            images = ready(images)
            labels = labels.to(device, non_blocking=True)
            return (images if prepare is None else each_view(prepare, images)), labels

    upcoming = load()
    while upcoming is not None:
        current = torch.cuda.current_stream(device)
        current.wait_stream(stream)
        images, labels = upcoming
        for view in images if isinstance(images, list) else [images]:
            view.record_stream(current)  # the caching allocator must not reuse them early
        labels.record_stream(current)
        upcoming = load()
        yield images, labels
