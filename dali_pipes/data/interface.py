"""What a data source is: the interface every backend, the sampler and the tools read a
split through.

A source is one split of a dataset. The backends, the sampler, the bad-file policy
(:mod:`dali_pipes.data.policy`), resuming, ``scan``, ``pack`` and ``show`` use only what is
declared here, so a new kind of data (a folder, packed shards, Parquet files, a user's own
format) is a class with these members and an entry in the registry
(:func:`dali_pipes.data.registry.register_source`); nothing else changes.

Required:

- :class:`Labelled`: ``classes``, ``labels`` and ``len``, which every split has, images or
  not (the synthetic backend needs nothing more);
- :class:`Source`: a split of encoded images (JPEG, PNG or WebP). ``read`` returns a batch's
  encoded bytes by index, each one or the :class:`~dali_pipes.errors.DataError` naming the
  sample, and never waits past the read deadline (``data.read_timeout``: a read that does
  not return is a bad sample, :func:`dali_pipes.image.reads.read_all` does it); ``identity``
  is what each sample's random augmentation is drawn from, with the seed and the epoch
  (usually its index; a packed sample keeps its folder index); ``name`` is what a sample is
  called in an error and in the bad-file manifest; ``root`` says where the split comes from.

Optional capabilities: each is a small Protocol below, named after what it lets a caller
do. A caller that can use one checks ``isinstance(source, Capability)`` and calls it; a
method that returns None means the capability does not apply to this instance (a folder's
source is not read in blocks, a packed one is). Adding a capability means a Protocol here,
saying who uses it and what it promises, and the method on the sources that can offer it;
sources without it keep working unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from dali_pipes.errors import ConfigError

if TYPE_CHECKING:
    from dali_pipes.data.targets import SampleTargets
    from dali_pipes.image.decode import Blob

#: A batch of sample indices, as the sampler hands them out.
Indices = Sequence[int] | np.ndarray


@runtime_checkable
class Labelled(Protocol):
    """Every split: its class names, one int64 label per sample, and how many samples."""

    @property
    def classes(self) -> tuple[str, ...]:
        """The class names in label order (label ``i`` is ``classes[i]``)."""
        ...

    @property
    def labels(self) -> np.ndarray:
        """int64, one per sample, each in ``[0, len(classes))``."""
        ...

    def __len__(self) -> int: ...


@runtime_checkable
class Source(Labelled, Protocol):
    """A split of encoded images: what the decoding backends, the caches and the tools read.

    Picklable (DataLoader workers and ``scan``'s processes get a copy) and safe to
    ``read`` from several threads at once (the DALI feed reads ahead on a pool).
    """

    @property
    def root(self) -> str:
        """Where the split comes from (a folder, a URL), for messages and
        ``loader.dataset.root``."""
        ...

    def read(self, indices: Indices) -> list[Blob]:
        """Each sample's encoded bytes (uint8), or the one-line ``DataError`` naming it
        (returned, not raised: the bad-file policy decides), within the read deadline."""
        ...

    def identity(self, indices: Indices) -> np.ndarray:
        """int64 per sample: what its random parameters are drawn from (with seed and
        epoch), so the same image gets the same crop however the data is stored."""
        ...

    def name(self, index: int) -> str:
        """What sample ``index`` is called in an error and in the bad-file list."""
        ...


# --------------------------------------------------------------------- capabilities


class Blocks(Protocol):
    """Samples stored in runs that are cheap to read together (the shards of a pack, the
    row groups of Parquet files): block ``b`` holds samples ``members(b)``, contiguous and
    ascending, the blocks in index order."""

    @property
    def num_blocks(self) -> int:
        """How many blocks there are."""
        ...

    @property
    def shuffle_buffer(self) -> int:
        """An epoch shuffles samples within runs of this many consecutive ones (0: off)."""
        ...

    def members(self, block: int) -> np.ndarray:
        """The sample indices of one block, ascending."""
        ...


@runtime_checkable
class ReadInBlocks(Protocol):
    """A source read in blocks: the sampler visits its blocks in an order drawn from (seed,
    epoch) and shuffles within a window (:class:`~dali_pipes.data.sampling.StreamSampler`)
    instead of a permutation of all samples, so a batch reads a few blocks, not one block
    per sample. Such an epoch resumes part-way on the world size that saved it."""

    def blocks(self) -> Blocks | None:
        """The blocks, or None when the samples are independent (a folder's files)."""
        ...


@dataclass(frozen=True)
class PartShare:
    """One dataset of a mix (:class:`Mixed`): what it is called, how many samples it holds,
    and how many of them a training epoch reads."""

    name: str
    size: int
    per_epoch: int


@runtime_checkable
class Mixed(Protocol):
    """Several datasets read as one split in proportions (``data=mix``,
    :mod:`dali_pipes.data.mix`): the training order reads each part's samples per epoch as
    :meth:`proportions` says (:class:`~dali_pipes.data.mix_order.MixSampler`)."""

    def proportions(self) -> tuple[PartShare, ...] | None:
        """Each part's size and samples per epoch, in part order; None: every sample once
        (the validation split)."""
        ...


@runtime_checkable
class Rejects(Protocol):
    """A source that left samples out when it was listed (a format the backends cannot
    decode, the scan manifest of ``data.exclude``): the loaders list them with the bad
    files, and ``scan`` reports them."""

    @property
    def rejected(self) -> tuple[tuple[str, str], ...]:
        """(name, reason) of each sample left out."""
        ...


@runtime_checkable
class Annotated(Protocol):
    """A split whose samples carry detection or segmentation targets besides the image
    (COCO's boxes and instance masks, a segmentation dataset's masks): the loaders move
    them with the image and hand them over in torchvision's references' batch form. Its
    ``labels`` (one per image) are 0: an image as a whole has no class here."""

    @property
    def task(self) -> str:
        """``"detection"`` (boxes, labels, maybe instance masks) or ``"segmentation"``."""
        ...

    @property
    def has_masks(self) -> bool:
        """Whether each sample's targets have masks (instance masks, or its one mask)."""
        ...

    def targets(self, index: int) -> SampleTargets:
        """Sample ``index``'s targets in its source image's pixels (thread-safe: the feed
        reads them on its read threads)."""
        ...


def mask_fill(source: Annotated) -> int:
    """What a crop pads ``source``'s masks with: its ``mask_fill`` (a segmentation
    source's ignore index), else 0 (instance masks: no object)."""
    return int(getattr(source, "mask_fill", 0))


def misfit(source: Annotated, index: int, size: tuple[int, int]) -> str | None:
    """Why sample ``index``'s targets cannot go with its image of ``size`` (height, width,
    read from the image): the source's ``misfit`` (a one-line reason naming the file and
    what to fix), or None when it fits or the source does not say. A loader treats a
    misfit like an unreadable image."""
    check = getattr(source, "misfit", None)
    return None if check is None else check(index, size)


@runtime_checkable
class StoredFormat(Protocol):
    """Where and how a source's samples are stored, for a backend's own reader of that
    format: ``format_name`` says which format it is (``"webdataset"``: ``pack``'s shards)."""

    @property
    def format_name(self) -> str:
        """The stored format's name, which a backend's own readers are registered under."""
        ...


@runtime_checkable
class StoredAs(Protocol):
    """A source whose samples a backend may read with a reader of its own for their stored
    format, instead of through ``read`` (the DALI backend reads ``pack``'s shards on a
    local disk with DALI's webdataset reader). The backend uses its reader only when it
    has one registered for ``format_name``; the reader must deliver the planned samples,
    so order, sharding and augmentation stay the sampler's."""

    def stored_format(self) -> StoredFormat | None:
        """The samples' stored format, or None when no backend reader applies to this
        instance (shards in a bucket are read through the source's ranged reads)."""
        ...


@runtime_checkable
class LocalFiles(Protocol):
    """A source whose every sample is a local file (an image folder's): what readers that
    open files themselves need (the DALI feed's compiled batch reads, ``bench``'s
    ImageFolder baseline and decode ceiling, DALI's own example pipeline, the peer
    loaders), with the deadline such a read keeps (``data.read_timeout``; None: none)."""

    @property
    def read_timeout(self) -> float | None:
        """Seconds a sample's read may take before it is a bad sample."""
        ...

    def local_paths(self) -> tuple[str, ...] | None:
        """Each sample's path, in index order; None when the samples are not all local
        files (packed shards, objects in a bucket)."""
        ...


#: A sample's size in bytes and what changes when it is rewritten.
SampleStat = tuple[int, str]


@runtime_checkable
class Stats(Protocol):
    """A source that knows each sample's size and version without reading it all (a
    folder: one ``stat`` per file), which ``pack`` plans its shards and its resume
    fingerprint from; without it, ``pack`` reads every sample once to measure it."""

    def stats(self) -> list[SampleStat]:
        """(size, version) of every sample, in index order; one line for one that is gone."""
        ...


def images_of(source: Labelled, user: str, hint: str = "use backend=synthetic") -> Source:
    """``source`` as a :class:`Source`, or the one-line error saying that ``user`` (e.g.
    ``backend=torch decodes image files``) needs images the data does not have."""
    if not isinstance(source, Source):
        raise ConfigError(f"{user} but data={source_name(source)} has none; {hint}")
    return source


def local_paths_of(source: Labelled) -> tuple[str, ...] | None:
    """The source's local file paths (:class:`LocalFiles`), None where it has none."""
    return source.local_paths() if isinstance(source, LocalFiles) else None


def source_name(source: Labelled) -> str:
    """How a source is called in messages: ``synthetic`` for ``SyntheticSource``."""
    return type(source).__name__.removesuffix("Source").lower() or type(source).__name__
