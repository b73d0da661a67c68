"""The DALI backend reads a source with one of DALI's own readers only when the source
names a stored format one is registered for; every other source is read through its
``read``. The loader asks the source, never which kind of source it is."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from helpers.shards import pack

from dali_pipes import DALIIterator
from dali_pipes.backends.dali.stored import STORED_READERS, stored_reader
from dali_pipes.backends.dali.webdataset import WebdatasetStream
from dali_pipes.data.interface import StoredAs
from dali_pipes.data.sampling import sampler_for
from dali_pipes.data.sources import FolderSource, ShardSource, discover_folder, open_source
from dali_pipes.data.specs import SamplingSpec, ShardData
from dali_pipes.errors import NameTaken
from dali_pipes.registry import Lazy


@dataclass(frozen=True)
class Mine:
    """A stored format no reader is registered for (until a test registers one)."""

    format_name: str = "mine"


@dataclass(frozen=True, eq=False)
class StoredFolder:
    """A folder's samples that say they are stored as ``Mine``: the user's source."""

    inner: FolderSource
    reads: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.inner)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def local_paths(self) -> None:
        return None  # read through ``read``, not by the feed's batch reads of local files

    def read(self, indices: Any) -> list[Any]:
        self.reads.extend(int(i) for i in indices)
        return self.inner.read(indices)

    def stored_format(self) -> Mine:
        return Mine()


class ReaderOfMine:
    """A reader for ``Mine`` that reads the folder's files itself and counts the samples."""

    def __init__(self, source: Any, stored: Any, sampler: Any) -> None:
        self.source, self.seen = source, 0

    def start(self, plan: Any, position: int, batch_size: int) -> None:
        pass

    def read(self, indices: Any) -> list[Any]:
        self.seen += len(indices)
        paths = [self.source.inner.files[int(i)] for i in indices]
        return [np.fromfile(p, dtype=np.uint8) for p in paths]

    def stop(self) -> None:
        pass


def test_a_folder_is_read_through_its_own_read(identity_tree: Path) -> None:
    source = discover_folder(identity_tree)
    assert not isinstance(source, StoredAs)
    assert stored_reader(source, sampler_for(source, SamplingSpec())) is None


def test_local_shards_are_read_by_dalis_webdataset_reader(
    identity_tree: Path, tmp_path: Path
) -> None:
    pack(identity_tree, tmp_path / "pack")
    source = open_source(ShardData(root=str(tmp_path / "pack")), "train")
    assert isinstance(source, ShardSource) and isinstance(source, StoredAs)
    reader = stored_reader(source, sampler_for(source, SamplingSpec()))
    assert isinstance(reader, WebdatasetStream)


def test_a_format_no_reader_is_registered_for_is_read_through_the_source(
    identity_tree: Path,
) -> None:
    source = StoredFolder(discover_folder(identity_tree))
    assert isinstance(source, StoredAs)
    assert stored_reader(source, sampler_for(source, SamplingSpec())) is None
    with DALIIterator(source, batch_size=8, device="cpu", augment="small") as it:
        batches = sum(1 for _ in it)
    assert batches == len(it) and sorted(set(source.reads)) == list(range(len(source)))


def test_a_reader_registered_for_a_format_reads_that_sources_samples_with_equal_batches(
    identity_tree: Path,
) -> None:
    def run(data: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
        with DALIIterator(data, batch_size=8, device="cpu", augment="small") as it:
            return [(x.clone(), y.clone()) for x, y in it]

    want = run(str(identity_tree))
    made: list[ReaderOfMine] = []

    def make(source: Any, stored: Any, sampler: Any) -> ReaderOfMine:
        made.append(ReaderOfMine(source, stored, sampler))
        return made[-1]

    source = StoredFolder(discover_folder(identity_tree))
    with STORED_READERS.restored() as readers:
        readers.register("mine", Lazy(make))
        got = run(source)
        with pytest.raises(NameTaken, match="mine"):
            readers.register("mine", Lazy(ReaderOfMine))
    assert made and made[0].seen == len(source) and not source.reads
    assert len(got) == len(want)
    for (x, y), (x0, y0) in zip(got, want, strict=True):
        assert torch.equal(y, y0) and torch.equal(x, x0)
