"""``torch.utils.data.DataLoader``'s public attributes on every loader, with its meaning.

Training code reads them: torchvision's reference ``evaluate`` takes
``len(loader.dataset)``, Accelerate's ``skip_first_batches`` rebuilds a ``DataLoader`` from
``dataset``, ``batch_sampler``, ``collate_fn`` and the other keyword arguments, samplers
get ``set_epoch``. Here:

- ``dataset`` (:class:`SplitDataset`): sized like the split, with ``ImageFolder``'s
  ``classes``, ``class_to_idx``, ``samples``/``imgs`` and ``targets`` for a folder;
  ``dataset[i]`` is sample ``i`` decoded, untransformed (uint8 ``[3, H, W]``, its label).
  Given a dataset object (``DALIIterator(CocoDetection(...))``), its other attributes
  read through (``loader.dataset.coco``).
- ``sampler`` (:class:`LoaderSampler`): ``DistributedSampler``'s attributes; ``len()`` is
  this rank's samples per epoch, iterating gives them for the epoch the next ``iter``
  runs, and ``set_epoch`` is the loader's.
- ``batch_sampler`` (:class:`PlannedBatches`): the next epoch's batches of sample indices,
  each a :class:`PlannedBatch` that names its epoch and batch number; with ``dataset`` and
  ``collate_fn`` (:func:`collate`) a plain ``DataLoader`` yields exactly this loader's
  batches (what ``skip_first_batches`` relies on).
- ``num_workers`` 0 and ``pin_memory`` False: a ``DataLoader`` rebuilt from these
  attributes must run in this process (the loader's own threads or worker processes are
  inside it, ``backend.*``) and must not pin: the batches already arrive on their device.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import numpy as np
import torch
from torch.utils.data import Sampler, default_collate

from dali_pipes.backends.specs import LoaderSpec
from dali_pipes.data.interface import Labelled, Source
from dali_pipes.data.sampling import RankSampler
from dali_pipes.image.decode import decode_bytes

Batch = tuple[Any, torch.Tensor]  # images (or a list of views), labels


class _Owner(Protocol):
    """What the attributes read of their loader (:class:`dali_pipes.backends.base.Loader`)."""

    spec: LoaderSpec
    rank_sampler: RankSampler
    sampler: LoaderSampler

    @property
    def batch_size(self) -> int: ...
    @property
    def next_run(self) -> tuple[int, int]: ...
    @property
    def start_batch(self) -> int: ...
    def set_epoch(self, epoch: int, start_batch: int = 0) -> None: ...
    def __iter__(self) -> Iterator[Batch]: ...
    def __len__(self) -> int: ...


class PlannedBatch(list[int]):
    """One batch of sample indices of the loader's plan, with its epoch and batch number:
    :class:`SplitDataset` turns it back into the loader's batch."""

    def __init__(self, indices: Sequence[int], epoch: int, number: int) -> None:
        super().__init__(int(i) for i in indices)
        self.epoch = epoch
        self.number = number


class _LoaderBatch:
    """The loader's batch as one "sample", which :func:`collate` unwraps."""

    def __init__(self, batch: Batch) -> None:
        self.batch = batch


def collate(samples: list[Any]) -> Any:
    """The loader's ``collate_fn``: a batch of the loader's plan (one item) is the
    loader's batch itself; anything else is collated by ``default_collate``."""
    if len(samples) == 1 and isinstance(samples[0], _LoaderBatch):
        return samples[0].batch
    return default_collate(samples)


def _owner(ref: weakref.ref[_Owner]) -> _Owner:
    loader = ref()
    if loader is None:
        raise RuntimeError("the loader this attribute belongs to was garbage-collected")
    return loader


class SplitDataset(torch.utils.data.Dataset[Any]):
    """The split as a map-style dataset: ``ImageFolder``'s attributes over the loader's
    source, and the loader's batches for the planned batches of its ``batch_sampler``.

    Holds the loader weakly (the loader holds this).
    """

    def __init__(self, loader: _Owner) -> None:
        self._loader = weakref.ref(loader)
        source: Labelled = loader.spec.source
        self.source = source
        self._max_pixels = loader.spec.max_pixels
        #: The class names in label order, as ``ImageFolder.classes``.
        self.classes: list[str] = list(source.classes)
        #: Class name -> label, as ``ImageFolder.class_to_idx``.
        self.class_to_idx: dict[str, int] = {c: i for i, c in enumerate(self.classes)}
        #: Each sample's label, as ``ImageFolder.targets``.
        self.targets: list[int] = [int(t) for t in source.labels]
        #: The folder (or packed dataset) the split was read from.
        self.root: str = getattr(source, "root", "")
        self._cursor: tuple[int, int, Iterator[Batch]] | None = None
        #: The dataset object the loader was given (``DALIIterator(dataset)``), if any: its
        #: other attributes read through (a ``CocoDetection``'s ``coco`` and ``ids``, which
        #: torchvision's detection reference evaluates with).
        self.given: Any = None

    def __getattr__(self, name: str) -> Any:
        """An attribute of the given dataset that this one does not have."""
        given = self.__dict__.get("given")
        if given is None or name.startswith("__"):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(given, name)

    @functools.cached_property
    def samples(self) -> list[tuple[str, int]]:
        """``(name, label)`` per sample, as ``ImageFolder.samples``, listed when first read
        (empty for synthetic data, which has no files; a packed sample is named
        ``shard.tar:member``, a Parquet row ``file.parquet row N``)."""
        source = self.source
        if not isinstance(source, Source):
            return []
        return [(source.name(i), label) for i, label in enumerate(self.targets)]

    @property
    def imgs(self) -> list[tuple[str, int]]:
        """``ImageFolder``'s older name for :attr:`samples`."""
        return self.samples

    def __len__(self) -> int:
        return len(self.source)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        """Sample ``index`` decoded, without the loader's augmentation, and its label."""
        source = self.source
        if not isinstance(source, Source):
            raise TypeError("data=synthetic has no images to index; iterate the loader")
        i = int(index)
        blob = source.read([i])[0]
        return decode_bytes(blob, source.name(i), self._max_pixels), int(source.labels[i])

    def __getitems__(self, indices: Sequence[int]) -> list[Any]:
        """A :class:`PlannedBatch` gives the loader's batch; other indices, samples."""
        if isinstance(indices, PlannedBatch):
            return [_LoaderBatch(self._batch(indices.epoch, indices.number))]
        return [self[i] for i in indices]

    def _batch(self, epoch: int, number: int) -> Batch:
        """Batch ``number`` of ``epoch``: the next one of the running epoch, else the loader
        restarted there (``set_epoch(epoch, start_batch=number)``)."""
        cursor = self._cursor
        if cursor is None or cursor[:2] != (epoch, number):
            loader = _owner(self._loader)
            if (loader.next_run[0], loader.start_batch) != (epoch, number):
                loader.set_epoch(epoch, start_batch=number)
            cursor = (epoch, number, iter(loader))
        self._cursor = None
        batch = next(cursor[2])
        self._cursor = (epoch, number + 1, cursor[2])
        return batch


class LoaderSampler(Sampler[int]):
    """``DistributedSampler``'s face on the loader's order (:mod:`dali_pipes.data.sampling`).

    ``len()``: this rank's samples per epoch (with padding, or after ``drop_last``);
    iterating: those of the epoch the loader's next ``iter`` runs; ``set_epoch``: the
    loader's. Other attributes (``num_items``, ``batches``, ``order`` ...) are the rank
    sampler's.
    """

    def __init__(self, loader: _Owner) -> None:
        self._loader = weakref.ref(loader)
        self.rank_sampler = loader.rank_sampler
        sampling = loader.spec.sampling
        self.num_replicas, self.rank = sampling.world_size, sampling.rank
        self.shuffle, self.seed = sampling.shuffle, sampling.seed
        self.drop_last = sampling.drop_last
        #: This rank's samples per epoch, and all ranks' together (DistributedSampler's).
        self.num_samples = self.rank_sampler.num_samples
        self.total_size = self.num_samples * self.num_replicas

    @property
    def epoch(self) -> int:
        """The epoch the loader's next ``iter`` runs."""
        return _owner(self._loader).next_run[0]

    def set_epoch(self, epoch: int) -> None:
        """The loader's :meth:`~dali_pipes.backends.base.Loader.set_epoch`."""
        _owner(self._loader).set_epoch(epoch)

    def __len__(self) -> int:
        return self.num_samples

    def __iter__(self) -> Iterator[int]:
        loader = _owner(self._loader)
        indices = self.rank_sampler.indices(*loader.next_run)
        return iter(int(i) for i in indices)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "rank_sampler":
            raise AttributeError(name)
        return getattr(self.rank_sampler, name)


class PlannedBatches(Sampler[list[int]]):
    """``batch_sampler``: the batches the loader's next ``iter`` yields, as
    :class:`PlannedBatch` lists of sample indices; ``len()`` is ``len(loader)``."""

    def __init__(self, loader: _Owner) -> None:
        self._loader = weakref.ref(loader)
        self.batch_size = loader.batch_size
        self.drop_last = loader.spec.sampling.drop_last
        self.sampler = loader.sampler

    def __len__(self) -> int:
        return len(_owner(self._loader))

    def __iter__(self) -> Iterator[list[int]]:
        loader = _owner(self._loader)
        (epoch, start), first = loader.next_run, loader.start_batch
        batches = loader.rank_sampler.batches(epoch, loader.batch_size, start)
        return iter(
            PlannedBatch(np.asarray(b).tolist(), epoch, first + k) for k, b in enumerate(batches)
        )


class DataLoaderAttributes:
    """The attributes ``DataLoader`` has and training code reads, for a loader to inherit
    (this module's docstring says what each means here)."""

    #: DataLoader's ``collate_fn``: unwraps the loader's batches (see ``batch_sampler``).
    collate_fn = staticmethod(collate)
    #: 0: a DataLoader rebuilt from these attributes runs in this process (the loader's
    #: own threads or worker processes are inside it, ``backend.*``).
    num_workers = 0
    #: False: batches arrive on their device already (pinning, if any, is inside).
    pin_memory = False
    #: DataLoader's other keyword arguments, at the values that describe this loader.
    timeout = 0.0
    worker_init_fn = None
    prefetch_factor = None
    persistent_workers = False
    generator = None
    multiprocessing_context = None
    pin_memory_device = ""
    in_order = True

    def attach_dataloader_attributes(self: _Owner) -> None:
        """Set ``dataset``, ``sampler`` and ``batch_sampler`` (after the loader's order)."""
        #: The split, sized like it, with ImageFolder's attributes for a folder.
        self.dataset = SplitDataset(self)
        #: DistributedSampler's face: ``len()`` this rank's samples, ``set_epoch``.
        self.sampler = LoaderSampler(self)
        #: The next epoch's batches; with ``dataset`` and ``collate_fn`` a DataLoader
        #: rebuilt from them yields this loader's batches.
        self.batch_sampler = PlannedBatches(self)

    @property
    def drop_last(self: _Owner) -> bool:
        """Whether the last partial batch (and the uneven tail of the order) is dropped."""
        return self.spec.sampling.drop_last
