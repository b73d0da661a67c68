"""Detection batches keep torchvision's detection references' contract: ``(images,
targets)``, images ``[N, 3, H, W]`` (a list of ``[3, H, W]`` when each keeps a size of its
own), one dict per image with ``boxes``
(``tv_tensors.BoundingBoxes``, XYXY, the output's canvas), ``labels`` (int64), ``masks``
(``tv_tensors.Mask``) and ``image_id``; an image with no objects keeps its place with
empty targets; every box holds its object and its mask covers it; epochs, resume and rank
shards behave as for classification."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conftest import gpu
from torchvision import tv_tensors

from dali_pipes import build_loader, compose_config
from dali_pipes.backends.base import Loader
from dali_pipes.backends.dali.loader import DaliLoader
from dali_pipes.config.specs import loader_spec
from dali_pipes.data.sample_objects import ensure_sample_objects
from dali_pipes.errors import ConfigError

KINDS = ["torch", "dali-cpu", "dali-twin", pytest.param("dali-gpu", marks=gpu)]
BATCH = 6


@pytest.fixture(scope="module")
def objects(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ensure_sample_objects(str(tmp_path_factory.mktemp("objects")), 30, 8)


def make(
    kind: str, root: Path, *extra: str, split: str = "train", rank: int = 0, world: int = 1
) -> Loader:
    backend = {
        "torch": ["backend=torch", "backend.num_workers=0"],
        "dali-cpu": ["backend=dali", "backend.device=cpu"],
        "dali-twin": ["backend=dali", "backend.device=cpu"],
        "dali-gpu": ["backend=dali", "backend.device=gpu"],
    }[kind]
    cfg = compose_config(
        [
            "data=coco",
            f"data.root={root}",
            "data.masks=true",
            f"data.batch_size={BATCH}",
            "augment=small",
            *backend,
            *extra,
        ]
    )
    if kind == "dali-twin":  # the GPU's graph, every operator on the CPU
        return DaliLoader(loader_spec(cfg, split, rank=rank, world_size=world), twin=True)
    return build_loader(cfg, split, rank=rank, world_size=world)


def epoch(loader: Loader, number: int) -> list[tuple[Any, list[dict[str, Any]]]]:
    loader.set_epoch(number)
    return [([i.clone() for i in x] if isinstance(x, list) else x.clone(), y) for x, y in loader]


def same(a: list[Any], b: list[Any]) -> bool:
    if len(a) != len(b):
        return False
    for (x, ys), (x0, ys0) in zip(a, b, strict=True):
        if not torch.equal(x, x0) or len(ys) != len(ys0):
            return False
        for y, y0 in zip(ys, ys0, strict=True):
            if y["image_id"] != y0["image_id"] or not torch.equal(y["boxes"], y0["boxes"]):
                return False
            if not torch.equal(y["masks"], y0["masks"]):
                return False
    return True


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("split", ["train", "val"])
def test_batches_are_images_and_one_target_dict_per_image(
    kind: str, split: str, objects: Path
) -> None:
    empty = 0
    with make(kind, objects, split=split) as loader:
        for images, targets in loader:
            n, _, h, w = images.shape
            assert images.dtype == torch.float32 and len(targets) == n
            device = images.device
            for target in targets:
                boxes, labels, masks = target["boxes"], target["labels"], target["masks"]
                assert isinstance(boxes, tv_tensors.BoundingBoxes)
                assert boxes.format == tv_tensors.BoundingBoxFormat.XYXY
                assert tuple(boxes.canvas_size) == (h, w) and boxes.dtype == torch.float32
                assert labels.dtype == torch.int64 and labels.shape == (len(boxes),)
                assert boxes.device == labels.device == masks.device == device
                assert isinstance(masks, tv_tensors.Mask) and masks.dtype == torch.uint8
                assert masks.shape == (len(boxes), h, w)
                assert isinstance(target["image_id"], int)
                assert ((labels >= 1) & (labels <= 4)).all()
                empty += len(boxes) == 0
    assert empty > 0  # images without objects keep their place


@pytest.mark.parametrize("kind", KINDS)
def test_every_box_holds_its_objects_mask(kind: str, objects: Path) -> None:
    checked = 0
    with make(kind, objects) as loader:
        for _, targets in epoch(loader, 1):
            for target in targets:
                for box, mask in zip(target["boxes"], target["masks"], strict=True):
                    ys, xs = np.nonzero(mask.cpu().numpy())
                    assert len(ys), f"image {target['image_id']}: a kept box has no pixel"
                    x1, y1, x2, y2 = box.tolist()
                    assert xs.min() >= x1 - 1 and xs.max() + 1 <= x2 + 1
                    assert ys.min() >= y1 - 1 and ys.max() + 1 <= y2 + 1
                    checked += 1
    assert checked >= 20


@pytest.mark.parametrize("kind", KINDS)
def test_set_epoch_resume_and_rank_shards_follow_the_sampler(kind: str, objects: Path) -> None:
    with make(kind, objects) as loader:
        first = epoch(loader, 3)
        assert same(epoch(loader, 3), first) and not same(epoch(loader, 4), first)
        loader.set_epoch(3)
        batches = iter(loader)
        next(batches)
        state = loader.state_dict()
        del batches
    with make(kind, objects) as resumed:
        resumed.load_state_dict(state)
        assert same([(x, y) for x, y in resumed], first[1:])
    whole = {y["image_id"]: y for _, ys in first for y in ys}
    shards = []
    for rank in (0, 1):
        with make(kind, objects, rank=rank, world=2) as part:
            shards.append({y["image_id"]: y for _, ys in epoch(part, 3) for y in ys})
    assert not set(shards[0]) & set(shards[1]) and len(shards[0]) == len(shards[1])
    assert set(shards[0]) | set(shards[1]) == set(whole)
    for shard in shards:  # each image's objects are the single process's
        for image_id, target in shard.items():
            assert torch.equal(target["boxes"], whole[image_id]["boxes"])


@pytest.mark.parametrize("kind", ["torch", "dali-cpu"])
def test_an_op_that_cannot_move_boxes_stops_the_loader_when_it_is_built(
    kind: str, objects: Path
) -> None:
    with pytest.raises(ConfigError, match=r"^augment op randaugment moves pixels but not boxes"):
        make(kind, objects, "augment=randaugment")


@pytest.mark.parametrize(
    ("kind", "change", "message"),
    [
        (
            "dali-cpu",
            "backend=synthetic",
            r"^backend=synthetic reads no images, so it has no boxes",
        ),
        ("torch", "data.cache=ram", r"takes no data\.cache=ram yet; remove it$"),
        ("dali-cpu", "augment=byol", r"takes no views yet; remove it$"),
    ],
    ids=["synthetic", "cache", "views"],
)
def test_what_cannot_give_boxes_and_masks_is_refused_in_one_line(
    kind: str, change: str, message: str, objects: Path
) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        make(kind, objects, change)
    assert "\n" not in str(caught.value)


#: ``augment=detr`` scaled down: shorter sides 96 or 128 (at most 192), the crop branch.
OWN_SIZES = [
    "augment=detr",
    "augment.train.crop.min_size=[96,128]",
    "augment.train.crop.max_size=192",
    "augment.train.crop.crop_sizes=[100]",
    "augment.train.crop.crop_range=[64,100]",
    "augment.val.crop.min_size=128",
    "augment.val.crop.max_size=192",
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("split", ["train", "val"])
def test_images_of_their_own_sizes_are_a_list_with_each_targets_canvas(
    kind: str, split: str, objects: Path
) -> None:
    """A recipe that keeps each image's own size (a shorter side with a maximum) gives a
    list of ``[3, H, W]`` tensors, as torchvision's detection models take them; each
    target's boxes and masks are on its own image's canvas. Epochs and resume as usual."""
    sizes = set()
    with make(kind, objects, *OWN_SIZES, split=split) as loader:
        first = epoch(loader, 2)
        for images, targets in first:
            assert isinstance(images, list) and len(images) == len(targets)
            for image, target in zip(images, targets, strict=True):
                c, h, w = image.shape
                assert c == 3 and image.dtype == torch.float32
                assert min(h, w) <= 128 and max(h, w) <= 192  # the shorter side, or the max
                assert tuple(target["boxes"].canvas_size) == (h, w)
                assert target["masks"].shape == (len(target["boxes"]), h, w)
                assert target["boxes"].device == image.device
                sizes.add((h, w))
        assert len(sizes) > 3
        loader.set_epoch(2)
        batches = iter(loader)
        next(batches)
        state = loader.state_dict()
        del batches
    with make(kind, objects, *OWN_SIZES, split=split) as resumed:
        resumed.load_state_dict(state)
        rest = [(x, y) for x, y in resumed]
    assert len(rest) == len(first) - 1
    for (x, ys), (x0, ys0) in zip(rest, first[1:], strict=True):
        assert all(torch.equal(a, b) for a, b in zip(x, x0, strict=True))
        assert [y["image_id"] for y in ys] == [y["image_id"] for y in ys0]
        assert all(torch.equal(y["boxes"], y0["boxes"]) for y, y0 in zip(ys, ys0, strict=True))


@pytest.mark.parametrize("kind", ["torch", "dali-cpu"])
def test_padding_to_one_size_gives_one_tensor_and_a_multiple_rounds_each_image_up(
    kind: str, objects: Path
) -> None:
    with make(kind, objects, *OWN_SIZES, "augment.train.crop.pad_to=192") as loader:
        images, targets = next(iter(loader))
        assert isinstance(images, torch.Tensor) and images.shape[1:] == (3, 192, 192)
        assert all(tuple(t["boxes"].canvas_size) == (192, 192) for t in targets)
    with make(kind, objects, *OWN_SIZES, "augment.train.crop.pad_multiple=32") as loader:
        images, _ = next(iter(loader))
        assert all(x.shape[1] % 32 == 0 and x.shape[2] % 32 == 0 for x in images)
