"""python -m dali_pipes.show on data with boxes: each sample's objects drawn over it (masks
tinted, boxes outlined) and counted under it on every backend, the difference column
saying how far the backends' boxes are apart, and a run's step replayed with the objects
that batch held; on segmentation data each sample's mask tinted over it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers.png import check_png
from omegaconf import OmegaConf

from dali_pipes import build_loader, compose_config
from dali_pipes.data.sample_objects import ensure_sample_objects
from dali_pipes.tools.overlay import classes_caption, objects_caption, overlay, overlay_classes
from dali_pipes.tools.show import run_show

TILE = 64


@pytest.fixture(scope="module")
def objects(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ensure_sample_objects(str(tmp_path_factory.mktemp("objects")), 16, 8)


def data(root: Path) -> list[str]:
    return ["data=coco", f"data.root={root}", "data.masks=true", "data.batch_size=4"]


def test_a_preview_draws_each_samples_objects_on_every_backend(
    objects: Path, tmp_path: Path
) -> None:
    out = tmp_path / "show.png"
    cfg = compose_config(
        [
            *data(objects),
            "augment=ssd",
            "augment.train.crop.size=64",
            "show.samples=4",
            f"show.tile={TILE}",
            "show.backends=[dali-cpu,torch]",
            f"show.out={out}",
            "backend.num_threads=1",
        ],
        config_name="show",
    )
    shown = run_show(cfg)["shown"]
    check_png(out, width=3 * (TILE + 6) + 6)
    dali, torch_ = shown
    assert len(dali.labels) == 4 and all(isinstance(t, dict) for t in dali.labels)
    for a, b in zip(dali.labels, torch_.labels, strict=True):
        assert torch.allclose(a["boxes"], b["boxes"], atol=1.0)
        assert a["boxes"].device.type == "cpu" and a["masks"].device.type == "cpu"


def test_a_preview_of_images_of_their_own_sizes_draws_each_at_its_own_aspect(
    objects: Path, tmp_path: Path
) -> None:
    out = tmp_path / "show.png"
    sides = ["augment.train.crop.min_size=[96,128]", "augment.train.crop.max_size=192"]
    cfg = compose_config(
        [
            *data(objects),
            "augment=detr",
            *sides,
            "show.samples=4",
            f"show.tile={TILE}",
            "show.backends=[dali-cpu,torch]",
            f"show.out={out}",
        ],
        config_name="show",
    )
    dali, torch_ = run_show(cfg)["shown"]
    check_png(out, width=3 * (TILE + 6) + 6)
    assert isinstance(dali.images, list) and len({tuple(x.shape) for x in dali.images}) > 1
    for a, b, target in zip(dali.images, torch_.images, dali.labels, strict=True):
        assert a.shape == b.shape and tuple(target["boxes"].canvas_size) == a.shape[-2:]


def test_an_objects_mask_is_tinted_and_its_box_outlined_in_its_classs_colour() -> None:
    image = torch.full((3, 40, 60), 128, dtype=torch.uint8)
    masks = torch.zeros((1, 40, 60), dtype=torch.uint8)
    masks[0, 10:20, 20:40] = 1
    target = {
        "boxes": torch.tensor([[20.0, 10.0, 40.0, 20.0]]),
        "labels": torch.tensor([2]),
        "masks": masks,
    }
    drawn = overlay(image, target, ("__background__", "square", "circle"))
    assert not torch.equal(drawn[:, 14, 30], image[:, 14, 30])  # inside the mask: tinted
    assert torch.equal(drawn[:, 35, 5], image[:, 35, 5])  # far from the object: untouched
    assert not torch.equal(drawn[:, 10, 30], image[:, 10, 30])  # on the box's top edge
    assert objects_caption(target, ("__background__", "square", "circle")) == "1 circle"
    assert objects_caption({"labels": torch.zeros(0)}, ()) == "no objects"


def test_show_replays_a_steps_batch_with_its_objects(objects: Path, tmp_path: Path) -> None:
    saved = compose_config([*data(objects), "augment=ssd", "trainer=quick", "trainer.epochs=2"])
    OmegaConf.save(saved, tmp_path / "config.yaml")
    (tmp_path / "run.json").write_text('{"world_size": 1, "batches_per_epoch": 4}')
    cfg = compose_config(
        [
            f"show.run={tmp_path}",
            "show.step=5",  # epoch 1, batch 1
            "show.backends=[dali-cpu]",
            f"show.tile={TILE}",
            f"show.out={tmp_path / 'step.png'}",
        ],
        config_name="show",
    )
    (replayed,) = run_show(cfg)["shown"]
    with build_loader(saved, "train") as loader:
        loader.set_epoch(1)
        batches = iter(loader)
        next(batches)
        _, targets = next(batches)
    assert [t["image_id"] for t in targets] == [t["image_id"] for t in replayed.labels]
    for want, got in zip(targets, replayed.labels, strict=True):
        assert torch.equal(want["boxes"], got["boxes"]) and torch.equal(want["masks"], got["masks"])


def test_a_preview_tints_each_samples_segmentation_mask(tmp_path: Path) -> None:
    out = tmp_path / "seg.png"
    cfg = compose_config(
        [
            "data=sample_segmentation",
            f"data.root={tmp_path}",
            "data.train_images=8",
            "data.val_images=4",
            "augment=seg",
            "augment.train.crop.size=64",
            "show.samples=4",
            f"show.tile={TILE}",
            "show.backends=[dali-cpu,torch]",
            f"show.out={out}",
            "backend.num_threads=1",
        ],
        config_name="show",
    )
    dali, torch_ = run_show(cfg)["shown"]
    check_png(out, width=3 * (TILE + 6) + 6)
    assert dali.labels.shape == (4, 64, 64) and torch.equal(dali.labels, torch_.labels)
    image = torch.full((3, 8, 8), 100, dtype=torch.uint8)
    mask = torch.zeros((8, 8), dtype=torch.int64)
    mask[2:4, 2:4], mask[6:, 6:] = 3, 255
    drawn = overlay_classes(image, mask)
    assert not torch.equal(drawn[:, 2, 2], image[:, 2, 2])  # class 3: tinted
    assert torch.equal(drawn[:, 0, 0], image[:, 0, 0])  # the background: untouched
    assert classes_caption(mask) == "classes 3, padded"
