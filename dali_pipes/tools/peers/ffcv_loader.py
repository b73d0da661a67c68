"""The ``ffcv`` peer: FFCV, written as its ImageNet example writes a loader.

FFCV reads a ``.beton`` file, not image files: :func:`write_beton` converts the split
once with FFCV's ``DatasetWriter`` (an ``RGBImageField`` stored as JPEG, as the ImageNet
example's ``write_mode='jpg'``; an ``IntField`` label), timed apart from loading. The
loader is FFCV's ``Loader`` with one pipeline per field: ``RandomResizedCropRGBImageDecoder``
(or ``CenterCropRGBImageDecoder`` for resize + centre crop) -> ``RandomHorizontalFlip`` ->
``NormalizeImage`` (numba-compiled, to float32) -> ``ToTensor`` -> ``ToTorchImage``;
labels ``IntDecoder`` -> ``ToTensor``. Order ``RANDOM``, ``num_workers`` threads.

FFCV stores the pixels it decoded and re-encoded (JPEG quality 90), not the original
files' bytes: its decoder works on those, which the bench note says.
"""

from __future__ import annotations

import gc
import hashlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dali_pipes.augment.ops.crop import RandomResizedCrop
from dali_pipes.tools.peers.task import PeerTask, need

#: FFCV's RGBImageField settings for the conversion (its ImageNet example's defaults).
JPEG_QUALITY = 90


class _Images:
    """The split's files as the indexed dataset FFCV's writer reads: (RGB PIL image,
    label), as torchvision's ImageFolder gives them."""

    def __init__(self, task: PeerTask) -> None:
        self.files = task.files
        self.labels = task.labels

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int) -> tuple[Any, int]:
        from PIL import Image

        with Image.open(self.files[index]) as image:
            return image.convert("RGB"), self.labels[index]


def beton_path(task: PeerTask, folder: str) -> Path:
    """Where the split's ``.beton`` lives: named by a hash of the file list and the
    conversion settings, so a changed dataset gets a new file."""
    key = json.dumps([task.files, task.labels, JPEG_QUALITY]).encode()
    return Path(folder) / f"{hashlib.sha256(key).hexdigest()[:16]}.beton"


def write_beton(task: PeerTask, path: Path) -> float:
    """Convert the split into ``path`` with FFCV's writer; the seconds it took. Written
    beside and renamed, so an interrupted conversion leaves no file at ``path``."""
    writer = need("ffcv.writer", "ffcv")
    fields = need("ffcv.fields", "ffcv")
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    start = time.perf_counter()
    out = writer.DatasetWriter(
        str(partial),
        {
            "image": fields.RGBImageField(write_mode="jpg", jpeg_quality=JPEG_QUALITY),
            "label": fields.IntField(),
        },
        num_workers=task.threads,
    )
    out.from_indexed_dataset(_Images(task))
    partial.rename(path)
    return time.perf_counter() - start


class FfcvLoader:
    """FFCV's ``Loader`` over the split's ``.beton``; each ``iter()`` is one epoch."""

    def __init__(self, task: PeerTask, beton: Path) -> None:
        self.task = task
        loader = need("ffcv.loader", "ffcv")
        decoders = need("ffcv.fields.decoders", "ffcv")
        ops = need("ffcv.transforms", "ffcv")
        crop = task.crop
        size = (task.size, task.size)
        if isinstance(crop, RandomResizedCrop):
            decoder = decoders.RandomResizedCropRGBImageDecoder(size, crop.scale, crop.ratio)
        else:
            decoder = decoders.CenterCropRGBImageDecoder(size, ratio=crop.size / crop.resize)
        image = [decoder]
        if task.flip:
            image.append(ops.RandomHorizontalFlip(task.flip))
        image += [
            ops.NormalizeImage(255 * np.array(task.mean), 255 * np.array(task.std), np.float32),
            ops.ToTensor(),
            ops.ToTorchImage(channels_last=False),
        ]
        self._loader: Any = loader.Loader(
            str(beton),
            batch_size=task.batch_size,
            num_workers=task.threads,
            order=loader.OrderOption.RANDOM,
            drop_last=task.drop_last,
            seed=task.seed,
            pipelines={"image": image, "label": [decoders.IntDecoder(), ops.ToTensor()]},
        )
        self.note = f"FFCV Loader, {task.threads} threads, .beton at {beton}"

    def __len__(self) -> int:
        return len(self._loader)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        epoch = iter(self._loader)  # FFCV's EpochIterator: a thread filling batch slots
        try:
            for images, labels in epoch:
                yield images, labels.view(-1).long()
        finally:  # an epoch left early: stop its thread before releasing its memory
            epoch.terminate_event.set()
            epoch.join(timeout=10)
            epoch.close()

    def close(self) -> None:
        """Release FFCV's loader (its memory map of the file) and collect its compiled
        pipeline now: the finalizers of FFCV's numba dispatchers raise when they run
        (ignored, but on Python 3.11.7 a garbage collection that runs them in the middle
        of an ``ast.parse`` elsewhere makes that parse fail with "AST constructor
        recursion depth mismatch")."""
        self._loader = None
        gc.collect()

    def __enter__(self) -> FfcvLoader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
