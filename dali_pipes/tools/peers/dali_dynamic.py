"""The ``dali-dynamic`` peer: DALI 2.x's dynamic mode (``nvidia.dali.experimental.dynamic``).

Written as DALI's dynamic-mode guides write a PyTorch loader: a stateful
``ndd.readers.File`` (DALI's own listing and shuffling, created once and asked for each
epoch with ``next_epoch(batch_size=...)``), then operators called as plain functions on
each batch: ``decoders.image_random_crop`` (the decoder draws the window),
``resize`` to the crop size and ``crop_mirror_normalize`` with a ``random.coin_flip``
mirror; or ``decoders.image`` + ``resize(resize_shorter=...)`` + a centred
``crop_mirror_normalize`` for resize + centre crop. ``.torch()`` hands the batch over
through DLPack. The thread pool is dynamic mode's own, in the loader's ``EvalContext``.

DALI's reader pads the last batch of an epoch (``pad_last_batch``) so that epochs stay
aligned; the padding is cut before decoding, as DALI's PyTorch iterator does with
``LastBatchPolicy.PARTIAL``. With ``device="gpu"`` the decoder runs on the GPU (DALI's
``mixed`` stage) and so does everything after it.

``nvidia.dali.experimental.torchvision`` was not chosen for this peer: it is a
torchvision-like set of transforms applied to images already decoded (a PIL image or a
tensor goes in through an ``external_source``), with no reader, decoder or batching of
its own, so a loader built on it still decodes with PIL in a DataLoader.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

from dali_pipes.augment.ops.crop import RandomResizedCrop
from dali_pipes.tools.peers.task import PeerTask, need


class DynamicLoader:
    """DALI dynamic mode over a :class:`PeerTask`; each ``iter()`` is one epoch."""

    def __init__(self, task: PeerTask, device: str = "cpu") -> None:
        self.task = task
        self.device = device
        self._ndd: Any = need("nvidia.dali.experimental.dynamic", "dali-dynamic")
        self._types: Any = need("nvidia.dali.types", "dali-dynamic")
        # the loader's own thread pool (dynamic mode's evaluation context), entered
        # around every call: a process-wide ndd.set_num_threads would change it for others
        self._ctx = self._ndd.EvalContext(num_threads=task.threads)
        self._rng = self._ndd.random.RNG(seed=task.seed)
        self._reader = self._ndd.readers.File(
            file_root=task.root,
            random_shuffle=True,
            pad_last_batch=True,
            seed=task.seed,
            max_batch_size=task.batch_size,
        )
        self.size = int(self._reader.get_metadata(task.batch_size)["epoch_size"])
        self.note = f"DALI dynamic mode on the {device}, {task.threads} threads"
        if self.size != len(task.files):
            self.note += f"; readers.File lists {self.size} files, dali_pipes {len(task.files)}"

    def __len__(self) -> int:
        b = self.task.batch_size
        return self.size // b if self.task.drop_last else -(-self.size // b)

    def _images(self, jpegs: Any) -> Any:
        ndd, types, task = self._ndd, self._types, self.task
        crop = task.crop
        if isinstance(crop, RandomResizedCrop):
            images = ndd.decoders.image_random_crop(
                jpegs,
                device=self.device,
                output_type=types.RGB,
                random_area=list(crop.scale),
                random_aspect_ratio=list(crop.ratio),
                num_attempts=100,
            )
            return ndd.resize(
                images, resize_x=crop.size, resize_y=crop.size, interp_type=types.INTERP_LINEAR
            )
        images = ndd.decoders.image(jpegs, device=self.device, output_type=types.RGB)
        return ndd.resize(images, resize_shorter=crop.resize, interp_type=types.INTERP_LINEAR)

    def _batch(self, jpegs: Any, labels: Any) -> tuple[torch.Tensor, torch.Tensor]:
        ndd, types, task = self._ndd, self._types, self.task
        n = jpegs.batch_size
        mirror = (
            ndd.random.coin_flip(probability=task.flip, batch_size=n, rng=self._rng)
            if task.flip
            else 0
        )
        images = ndd.crop_mirror_normalize(
            self._images(jpegs),
            dtype=types.FLOAT,
            output_layout="CHW",
            crop=(task.size, task.size),
            mean=[255 * m for m in task.mean],
            std=[255 * s for s in task.std],
            mirror=mirror,
        )
        labels = labels.gpu() if self.device == "gpu" else labels
        return images.torch(), labels.torch().view(-1).long()

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        b, left = self.task.batch_size, self.size
        epoch = iter(self._reader.next_epoch(batch_size=b, ctx=self._ctx))
        while left > 0:
            with self._ctx:
                jpegs, labels = next(epoch)
                if left < b:
                    if self.task.drop_last:
                        break
                    jpegs = self._ndd.batch([jpegs.tensors[i] for i in range(left)])
                    labels = self._ndd.batch([labels.tensors[i] for i in range(left)])
                left -= jpegs.batch_size
                batch = self._batch(jpegs, labels)
            yield batch

    def close(self) -> None:
        """Release the reader."""
        self._reader = None

    def __enter__(self) -> DynamicLoader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
