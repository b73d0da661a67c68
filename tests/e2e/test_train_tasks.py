"""``python -m dali_pipes.train task=detection|segmentation``: every listed model builds
(untrained, nothing downloaded), trains a step and is evaluated on the sample data on the
CPU, its epoch row holding the task's figures (COCO mAP; mean IoU and pixel accuracy)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from dali_pipes import compose_config
from dali_pipes.train.run import train

pytest.importorskip("pycocotools")

slow = pytest.mark.slow
#: torchvision's detectors resize every image to ``min_size`` (800 by default): smaller
#: here, so a step of a ResNet-50 detector takes seconds on two cores.
SMALL_INPUT = ["+model.arch.min_size=160", "+model.arch.max_size=256"]
DETECTORS = {
    "small_detector": [],
    "fasterrcnn_mobilenet_v3_large_fpn": SMALL_INPUT,
    "ssdlite320_mobilenet_v3_large": [],
    "fasterrcnn_resnet50_fpn": SMALL_INPUT,
    "retinanet_resnet50_fpn_v2": SMALL_INPUT,
    "maskrcnn_resnet50_fpn": [*SMALL_INPUT, "data.masks=true"],
}
HEAVY = {"fasterrcnn_resnet50_fpn", "retinanet_resnet50_fpn_v2", "maskrcnn_resnet50_fpn"}
SEGMENTERS = ["small_segmenter", "lraspp_mobilenet_v3_large", "deeplabv3_mobilenet_v3_large"]


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sample")


def one_step(task: str, model: str, root: Path, out: Path, *extra: str) -> dict[str, Any]:
    """One training step and one evaluation of ``model`` on a few sample images."""
    return train(
        compose_config(
            [
                f"task={task}",
                f"model={model}",
                f"data.root={root}",
                "data.train_images=4",
                "data.val_images=2",
                "data.batch_size=2",
                "trainer.epochs=1",
                "trainer.max_steps_per_epoch=1",
                "backend.num_threads=1",
                f"output_dir={out}",
                *extra,
            ]
        )
    )


@pytest.mark.parametrize(
    "model", [pytest.param(m, marks=slow) if m in HEAVY else m for m in DETECTORS]
)
def test_each_detector_trains_a_step_and_is_scored_by_coco_map(
    model: str, data_root: Path, tmp_path: Path
) -> None:
    row = one_step("detection", model, data_root, tmp_path, *DETECTORS[model])
    assert math.isfinite(row["train_loss"]) and row["train_loss"] > 0
    assert 0.0 <= row["val_map"] <= row["val_map50"] <= 1.0
    assert "val_top1" not in row and "train_top1" not in row
    if model == "maskrcnn_resnet50_fpn":
        assert 0.0 <= row["val_mask_map"] <= 1.0
    last = (tmp_path / "train.log").read_text().splitlines()[-1]
    assert "done: 1 epochs | val_map " in last


@pytest.mark.parametrize("model", [*SEGMENTERS, pytest.param("fcn_resnet50", marks=slow)])
def test_each_segmenter_trains_a_step_and_is_scored_by_mean_iou(
    model: str, data_root: Path, tmp_path: Path
) -> None:
    row = one_step("segmentation", model, data_root, tmp_path)
    assert math.isfinite(row["train_loss"]) and 0.0 <= row["train_pixel_acc"] <= 1.0
    assert math.isfinite(row["val_loss"])
    assert 0.0 <= row["val_miou"] <= 1.0 and 0.0 <= row["val_pixel_acc"] <= 1.0
    last = (tmp_path / "train.log").read_text().splitlines()[-1]
    assert "done: 1 epochs | val_miou " in last
