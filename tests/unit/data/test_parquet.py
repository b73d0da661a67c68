"""``data=parquet``: the Hub layout found, its splits and classes read, its rows read by row
groups, and every bad layout one line (dali_pipes/data/parquet.py, parquet_layout.py)."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.parquet import IMAGE, folder_table, hub_metadata, write_hub, write_split
from torchvision.datasets import ImageFolder

from dali_pipes import compose_config
from dali_pipes.config.specs import loader_spec
from dali_pipes.data.manifest import write_manifest
from dali_pipes.data.parquet import ParquetSource, open_parquet
from dali_pipes.data.registry import open_source
from dali_pipes.data.sampling import StreamSampler, sampler_for
from dali_pipes.data.sources import discover_folder
from dali_pipes.data.specs import ParquetData, SamplingSpec
from dali_pipes.errors import ConfigError, DataError


@pytest.fixture(scope="module")
def hub(identity_tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The identity tree's 17 images as train and validation splits, 2 files each, row
    groups of 3."""
    return write_hub(identity_tree, tmp_path_factory.mktemp("hub"))


def source(root: Path, split: str = "val", **keys: object) -> ParquetSource:
    opened = open_source(ParquetData(root=str(root), **keys), split)  # type: ignore[arg-type]
    assert isinstance(opened, ParquetSource)
    return opened


def one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    message = str(exc.value)
    assert "\n" not in message, message
    return message


def refused(root: Path, split: str, match: str, **keys: object) -> None:
    """Opening ``split`` fails with one line matching ``match``."""
    with pytest.raises(DataError, match=match) as exc:
        source(root, split, **keys)
    one_line(exc)


def test_a_split_reads_the_folders_images_labels_and_classes_in_imagefolder_order(
    hub: Path, identity_tree: Path
) -> None:
    folder = discover_folder(identity_tree)
    for split in ("train", "val"):
        parquet = source(hub, split)
        assert parquet.classes == folder.classes == tuple(ImageFolder(str(identity_tree)).classes)
        assert parquet.labels.tolist() == folder.labels.tolist()
        assert parquet.identity(range(len(parquet))).tolist() == list(range(len(folder)))
        every = list(range(len(folder)))
        for mine, theirs in zip(parquet.read(every), folder.read(every), strict=True):
            assert isinstance(mine, np.ndarray) and isinstance(theirs, np.ndarray)
            assert np.array_equal(mine, theirs)


def test_a_sample_is_named_by_its_file_and_row(hub: Path) -> None:
    parquet = source(hub)
    assert parquet.name(0) == f"{hub}/data/validation-00000-of-00002.parquet row 0"
    assert parquet.name(10) == f"{hub}/data/validation-00001-of-00002.parquet row 1"


def test_row_groups_are_the_samplers_blocks_and_a_read_fetches_only_its_groups(hub: Path) -> None:
    parquet = source(hub, "train")
    blocks = parquet.blocks()
    # 9 + 8 rows in two files, groups of 3: 3 + 3 groups
    assert [blocks.members(b).tolist() for b in range(blocks.num_blocks)] == [
        [0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10, 11], [12, 13, 14], [15, 16],
    ]  # fmt: skip
    assert isinstance(sampler_for(parquet, SamplingSpec()), StreamSampler)
    parquet.read([4, 3])
    assert list(parquet._cache().blocks) == [1]  # the one row group those rows are in
    parquet.read([16])
    assert list(parquet._cache().blocks) == [1, 5]


def test_a_source_pickles_without_its_cache_and_reads_the_same(hub: Path) -> None:
    parquet = source(hub)
    first = parquet.read([5])[0]
    copy = pickle.loads(pickle.dumps(parquet))
    assert "_cached" not in copy.__dict__
    again = copy.read([5])[0]
    assert isinstance(first, np.ndarray) and isinstance(again, np.ndarray)
    assert np.array_equal(first, again)


def test_splits_come_from_the_file_names(identity_tree: Path, tmp_path: Path) -> None:
    table = folder_table(identity_tree)
    write_split(table.slice(0, 5), tmp_path, "train", files=1)
    write_split(table.slice(5, 4), tmp_path, "val", files=1)
    write_split(table.slice(9, 3), tmp_path, "test", files=1)
    assert len(source(tmp_path, "train")) == 5
    assert len(source(tmp_path, "val")) == 4  # "val" when there is no "validation"
    assert len(source(tmp_path, "val", val_split="test")) == 3
    assert (
        source(tmp_path, "val", val_split="test").labels.tolist()
        == table.column("label").to_pylist()[9:12]
    )


def test_the_root_may_be_the_data_folder_and_a_single_file_split_has_no_part_numbers(
    identity_tree: Path, tmp_path: Path
) -> None:
    pq.write_table(folder_table(identity_tree), tmp_path / "train.parquet")
    assert len(source(tmp_path, "train")) == 17


def test_classes_without_classlabel_names_are_the_label_numbers_of_both_splits(
    identity_tree: Path, tmp_path: Path
) -> None:
    table = folder_table(identity_tree, names=False)
    write_split(table.slice(0, 5), tmp_path, "train", files=1)  # labels 0 only
    write_split(table, tmp_path, "validation", files=1)  # labels 0..2
    assert source(tmp_path, "train").classes == ("0", "1", "2")
    assert source(tmp_path, "val").classes == ("0", "1", "2")


def test_a_plain_binary_image_column_and_other_column_names_are_read(
    identity_tree: Path, tmp_path: Path
) -> None:
    table = folder_table(identity_tree)
    plain = pa.table(
        {
            "jpg": pc_bytes(table),
            "cls": table.column("label"),
        }
    ).replace_schema_metadata(hub_metadata(["ant", "bee", "cat"], "jpg", "cls"))
    write_split(plain, tmp_path, "train", files=1)
    parquet = source(tmp_path, "train", image_column="jpg", label_column="cls")
    assert parquet.classes == ("ant", "bee", "cat")
    folder = discover_folder(identity_tree)
    blob, theirs = parquet.read([7])[0], folder.read([7])[0]
    assert isinstance(blob, np.ndarray) and isinstance(theirs, np.ndarray)
    assert np.array_equal(blob, theirs)


def pc_bytes(table: pa.Table) -> pa.Array:
    import pyarrow.compute as pc

    return pc.struct_field(table.column("image").combine_chunks(), [0])


def test_a_row_without_image_bytes_is_a_bad_sample_naming_its_file_and_row(
    identity_tree: Path, tmp_path: Path
) -> None:
    table = folder_table(identity_tree)
    images = table.column("image").to_pylist()
    images[4] = {"bytes": None, "path": "elsewhere.jpg"}
    images[5] = {"bytes": b"not an image at all", "path": "x.jpg"}
    broken = table.set_column(0, "image", pa.array(images, type=IMAGE))
    write_split(broken, tmp_path, "train", files=1)
    parquet = source(tmp_path, "train")
    missing, garbage, good = parquet.read([4, 5, 6])
    assert isinstance(missing, DataError)
    assert str(missing).startswith(f"{parquet.files[0]} row 4: no image bytes in column 'image'")
    assert isinstance(garbage, np.ndarray) and garbage.tobytes() == b"not an image at all"
    assert isinstance(good, np.ndarray)


def test_the_scan_manifest_leaves_rows_out(hub: Path, tmp_path: Path) -> None:
    whole = source(hub, "train")
    manifest = tmp_path / "bad.csv"
    write_manifest(manifest, [(whole.name(3), "broken"), (whole.name(12), "broken")])
    parquet = source(hub, "train", exclude=str(manifest))
    assert len(parquet) == 15
    assert 3 not in parquet.identity(range(15)) and 12 not in parquet.identity(range(15))
    assert [name for name, _ in parquet.rejected] == [whole.name(3), whole.name(12)]
    blocks = parquet.blocks()
    assert sum(len(blocks.members(b)) for b in range(blocks.num_blocks)) == 15


def test_the_config_group_composes_and_opens_both_splits(hub: Path) -> None:
    cfg = compose_config(["data=parquet", f"data.root={hub}", "data.batch_size=4"])
    assert cfg.data.image_column == "image" and cfg.data.shuffle_buffer == 2048
    spec = loader_spec(cfg, "val", rank=0, world_size=1)
    assert isinstance(spec.source, ParquetSource) and len(spec.source) == 17


# --------------------------------------------------------------------------- bad layouts


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda root: root / "missing", r"data\.root .*/missing does not exist; set data\.root"),
        (lambda root: root, r"holds no Parquet files named <split>-00000-of-00001\.parquet"),
    ],
    ids=["no-root", "no-parquet"],
)
def test_a_root_without_a_dataset_is_one_line(make: object, expected: str, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a dataset")
    refused(make(tmp_path), "val", expected)  # type: ignore[operator]


def test_a_split_with_a_missing_part_is_one_line(hub: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    for path in (hub / "data").glob("train-*"):
        (data / path.name).write_bytes(path.read_bytes())
    (data / "train-00003-of-00004.parquet").write_bytes(
        (data / "train-00000-of-00002.parquet").read_bytes()
    )
    refused(tmp_path, "train", r"split 'train' is incomplete")


def test_a_split_that_is_not_there_lists_the_ones_that_are(hub: Path) -> None:
    refused(
        hub,
        "val",
        r"no Parquet files of split test .*\(train, validation found\); set data\.val_split",
        val_split="test",
    )


def test_an_empty_split_is_one_line(identity_tree: Path, tmp_path: Path) -> None:
    write_split(folder_table(identity_tree).slice(0, 0), tmp_path, "train", files=1)
    refused(tmp_path, "train", r"split 'train' has no rows; choose another split")


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        (
            {"image_column": "img"},
            r"no column 'img' \(columns: image, label\); set data\.image_column",
        ),
        (
            {"label_column": "cls"},
            r"no column 'cls' \(columns: image, label\); set data\.label_column",
        ),
        ({"image_column": "name"}, r"column 'name' is string, not images .*set data\.image_column"),
        ({"label_column": "name"}, r"column 'name' is string, not integer labels"),
    ],
    ids=["no-image-column", "no-label-column", "non-image-column", "non-integer-labels"],
)
def test_a_missing_or_mistyped_column_is_one_line(
    keys: dict[str, str], expected: str, identity_tree: Path, tmp_path: Path
) -> None:
    table = folder_table(identity_tree)
    if "name" in keys.values():
        names = pa.array([f"n{i}" for i in range(table.num_rows)])
        table = table.append_column("name", names)
        expected = expected.replace("image, label", "image, label, name")
    write_split(table, tmp_path, "train", files=1)
    refused(tmp_path, "train", expected, **keys)


def test_unlabelled_rows_and_labels_outside_the_classes_are_one_line(
    identity_tree: Path, tmp_path: Path
) -> None:
    table = folder_table(identity_tree)
    labels = table.column("label").to_pylist()
    labels[2] = -1
    write_split(
        table.set_column(1, "label", pa.array(labels, pa.int64())), tmp_path, "test", files=1
    )
    refused(
        tmp_path,
        "val",
        r"test-00000-of-00001\.parquet row 2: label -1 is the Hub's mark for an unlabelled",
        val_split="test",
    )
    labels[2] = 7
    write_split(
        table.set_column(1, "label", pa.array(labels, pa.int64())), tmp_path, "test", files=1
    )
    with pytest.raises(DataError, match=r"row 2: label 7 is outside the 3 ClassLabel names"):
        source(tmp_path, "val", val_split="test")


def test_a_file_that_is_not_parquet_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "train.parquet").write_bytes(b"PAR1 but nothing else")
    refused(tmp_path, "train", r"train\.parquet: not a readable Parquet file .*; download it again")


def test_a_root_left_unset_is_one_line() -> None:
    with pytest.raises(ConfigError, match=r"data\.root is not set"):
        open_parquet(ParquetData(), "train")
