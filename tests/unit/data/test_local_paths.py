"""A source says when its samples are regular local files a reader may open itself."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from helpers.shards import pack

from dali_pipes.data.interface import LocalFiles, local_paths_of
from dali_pipes.data.sources import FolderSource, ShardSource, discover_folder, open_source
from dali_pipes.data.specs import ShardData


def test_a_folders_samples_are_its_files(identity_tree: Path) -> None:
    source = discover_folder(identity_tree)
    assert source.local_paths() == source.files and all(Path(p).is_file() for p in source.files)


def test_samples_packed_in_shards_have_no_paths_to_open(
    identity_tree: Path, tmp_path: Path
) -> None:
    pack(identity_tree, tmp_path / "pack")
    source = open_source(ShardData(root=str(tmp_path / "pack")), "train")
    assert isinstance(source, ShardSource) and not isinstance(source, LocalFiles)
    assert local_paths_of(source) is None


def test_objects_in_a_bucket_have_no_paths_to_open() -> None:
    source = FolderSource(
        root="s3://bucket/photos",
        files=("s3://bucket/photos/a/1.jpg",),
        labels=np.zeros(1, np.int64),
        classes=("a",),
    )
    assert source.local_paths() is None
