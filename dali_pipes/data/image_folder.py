"""A torchvision ``ImageFolder`` (any ``DatasetFolder`` that loads images with torchvision's
loader) as a source: its root, samples, labels and classes taken as they are.

The samples keep the dataset's order and labels (whatever ``find_classes``,
``extensions`` or ``is_valid_file`` chose), so sample ``i`` here is ``dataset[i]`` there
and its augmentation is keyed by ``i``. What the backends cannot do as torchvision would
is refused in one line: a dataset that reads files its own way (another ``loader``, its
own ``__getitem__``) or changes labels (``target_transform``); a sample of a format the
backends do not decode is a bad file like any other (``on_error``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from dali_pipes.data.manifest import read_manifest
from dali_pipes.data.sources import IMAGE_EXTENSIONS, FolderSource
from dali_pipes.data.specs import TOLERATE, DataSpec
from dali_pipes.errors import ConfigError, DataError
from dali_pipes.image.reads import DEFAULT_READ_TIMEOUT


def is_folder_dataset(obj: Any) -> bool:
    """Whether ``obj`` is a torchvision ``DatasetFolder`` (``ImageFolder`` is one).

    Asked of every path given to ``DALIIterator``, so it imports nothing: an object made by
    torchvision exists only once torchvision is imported (importing it takes seconds)."""
    folder = sys.modules.get("torchvision.datasets.folder")
    return folder is not None and isinstance(obj, folder.DatasetFolder)


def adapt(obj: Any, data: DataSpec) -> FolderSource | None:
    """The source of a torchvision ``DatasetFolder`` with ``data``'s bad-file settings; None
    for anything else (``DALIIterator``'s adapter, :mod:`dali_pipes.data.given`)."""
    if not is_folder_dataset(obj):
        return None
    return folder_dataset_source(
        obj, on_error=data.on_error, exclude=data.exclude, read_timeout=data.read_timeout
    )


def check_dataset(dataset: Any) -> None:
    """Refuse a dataset whose samples the backends would not read as it does."""
    from torchvision.datasets import DatasetFolder
    from torchvision.datasets.folder import default_loader, pil_loader

    name = type(dataset).__name__
    if type(dataset).__getitem__ is not DatasetFolder.__getitem__:
        raise ConfigError(
            f"{name} has a __getitem__ of its own, which the loader would not run; give an "
            "ImageFolder, or its root and transform"
        )
    if dataset.loader not in (default_loader, pil_loader):
        raise ConfigError(
            f"{name}.loader={dataset.loader!r} is not torchvision's image loader; the backends "
            "decode the files themselves (RGB, as PIL's convert('RGB'))"
        )
    if dataset.target_transform is not None:
        raise ConfigError(
            f"{name}.target_transform={dataset.target_transform!r} is not supported: the "
            "labels are the dataset's class indices; map them in the training loop"
        )


def folder_dataset_source(
    dataset: Any,
    *,
    on_error: str = "raise",
    exclude: str | None = None,
    read_timeout: float | None = DEFAULT_READ_TIMEOUT,
) -> FolderSource:
    """``dataset``'s samples, in its order, with its labels and classes; a file of a format
    the backends do not decode fails here, or under ``on_error=skip|drop`` is left out
    (``rejected``), as are the files of an ``exclude`` manifest."""
    check_dataset(dataset)
    excluded = read_manifest(exclude) if exclude else {}
    files: list[str] = []
    labels: list[int] = []
    rejected: list[tuple[str, str]] = []
    for path, label in dataset.samples:
        ext = os.path.splitext(path)[1].lower()
        if ext not in IMAGE_EXTENSIONS:
            reason = f"{ext or 'no extension'}: not a format the backends decode"
            if on_error not in TOLERATE:
                raise DataError(f"{path}: {reason}; convert it to JPEG or PNG, or remove it")
            rejected.append((path, reason))
        elif excluded and (why := excluded.get(str(Path(path).resolve()))):
            rejected.append((path, f"in the scan manifest: {why}"))
        else:
            files.append(path)
            labels.append(int(label))
    return FolderSource(
        root=str(dataset.root),
        files=tuple(files),
        labels=np.asarray(labels, dtype=np.int64),
        classes=tuple(dataset.classes),
        rejected=tuple(rejected),
        read_timeout=read_timeout,
    )
