"""The data sources there are: ``data=<name>`` -> its config schema and what opens a split.

Each kind is registered once, here or by a user (:func:`register_source`, also
``dali_pipes.register_source``): its name, its schema (a frozen
:class:`~dali_pipes.data.specs.DataSpec` subclass, whose fields are the ``data.*`` keys)
and the function that opens one split of it. A second registration of a taken name is
refused in one line unless it says ``replace=True`` (:class:`dali_pipes.registry.Registry`).
The Hydra schemas (``schema/data/<name>``) are derived from this registry
(:func:`dali_pipes.config.schemas.register`), and :func:`open_source` picks the opener by
the spec's class, so ``data=imagenet`` (a folder preset) opens like ``data=folder``.
Openers named by a ``module:function`` string are imported on first use
(:class:`~dali_pipes.registry.Lazy`): ``data=parquet`` imports pyarrow only when it is chosen.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dali_pipes.data.interface import Labelled
from dali_pipes.data.specs import (
    CocoData,
    DataSpec,
    FolderData,
    MixData,
    ParquetData,
    SampleData,
    SampleObjectsData,
    SampleSegmentationData,
    SegmentationData,
    ShardData,
    SyntheticData,
)
from dali_pipes.data.zip_archive import ZipData
from dali_pipes.errors import ConfigError
from dali_pipes.registry import Lazy, Registry, where

#: The splits a loader is built for.
SPLITS = ("train", "val")
#: ``opener(spec, split)`` -> the split's source.
Opener = Callable[[Any, str], Labelled]


@dataclass(frozen=True)
class SourceKind:
    """One ``data=<name>``: its schema and its opener (imported on first use when it was
    named by ``module:function``)."""

    name: str
    spec: type[DataSpec]
    opener: Lazy[Opener]

    def open(self, data: DataSpec, split: str) -> Labelled:
        """The source of ``split`` of ``data``."""
        return self.opener.get()(data, split)


def _describe(kind: SourceKind) -> str:
    return f"schema {where(kind.spec)}, opened by {kind.opener.ref}"


#: Every ``data=<name>``, built-in ones first.
SOURCES: Registry[SourceKind] = Registry("data source", _describe)


def register_source(
    name: str, spec: type[DataSpec], opener: Opener | str, *, replace: bool = False
) -> None:
    """Make ``data=<name>`` available.

    The Hydra schema follows at the next :func:`~dali_pipes.compose_config` (or
    :func:`dali_pipes.config.schemas.register`).

    Args:
        name: the config's name for it (``data=<name>``).
        spec: its schema, a frozen :class:`~dali_pipes.data.specs.DataSpec` subclass whose
            fields are the ``data.*`` keys.
        opener: ``opener(spec, split)`` opens a split (``train`` or ``val``) into a
            :class:`~dali_pipes.data.interface.Source` (or a
            :class:`~dali_pipes.data.interface.Labelled`, for labels alone); or its
            ``"module:function"``, imported on first use.
        replace: put it there even when another source holds ``name``.

    Returns:
        None.

    Raises:
        NameTaken: another source holds ``name`` (the same one again is accepted).
        ConfigError: ``spec`` is not a DataSpec subclass.
    """
    if not (isinstance(spec, type) and issubclass(spec, DataSpec)):
        raise ConfigError(f"register_source({name!r}): the schema must subclass DataSpec")
    SOURCES.register(name, SourceKind(name, spec, Lazy(opener)), replace=replace)


def source_kinds() -> tuple[SourceKind, ...]:
    """Every registered kind, built-in ones first."""
    return tuple(SOURCES.values())


def source_kind(name: str) -> SourceKind:
    """The kind ``data=<name>`` chooses, or the one-line error listing the ones there are."""
    if name not in SOURCES:
        raise ConfigError(f"data={name!r} is unknown: choose one of {', '.join(SOURCES)}")
    return SOURCES[name]


def open_source(data: DataSpec, split: str) -> Labelled:
    """Resolve a data config into the source of one split (``train`` or ``val``)."""
    if split not in SPLITS:
        raise ConfigError(f"split={split!r} is invalid: choose one of {SPLITS}")
    for cls in type(data).__mro__:  # the most derived registered schema opens it
        for kind in SOURCES.values():
            if kind.spec is cls:
                return kind.open(data, split)
    raise ConfigError(
        f"data={data.name!r} has no source: use one of {', '.join(SOURCES)}, or register "
        "yours with dali_pipes.register_source"
    )


for _name, _spec, _opener in (
    ("folder", FolderData, "dali_pipes.data.sources:open_folder"),
    ("sample", SampleData, "dali_pipes.data.sources:open_sample"),
    ("shards", ShardData, "dali_pipes.data.sources:open_shards"),
    ("parquet", ParquetData, "dali_pipes.data.parquet:open_parquet"),
    ("synthetic", SyntheticData, "dali_pipes.data.sources:open_synthetic"),
    ("zip", ZipData, "dali_pipes.data.zip_archive:open_zip"),
    ("coco", CocoData, "dali_pipes.data.coco:open_coco"),
    ("sample_objects", SampleObjectsData, "dali_pipes.data.sample_targets:open_sample_objects"),
    ("segmentation", SegmentationData, "dali_pipes.data.segmentation:open_segmentation"),
    ("mix", MixData, "dali_pipes.data.mix:open_mix"),
    (
        "sample_segmentation",
        SampleSegmentationData,
        "dali_pipes.data.sample_targets:open_sample_segmentation",
    ),
):
    register_source(_name, _spec, _opener)
