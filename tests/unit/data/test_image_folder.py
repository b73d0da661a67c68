"""A torchvision ImageFolder as a source: its samples, labels and classes as they are.

``DALIIterator(ImageFolder(root, transform=...))`` must see what the dataset lists, in its
order -- whatever ``is_valid_file``, ``extensions`` or a subclass's ``find_classes`` chose --
and refuse in one line what the backends would not read as the dataset does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torchvision.transforms as T
from conftest import BUNDLED_PHOTOS
from torchvision.datasets import ImageFolder

from dali_pipes import DALIIterator
from dali_pipes.data.image_folder import folder_dataset_source
from dali_pipes.errors import ConfigError, DataError


class ReversedClasses(ImageFolder):
    """A subclass that orders its classes its own way (torchvision's documented hook)."""

    def find_classes(self, directory: str) -> tuple[list[str], dict[str, int]]:
        classes, _ = super().find_classes(directory)
        classes = classes[::-1]
        return classes, {name: i for i, name in enumerate(classes)}


def test_the_source_is_the_datasets_samples_labels_and_classes_in_its_order() -> None:
    dataset = ReversedClasses(str(BUNDLED_PHOTOS), is_valid_file=lambda p: "4" in Path(p).name)
    source = folder_dataset_source(dataset)
    assert source.files == tuple(path for path, _ in dataset.samples)
    assert np.array_equal(source.labels, dataset.targets)
    assert source.classes == tuple(dataset.classes) and source.root == str(BUNDLED_PHOTOS)
    assert list(source.identity(np.arange(len(source)))) == list(range(len(dataset)))


def test_a_file_the_backends_do_not_decode_fails_or_is_left_out(tmp_path: Path) -> None:
    folder = tmp_path / "cls"
    folder.mkdir()
    for name in ("a.jpg", "b.bmp"):
        (folder / name).write_bytes((next(BUNDLED_PHOTOS.rglob("*.jpg"))).read_bytes())
    dataset = ImageFolder(str(tmp_path))
    with pytest.raises(DataError, match=r"b\.bmp: \.bmp: not a format the backends decode"):
        folder_dataset_source(dataset)
    kept = folder_dataset_source(dataset, on_error="skip")
    assert [Path(f).name for f in kept.files] == ["a.jpg"] and len(kept.rejected) == 1


class OwnItems(ImageFolder):
    def __getitem__(self, index: int) -> Any:
        return super().__getitem__(index)


@pytest.mark.parametrize(
    ("dataset", "expected"),
    [
        (ImageFolder(str(BUNDLED_PHOTOS), loader=lambda p: p), "is not torchvision's image loader"),
        (ImageFolder(str(BUNDLED_PHOTOS), target_transform=lambda y: y + 1), "target_transform"),
        (OwnItems(str(BUNDLED_PHOTOS)), "OwnItems has a __getitem__ of its own"),
    ],
)
def test_a_dataset_that_reads_or_labels_its_own_way_is_refused(dataset: Any, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        folder_dataset_source(dataset)


def test_the_iterator_takes_the_datasets_transform_once() -> None:
    transform = T.Compose([T.Resize(40), T.CenterCrop(32), T.ToTensor()])
    dataset = ImageFolder(str(BUNDLED_PHOTOS), transform=transform)
    with pytest.raises(ConfigError, match="give one of them"):
        DALIIterator(dataset, augment=transform, device="cpu")
    with pytest.raises(ConfigError, match="image_size given with a torchvision transform"):
        DALIIterator(dataset, image_size=64, device="cpu")
    with DALIIterator(dataset, batch_size=4, train=False, device="cpu") as loader:
        assert loader.classes == tuple(dataset.classes)
        images, labels = next(iter(loader))
        assert images.shape == (4, 3, 32, 32) and labels.tolist() == dataset.targets[:4]


def test_the_iterator_takes_a_transform_for_a_folder_path() -> None:
    """A list of transforms is their Compose; the batches are what it ends with (uint8
    pixels here), in channels_last memory when asked."""
    transform = [T.CenterCrop(24), T.RandomHorizontalFlip(), T.PILToTensor()]
    with DALIIterator(
        BUNDLED_PHOTOS, augment=transform, batch_size=5, device="cpu", channels_last=True
    ) as loader:
        images, labels = next(iter(loader))
    assert images.dtype == torch.uint8 and images.shape == (5, 3, 24, 24)
    assert images.is_contiguous(memory_format=torch.channels_last) and len(labels) == 5
