"""``DALIIterator(data)`` over every kind of data it takes gives what it gives over the image
folder the data was made from: the same batches in the same order (training and
evaluation), the same halves on two ranks, the same rest of an epoch after a resume, and the
same treatment of a bad image (skipped with the batch kept full, or named in one line).

Each kind is made from the identity tree (17 images in ImageFolder order): a zip archive
of it (given as a path and as a ``ZipData`` spec with the split in a folder), a Hugging
Face dataset (``Dataset.from_dict`` of the paths, ``load_dataset("parquet", ...)`` of its
Parquet file, ``save_to_disk``/``load_from_disk``), a ``FolderData`` spec, and a user's
own :class:`~dali_pipes.data.interface.Source` written here. Everything runs offline on
DALI's CPU.
"""

from __future__ import annotations

import os
import shutil
import zipfile
from collections.abc import Callable
from functools import cache, partial
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torchvision.datasets import ImageFolder

from dali_pipes import DALIIterator, DataError
from dali_pipes.data.specs import FolderData
from dali_pipes.data.zip_archive import ZipData
from dali_pipes.image.decode import Blob, read_files

datasets = pytest.importorskip("datasets")

KINDS = [
    "folder-spec",
    "zip",
    "zip-spec",
    "hf-from-dict",
    "hf-parquet",
    "hf-disk",
    "own-source",
]
BATCH = 4


class FileListSource:
    """A user's own source: a list of image files with their class names."""

    def __init__(self, files: list[str], names: list[str]) -> None:
        self.files = files
        self.classes = tuple(sorted(set(names)))
        self.labels = np.array([self.classes.index(n) for n in names], dtype=np.int64)
        self.root = os.path.commonpath(files)

    def __len__(self) -> int:
        return len(self.files)

    def read(self, indices: Any) -> list[Blob]:
        return read_files([self.files[int(i)] for i in indices], timeout=30)

    def identity(self, indices: Any) -> np.ndarray:
        return np.asarray(indices, dtype=np.int64)

    def name(self, index: int) -> str:
        return self.files[index]


def zipped(tree: Path, archive: Path, inside: str = "") -> Path:
    """``tree`` as a zip archive, its class folders at the top or under ``inside``."""
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        for path in sorted(tree.rglob("*")):
            if path.is_file():
                z.write(path, inside + path.relative_to(tree).as_posix())
    return archive


def hf_dataset(tree: Path) -> Any:
    """The tree's ImageFolder samples as a dataset of paths with a ClassLabel column."""
    folder = ImageFolder(str(tree))
    features = datasets.Features(
        {"image": datasets.Image(), "label": datasets.ClassLabel(names=folder.classes)}
    )
    return datasets.Dataset.from_dict(
        {"image": [p for p, _ in folder.samples], "label": [y for _, y in folder.samples]},
        features=features,
    )


def made(kind: str, tree: Path, work: Path) -> Any:
    """``tree`` as data of ``kind`` (files written under ``work``)."""
    work.mkdir(parents=True, exist_ok=True)
    if kind == "folder-spec":
        return FolderData(root=str(tree))
    if kind == "zip":
        return str(zipped(tree, work / "tree.zip"))
    if kind == "zip-spec":
        archive = zipped(tree, work / "split.zip", inside="data/train/")
        return ZipData(root=str(archive), train_dir="data/train", val_dir="data/train")
    if kind == "hf-from-dict":
        return hf_dataset(tree)
    if kind == "hf-parquet":
        hf_dataset(tree).to_parquet(str(work / "tree.parquet"))
        return datasets.load_dataset(
            "parquet",
            data_files=str(work / "tree.parquet"),
            split="train",
            cache_dir=str(work / "cache"),
        )
    if kind == "hf-disk":
        hf_dataset(tree).save_to_disk(str(work / "saved"))
        return datasets.load_from_disk(str(work / "saved"))
    if kind == "own-source":
        folder = ImageFolder(str(tree))
        return FileListSource(
            [p for p, _ in folder.samples], [folder.classes[y] for _, y in folder.samples]
        )
    raise AssertionError(kind)


def loader(data: Any, **changes: Any) -> DALIIterator:
    return DALIIterator(
        data, **{"batch_size": BATCH, "device": "cpu", "augment": "small", **changes}
    )


def epoch(make: Callable[[], DALIIterator], number: int = 1) -> list[tuple[Any, Any]]:
    with make() as it:
        it.set_epoch(number)
        return [(x.clone(), y.clone()) for x, y in it]


@cache
def folder_epoch(
    tree: Path, number: int, train: bool = True, rank: int = 0, world_size: int = 1
) -> list[tuple[Any, Any]]:
    """The folder's epoch, made once for every kind compared with it."""
    return epoch(partial(loader, str(tree), train=train, rank=rank, world_size=world_size), number)


def assert_same(got: list[tuple[Any, Any]], want: list[tuple[Any, Any]]) -> None:
    assert len(got) == len(want)
    for k, ((x, y), (x0, y0)) in enumerate(zip(got, want, strict=True)):
        assert torch.equal(y, y0), f"batch {k}: labels {y.tolist()} != {y0.tolist()}"
        assert torch.equal(x, x0), f"batch {k}: images differ"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
def test_each_kind_of_data_gives_the_folders_batches_in_its_order(
    kind: str, train: bool, identity_tree: Path, tmp_path: Path
) -> None:
    data = made(kind, identity_tree, tmp_path)
    assert_same(epoch(partial(loader, data, train=train)), folder_epoch(identity_tree, 1, train))


@pytest.mark.parametrize("kind", KINDS)
def test_two_ranks_read_disjoint_equal_halves_as_over_the_folder(
    kind: str, identity_tree: Path, tmp_path: Path
) -> None:
    data = made(kind, identity_tree, tmp_path)
    halves = []
    for rank in (0, 1):
        with loader(data, rank=rank, world_size=2) as it:
            it.set_epoch(2)
            halves.append(list(it.sampler))
        assert_same(
            epoch(partial(loader, data, rank=rank, world_size=2), 2),
            folder_epoch(identity_tree, 2, rank=rank, world_size=2),
        )
    assert len(halves[0]) == len(halves[1]) == 9  # 17 samples, padded to 18
    assert set(halves[0]) | set(halves[1]) == set(range(17))
    assert len(set(halves[0]) & set(halves[1])) == 1  # only DistributedSampler's padding


@pytest.mark.parametrize("kind", KINDS)
def test_a_resumed_epoch_continues_batch_for_batch(
    kind: str, identity_tree: Path, tmp_path: Path
) -> None:
    data = made(kind, identity_tree, tmp_path)
    whole = epoch(lambda: loader(data), 3)
    with loader(data) as first:
        first.set_epoch(3)
        batches = iter(first)
        next(batches)
        next(batches)
        state = first.state_dict()
    with loader(data) as second:
        second.load_state_dict(state)
        rest = [(x.clone(), y.clone()) for x, y in second]
    assert_same(rest, whole[2:])


@pytest.fixture(scope="module")
def tree_with_a_bad_image(identity_tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The identity tree with one more file in ``bee/``: named as a JPEG, not one."""
    tree = Path(shutil.copytree(identity_tree, tmp_path_factory.mktemp("bad") / "tree"))
    (tree / "bee" / "img_03b.jpg").write_bytes(b"no JPEG here, just text\n" * 20)
    return tree


@pytest.mark.parametrize("kind", KINDS)
def test_a_bad_image_is_skipped_with_full_batches_or_named_in_one_line(
    kind: str, tree_with_a_bad_image: Path, tmp_path: Path
) -> None:
    data = made(kind, tree_with_a_bad_image, tmp_path)
    with loader(data, on_error="skip", drop_last=True) as it:
        sizes = [len(y) for _, y in it]
        bad = list(it.bad_files)
    assert sizes == [BATCH] * (18 // BATCH)
    assert len(bad) == 1
    with pytest.raises(DataError) as raised, loader(data, train=False) as it:
        for _ in it:
            pass
    message = str(raised.value)
    assert "\n" not in message and message.startswith(bad[0]), message
