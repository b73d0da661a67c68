"""Dataset discovery: which files, which labels, which classes.

Folder discovery reproduces torchvision's ``ImageFolder`` exactly (sorted class folders,
sorted ``os.walk`` order, case-insensitive extensions), so class indices and sample order
are the ones a user of ``ImageFolder`` already has. Every backend reads the same
:class:`ImageSource`; a synthetic source has labels but no files.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dali_pipes.data.manifest import read_manifest
from dali_pipes.data.shards import ShardLayout, ShardReader, open_split
from dali_pipes.data.specs import (
    TOLERATE,
    DataSpec,
    FolderData,
    SampleData,
    ShardData,
    SyntheticData,
)
from dali_pipes.errors import ConfigError, DataError
from dali_pipes.image.decode import read_file

log = logging.getLogger(__name__)

#: Formats both backends decode (torchvision.io and DALI's decoders).
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".webp")
#: Formats ImageFolder would list but torchvision.io cannot decode.
UNSUPPORTED_EXTENSIONS = (".bmp", ".ppm", ".pgm", ".tif", ".tiff")
SPLITS = ("train", "val")


@dataclass(frozen=True, eq=False)
class ImageSource:
    """Encoded images of one split with ImageFolder labels: files, or samples in shards.

    ``files`` names every sample (a path, or ``shard.tar:member`` for a packed dataset);
    :meth:`read` returns their bytes either way. A sample's augmentation is keyed by
    :meth:`identity`, the same for a file and for its packed copy.
    """

    root: str
    files: tuple[str, ...]
    labels: np.ndarray = field(repr=False)  # int64, one per file
    classes: tuple[str, ...]
    #: Files left out at discovery, with the reason (unsupported format, scan manifest).
    rejected: tuple[tuple[str, str], ...] = ()
    #: Where the samples of a packed dataset are (None: one file per sample).
    layout: ShardLayout | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        reader = ShardReader(self.layout) if self.layout is not None else None
        object.__setattr__(self, "_reader", reader)

    def __len__(self) -> int:
        return len(self.files)

    def read(self, indices: list[int] | np.ndarray) -> list[np.ndarray | DataError]:
        """Each sample's encoded bytes, or the error naming it (raised later, or skipped)."""
        reader: ShardReader | None = self._reader  # type: ignore[attr-defined]
        if reader is not None:
            try:
                return list(reader.read(indices))
            except DataError as exc:
                return [exc] * len(indices)
        return [read_file(self.files[int(i)]) for i in indices]

    def identity(self, indices: list[int] | np.ndarray) -> np.ndarray:
        """What each sample's random augmentation is drawn from (with seed and epoch): the
        index of its file in the folder's ImageFolder order. For a folder that is the
        sample's index here; a packed sample carries it in its key (the packing shuffled
        the samples), so a photo gets the same crop and flip from its shard as from the
        folder it was packed from."""
        idx = np.asarray(indices, dtype=np.int64)
        ids = None if self.layout is None else self.layout.ids
        return idx if ids is None else ids[idx]

    @property
    def num_classes(self) -> int:
        """How many classes the labels range over."""
        return len(self.classes)


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


Source = ImageSource | SyntheticSource


def discover_folder(
    root: str | os.PathLike[str], *, on_error: str = "raise", exclude: str | None = None
) -> ImageSource:
    """List ``root/<class>/**/<image>`` like ``torchvision.datasets.ImageFolder``.

    Files of a format the backends cannot decode fail the listing, or with
    ``on_error="skip"`` are left out and listed in ``rejected``; so are the files of an
    ``exclude`` manifest (from ``python -m dali_pipes.scan``).
    """
    excluded = read_manifest(exclude) if exclude else {}
    rejected: list[tuple[str, str]] = []
    top = Path(root).expanduser()
    classes = _class_folders(top)
    files: list[str] = []
    labels: list[int] = []
    ignored = 0
    for index, name in enumerate(classes):
        found = 0
        for dirpath, _, fnames in sorted(os.walk(top / name, followlinks=True)):
            for fname in sorted(fnames):
                ext = os.path.splitext(fname)[1].lower()
                path = os.path.join(dirpath, fname)
                if ext in IMAGE_EXTENSIONS:
                    if excluded and (reason := excluded.get(str(Path(path).resolve()))):
                        rejected.append((path, f"in the scan manifest: {reason}"))
                        continue
                    files.append(path)
                    labels.append(index)
                    found += 1
                elif ext in UNSUPPORTED_EXTENSIONS:
                    message = f"{ext} images are not supported; convert it to JPEG or PNG"
                    if on_error not in TOLERATE:
                        raise DataError(f"{path}: {message}, or remove it")
                    rejected.append((path, message))
                else:
                    ignored += 1
        if found == 0:
            message = (
                f"class folder {top / name} has no usable images "
                f"({', '.join(IMAGE_EXTENSIONS)}); add images or remove the folder"
            )
            if on_error not in TOLERATE:
                raise DataError(message)
            log.warning("%s (class %d kept, with no samples)", message, index)
    if ignored:
        log.info("%s: ignored %d files without an image extension", top, ignored)
    return ImageSource(
        root=str(top),
        files=tuple(files),
        labels=np.asarray(labels, dtype=np.int64),
        classes=tuple(classes),
        rejected=tuple(rejected),
    )


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


def open_source(data: DataSpec, split: str) -> Source:
    """Resolve a data config into the source of one split (``train`` or ``val``)."""
    if split not in SPLITS:
        raise ConfigError(f"split={split!r} is invalid: choose one of {SPLITS}")
    if isinstance(data, SyntheticData):
        return SyntheticSource(data.num_samples, data.num_classes)
    if isinstance(data, ShardData):
        if not data.root:
            raise ConfigError("data.root is not set: pass data.root=/path/to/shards")
        names, labels, classes, layout = open_split(data.root, split, data.shuffle_buffer)
        return ImageSource(
            root=str(Path(data.root).expanduser()),
            files=tuple(names),
            labels=labels,
            classes=tuple(classes),
            layout=layout,
        )
    if isinstance(data, SampleData):
        from dali_pipes.data.sample_set import ensure_sample_dataset

        root = ensure_sample_dataset(data.root, data.train_per_class, data.val_per_class)
        return discover_folder(root / split, on_error=data.on_error, exclude=data.exclude)
    if isinstance(data, FolderData):
        if not data.root:
            raise ConfigError("data.root is not set: pass data.root=/path/to/images")
        sub = data.train_dir if split == "train" else data.val_dir
        return discover_folder(
            Path(data.root) / sub if sub else Path(data.root),
            on_error=data.on_error,
            exclude=data.exclude,
        )
    raise ConfigError(
        f"data={data.name!r} has no source: use folder, imagenet, sample or synthetic"
    )
