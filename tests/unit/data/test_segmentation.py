"""data=segmentation recognises its three layouts (paired folders, ADE20K, Pascal VOC),
pairs each image with its mask, reads palette and grey masks as classes, and turns a
missing, colour or mis-sized mask into one line naming it (under skip, a bad sample)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from dali_pipes import build_loader, compose_config
from dali_pipes.data.sample_objects import ensure_sample_segmentation
from dali_pipes.data.segmentation import open_segmentation
from dali_pipes.data.specs import SegmentationData
from dali_pipes.errors import ConfigError, DataError


@pytest.fixture(scope="module")
def paired(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ensure_sample_segmentation(str(tmp_path_factory.mktemp("seg")), 6, 6)


def names(folder: Path) -> list[str]:
    return sorted(p.stem for p in folder.iterdir())


def as_ade20k(paired: Path, root: Path) -> Path:
    for split, ade in (("train", "training"), ("val", "validation")):
        shutil.copytree(paired / "images" / split, root / "images" / ade)
        shutil.copytree(paired / "masks" / split, root / "annotations" / ade)
    return root


def as_voc(paired: Path, root: Path) -> Path:
    """VOC's layout, its masks as palette PNGs (VOC's are)."""
    (root / "ImageSets" / "Segmentation").mkdir(parents=True)
    (root / "JPEGImages").mkdir()
    (root / "SegmentationClass").mkdir()
    for split in ("train", "val"):
        ids = names(paired / "images" / split)
        (root / "ImageSets" / "Segmentation" / f"{split}.txt").write_text("\n".join(ids) + "\n")
        for i in ids:
            shutil.copy(paired / "images" / split / f"{i}.jpg", root / "JPEGImages")
            grey = Image.open(paired / "masks" / split / f"{i}.png")
            palette = grey.convert("P")
            palette.putpalette([v for k in range(256) for v in (k, 255 - k, (7 * k) % 256)])
            palette.save(root / "SegmentationClass" / f"{i}.png")
    return root


@pytest.mark.parametrize("layout", ["paired folders", "ADE20K", "Pascal VOC"])
def test_each_layout_pairs_every_image_with_its_mask(
    layout: str, paired: Path, tmp_path: Path
) -> None:
    root, splits = paired, ("train", "val")
    if layout == "ADE20K":
        root, splits = as_ade20k(paired, tmp_path), ("training", "validation")
    elif layout == "Pascal VOC":
        root = as_voc(paired, tmp_path)
    data = SegmentationData(root=str(root), train_split=splits[0], val_split=splits[1])
    for split, count in (("train", 6), ("val", 6)):
        source = open_segmentation(data, split)
        assert source.layout == layout and len(source) == count
        classes: set[int] = set()
        for i in range(count):
            name = Path(source.name(i)).stem
            want = np.asarray(Image.open(paired / "masks" / split / f"{name}.png"))
            got = source.targets(i).semantic
            assert got is not None and np.array_equal(got, want)  # palette: its indices
            assert source.misfit(i, (want.shape[0], want.shape[1])) is None
            classes |= set(np.unique(got).tolist())
        assert {0} < classes <= {0, 1, 2, 3, 4}


def test_a_root_without_a_layout_or_without_a_root_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no segmentation layout for split 'train'"):
        open_segmentation(SegmentationData(root=str(tmp_path)), "train")
    with pytest.raises(ConfigError, match=r"data\.root is not set"):
        open_segmentation(SegmentationData(), "train")


def test_a_missing_colour_or_mis_sized_mask_is_one_line_naming_it(
    paired: Path, tmp_path: Path
) -> None:
    root = tmp_path / "copy"
    shutil.copytree(paired, root)
    masks = root / "masks" / "val"
    first, second, third, fourth = sorted(masks.iterdir())[:4]
    first.unlink()
    Image.open(second).convert("RGB").save(second)
    Image.open(third).resize((17, 9)).save(third)
    fourth.write_bytes(fourth.read_bytes()[: len(fourth.read_bytes()) // 2])  # truncated
    source = open_segmentation(SegmentationData(root=str(root)), "val")
    reasons = [source.misfit(i, _size(source, i)) for i in range(4)]
    assert reasons[3] is not None and str(fourth) in reasons[3] and "not a readable" in reasons[3]
    assert reasons[0] is not None and str(first) in reasons[0] and "\n" not in reasons[0]
    assert reasons[1] is not None and "a RGB mask" in reasons[1] and str(second) in reasons[1]
    assert reasons[2] is not None and "a 9x17 mask for the" in reasons[2]
    with pytest.raises(DataError, match="cannot read the mask"):
        source.targets(0)
    bad = {source.name(i) for i in range(4)}  # a bad sample is named by its image
    for backend in ("dali", "torch"):
        overrides = _overrides(root, backend)
        with (
            pytest.raises(DataError, match="mask"),
            build_loader(compose_config(overrides), "val") as loader,
        ):
            list(loader)
        skip = compose_config([*overrides, "data.on_error=skip"])
        with build_loader(skip, "val") as loader:
            assert [len(masks) for _, masks in loader] == [2, 2, 2]  # substitutes fill slots
            assert set(loader.bad_files) == bad


def _overrides(root: Path, backend: str) -> list[str]:
    return [
        "data=segmentation",
        f"data.root={root}",
        "data.batch_size=2",
        "augment=small",
        f"backend={backend}",
        *(["backend.device=cpu"] if backend == "dali" else ["backend.num_workers=0"]),
    ]


def _size(source: object, index: int) -> tuple[int, int]:
    from dali_pipes.data.segmentation import SegmentationSource

    assert isinstance(source, SegmentationSource)
    with Image.open(source.files[index]) as image:
        return image.height, image.width
