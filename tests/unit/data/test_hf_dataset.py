"""A Hugging Face ``datasets.Dataset`` as a source: its columns found from the features,
its rows read as encoded bytes from the Arrow table, never decoded by PIL, and what it
cannot take said in one line (dali_pipes/data/hf_dataset.py)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from dali_pipes import ConfigError, DataError
from dali_pipes.data.given import DATA_KEYS, open_data
from dali_pipes.data.hf_dataset import dataset_source
from dali_pipes.data.specs import DataSpec

datasets = pytest.importorskip("datasets")

JPEG = b"\xff\xd8\xff\xe0 pretend"
#: The data keywords as DALIIterator passes them when none is given.
DEFAULTS = {key: getattr(DataSpec, key) for key in DATA_KEYS}


def test_rows_are_the_images_bytes_in_the_datasets_own_order_without_pil(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    blobs = [JPEG + bytes([k]) for k in range(6)]
    ds = datasets.Dataset.from_dict(
        {"img": [{"bytes": b, "path": None} for b in blobs], "fine": [0, 1, 2, 0, 1, 2]},
        features=datasets.Features(
            {"img": datasets.Image(), "fine": datasets.ClassLabel(names=["a", "b", "c"])}
        ),
    ).select([5, 3, 1, 0])  # an indices mapping over the table
    monkeypatch.setattr(
        datasets.Image, "decode_example", lambda *a, **k: pytest.fail("PIL decoded a row")
    )
    source = dataset_source(ds)
    assert source.classes == ("a", "b", "c") and source.labels.tolist() == [2, 0, 1, 0]
    got = source.read([0, 2, 1])
    assert [bytes(b) for b in got] == [blobs[5], blobs[1], blobs[3]]  # type: ignore[arg-type]
    assert source.name(1) == "dataset in memory row 1"


def test_integer_labels_name_their_classes_by_number_and_binary_images_are_read(
    tmp_path: Path,
) -> None:
    ds = datasets.Dataset.from_dict({"image": [JPEG, JPEG], "label": [0, 3]})
    ds.save_to_disk(str(tmp_path / "saved"))
    source = dataset_source(datasets.load_from_disk(str(tmp_path / "saved")))
    assert source.classes == ("0", "1", "2", "3")
    assert source.root == str(tmp_path / "saved")
    assert bytes(source.read([1])[0]) == JPEG  # type: ignore[arg-type]


def test_a_row_whose_file_is_gone_or_that_has_no_image_is_a_bad_sample(tmp_path: Path) -> None:
    ds = datasets.Dataset.from_dict(
        {"image": [str(tmp_path / "gone.jpg"), None], "label": [0, 0]},
        features=datasets.Features({"image": datasets.Image(), "label": datasets.Value("int64")}),
    )
    gone, empty = dataset_source(ds).read([0, 1])
    assert isinstance(gone, DataError) and "gone.jpg" in str(gone)
    assert str(empty) == "dataset in memory row 1: the row has no image (no bytes, no path)"


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        (
            {"a": [JPEG], "b": [JPEG], "label": [0]},
            "no column is the image (columns: ['a', 'b', 'label']): keep one with "
            "dataset.select_columns([...]) or name it 'image' with dataset.rename_column",
        ),
        (
            {"image": ["a photo"], "label": [0]},
            "column 'image' is Value('string'), not encoded images: cast it with "
            "dataset.cast_column('image', datasets.Image())",
        ),
        (
            {"image": [JPEG], "label": ["cat"]},
            "label column 'label' holds object, not class indices: cast it with "
            "dataset.class_encode_column('label')",
        ),
        (
            {"image": [JPEG], "label": [-1]},
            "row 0 has label -1: every row needs a class (leave unlabelled rows out with "
            "dataset.filter)",
        ),
    ],
    ids=["no-image-column", "strings", "string-labels", "unlabelled"],
)
def test_columns_it_cannot_use_are_one_line_with_the_call_that_fixes_them(
    columns: dict[str, list[object]], message: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        dataset_source(datasets.Dataset.from_dict(columns))
    assert str(raised.value) == message


def test_a_dataset_dict_a_stream_and_exclude_are_refused_in_one_line() -> None:
    ds = datasets.Dataset.from_dict({"image": [JPEG], "label": [0]})
    for given, start in [
        (datasets.DatasetDict({"train": ds}), "a DatasetDict holds the splits ['train']: give one"),
        (ds.to_iterable_dataset(), "a streaming (iterable) dataset has no length"),
    ]:
        with pytest.raises(ConfigError, match="^" + re.escape(start)):
            open_data(given, "train", **DEFAULTS)
    with pytest.raises(ConfigError, match=r"^exclude= names files, and a dataset's samples"):
        open_data(ds, "train", **{**DEFAULTS, "exclude": "bad.csv"})
    assert np.array_equal(open_data(ds, "val", **DEFAULTS).source.labels, [0])
