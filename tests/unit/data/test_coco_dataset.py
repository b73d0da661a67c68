"""torchvision's ``CocoDetection`` as a source: its ``ids`` order, the category ids as the
labels (as the v2 wrapper gives them), crowd annotations kept, instance masks when the
wrapper's ``target_keys`` ask for them, its transforms taken as the augmentation, and a
``target_transform`` refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torchvision.datasets import CocoDetection, wrap_dataset_for_transforms_v2
from torchvision.transforms import v2 as T

from dali_pipes import DALIIterator
from dali_pipes.data.coco_dataset import adapt, coco_transforms
from dali_pipes.data.sample_objects import ensure_sample_objects
from dali_pipes.data.specs import DataSpec
from dali_pipes.errors import ConfigError

pytest.importorskip("pycocotools")


@pytest.fixture(scope="module")
def objects(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ensure_sample_objects(str(tmp_path_factory.mktemp("objects")), 12, 4)


def dataset(root: Path, **kwargs: object) -> CocoDetection:
    return CocoDetection(
        str(root / "train2017"), str(root / "annotations/instances_train2017.json"), **kwargs
    )


def test_the_source_keeps_the_datasets_order_category_ids_and_crowd(
    objects: Path, tmp_path: Path
) -> None:
    content = json.loads((objects / "annotations/instances_train2017.json").read_text())
    content["annotations"][0]["iscrowd"] = 1
    annotations = tmp_path / "crowd.json"
    annotations.write_text(json.dumps(content))
    coco = CocoDetection(str(objects / "train2017"), str(annotations))
    coco.ids = list(reversed(coco.ids))[:8]
    source = adapt(coco, DataSpec())
    assert source is not None and len(source) == 8 and not source.has_masks
    for index, image_id in enumerate(coco.ids):
        target = source.targets(index)
        assert target.image_id == image_id
        anns = coco.coco.imgToAnns[image_id]
        assert target.labels.tolist() == [a["category_id"] for a in anns]  # crowd kept
        assert len(target.boxes) == len(anns)
    assert source.classes[3] == "circle" and source.classes[4] == "N/A"
    assert adapt("not a dataset", DataSpec()) is None


def test_the_v2_wrapper_asks_for_masks_with_its_target_keys(objects: Path) -> None:
    plain = wrap_dataset_for_transforms_v2(dataset(objects))
    assert not adapt(plain, DataSpec()).has_masks  # type: ignore[union-attr]
    keys = {"image_id", "boxes", "labels", "masks"}
    masked = adapt(wrap_dataset_for_transforms_v2(dataset(objects), target_keys=keys), DataSpec())
    assert masked is not None and masked.has_masks


def test_its_transforms_are_the_augmentation_and_a_target_transform_is_refused(
    objects: Path,
) -> None:
    pipeline = T.Compose([T.ToImage(), T.Resize((64, 64)), T.ToDtype(torch.float, scale=True)])
    wrapped = wrap_dataset_for_transforms_v2(dataset(objects, transforms=pipeline))
    assert coco_transforms(wrapped) is pipeline
    with DALIIterator(wrapped, batch_size=4, device="cpu", shuffle=False) as loader:
        images, targets = next(iter(loader))
    assert images.shape == (4, 3, 64, 64) and float(images.max()) <= 1.0
    assert [t["image_id"] for t in targets] == wrapped.ids[:4]
    with pytest.raises(ConfigError, match=r"^augment= is given and the CocoDetection has a"):
        DALIIterator(wrapped, augment="small", device="cpu")
    refused = dataset(objects, transform=T.ToImage(), target_transform=lambda t: t)
    with pytest.raises(ConfigError, match=r"^the CocoDetection has a target_transform"):
        DALIIterator(refused, device="cpu")
