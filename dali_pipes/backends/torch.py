"""torch backend: torchvision decode + transforms v2 in DataLoader workers.

It is the fallback when DALI is not wanted and the reference the DALI path is checked
against. Workers decode with ``torchvision.io`` and apply the shared geometry
(:mod:`dali_pipes.geometry`, realised by :mod:`dali_pipes.transforms`); batches travel as
uint8 and are normalised in the main process, on a CUDA side stream when on a GPU.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, Sampler
from torchvision.io import ImageReadMode, decode_image, read_file

from dali_pipes import geometry
from dali_pipes.backends.base import Loader
from dali_pipes.device import resolve_device
from dali_pipes.dist import cpu_share
from dali_pipes.errors import ConfigError, DataError
from dali_pipes.imageinfo import image_size
from dali_pipes.normalize import Batch, Normalizer, normalized
from dali_pipes.sampling import ShardSampler
from dali_pipes.sources import ImageSource
from dali_pipes.spec import AugmentSpec, LoaderSpec, TorchBackend
from dali_pipes.transforms import apply_geometry

Key = tuple[int, int]  # (sample index, epoch): what the sampler hands to the dataset


def decode(path: str) -> torch.Tensor:
    """Read and decode one file to uint8 RGB ``[3, H, W]`` (EXIF orientation ignored,
    like ``ImageFolder``), or raise :class:`DataError` naming the file."""
    try:
        data = read_file(path)
    except (OSError, RuntimeError) as exc:
        raise DataError(
            f"{path}: cannot read the file ({exc}); check it exists and is readable"
        ) from None
    image_size(memoryview(data.numpy()), path)  # the same "not an image" message as DALI's
    try:
        return decode_image(data, mode=ImageReadMode.RGB, apply_exif_orientation=False)
    except RuntimeError as exc:
        # torchvision prefixes the reason with its C++ source location; drop that.
        reason = re.sub(r"^.*?\.cpp:\d+,\s*", "", str(exc).strip().splitlines()[0])
        raise DataError(
            f"{path}: cannot decode the image ({reason}); remove or replace it"
        ) from None


class _Samples(Dataset[tuple[torch.Tensor, int]]):
    def __init__(self, source: ImageSource, augment: AugmentSpec, train: bool, seed: int) -> None:
        self.files = source.files
        self.labels = source.labels
        self.augment = augment
        self.train = train
        self.seed = seed

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, key: Key) -> tuple[torch.Tensor, int]:
        index, epoch = key
        image = decode(self.files[index])
        g = geometry.plan(self.augment, self.train, [image.shape[-2:]], [index], self.seed, epoch)
        sample = apply_geometry(
            image,
            tuple(int(v) for v in g.window[0]),  # type: ignore[arg-type]
            (int(g.resize[0, 0]), int(g.resize[0, 1])),
            (int(g.crop[0, 0]), int(g.crop[0, 1])),
            g.out,
            bool(g.flip[0]),
        )
        return sample, int(self.labels[index])


class _EpochBatches(Sampler[list[Key]]):
    """Batches of (index, epoch) keys for the epoch set just before iteration."""

    def __init__(self, sampler: ShardSampler, batch_size: int) -> None:
        self.sampler = sampler
        self.batch_size = batch_size
        self.epoch = 0

    def __iter__(self) -> Iterator[list[Key]]:
        for batch in self.sampler.batches(self.epoch, self.batch_size):
            yield [(int(i), self.epoch) for i in batch]

    def __len__(self) -> int:
        return self.sampler.num_batches(self.batch_size)


def _collate(samples: list[tuple[torch.Tensor, int]]) -> Batch:
    images = torch.stack([s[0] for s in samples])
    labels = torch.tensor([s[1] for s in samples], dtype=torch.int64)
    return images, labels


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
        if not isinstance(spec.source, ImageSource):
            raise ConfigError(
                "backend=torch decodes image files but data=synthetic has none; "
                "use backend=synthetic"
            )
        self.device = resolve_device(opts.device, "torch")
        workers = cpu_share() if opts.num_workers is None else opts.num_workers
        self._batches = _EpochBatches(self.sampler, spec.batch_size)
        extra: dict[str, Any] = {}
        if workers > 0:
            extra = {
                "persistent_workers": opts.persistent_workers,
                "prefetch_factor": opts.prefetch_factor,
            }
        self._loader = DataLoader(
            _Samples(spec.source, spec.augment, spec.train, spec.sampling.seed),
            batch_sampler=self._batches,
            num_workers=workers,
            pin_memory=opts.pin_memory and self.device.type == "cuda",
            collate_fn=_collate,
            **extra,
        )
        self._norm = Normalizer(spec.augment, self.device)

    def _epoch(self, epoch: int) -> Iterator[Batch]:
        self._batches.epoch = epoch
        try:
            yield from normalized(self._loader, self._norm, self.device)
        except DataError as exc:
            raise (_worker_error(exc) or exc) from None

    def close(self) -> None:
        # Dropping the persistent iterator shuts its worker processes down.
        self._loader._iterator = None


__all__ = ["TorchLoader", "decode"]
