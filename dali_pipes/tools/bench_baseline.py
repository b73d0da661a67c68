"""The yardsticks ``bench`` measures dali_pipes against: what users write without it, and
how fast the CPU decodes at all.

:func:`baseline` is torchvision's ``ImageFolder`` with PIL and the same training pipeline
as torchvision v2 transforms in a ``DataLoader`` (the ``baseline`` candidates);
:func:`decode_ceiling` is full libjpeg-turbo decodes of files in memory with one process
per core (the ``decode`` candidate), the most any CPU loader can reach.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

from dali_pipes.augment.spec import AugmentSpec
from dali_pipes.backends.base import each_view
from dali_pipes.data.interface import Source
from dali_pipes.errors import DaliPipesError
from dali_pipes.runtime.pools import fresh_pool
from dali_pipes.tools.measurement import Measurement


class ViewsTransform:
    """The recipe's own multi-view transform: each view's torchvision pipeline applied to
    the one decoded image (what lightly's ``MultiViewTransform`` and DINO's
    ``DataAugmentationDINO`` do), a list of tensors, globals first."""

    def __init__(self, transforms: list[Any]) -> None:
        self.transforms = transforms

    def __call__(self, image: Any) -> list[Any]:
        return [transform(image) for transform in self.transforms]


class PilGaussianBlur:
    """The self-supervised recipes' own blur (DINO's ``utils.GaussianBlur``, lightly's and
    VISSL's alike): with probability ``p``, PIL's ``GaussianBlur`` with a radius drawn from
    ``sigma``. PIL approximates the Gaussian by box blurs: faster than torchvision's exact
    23 x 23 convolution, not the same pixels."""

    def __init__(self, p: float, sigma: tuple[float, float]) -> None:
        self.p, self.sigma = p, sigma

    def __call__(self, image: Any) -> Any:
        import random

        from PIL import ImageFilter

        if random.random() >= self.p:
            return image
        return image.filter(ImageFilter.GaussianBlur(radius=random.uniform(*self.sigma)))


def _step(op: Any, recipe: bool) -> Any:
    """An op as the baseline writes it: its ``torchvision()``; with ``recipe``, Gaussian
    blur as the recipes write it (:class:`PilGaussianBlur`)."""
    from dali_pipes.augment.ops.gaussian_blur import GaussianBlur

    if recipe and isinstance(op, GaussianBlur):
        return PilGaussianBlur(op.p, op.sigma)
    return op.torchvision()


def baseline_transform(augment: AugmentSpec, recipe: bool = False) -> Any:
    """The training split as torchvision v2 transforms on PIL images, normalised: each op's
    ``torchvision()`` (``recipe``: the recipes' PIL blur instead of torchvision's); for a
    split with views, a :class:`ViewsTransform` of them."""
    from torchvision.transforms import v2

    tail = [
        v2.PILToTensor(),
        v2.ToDtype(torch.float32, scale=True),
        v2.Normalize(augment.mean, augment.std),
    ]
    try:
        views = [
            v2.Compose(
                [
                    *(_step(op, recipe) for op in p.before),  # colour ops on the whole image
                    p.crop.torchvision(),
                    *(_step(op, recipe) for op in p.ops),
                    *tail,
                ]
            )
            for p in augment.views(True).pipelines
        ]
    except NotImplementedError as exc:
        raise DaliPipesError(
            f"bench baseline: {exc}; leave baseline out of bench.candidates"
        ) from None
    return ViewsTransform(views) if augment.multi_view(True) else views[0]


def baseline(
    source: Source,
    augment: AugmentSpec,
    batch: int,
    workers: int,
    cuda: bool,
    recipe: bool = False,
) -> Callable[[], Iterable[Any]]:
    """What users write without dali_pipes: ImageFolder + PIL + the same training pipeline
    as torchvision v2 transforms (:func:`baseline_transform`; ``recipe``: with the
    self-supervised recipes' PIL blur)."""
    from torch.utils.data import DataLoader
    from torchvision import datasets

    transform = baseline_transform(augment, recipe)
    dataset = datasets.ImageFolder(source.root, transform=transform)
    loader = DataLoader(
        dataset,
        batch_size=batch,
        shuffle=True,
        num_workers=workers,
        pin_memory=cuda,
        persistent_workers=workers > 0,
    )

    def epoch() -> Iterable[Any]:
        for images, labels in loader:
            if cuda:  # the copy the user's loop would make
                images = each_view(lambda view: view.cuda(non_blocking=True), images)
                labels = labels.cuda(non_blocking=True)
            yield images, labels

    return epoch


def _decode_worker(files: list[str | bytes], images: int) -> float:
    """Seconds to decode ``images`` images, cycling through ``files`` (paths, or the
    images' bytes), held in memory first."""
    from torchvision.io import ImageReadMode, decode_image, read_file

    torch.set_num_threads(1)
    blobs = [
        read_file(f) if isinstance(f, str) else torch.frombuffer(bytearray(f), dtype=torch.uint8)
        for f in files[:images]
    ]
    start, done = time.perf_counter(), 0
    while done < images:
        for blob in blobs:
            decode_image(blob, mode=ImageReadMode.RGB)
            done += 1
            if done >= images:
                break
    return time.perf_counter() - start


def decode_ceiling(
    files: Sequence[str | bytes], cores: int, images: int, repeats: int, name: str = "decode"
) -> Measurement:
    """Full libjpeg-turbo decodes per second with one process per core, the images (file
    paths, or their bytes: a pack's) in memory."""
    result = Measurement(name, note=f"full decodes, {cores} processes, files in RAM")
    shares = [list(files[i::cores]) for i in range(cores)]
    per = max(1, images // cores)
    with fresh_pool(cores, [__name__, "torchvision.io"]) as pool:
        pool.starmap(_decode_worker, [(s, min(per, 16)) for s in shares])  # warm-up
        for _ in range(repeats):
            start = time.perf_counter()
            pool.starmap(_decode_worker, [(s, per) for s in shares])
            result.rates.append(per * cores / (time.perf_counter() - start))
    return result
