"""What ``DALIIterator(data)`` opens for each thing it is given, and how its data keywords
meet a data spec's values (dali_pipes/data/given.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from dali_pipes import ConfigError
from dali_pipes.data.given import DATA_KEYS, open_data, spec_for_path
from dali_pipes.data.registry import SOURCES, register_source
from dali_pipes.data.sources import FolderSource
from dali_pipes.data.specs import DataSpec, FolderData, ParquetData
from dali_pipes.data.zip_archive import ZipData

#: The data keywords as DALIIterator passes them when none is given.
DEFAULTS = {key: getattr(DataSpec, key) for key in DATA_KEYS}


def test_a_path_is_a_zip_archive_when_it_ends_in_zip_and_a_folder_otherwise() -> None:
    assert spec_for_path("/data/train.zip") == ZipData(root="/data/train.zip")
    assert spec_for_path("/data/TRAIN.ZIP") == ZipData(root="/data/TRAIN.ZIP")
    assert spec_for_path("/data/train") == FolderData(root="/data/train")
    assert spec_for_path("s3://bucket/train") == FolderData(root="s3://bucket/train")


@dataclass(frozen=True)
class TarData(DataSpec):
    """A kind a user registers that claims ``.tar`` paths."""

    name: str = "tar"
    root: str | None = None

    @classmethod
    def from_path(cls, path: str) -> DataSpec | None:
        return cls(root=path) if path.endswith(".tar") else None


def test_a_registered_kind_claims_its_paths_before_the_folder_fallback() -> None:
    with SOURCES.restored():
        register_source("tar", TarData, lambda data, split: None)  # type: ignore[arg-type,return-value]
        assert spec_for_path("/data/x.tar") == TarData(root="/data/x.tar")
    assert spec_for_path("/data/x.tar") == FolderData(root="/data/x.tar")


def test_a_keyword_left_at_its_default_takes_the_specs_value(identity_tree: Path) -> None:
    spec = FolderData(root=str(identity_tree), batch_size=8, on_error="skip")
    opened = open_data(spec, "train", **DEFAULTS)
    assert (opened.data.batch_size, opened.data.on_error) == (8, "skip")
    assert isinstance(opened.source, FolderSource) and len(opened.source) == 17


def test_a_keyword_given_fills_what_the_spec_leaves_at_its_default(identity_tree: Path) -> None:
    opened = open_data(FolderData(root=str(identity_tree)), "val", **{**DEFAULTS, "batch_size": 4})
    assert opened.data == FolderData(root=str(identity_tree), batch_size=4)


@dataclass(frozen=True)
class BigBatches(FolderData):
    """A kind whose own default batch is larger."""

    batch_size: int = 128


def test_a_keyword_overrides_a_default_of_the_specs_own_class(identity_tree: Path) -> None:
    spec = BigBatches(root=str(identity_tree))
    assert open_data(spec, "val", **DEFAULTS).data.batch_size == 128
    assert open_data(spec, "val", **{**DEFAULTS, "batch_size": 16}).data.batch_size == 16


def test_a_keyword_that_contradicts_the_spec_is_one_line_naming_both() -> None:
    spec = ParquetData(root="/data/hub", batch_size=8)
    with pytest.raises(ConfigError) as raised:
        open_data(spec, "train", **{**DEFAULTS, "batch_size": 16})
    assert str(raised.value) == (
        "batch_size=16 given and the ParquetData says batch_size=8: set it in one of them"
    )


def test_a_source_object_is_read_as_it_is_and_settled_keys_are_refused(
    identity_tree: Path,
) -> None:
    source = open_data(str(identity_tree), "train", **DEFAULTS).source
    assert open_data(source, "train", **{**DEFAULTS, "on_error": "skip"}).source is source
    with pytest.raises(
        ConfigError, match=r"^exclude given with a source object \(FolderSource\), which"
    ):
        open_data(source, "train", **{**DEFAULTS, "exclude": "bad.csv"})


def test_an_object_it_cannot_read_is_one_line_listing_what_it_can() -> None:
    with pytest.raises(ConfigError) as raised:
        open_data([1, 2, 3], "train", **DEFAULTS)
    message = str(raised.value)
    assert message.startswith("cannot read a builtins.list: give a folder") and "\n" not in message
