"""The data sources there are: ``data=<name>`` -> its config schema and what opens a split.

Each kind is registered once, here or by a user (:func:`register_source`): its name, its
schema (a frozen :class:`~dali_pipes.data.specs.DataSpec` subclass, whose fields are the
``data.*`` keys) and the function that opens one split of it. The Hydra schemas
(``schema/data/<name>``) are derived from this registry
(:func:`dali_pipes.config.schemas.register`), and :func:`open_source` picks the opener by
the spec's class, so ``data=imagenet`` (a folder preset) opens like ``data=folder``.
Openers named by a ``module:function`` string are imported on first use: ``data=parquet``
imports pyarrow only when it is chosen.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dali_pipes.data.interface import Labelled
from dali_pipes.data.specs import (
    DataSpec,
    FolderData,
    ParquetData,
    SampleData,
    ShardData,
    SyntheticData,
)
from dali_pipes.errors import ConfigError

#: The splits a loader is built for.
SPLITS = ("train", "val")
#: ``opener(spec, split)`` -> the split's source.
Opener = Callable[[Any, str], Labelled]


@dataclass(frozen=True)
class SourceKind:
    """One ``data=<name>``: its schema and its opener (a callable, or ``module:function``)."""

    name: str
    spec: type[DataSpec]
    opener: Opener | str

    def open(self, data: DataSpec, split: str) -> Labelled:
        """The source of ``split`` of ``data``."""
        opener = self.opener
        if isinstance(opener, str):
            module, _, attr = opener.partition(":")
            opener = getattr(importlib.import_module(module), attr)
            assert callable(opener)
        return opener(data, split)


_KINDS: dict[str, SourceKind] = {}


def register_source(name: str, spec: type[DataSpec], opener: Opener | str) -> None:
    """Make ``data=<name>`` available: ``spec`` is its schema, ``opener(spec, split)`` opens
    a split (``train`` or ``val``) into a :class:`~dali_pipes.data.interface.Source` (or a
    :class:`~dali_pipes.data.interface.Labelled`, for labels alone). Registering a name
    again replaces it. The Hydra schema follows at the next
    :func:`~dali_pipes.compose_config` (or :func:`dali_pipes.config.schemas.register`)."""
    if not (isinstance(spec, type) and issubclass(spec, DataSpec)):
        raise ConfigError(f"register_source({name!r}): the schema must subclass DataSpec")
    _KINDS[name] = SourceKind(name, spec, opener)


def source_kinds() -> tuple[SourceKind, ...]:
    """Every registered kind, built-in ones first."""
    return tuple(_KINDS.values())


def open_source(data: DataSpec, split: str) -> Labelled:
    """Resolve a data config into the source of one split (``train`` or ``val``)."""
    if split not in SPLITS:
        raise ConfigError(f"split={split!r} is invalid: choose one of {SPLITS}")
    for cls in type(data).__mro__:  # the most derived registered schema opens it
        for kind in _KINDS.values():
            if kind.spec is cls:
                return kind.open(data, split)
    raise ConfigError(
        f"data={data.name!r} has no source: use one of {', '.join(_KINDS)}, or register "
        "yours with dali_pipes.data.registry.register_source"
    )


for _kind in (
    SourceKind("folder", FolderData, "dali_pipes.data.sources:open_folder"),
    SourceKind("sample", SampleData, "dali_pipes.data.sources:open_sample"),
    SourceKind("shards", ShardData, "dali_pipes.data.sources:open_shards"),
    SourceKind("parquet", ParquetData, "dali_pipes.data.parquet:open_parquet"),
    SourceKind("synthetic", SyntheticData, "dali_pipes.data.sources:open_synthetic"),
):
    _KINDS[_kind.name] = _kind
