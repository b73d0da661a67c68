"""Several datasets read as one split (``data=mix``, ``DALIIterator([a, b], weights=...)``).

A :class:`MixedSource` puts its parts' samples one after another (part ``i``'s indices
follow those of the parts before it) and reads each through its own source, so every
backend, cache and tool reads a mix as it reads one folder. Two things are the mix's own:

- **labels**: each part's classes kept apart (``separate``: part ``i``'s labels follow the
  classes of the parts before it, each class named ``<tag>/<class>``), or mapped by name
  onto one class list (``shared``: the names sorted, as ImageFolder sorts its folders; or
  the list given);
- **proportions** (the training split): how many samples of each part an epoch reads,
  which the training order follows (:mod:`dali_pipes.data.mix_order`). The validation
  split reads every sample of every part once.

A sample's augmentation is drawn from its part's identity with the part's place above it
(:data:`PART_SHIFT`), so the first part draws what it draws alone and no two parts share
draws. The parts must be image sources read in any order (folders, zip archives, the
sample data, a user's source); sources read in blocks (shards, Parquet) and sources with
boxes or masks are refused in one line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import cached_property
from typing import Any

import numpy as np

from dali_pipes.data.interface import (
    Annotated,
    Indices,
    LocalFiles,
    ReadInBlocks,
    Rejects,
    Source,
    source_name,
)
from dali_pipes.data.mix_order import PartShare, epoch_shares
from dali_pipes.data.registry import open_source, source_kind
from dali_pipes.data.specs import DataSpec, MixData
from dali_pipes.errors import ConfigError
from dali_pipes.image.decode import Blob

#: A part's place in the mix is added to its samples' identities this far up: parts never
#: share draws, and a sample's repeat number (below it) has room.
PART_SHIFT = 48
#: The mix's own ``data.*`` keys: one value for all its sources, set on the mix.
MIX_KEYS = ("batch_size", "drop_last", "cache", "cache_max_side")
#: Keys every source takes from the mix (how a bad file is treated, how long a read takes,
#: the scan manifest of files to leave out).
INHERITED = ("on_error", "max_pixels", "read_timeout", "exclude")


@dataclass(frozen=True)
class Part:
    """One dataset of a mix, as configured: its data, its weight (None: its size) and its
    tag."""

    data: DataSpec
    weight: float | None
    tag: str


@dataclass(frozen=True, eq=False)
class MixedSource:
    """Several sources as one split: the :class:`~dali_pipes.data.interface.Source`
    interface over all their samples, in part order, with the mix's labels, and for the
    training split the samples of each part an epoch reads (:meth:`proportions`)."""

    parts: tuple[Source, ...]
    tags: tuple[str, ...]
    classes: tuple[str, ...]
    labels: np.ndarray = field(repr=False)
    shares: tuple[PartShare, ...] | None = None  # None: every sample once (validation)
    read_timeout: float | None = None

    def __len__(self) -> int:
        return int(self.offsets[-1])

    @cached_property
    def offsets(self) -> np.ndarray:
        """Where each part's samples start in the mix, and the mix's size last."""
        return np.cumsum([0, *(len(p) for p in self.parts)]).astype(np.int64)

    @property
    def root(self) -> str:
        """The parts' roots, for messages and ``loader.dataset.root``."""
        return "mix of " + ", ".join(p.root for p in self.parts)

    def locate(self, indices: Indices) -> tuple[np.ndarray, np.ndarray]:
        """Each index's part and its index in that part."""
        idx = np.asarray(indices, np.int64)
        part = np.searchsorted(self.offsets, idx, side="right") - 1
        return part, idx - self.offsets[part]

    def read(self, indices: Indices) -> list[Blob]:
        """Each sample's bytes from its part (one read per part, the batch's order kept)."""
        part, local = self.locate(indices)
        out: list[Blob] = [np.zeros(0, np.uint8)] * len(part)  # every slot is set below
        for p in np.unique(part):
            where = np.flatnonzero(part == p)
            for slot, blob in zip(where, self.parts[p].read(local[where]), strict=True):
                out[slot] = blob
        return out

    def identity(self, indices: Indices) -> np.ndarray:
        """Each sample's identity in its part, with the part's place above it."""
        part, local = self.locate(indices)
        ids = np.empty(len(part), np.int64)
        for p in np.unique(part):
            where = part == p
            ids[where] = self.parts[p].identity(local[where]) + (np.int64(p) << PART_SHIFT)
        return ids

    def name(self, index: int) -> str:
        """The sample's name in its part."""
        part, local = self.locate([index])
        return self.parts[int(part[0])].name(int(local[0]))

    def proportions(self) -> tuple[PartShare, ...] | None:
        """How many samples of each part a training epoch reads (None: each once)."""
        return self.shares

    def local_paths(self) -> tuple[str, ...] | None:
        """Every sample's path, when every part's samples are local files."""
        paths = [p.local_paths() if isinstance(p, LocalFiles) else None for p in self.parts]
        if any(p is None for p in paths):
            return None
        return tuple(path for part in paths if part is not None for path in part)

    @property
    def rejected(self) -> tuple[tuple[str, str], ...]:
        """The samples each part left out when it was listed."""
        return tuple(r for p in self.parts if isinstance(p, Rejects) for r in p.rejected)


def mix_sources(
    parts: Sequence[Any],
    tags: Sequence[str],
    weights: Sequence[float | None] | None,
    labels: str | Sequence[str] = "separate",
    epoch_size: int | None = None,
    *,
    train: bool = True,
    read_timeout: float | None = None,
) -> MixedSource:
    """The opened ``parts`` as one split, labelled as ``labels`` says; for the training
    split with each part's samples per epoch from ``weights`` (None, or all None: each
    part's size) and ``epoch_size`` (None: all the parts' samples). Both are checked for
    either split, so a mistake shows whichever split is built first."""
    if len(set(tags)) != len(tags):
        raise ConfigError(f"tags {list(tags)} name two datasets alike; give each its own tag")
    sources = tuple(_mixable(p, tag) for p, tag in zip(parts, tags, strict=True))
    classes, mapped = _labels(sources, tuple(tags), labels)
    sizes = [len(s) for s in sources]
    given = [] if weights is None else [w for w in weights if w is not None]
    if given and len(given) != len(sources):
        raise ConfigError(
            "some datasets have a weight and some not; give every one a weight, or none "
            "(each is then read once an epoch)"
        )
    for weight in given:
        if isinstance(weight, bool) or not isinstance(weight, int | float):
            raise ConfigError(f"weight {weight!r} is invalid: give a number >= 0")
    total = sum(sizes) if epoch_size is None else epoch_size
    counts = epoch_shares(sizes, [float(w) for w in given] or None, total)
    shares = tuple(
        PartShare(_described(s, tag), len(s), n)
        for s, tag, n in zip(sources, tags, counts, strict=True)
    )
    return MixedSource(
        sources, tuple(tags), classes, mapped, shares if train else None, read_timeout
    )


def open_mix(data: MixData, split: str) -> MixedSource:
    """A split of ``data=mix``: each source opened as its own ``data=<name>`` would be."""
    parts = [part_of(entry, i, data) for i, entry in enumerate(data.sources)]
    return mix_sources(
        [open_source(p.data, split) for p in parts],
        [p.tag for p in parts],
        [p.weight for p in parts],
        data.labels,
        data.epoch_size,
        train=split == "train",
        read_timeout=data.read_timeout,
    )


def part_of(entry: Any, index: int, mix: MixData) -> Part:
    """Entry ``index`` of ``data.sources`` as a :class:`Part`, or one line naming the key
    that is wrong and what to do."""
    where = f"data.sources[{index}]"
    if not isinstance(entry, Mapping) or "name" not in entry:
        raise ConfigError(
            f"{where}={entry!r} is invalid: give a mapping with name (a data kind: folder, "
            "sample, zip, ...) and its keys, e.g. {name: folder, root: /data/a, weight: 1}"
        )
    keys = {str(k): v for k, v in entry.items()}
    weight, tag = keys.pop("weight", None), str(keys.pop("tag", index))
    if keys["name"] == "mix":
        raise ConfigError(f"{where}: a mix inside a mix is not supported; list its sources")
    kind = source_kind(str(keys["name"]))
    mixes = sorted(set(keys) & {*MIX_KEYS, *INHERITED})
    if mixes:
        raise ConfigError(
            f"{where}.{mixes[0]} is the mix's setting, for all its sources: set data.{mixes[0]} "
            "instead"
        )
    known = {f.name for f in fields(kind.spec)}
    unknown = sorted(set(keys) - known)
    if unknown:
        raise ConfigError(
            f"{where}.{unknown[0]} is not a key of data={keys['name']}: its keys are "
            f"{', '.join(sorted(known - {*MIX_KEYS, *INHERITED}))}"
        )
    if weight is not None and (isinstance(weight, bool) or not isinstance(weight, int | float)):
        raise ConfigError(f"{where}.weight={weight!r} is invalid: give a number >= 0")
    if weight is not None and not weight >= 0:
        raise ConfigError(f"{where}.weight={weight!r} is invalid: must be >= 0")
    try:
        data = kind.spec(**keys, **{k: getattr(mix, k) for k in INHERITED})
    except ConfigError as exc:
        raise ConfigError(f"{where} ({keys['name']}): {exc}") from None
    return Part(data, None if weight is None else float(weight), tag)


def _mixable(source: Any, tag: str) -> Source:
    """``source`` if a mix can read it, else one line saying why not."""
    what = f"data.sources {tag} ({getattr(source, 'root', source_name(source))})"
    if not isinstance(source, Source):
        raise ConfigError(f"{what} has no images to read; a mix reads image datasets")
    if isinstance(source, Annotated):
        raise ConfigError(
            f"{what} has {source.task} targets, which a mix does not carry; mix datasets "
            "of class labels"
        )
    if isinstance(source, ReadInBlocks) and source.blocks() is not None:
        raise ConfigError(
            f"{what} is read in blocks (shards, Parquet), which a mix does not read; mix "
            "folders or zip archives"
        )
    return source


def _labels(
    sources: tuple[Source, ...], tags: tuple[str, ...], labels: str | Sequence[str]
) -> tuple[tuple[str, ...], np.ndarray]:
    """The mix's class names and its labels, one per sample in part order."""
    if labels == "separate":
        classes = tuple(
            f"{tag}/{c}" for s, tag in zip(sources, tags, strict=True) for c in s.classes
        )
        starts = np.cumsum([0, *(len(s.classes) for s in sources)])
        mapped = [np.asarray(s.labels, np.int64) + starts[i] for i, s in enumerate(sources)]
        return classes, np.concatenate(mapped)
    if labels == "shared":
        names = tuple(sorted({c for s in sources for c in s.classes}))
    elif not isinstance(labels, str) and len(set(labels)) != len(labels):
        raise ConfigError(f"labels={list(labels)} names a class twice; list each class once")
    elif isinstance(labels, str):
        raise ConfigError(
            f"data.labels={labels!r} is invalid: choose separate or shared, or give a list "
            "of class names"
        )
    else:
        names = tuple(str(n) for n in labels)
    place = {name: i for i, name in enumerate(names)}
    mapped = []
    for s, tag in zip(sources, tags, strict=True):
        missing = [c for c in s.classes if c not in place]
        if missing:
            raise ConfigError(
                f"data.labels: class {missing[0]!r} of source {tag} is not in the class list "
                f"given; add it, or use data.labels=shared"
            )
        lookup = np.asarray([place[c] for c in s.classes], np.int64)
        mapped.append(lookup[np.asarray(s.labels, np.int64)])
    return names, np.concatenate(mapped)


def _described(source: Source, tag: str) -> str:
    """How a part is called in the training log: its tag, or where it comes from when the
    tag is its place in the list."""
    return source.root if tag.isdigit() else tag


__all__ = ["INHERITED", "MIX_KEYS", "PART_SHIFT", "MixedSource", "Part", "mix_sources", "open_mix"]
