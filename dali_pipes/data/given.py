"""What a loader built in Python reads: any data a user hands over, opened into a source.

``DALIIterator(data)`` takes data as ``DataLoader`` takes a dataset. :func:`open_data` turns
what it was given into one split's :class:`~dali_pipes.data.interface.Source`:

- a data spec (``FolderData(root=...)``, ``ParquetData(root=...)``, ``ShardData(root=...)``,
  ``ZipData(root=...)``, a user's registered spec) opens as ``data=<name>`` would;
- a path or an ``s3://`` URL: the registered kind that claims it
  (:meth:`~dali_pipes.data.specs.DataSpec.from_path`: ``.zip`` is an archive), else an
  image folder;
- a dataset object of another library that a registered adapter takes (a torchvision
  ``ImageFolder`` or ``CocoDetection``, a Hugging Face ``datasets.Dataset``):
  :data:`ADAPTERS`;
- any object with the :class:`~dali_pipes.data.interface.Source` interface, as it is.

The data keywords (``batch_size``, ``drop_last``, ``on_error``, ``max_pixels``, ``exclude``,
``read_timeout``) are the config's ``data.*`` keys. With a data spec a keyword left at its
default takes the spec's value; one given with another value than the spec's is refused in
one line, so a value is never silently dropped.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from dali_pipes.data.interface import Labelled
from dali_pipes.data.registry import SOURCES, open_source
from dali_pipes.data.specs import DataSpec, FolderData
from dali_pipes.errors import ConfigError
from dali_pipes.registry import Lazy, Registry

#: The ``data.*`` keys a loader built in Python takes as keywords.
DATA_KEYS = ("batch_size", "drop_last", "on_error", "max_pixels", "exclude", "read_timeout")
#: Keys that say how a source is opened, which an object opened already has settled.
OPENING_KEYS = ("exclude", "read_timeout")

#: ``adapter(obj, data)`` -> the object's source, or None when it is not the adapter's kind.
Adapter = Callable[[Any, DataSpec], Labelled | None]


def _describe(adapter: Lazy[Adapter]) -> str:
    return f"adapter {adapter.ref}"


#: Dataset objects of other libraries and what reads them (imported on first use; each
#: answers None for an object that is not its kind, without importing its library).
ADAPTERS: Registry[Lazy[Adapter]] = Registry("dataset adapter", _describe)
ADAPTERS.register("torchvision", Lazy("dali_pipes.data.image_folder:adapt"))
ADAPTERS.register("torchvision-coco", Lazy("dali_pipes.data.coco_dataset:adapt"))
ADAPTERS.register("datasets", Lazy("dali_pipes.data.hf_dataset:adapt"))


@dataclass(frozen=True)
class Opened:
    """A split opened from what the user gave, with the data keys in effect."""

    source: Labelled
    data: DataSpec


def open_data(given: Any, split: str, **keys: Any) -> Opened:
    """Open ``split`` of ``given`` (see the module's docstring); ``keys`` are the data
    keywords as the caller received them."""
    unknown = sorted(set(keys) - set(DATA_KEYS))
    if unknown:
        raise TypeError(f"open_data() got unexpected keys {unknown}")
    if isinstance(given, DataSpec):
        data = merged(given, keys)
        return Opened(open_source(data, split), data)
    if isinstance(given, (str, os.PathLike)):
        data = merged(spec_for_path(os.fspath(given)), keys)
        return Opened(open_source(data, split), data)
    data = DataSpec(**keys)
    for adapter in ADAPTERS.values():
        source = adapter.get()(given, data)
        if source is not None:
            return Opened(source, data)
    if isinstance(given, Labelled):
        settled = [k for k in OPENING_KEYS if keys.get(k) != getattr(DataSpec, k)]
        if settled:
            raise ConfigError(
                f"{', '.join(settled)} given with a source object ({type(given).__name__}), "
                "which is open already: set them where the source is made"
            )
        return Opened(given, data)
    raise ConfigError(
        f"cannot read a {type(given).__module__}.{type(given).__name__}: give a folder, a "
        "zip archive or an s3:// URL, a data spec (FolderData, ParquetData, ShardData, "
        "ZipData, ...), a torchvision ImageFolder, a Hugging Face datasets.Dataset, or an "
        "object with the Source interface (docs: How-to guides > Any data)"
    )


def open_mixed(
    given: Sequence[Any],
    split: str,
    weights: Sequence[float] | None = None,
    labels: str | Sequence[str] = "separate",
    epoch_size: int | None = None,
    **keys: Any,
) -> Opened:
    """Open ``split`` of each item of ``given`` (anything :func:`open_data` takes) and read
    them as one mix (:mod:`dali_pipes.data.mix`): ``weights`` (one per item; None: each
    item's size) say how much of a training epoch each makes up."""
    from dali_pipes.data.mix import mix_sources

    if not given:
        raise ConfigError("an empty list of datasets was given: give at least one to read")
    if weights is not None and len(weights) != len(given):
        raise ConfigError(
            f"weights={list(weights)} holds {len(weights)} weights for {len(given)} datasets; "
            "give one per dataset"
        )
    opened = [open_data(item, split, **keys) for item in given]
    for key in DATA_KEYS:
        values = [getattr(o.data, key) for o in opened]
        if any(v != values[0] for v in values):
            raise ConfigError(
                f"the datasets to mix say {key}={values}: a mix has one {key}; give it once, "
                f"as DALIIterator({key}=...), or the same in each"
            )
    source = mix_sources(
        [o.source for o in opened],
        [str(i) for i in range(len(given))],
        None if weights is None else list(weights),
        labels,
        epoch_size,
        train=split == "train",
        read_timeout=opened[0].data.read_timeout,
    )
    return Opened(source, opened[0].data)


def spec_for_path(path: str) -> DataSpec:
    """The data a path names: the last registered kind that claims it (a user's kinds come
    after the built-in ones), else an image folder (local or in a bucket)."""
    for kind in reversed(list(SOURCES.values())):
        claimed = kind.spec.from_path(path)
        if claimed is not None:
            return claimed
    return FolderData(root=path)


def merged(data: DataSpec, keys: dict[str, Any]) -> DataSpec:
    """``data`` with the keywords that were given (not left at their default); a keyword
    that contradicts a value the spec was given (not its class's default) is a one-line
    error."""
    changes: dict[str, Any] = {}
    for key, value in keys.items():
        held = getattr(data, key)
        if value in (getattr(DataSpec, key), held):  # left at its default, or agreeing
            continue
        if held != getattr(type(data), key):
            raise ConfigError(
                f"{key}={value!r} given and the {type(data).__name__} says {key}={held!r}: "
                "set it in one of them"
            )
        changes[key] = value
    return dataclasses.replace(data, **changes) if changes else data
