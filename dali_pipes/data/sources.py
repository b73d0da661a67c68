"""The built-in sources: image folders (ImageFolder's order), packed shards, the synthetic
split, and how each is opened from its ``data.*`` config.

Folder discovery reproduces torchvision's ``ImageFolder`` exactly (sorted class folders,
sorted ``os.walk`` order, case-insensitive extensions), so class indices and sample order
are the ones a user of ``ImageFolder`` already has. Every backend reads a
:class:`FolderSource` or a :class:`ShardSource` through the source interface
(:mod:`dali_pipes.data.interface`); a synthetic source has labels but no files. The
openers are registered in :mod:`dali_pipes.data.registry`.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from dali_pipes.data.interface import Blocks, Indices, Labelled, SampleStat, Source
from dali_pipes.data.listing import ClassListing
from dali_pipes.data.manifest import read_manifest
from dali_pipes.data.registry import SPLITS, open_source
from dali_pipes.data.shard_reader import ShardReader
from dali_pipes.data.shards import ShardLayout, open_split
from dali_pipes.data.specs import (
    FolderData,
    SampleData,
    ShardData,
    SyntheticData,
)
from dali_pipes.data.storage import Storage, is_url, join, storage_for
from dali_pipes.data.walk import walk
from dali_pipes.errors import ConfigError, DataError
from dali_pipes.image.decode import Blob
from dali_pipes.image.headers import IMAGE_EXTENSIONS
from dali_pipes.image.reads import DEFAULT_READ_TIMEOUT, read_all

log = logging.getLogger(__name__)


__all__ = [
    "IMAGE_EXTENSIONS",
    "SPLITS",
    "FolderSource",
    "ImageSource",
    "Labelled",
    "ShardSource",
    "Source",
    "SyntheticSource",
    "open_source",
]


@dataclass(frozen=True, eq=False)
class FolderSource:
    """The image files of one split of a folder (local or in a bucket), ImageFolder labels.

    Besides the :class:`~dali_pipes.data.interface.Source` interface it offers the
    ``rejected``, ``local_paths`` (local files) and ``stats`` capabilities. A sample's
    augmentation is keyed by its index, the same as its packed copy's
    (:meth:`ShardSource.identity`).
    """

    root: str
    files: tuple[str, ...]
    labels: np.ndarray = field(repr=False)  # int64, one per file
    classes: tuple[str, ...]
    #: Files left out at discovery, with the reason (unsupported format, scan manifest).
    rejected: tuple[tuple[str, str], ...] = ()
    #: Seconds a file's read may take before it is a bad file (``data.read_timeout``).
    read_timeout: float | None = DEFAULT_READ_TIMEOUT

    def __len__(self) -> int:
        return len(self.files)

    @cached_property
    def storage(self) -> Storage:
        """Where the files are read from: the local disk or the bucket of ``root``."""
        return storage_for(self.root, self.read_timeout)

    def read(self, indices: Indices) -> list[Blob]:
        """Each file's bytes, or the error naming it (raised later, or skipped); every read
        within ``read_timeout`` (:mod:`dali_pipes.image.reads`)."""
        return self.storage.read_many([self.files[int(i)] for i in indices], self.read_timeout)

    def identity(self, indices: Indices) -> np.ndarray:
        """What each sample's random augmentation is drawn from (with seed and epoch): the
        index of its file in the folder's ImageFolder order."""
        return np.asarray(indices, dtype=np.int64)

    def name(self, index: int) -> str:
        """The file's path."""
        return self.files[index]

    def local_paths(self) -> tuple[str, ...] | None:
        """The files, when they are local files (not in a bucket)."""
        return None if is_url(self.root) else self.files

    def stats(self) -> list[SampleStat]:
        """Size and version of each file (one listing per folder of a bucket), or one line
        naming a file that went away since it was listed."""
        stats = self.storage.stat(self.files)
        for path, st in zip(self.files, stats, strict=True):
            if st is None:
                raise DataError(f"{path}: gone since the folder was listed; rerun the pack")
        return [st for st in stats if st is not None]

    @property
    def num_classes(self) -> int:
        """How many classes the labels range over."""
        return len(self.classes)


@dataclass(frozen=True, eq=False)
class ShardSource:
    """One split of a dataset packed by ``pack``: samples in tar shards, read shard by shard.

    ``files`` names every sample ``shard.tar:member``. Besides the
    :class:`~dali_pipes.data.interface.Source` interface it offers the ``blocks`` (the
    shards, which the sampler visits in turn) and ``stored_format`` capabilities (a
    backend's own webdataset reader may read shards on a local disk).
    """

    root: str
    files: tuple[str, ...]
    labels: np.ndarray = field(repr=False)  # int64, one per sample
    classes: tuple[str, ...]
    #: Where each sample is in which shard, and its folder index.
    layout: ShardLayout = field(repr=False)
    read_timeout: float | None = DEFAULT_READ_TIMEOUT

    def __len__(self) -> int:
        return len(self.files)

    @cached_property
    def reader(self) -> ShardReader:
        """The shard reader of this process (its blocks cached for the sampler's window)."""
        return ShardReader(self.layout, storage_for(self.root, self.read_timeout))

    def read(self, indices: Indices) -> list[Blob]:
        """Each sample's bytes, or the error naming it; the batch's reads (neighbouring
        samples in one call) within one ``read_timeout``."""

        def batch(_: str) -> list[np.ndarray | DataError]:
            # A sample or shard that cannot be read comes back as its error (a bad file);
            # a store that fails for good (the server gone past the retries, credentials
            # refused) raises, and the run stops with that line, as for a folder.
            return list(self.reader.read(indices))

        [blobs] = read_all(batch, [self.files[int(indices[0])]], self.read_timeout)
        return [blobs] * len(indices) if isinstance(blobs, DataError) else blobs

    def identity(self, indices: Indices) -> np.ndarray:
        """The index of each sample's file in the folder it was packed from (the packing
        shuffled the samples; the key keeps it), so a photo gets the same crop and flip from
        its shard as from the folder."""
        idx = np.asarray(indices, dtype=np.int64)
        ids = self.layout.ids  # None in a pack written before keys carried it: the index
        return idx if ids is None else ids[idx]

    def name(self, index: int) -> str:
        """``shard.tar:member``."""
        return self.files[index]

    def blocks(self) -> Blocks:
        """The shards: the sampler reads a split shard by shard."""
        return self.layout

    def stored_format(self) -> ShardLayout | None:
        """The shards as WebDataset tars, when they are on a local disk (a backend's own
        reader reads those); None for shards in a bucket."""
        return self.layout if self.layout.on_disk else None

    @property
    def num_classes(self) -> int:
        """How many classes the labels range over."""
        return len(self.classes)


#: A split of encoded images listed by this module: a folder's files or a pack's samples.
ImageSource = FolderSource | ShardSource


@dataclass(frozen=True, eq=False)
class SyntheticSource:
    """``num_samples`` virtual samples, label ``i % num_classes``; nothing to decode."""

    num_samples: int
    num_classes: int

    @property
    def labels(self) -> np.ndarray:
        """Labels cycling through the classes, one per virtual sample."""
        return np.arange(self.num_samples, dtype=np.int64) % self.num_classes

    @property
    def classes(self) -> tuple[str, ...]:
        """``class_0`` ... ``class_{n-1}``."""
        return tuple(f"class_{i}" for i in range(self.num_classes))

    def __len__(self) -> int:
        return self.num_samples


def discover_folder(
    root: str | os.PathLike[str],
    *,
    on_error: str = "raise",
    exclude: str | None = None,
    read_timeout: float | None = DEFAULT_READ_TIMEOUT,
) -> FolderSource:
    """List ``root/<class>/**/<image>`` like ``torchvision.datasets.ImageFolder``.

    Files of a format the backends cannot decode, and names with an image extension that
    are not regular files (a FIFO would block its reader forever), fail the listing, or
    with ``on_error`` skip or drop are left out and listed in ``rejected``; so are the files of an
    ``exclude`` manifest (from ``python -m dali_pipes.scan``). A symlink back into a folder
    above it is not followed (with a warning), where ImageFolder would list the same images
    again under ever longer paths.
    """
    excluded = read_manifest(exclude) if exclude else {}
    top = join(root)
    tree = _bucket_tree(top) if is_url(top) else _FolderTree(Path(top))
    classes = tree.classes()
    listing = ClassListing(on_error, excluded, _manifest_key)
    for label, name in enumerate(classes):
        listing.add_class(join(top, name), tree.entries(name), label)
    listing.log_ignored(top)
    return FolderSource(
        root=top,
        files=tuple(listing.files),
        labels=np.asarray(listing.labels, dtype=np.int64),
        classes=tuple(classes),
        rejected=tuple(listing.rejected),
        read_timeout=read_timeout,
    )


def _manifest_key(path: str) -> str:
    """How the scan manifest names a file: its resolved path (an object: its URL)."""
    return path if is_url(path) else str(Path(path).resolve())


@dataclass(frozen=True)
class _FolderTree:
    """An ImageFolder root on the file system."""

    top: Path

    def classes(self) -> list[str]:
        """The class folder names, sorted, or one line saying what the root should be."""
        return _class_folders(self.top)

    def entries(self, name: str) -> list[tuple[str, bool]]:
        """Class ``name``'s files in ``os.walk`` order, each with whether it is regular."""
        return [(e.path, e.is_file()) for e in walk(self.top / name)]


@dataclass(frozen=True)
class _BucketTree:
    """An ImageFolder root in object storage: ``s3://bucket/prefix/<class>/**/<image>``,
    listed once (paginated), in the order ``os.walk`` gives for a local copy."""

    top: str
    folders: dict[str, list[tuple[str, str]]]  # class -> (folder, name) of each object

    def classes(self) -> list[str]:
        """The class folder names, sorted, or one line saying what the root should be."""
        if not self.folders:
            raise DataError(
                f"data root {self.top} has no class folders (no objects under the prefix); "
                f"expected {self.top}/<class>/<image>.jpg: check data.root"
            )
        return sorted(self.folders)

    def entries(self, name: str) -> list[tuple[str, bool]]:
        """Class ``name``'s objects sorted as ``os.walk`` lists a local copy: by folder,
        then by name; every object is a regular file."""
        return [(f"{folder}/{base}", True) for folder, base in sorted(self.folders[name])]


def _bucket_tree(top: str) -> _BucketTree:
    from dali_pipes.data.s3 import list_keys, split_url

    prefix = split_url(top)[1]
    start = len(prefix) + 1 if prefix else 0
    folders: dict[str, list[tuple[str, str]]] = {}
    for key in list_keys(top):
        parts = key[start:].split("/")
        if len(parts) < 2 or not parts[0]:
            continue  # an object beside the class folders: ImageFolder ignores files there
        objects = folders.setdefault(parts[0], [])
        if parts[-1]:  # not a folder marker ("class/")
            objects.append((join(top, *parts[:-1]), parts[-1]))
    return _BucketTree(top, folders)


def _class_folders(top: Path) -> list[str]:
    """The class folder names of an ImageFolder root, sorted (class ``i`` is the i-th), or
    a one-line error saying what the root should look like."""
    if not top.exists():
        raise DataError(f"data root {top} does not exist; set data.root to an image folder")
    if not top.is_dir():
        raise DataError(f"data root {top} is not a directory; set data.root to an image folder")
    classes = sorted(e.name for e in os.scandir(top) if e.is_dir())
    if not classes:
        raise DataError(f"data root {top} has no class folders; expected {top}/<class>/<image>.jpg")
    return classes


def open_folder(data: FolderData, split: str) -> FolderSource:
    """A split of an image folder: ``root``, or its ``train_dir``/``val_dir`` subfolder."""
    if not data.root:
        raise ConfigError("data.root is not set: pass data.root=/path/to/images")
    sub = data.train_dir if split == "train" else data.val_dir
    return discover_folder(
        join(data.root, sub) if sub else data.root,
        on_error=data.on_error,
        exclude=data.exclude,
        read_timeout=data.read_timeout,
    )


def open_sample(data: SampleData, split: str) -> FolderSource:
    """A split of the embedded sample dataset, generated on first use."""
    from dali_pipes.data.sample_set import ensure_sample_dataset

    root = ensure_sample_dataset(data.root, data.train_per_class, data.val_per_class)
    return discover_folder(
        root / split,
        on_error=data.on_error,
        exclude=data.exclude,
        read_timeout=data.read_timeout,
    )


def open_shards(data: ShardData, split: str) -> ShardSource:
    """A split of a dataset packed by ``python -m dali_pipes.pack``."""
    if not data.root:
        raise ConfigError("data.root is not set: pass data.root=/path/to/shards")
    names, labels, classes, layout = open_split(
        data.root, split, data.shuffle_buffer, data.block_mb
    )
    return ShardSource(
        root=data.root if is_url(data.root) else str(Path(data.root).expanduser()),
        files=tuple(names),
        labels=labels,
        classes=tuple(classes),
        layout=layout,
        read_timeout=data.read_timeout,
    )


def open_synthetic(data: SyntheticData, split: str) -> SyntheticSource:
    """Virtual samples: labels, no images."""
    return SyntheticSource(data.num_samples, data.num_classes)
