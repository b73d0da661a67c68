"""``data=parquet``: image datasets in Parquet files (the Hugging Face Hub layout), read by
row groups.

Where the files are and what their columns mean is :mod:`dali_pipes.data.parquet_layout`.
A split's samples are the rows of its files, in file order then row order; a sample's
identity (what its augmentation is drawn from) is that row number, so a dataset written
from an image folder in ImageFolder order gets the folder's crops and flips.

Reading: a Parquet file is read a row group at a time (pyarrow; only the image column, only
the row groups a batch needs, never a whole table), so the sampler visits row groups, not
rows: each epoch takes the row groups in an order drawn from (seed, epoch) and shuffles
samples within windows of ``data.shuffle_buffer``
(:class:`~dali_pipes.data.sampling.StreamSampler`, as for packed shards). The row groups
read are kept in a per-process cache large enough for two windows, shared by the threads
that read (the DALI feed's) and fetched once however many ask. Files in a bucket
(``s3://``) are read with ranged GETs through the storage layer, its retries and deadlines
included. A row whose bytes are not an image is a bad sample (``data.on_error``), named
``<file> row <n>``; a row group that cannot be read makes each of its rows one.
"""

from __future__ import annotations

import math
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dali_pipes.data.interface import Blocks, Indices
from dali_pipes.data.manifest import read_manifest
from dali_pipes.data.parquet_layout import (
    Columns,
    RemoteFile,
    check_columns,
    choose_split,
    class_names,
    list_parquet,
    one_line,
    require_pyarrow,
)
from dali_pipes.data.shard_reader import BlockCache
from dali_pipes.data.specs import ParquetData
from dali_pipes.data.storage import Storage, is_url, storage_for
from dali_pipes.errors import ConfigError, DataError
from dali_pipes.image.decode import Blob
from dali_pipes.image.reads import read_all

_Group = tuple[int, int]  # (file, row group in the file)


@dataclass(frozen=True)
class RowGroups:
    """The row groups as the sampler's blocks: group ``b`` holds samples
    ``starts[b]:starts[b + 1]``."""

    starts: np.ndarray = field(repr=False)
    shuffle_buffer: int = 0

    @property
    def num_blocks(self) -> int:
        """How many row groups the split has."""
        return len(self.starts) - 1

    def members(self, block: int) -> np.ndarray:
        """The samples of one row group, ascending."""
        return np.arange(self.starts[block], self.starts[block + 1], dtype=np.int64)


@dataclass(frozen=True)
class GroupImages:
    """One row group's image bytes as pyarrow holds them: each row a view, no copy."""

    data: Any = field(repr=False)  # the binary column's data buffer
    offsets: np.ndarray = field(repr=False)  # where each row's bytes start, and the end
    valid: np.ndarray = field(repr=False)  # bool per row: it has bytes

    @classmethod
    def of(cls, column: Any) -> GroupImages:
        """The views into a pyarrow binary (or large binary) array."""
        import pyarrow as pa

        kind = np.int64 if pa.types.is_large_binary(column.type) else np.int32
        _, offsets, data = column.buffers()
        where = np.frombuffer(offsets, dtype=kind)[column.offset : column.offset + len(column) + 1]
        valid = np.asarray(column.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        return cls(data, where.astype(np.int64), valid)

    def row(self, k: int) -> np.ndarray | None:
        """Row ``k``'s bytes (a view), None when it has none."""
        if not self.valid[k]:
            return None
        start, end = int(self.offsets[k]), int(self.offsets[k + 1])
        return np.frombuffer(self.data, dtype=np.uint8, count=end - start, offset=start)


@dataclass(frozen=True, eq=False)
class ParquetSource:
    """One split of a Parquet dataset: the :class:`~dali_pipes.data.interface.Source`
    interface, read in row groups (:meth:`blocks`)."""

    root: str
    files: tuple[str, ...]
    sizes: tuple[int, ...]  # bytes per file (ranged reads of a bucket need them)
    footers: tuple[Any, ...] = field(repr=False)  # pyarrow FileMetaData per file
    columns: Columns
    labels: np.ndarray = field(repr=False)  # int64 per sample
    classes: tuple[str, ...]
    #: The split's row (over all its files) of each sample: rows in data.exclude are not.
    rows: np.ndarray = field(repr=False)
    #: The first split row of each row group, and the split's row count at the end.
    group_rows: np.ndarray = field(repr=False)
    group_of: tuple[_Group, ...] = field(repr=False)  # (file, group in it) of each row group
    file_rows: np.ndarray = field(repr=False)  # the first split row of each file
    rejected: tuple[tuple[str, str], ...] = ()
    read_timeout: float | None = None
    shuffle_buffer: int = 0

    def __len__(self) -> int:
        return len(self.rows)

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def name(self, index: int) -> str:
        """``<file> row <n>``: the sample's file and its row in that file."""
        row = int(self.rows[index])
        f = int(np.searchsorted(self.file_rows, row, side="right")) - 1
        return f"{self.files[f]} row {row - int(self.file_rows[f])}"

    def identity(self, indices: Indices) -> np.ndarray:
        """The samples' rows in the split: the same draws as the folder they came from,
        when it was written in ImageFolder order."""
        return self.rows[np.asarray(indices, dtype=np.int64)]

    def blocks(self) -> Blocks:
        """The row groups, in index order (rows left out by ``data.exclude`` dropped)."""
        starts = np.searchsorted(self.rows, self.group_rows)
        return RowGroups(starts.astype(np.int64), self.shuffle_buffer)

    def read(self, indices: Indices) -> list[Blob]:
        """Each sample's image bytes (a view of its row group), or the error naming its
        file and row; one deadline (``data.read_timeout``) for the batch's row groups."""
        idx = np.asarray(indices, dtype=np.int64)
        if not len(idx):
            return []
        [blobs] = read_all(lambda _: self._read(idx), [self.name(int(idx[0]))], self.read_timeout)
        return [blobs] * len(idx) if isinstance(blobs, DataError) else blobs

    def _read(self, idx: np.ndarray) -> list[Blob]:
        rows = self.rows[idx]
        groups = np.searchsorted(self.group_rows, rows, side="right") - 1
        read = self._cache().get(sorted({int(g) for g in groups}), self._fetch)
        out: list[Blob] = []
        for i, row, g in zip(idx, rows, groups, strict=True):
            group = read[int(g)]
            if isinstance(group, DataError):
                out.append(DataError(f"{self.name(int(i))}: {group}"))
                continue
            blob = group.row(int(row - self.group_rows[g]))
            out.append(
                blob
                if blob is not None
                else DataError(
                    f"{self.name(int(i))}: no image bytes in column {self.columns.image!r} "
                    "(the row names a file only); store the images' bytes in the dataset"
                )
            )
        return out

    def _fetch(self, groups: list[int]) -> list[GroupImages | DataError]:
        """The image bytes of each row group, or the error naming it."""
        return [self._read_group(g) for g in groups]

    def _read_group(self, group: int) -> GroupImages | DataError:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        f, g = self.group_of[group]
        try:
            opened = pq.ParquetFile(self._file(f), metadata=self.footers[f])
            read = opened.read_row_group(g, columns=self.columns.image_path, use_threads=False)
            chunks = read.column(0)
            column = chunks.chunk(0) if chunks.num_chunks == 1 else chunks.combine_chunks()
            if pa.types.is_struct(column.type):
                column = pc.struct_field(column, [0])
            return GroupImages.of(column)
        except (OSError, pa.ArrowException) as exc:
            return DataError(
                f"cannot read row group {g} of {self.files[f]} ({one_line(exc)}); the file "
                "is damaged: download it again"
            )

    def _file(self, f: int) -> Any:
        """What pyarrow reads file ``f`` from: its path, or the object through the storage."""
        if not is_url(self.files[f]):
            return self.files[f]
        import pyarrow as pa

        return pa.PythonFile(RemoteFile(self.files[f], self.sizes[f], self._storage()), mode="r")

    def _storage(self) -> Storage:
        storage = self.__dict__.get("_store")
        if storage is None:
            storage = storage_for(self.root, self.read_timeout)
            object.__setattr__(self, "_store", storage)
        return storage

    def _cache(self) -> BlockCache[int, GroupImages | DataError]:
        """This process's row groups (a forked worker starts with none, and its own lock)."""
        state = self.__dict__.get("_cached")
        if state is None or state[0] != os.getpid():
            with _LOCK:
                state = self.__dict__.get("_cached")
                if state is None or state[0] != os.getpid():
                    state = (os.getpid(), BlockCache(self._capacity()))
                    object.__setattr__(self, "_cached", state)
        cache: BlockCache[int, GroupImages | DataError] = state[1]
        return cache

    def _capacity(self) -> int:
        """Row groups for two shuffle windows and their edges."""
        groups = max(len(self.group_of), 1)
        per_group = max(len(self.rows) / groups, 1.0)
        return 2 * math.ceil(max(self.shuffle_buffer, 1) / per_group) + 4


_LOCK = threading.Lock()


def open_parquet(data: ParquetData, split: str) -> ParquetSource:
    """The ``split`` (``train`` or ``val``) of the Parquet dataset at ``data.root``."""
    require_pyarrow()
    if not data.root:
        raise ConfigError(
            "data.root is not set: pass data.root=/path/to/dataset (or s3://bucket/prefix)"
        )
    root = data.root.rstrip("/") if is_url(data.root) else str(Path(data.root).expanduser())
    storage = storage_for(root, data.read_timeout)
    found = list_parquet(root, storage)
    chosen = choose_split(found, split, data.train_split, data.val_split)
    files = found[chosen]
    sizes = _sizes(files, storage)
    footers = [
        _footer(path, size, storage, data.read_timeout)
        for path, size in zip(files, sizes, strict=True)
    ]
    schema = footers[0].schema.to_arrow_schema()
    columns = check_columns(schema, files[0], data.image_column, data.label_column)
    for path, footer in zip(files[1:], footers[1:], strict=True):
        check_columns(footer.schema.to_arrow_schema(), path, columns.image, columns.label)
    labels = np.concatenate(
        [
            _labels(path, size, footer, columns.label, storage)
            for path, size, footer in zip(files, sizes, footers, strict=True)
        ]
    )
    if not len(labels):
        raise DataError(f"{root}: split {chosen!r} has no rows; choose another split")
    classes = class_names(schema, columns.label) or _numbered_classes(
        labels, found, data, chosen, columns, storage
    )
    _check_labels(labels, classes, files, footers)
    group_of, group_rows, file_rows = _groups(footers)
    rows, rejected = _kept(files, file_rows, len(labels), data.exclude)
    if not len(rows):
        raise DataError(f"{root}: every row of split {chosen!r} is in data.exclude")
    return ParquetSource(
        root=root,
        files=tuple(files),
        sizes=tuple(sizes),
        footers=tuple(footers),
        columns=columns,
        labels=labels[rows],
        classes=classes,
        rows=rows,
        group_rows=group_rows,
        group_of=tuple(group_of),
        file_rows=file_rows,
        rejected=tuple(rejected),
        read_timeout=data.read_timeout,
        shuffle_buffer=data.shuffle_buffer,
    )


def _sizes(files: list[str], storage: Storage) -> list[int]:
    """Each file's size in bytes (a bucket's from its listing)."""
    stats = storage.stat(files)
    for path, st in zip(files, stats, strict=True):
        if st is None:
            raise DataError(f"{path}: gone since the dataset was listed; check data.root")
    return [st[0] for st in stats if st is not None]


def _source(path: str, size: int, storage: Storage) -> Any:
    """What pyarrow opens ``path`` from (a path, or a bucket's object by ranged reads)."""
    if not is_url(path):
        return path
    import pyarrow as pa

    return pa.PythonFile(RemoteFile(path, size, storage), mode="r")


def _footer(path: str, size: int, storage: Storage, timeout: float | None) -> Any:
    """The file's Parquet metadata (row groups, schema), read within ``timeout``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def read(_: str) -> Any:
        try:
            return pq.read_metadata(_source(path, size, storage))
        except (OSError, pa.ArrowException) as exc:
            return DataError(
                f"{path}: not a readable Parquet file ({one_line(exc)}); download it again"
            )

    [footer] = read_all(read, [path], timeout)
    if isinstance(footer, DataError):
        raise footer
    return footer


def _labels(path: str, size: int, footer: Any, column: str, storage: Storage) -> np.ndarray:
    """The file's label column (that column alone is read), as int64."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        opened = pq.ParquetFile(_source(path, size, storage), metadata=footer)
        labels = opened.read(columns=[column], use_threads=False).column(0)
    except (OSError, pa.ArrowException) as exc:
        raise DataError(
            f"{path}: cannot read column {column!r} ({one_line(exc)}); download it again"
        ) from None
    if labels.null_count:
        raise DataError(
            f"{path}: {labels.null_count} rows have no label in column {column!r}; choose a "
            "labelled split or set data.label_column"
        )
    return np.asarray(labels.to_numpy(), dtype=np.int64)


def _numbered_classes(
    labels: np.ndarray,
    found: dict[str, list[str]],
    data: ParquetData,
    chosen: str,
    columns: Columns,
    storage: Storage,
) -> tuple[str, ...]:
    """Classes named by their labels where the schema has no ClassLabel names: ``"0"`` to
    the largest label of the training and validation splits (both, so that the two
    loaders agree on the number of classes)."""
    largest = int(labels.max())
    for split in ("train", "val"):
        try:
            other = choose_split(found, split, data.train_split, data.val_split)
        except DataError:
            continue
        if other == chosen:
            continue
        files = found[other]
        sizes = _sizes(files, storage)
        for path, size in zip(files, sizes, strict=True):
            footer = _footer(path, size, storage, data.read_timeout)
            theirs = _labels(path, size, footer, columns.label, storage)
            largest = max(largest, int(theirs.max()) if len(theirs) else -1)
    return tuple(str(i) for i in range(max(largest, -1) + 1))


def _check_labels(
    labels: np.ndarray, classes: tuple[str, ...], files: list[str], footers: list[Any]
) -> None:
    """One line naming the first row whose label is not one of ``classes``."""
    bad = np.flatnonzero((labels < 0) | (labels >= len(classes)))
    if not len(bad):
        return
    ends = np.cumsum([footer.num_rows for footer in footers])
    f = int(np.searchsorted(ends, bad[0], side="right"))
    row = int(bad[0] - (ends[f - 1] if f else 0))
    value = int(labels[bad[0]])
    why = (
        "the Hub's mark for an unlabelled row, as in a test split; choose a labelled split"
        if value < 0
        else f"outside the {len(classes)} ClassLabel names of the schema; fix the labels"
    )
    raise DataError(f"{files[f]} row {row}: label {value} is {why}")


def _groups(footers: list[Any]) -> tuple[list[_Group], np.ndarray, np.ndarray]:
    """(file, group) of each row group, each group's first split row (and the total at the
    end), each file's first split row."""
    group_of: list[_Group] = []
    starts: list[int] = []
    file_rows: list[int] = []
    row = 0
    for f, footer in enumerate(footers):
        file_rows.append(row)
        for g in range(footer.num_row_groups):
            group_of.append((f, g))
            starts.append(row)
            row += footer.row_group(g).num_rows
    starts.append(row)
    return group_of, np.asarray(starts, np.int64), np.asarray(file_rows, np.int64)


def _kept(
    files: list[str], file_rows: np.ndarray, total: int, exclude: str | None
) -> tuple[np.ndarray, list[tuple[str, str]]]:
    """The split rows kept, and the ``(name, reason)`` of those the scan manifest
    ``exclude`` lists (written by ``python -m dali_pipes.scan``)."""
    if not exclude:
        return np.arange(total, dtype=np.int64), []
    listed = read_manifest(exclude)
    resolved = {(f if is_url(f) else str(Path(f).resolve())): k for k, f in enumerate(files)}
    dropped: dict[int, tuple[str, str]] = {}
    for name, reason in listed.items():
        path, _, row = name.rpartition(" row ")
        if path in resolved and row.isdigit():
            f = resolved[path]
            dropped[int(file_rows[f]) + int(row)] = (
                f"{files[f]} row {row}",
                f"in the scan manifest: {reason}",
            )
    keep = np.setdiff1d(np.arange(total, dtype=np.int64), np.fromiter(dropped, np.int64))
    return keep, [dropped[r] for r in sorted(dropped)]
