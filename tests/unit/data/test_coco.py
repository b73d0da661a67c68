"""data=coco reads COCO's layout as torchvision's CocoDetection does (the same images in
the same order, the same boxes, categories and masks), maps categories to contiguous
labels, leaves crowds out, and turns each kind of bad annotation into one line naming
the file and the annotation (or, under skip, leaves its image out with the reason)."""

from __future__ import annotations

import copy
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from dali_pipes import DALIIterator, build_loader, compose_config
from dali_pipes.config.specs import to_spec
from dali_pipes.data.coco import open_coco
from dali_pipes.data.interface import Annotated, Source
from dali_pipes.data.registry import open_source
from dali_pipes.data.sample_objects import CATEGORIES, ensure_sample_objects, uncompressed_rle
from dali_pipes.data.specs import CocoData, DataSpec, SampleObjectsData
from dali_pipes.errors import ConfigError, DataError


@pytest.fixture(scope="module")
def coco(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ensure_sample_objects(str(tmp_path_factory.mktemp("objects")), 24, 8)


def with_annotations(coco: Path, tmp: Path, change: Any) -> Path:
    """A copy of the dataset's val split whose annotations file ``change`` edited."""
    content = json.loads((coco / "annotations" / "instances_val2017.json").read_text())
    change(content)
    (tmp / "annotations").mkdir(exist_ok=True)
    (tmp / "annotations" / "instances_val2017.json").write_text(json.dumps(content))
    if not (tmp / "val2017").exists():
        (tmp / "val2017").symlink_to(coco / "val2017")
    return tmp


def test_the_split_is_torchvisions_coco_detection_image_for_image(coco: Path) -> None:
    from torchvision.datasets import CocoDetection, wrap_dataset_for_transforms_v2

    source = open_coco(CocoData(root=str(coco), masks=True), "train")
    theirs = wrap_dataset_for_transforms_v2(
        CocoDetection(str(coco / "train2017"), str(coco / "annotations/instances_train2017.json")),
        target_keys=("image_id", "boxes", "labels", "masks"),
    )
    assert isinstance(source, Source) and isinstance(source, Annotated)
    assert len(source) == len(theirs) == 24 and source.task == "detection"
    assert source.classes == ("__background__", *(name for _, name in CATEGORIES))
    for i in range(len(source)):
        _, target = theirs[i]
        ours = source.targets(i)
        assert ours.image_id == target["image_id"]
        assert Path(source.name(i)).name == f"{ours.image_id:012d}.jpg"
        if "boxes" not in target:  # torchvision gives no keys for an image without objects
            assert ours.count == 0 and ours.boxes.shape == (0, 4)
            continue
        np.testing.assert_allclose(ours.boxes, target["boxes"].numpy())
        categories = [source.category_ids[k - 1] for k in ours.labels]
        assert categories == target["labels"].tolist()
        assert ours.masks is not None
        assert torch.equal(torch.from_numpy(ours.masks), target["masks"].as_subclass(torch.Tensor))


def test_each_box_is_the_tight_box_of_its_mask_and_the_labels_are_contiguous(coco: Path) -> None:
    source = open_coco(CocoData(root=str(coco), masks=True), "val")
    seen = set()
    for i in range(len(source)):
        t = source.targets(i)
        assert t.masks is not None and t.masks.shape[1:] == t.masks.shape[1:]
        for box, mask in zip(t.boxes, t.masks, strict=True):
            ys, xs = np.nonzero(mask)
            assert box.tolist() == [xs.min(), ys.min(), xs.max() + 1, ys.max() + 1]
        seen.update(t.labels.tolist())
    assert seen <= {1, 2, 3, 4}


def test_data_coco_and_data_sample_objects_compose_and_open(coco: Path, tmp_path: Path) -> None:
    cfg = compose_config(["data=coco", f"data.root={coco}", "data.masks=true"])
    spec = to_spec(cfg.data, DataSpec)
    assert isinstance(spec, CocoData) and spec.masks
    assert len(open_source(spec, "val")) == 8
    objects = to_spec(
        compose_config(["data=sample_objects", f"data.root={tmp_path}"]).data, DataSpec
    )
    assert isinstance(objects, SampleObjectsData)
    assert len(open_source(objects, "train")) == objects.train_images


def test_crowd_annotations_are_left_out_unless_asked_for(coco: Path, tmp_path: Path) -> None:
    def crowd_first(content: dict[str, Any]) -> None:
        content["annotations"][0]["iscrowd"] = 1

    root = with_annotations(coco, tmp_path, crowd_first)
    plain = open_coco(CocoData(root=str(root)), "val")
    crowded = open_coco(CocoData(root=str(root), crowd=True), "val")
    assert len(crowded.box_labels) == len(plain.box_labels) + 1


def test_an_uncompressed_rle_mask_decodes_to_itself() -> None:
    from pycocotools import mask as coco_mask

    rng = np.random.default_rng(0)
    for first in (0, 1):
        mask = (rng.random((17, 23)) < 0.4).astype(np.uint8)
        mask[0, 0] = first
        rle = coco_mask.frPyObjects(uncompressed_rle(mask), 17, 23)
        assert np.array_equal(coco_mask.decode(rle), mask)


def edit(field: str, value: Any) -> Any:
    def change(content: dict[str, Any]) -> None:
        annotation = next(a for a in content["annotations"] if a["id"] == TARGET_ID[0])
        annotation[field] = value

    return change


TARGET_ID = [0]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("image_id", 999999, r"names image 999999, which the file does not list"),
        ("category_id", 77, r"has category 77, which the file does not define"),
        ("bbox", [10, 10, -4, 8], r"has box \[10, 10, -4, 8\], outside image \d+ or empty"),
        ("bbox", [5000, 10, 4, 8], r"has box \[5000, 10, 4, 8\], outside image \d+ or empty"),
    ],
    ids=["missing-image", "unknown-category", "negative-size", "outside"],
)
def test_a_bad_annotation_is_one_line_naming_the_file_and_the_annotation(
    coco: Path, tmp_path: Path, field: str, value: Any, message: str
) -> None:
    first = json.loads((coco / "annotations" / "instances_val2017.json").read_text())
    TARGET_ID[0] = first["annotations"][0]["id"]
    root = with_annotations(coco, tmp_path, edit(field, value))
    path = root / "annotations" / "instances_val2017.json"
    with pytest.raises(DataError) as caught:
        open_coco(CocoData(root=str(root)), "val")
    line = str(caught.value)
    assert "\n" not in line and line.startswith(f"{path}: annotation {TARGET_ID[0]} ")
    assert __import__("re").search(message, line)
    if field != "image_id":  # under skip the image is a bad sample: substituted when read
        skipped = open_coco(CocoData(root=str(root), on_error="skip"), "val")
        assert len(skipped) == len(open_coco(CocoData(root=str(coco)), "val"))
        assert skipped.local_paths() is None  # read through read(), which says which
        bad = [
            i
            for i, blob in enumerate(skipped.read(range(len(skipped))))
            if isinstance(blob, DataError)
        ]
        assert len(bad) == 1
        assert str(skipped.read(bad)[0]).startswith(f"{path}: annotation {TARGET_ID[0]} ")
        with DALIIterator(
            CocoData(root=str(root), on_error="skip"),
            batch_size=4,
            device="cpu",
            augment="small",
            train=False,
        ) as loader:
            sizes = [len(targets) for _, targets in loader]
            assert sizes == [4, 4] and skipped.name(bad[0]) in loader.bad_files


def test_a_file_that_is_not_json_or_not_there_is_one_line(coco: Path, tmp_path: Path) -> None:
    (tmp_path / "annotations").mkdir()
    (tmp_path / "annotations" / "instances_val2017.json").write_text("{not json")
    with pytest.raises(DataError, match=r"instances_val2017\.json: not a JSON annotations file"):
        open_coco(CocoData(root=str(tmp_path)), "val")
    with pytest.raises(DataError, match=r"instances_train2017\.json: annotations file not found"):
        open_coco(CocoData(root=str(tmp_path)), "train")
    with pytest.raises(ConfigError, match=r"^data\.root is not set"):
        open_coco(CocoData(), "val")


def test_masks_without_pycocotools_say_which_extra_to_install(
    coco: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pycocotools.mask", None)
    with pytest.raises(ConfigError, match=r"pip install 'dali_pipes\[coco\]'"):
        open_coco(CocoData(root=str(coco), masks=True), "val")
    assert len(open_coco(replace(CocoData(root=str(coco)), masks=False), "val")) == 8


def test_a_missing_image_file_is_a_bad_sample_named_by_its_path(coco: Path, tmp_path: Path) -> None:
    root = with_annotations(coco, tmp_path, copy.copy)
    content = json.loads((root / "annotations" / "instances_val2017.json").read_text())
    content["images"][0]["file_name"] = "gone.jpg"
    (root / "annotations" / "instances_val2017.json").write_text(json.dumps(content))
    source = open_coco(CocoData(root=str(root)), "val")
    index = source.files.index(str(root / "val2017" / "gone.jpg"))
    (blob,) = source.read([index])
    assert isinstance(blob, DataError) and "gone.jpg" in str(blob)


@pytest.mark.parametrize("backend", ["dali", "torch"])
def test_masks_whose_image_has_another_size_are_one_line_or_under_skip_a_bad_sample(
    coco: Path, tmp_path: Path, backend: str
) -> None:
    """The annotations say a size the image does not have, so its masks (drawn at the
    annotations' size) cannot follow it: one line naming the image, the image id and the
    annotations file; under skip a substitute takes its place, as for an unreadable image."""

    def grow(content: dict[str, Any]) -> None:
        content["images"][2]["height"] += 7

    root = with_annotations(coco, tmp_path, grow)
    image = json.loads((root / "annotations" / "instances_val2017.json").read_text())["images"][2]
    overrides = [
        "data=coco",
        f"data.root={root}",
        "data.masks=true",
        "data.batch_size=4",
        "augment=small",
        f"backend={backend}",
        "backend.device=cpu",
        *(["backend.num_workers=0"] if backend == "torch" else []),
    ]
    with pytest.raises(DataError) as caught, build_loader(compose_config(overrides), "val") as bad:
        list(bad)
    line = str(caught.value)
    assert "\n" not in line and image["file_name"] in line
    assert f"image id {image['id']} " in line and "instances_val2017.json" in line
    skip = compose_config([*overrides, "data.on_error=skip"])
    with build_loader(skip, "val") as loader:
        batches = [targets for _, targets in loader]
        assert [len(t) for t in batches] == [4, 4]
        assert any(image["file_name"] in path for path in loader.bad_files)
    shown = [t["image_id"] for targets in batches for t in targets]
    assert image["id"] not in shown  # its place taken by a substitute
