"""A Hugging Face ``datasets.Dataset`` as a source: encoded images read from its Arrow table.

``DALIIterator(dataset)`` takes a dataset with one image column (the ``Image`` feature, or
binary) and one label column (``ClassLabel``, or integers), as ``load_dataset``,
``load_from_disk`` or ``Dataset.from_dict`` give it. A batch's rows are taken from the
table in the Arrow format (the dataset's own ``select``/``shuffle`` order kept), and their
bytes go to the decoders as they are: PIL never decodes them. A row that holds a file's
path instead of its bytes (a dataset made from paths and not saved yet) is read from that
file. Sample ``i`` is ``dataset[i]``, its augmentation drawn from ``i`` with the seed and the
epoch, so a dataset written from an image folder in ImageFolder order gets the folder's
batches.

Which columns are the image and the label is read from the features: the one ``Image``
column (else one named ``image``/``img``), the one ``ClassLabel`` column (else one named
``label``/``labels``). Anything else is said in one line, with the ``datasets`` call that
picks the columns. The ``datasets`` package is optional (``pip install
'dali_pipes[hf]'``); nothing here imports it: a dataset exists only once it is imported.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dali_pipes.data.interface import Indices
from dali_pipes.data.specs import DataSpec
from dali_pipes.errors import ConfigError, DataError
from dali_pipes.image.decode import Blob, read_files
from dali_pipes.image.reads import DEFAULT_READ_TIMEOUT, read_all

IMAGE_NAMES = ("image", "img")
LABEL_NAMES = ("label", "labels")


def is_dataset(obj: Any) -> bool:
    """Whether ``obj`` is a ``datasets.Dataset`` (without importing ``datasets``)."""
    module = sys.modules.get("datasets")
    return module is not None and isinstance(obj, module.Dataset)


def adapt(obj: Any, data: DataSpec) -> DatasetSource | None:
    """The source of a Hugging Face dataset; None for anything else. A ``DatasetDict`` or a
    streaming dataset is refused in one line."""
    module = sys.modules.get("datasets")
    if module is None:
        return None
    if isinstance(obj, module.DatasetDict):
        raise ConfigError(
            f"a DatasetDict holds the splits {sorted(obj)}: give one, e.g. dataset['train']"
        )
    if isinstance(obj, module.IterableDataset):
        raise ConfigError(
            "a streaming (iterable) dataset has no length or random access: load it without "
            "streaming=True, or save it with save_to_disk and load_from_disk"
        )
    if not isinstance(obj, module.Dataset):
        return None
    if data.exclude is not None:
        raise ConfigError(
            "exclude= names files, and a dataset's samples are rows: leave rows out with "
            "dataset.filter(...) instead"
        )
    return dataset_source(obj, read_timeout=data.read_timeout)


def dataset_source(
    dataset: Any, *, read_timeout: float | None = DEFAULT_READ_TIMEOUT
) -> DatasetSource:
    """``dataset``'s image and label columns as a source (columns found as the module says)."""
    features = dataset.features
    image = _column(features, "Image", IMAGE_NAMES, "image")
    label = _column(features, "ClassLabel", LABEL_NAMES, "label")
    kind = type(features[image]).__name__
    if kind not in ("Image", "Value") or (
        kind == "Value" and features[image].dtype not in ("binary", "large_binary")
    ):
        raise ConfigError(
            f"column {image!r} is {features[image]}, not encoded images: cast it with "
            f"dataset.cast_column({image!r}, datasets.Image())"
        )
    labels = _labels(dataset, label)
    names = getattr(features[label], "names", None)
    count = int(labels.max(initial=-1)) + 1
    classes = tuple(names) if names else tuple(str(i) for i in range(count))
    if len(classes) < count:
        raise ConfigError(
            f"label {count - 1} is past the {len(classes)} names of column {label!r}'s ClassLabel"
        )
    files = [entry["filename"] for entry in dataset.cache_files]
    return DatasetSource(
        dataset=dataset.select_columns([image]).with_format("arrow"),
        column=image,
        labels=labels,
        classes=classes,
        root=os.path.commonpath([os.path.dirname(f) for f in files])
        if files
        else "dataset in memory",
        read_timeout=read_timeout,
    )


def _column(features: Any, feature: str, names: tuple[str, ...], what: str) -> str:
    """The one column with ``feature``, else the one named as ``names`` says."""
    typed = [name for name, f in features.items() if type(f).__name__ == feature]
    if len(typed) == 1:
        return typed[0]
    named = [name for name in names if name in features]
    if len(typed) == 0 and len(named) == 1:
        return named[0]
    found = typed or named
    which = f"columns {found} could each be" if found else "no column is"
    raise ConfigError(
        f"{which} the {what} (columns: {list(features)}): keep one with "
        f"dataset.select_columns([...]) or name it {names[0]!r} with dataset.rename_column"
    )


def _labels(dataset: Any, column: str) -> np.ndarray:
    """The label column as int64, each in ``[0, classes)``, or the first bad row named."""
    table = dataset.select_columns([column]).with_format("arrow")[:]
    values = table.column(column).to_numpy(zero_copy_only=False)
    if not np.issubdtype(values.dtype, np.integer):
        raise ConfigError(
            f"label column {column!r} holds {values.dtype}, not class indices: cast it with "
            f"dataset.class_encode_column({column!r})"
        )
    labels = values.astype(np.int64)
    bad = np.flatnonzero(labels < 0)
    if bad.size:
        raise ConfigError(
            f"row {int(bad[0])} has label {int(labels[bad[0]])}: every row needs a class "
            "(leave unlabelled rows out with dataset.filter)"
        )
    return labels


@dataclass(frozen=True, eq=False)
class DatasetSource:
    """A Hugging Face dataset's images and labels (the
    :class:`~dali_pipes.data.interface.Source` interface)."""

    dataset: Any = field(repr=False)  # the image column in the Arrow format
    column: str
    labels: np.ndarray = field(repr=False)
    classes: tuple[str, ...]
    root: str
    read_timeout: float | None = DEFAULT_READ_TIMEOUT

    def __len__(self) -> int:
        return len(self.labels)

    def read(self, indices: Indices) -> list[Blob]:
        """The rows' bytes (views into the table), a path's file read where a row has no
        bytes; the table's part within the deadline, each file's read within it too."""
        rows = [int(i) for i in indices]
        [taken] = read_all(lambda _: self._take(rows), [self.name(rows[0])], self.read_timeout)
        if isinstance(taken, DataError):
            return [taken] * len(rows)
        paths = [found for found in taken if isinstance(found, str)]
        files = iter(read_files(paths, self.read_timeout) if paths else [])
        blobs: list[Blob] = []
        for row, found in zip(rows, taken, strict=True):
            if isinstance(found, str):  # the row names its file: read with the others
                blobs.append(next(files))
            else:
                blobs.append(self._empty(row) if found is None else found)
        return blobs

    def identity(self, indices: Indices) -> np.ndarray:
        """The row: ``dataset[i]`` gets the draws of sample ``i`` of a folder in that order."""
        return np.asarray(indices, dtype=np.int64)

    def name(self, index: int) -> str:
        """``<dataset> row <i>``."""
        return f"{self.root} row {index}"

    def _take(self, rows: list[int]) -> list[np.ndarray | str | None] | DataError:
        """One batch's rows from the table: bytes (a view), else the path, else None."""
        import pyarrow as pa
        import pyarrow.compute as pc

        from dali_pipes.data.parquet import GroupImages

        column = self.dataset[rows].column(self.column).combine_chunks()
        if pa.types.is_struct(column.type):
            data, paths = pc.struct_field(column, "bytes"), pc.struct_field(column, "path")
        else:
            data, paths = column, None
        images = GroupImages.of(data)
        out: list[np.ndarray | str | None] = []
        for k in range(len(column)):
            blob = images.row(k)
            path = paths[k].as_py() if blob is None and paths is not None else None
            out.append(blob if blob is not None else path)
        return out

    def _empty(self, row: int) -> DataError:
        return DataError(f"{self.name(row)}: the row has no image (no bytes, no path)")
