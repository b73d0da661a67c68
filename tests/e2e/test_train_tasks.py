"""``python -m dali_pipes.train task=detection|segmentation``: every listed model builds
(untrained, nothing downloaded), trains a step and is evaluated on the sample data on the
CPU, its epoch row holding the task's figures (COCO mAP; mean IoU and pixel accuracy); a
run interrupted mid-epoch and resumed ends as the run never interrupted."""

from __future__ import annotations

import math
import signal
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers.runs import rows, run_cli, signal_mid_epoch
from helpers.warm import python

from dali_pipes import compose_config
from dali_pipes.train import checkpoints as checkpoint
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


@pytest.mark.parametrize(
    ("task", "model", "loader_layout"),
    [("detection", "small_detector", False), ("segmentation", "small_segmenter", True)],
)
def test_channels_last_as_on_a_gpu_trains_whether_or_not_the_loader_can_give_it(
    task: str, model: str, loader_layout: bool, data_root: Path, tmp_path: Path
) -> None:
    """``trainer.channels_last=on``, what ``auto`` picks on a GPU: a detector's images keep
    their own sizes (a list, which has no memory format), so its loader is not asked for
    channels_last and the model still is; a segmenter's batch is one tensor, asked for."""
    row = one_step(task, model, data_root, tmp_path, "trainer.channels_last=on")
    assert math.isfinite(row["train_loss"])
    assert ", channels_last;" in (tmp_path / "train.log").read_text()
    saved = (tmp_path / "config.yaml").read_text()
    assert f"channels_last: {str(loader_layout).lower()}" in saved


@pytest.mark.parametrize("task", ["detection", "segmentation"])
def test_doctor_measures_a_detector_or_segmenter_fed_and_on_a_replayed_batch(
    task: str, data_root: Path, tmp_path: Path
) -> None:
    """doctor's ceiling for data with boxes or masks is the loader's first batch replayed
    on the device (random pixels carry no targets); the fed rate is the task's own step."""
    from dali_pipes.tools.doctor import run_doctor
    from dali_pipes.tools.doctor_report import summary

    cfg = compose_config(
        [
            f"task={task}",
            f"data.root={data_root}",
            "data.train_images=4",
            "data.val_images=2",
            "data.batch_size=2",
            "doctor.steps=2",
            "doctor.warmup_steps=1",
            "doctor.tune=false",
            "doctor.placements=false",
            f"doctor.out_dir={tmp_path}",
        ],
        config_name="doctor",
    )
    report = run_doctor(cfg)
    assert report["ceiling_data"] == "one loader batch replayed"
    assert report["synthetic_images_per_s"] > 0 and report["loader_images_per_s"] > 0
    assert len(report["timeline"]) == 2 and 0 <= report["data_wait"] <= 1
    assert "one loader batch replayed: " in summary(report)


#: A short run of each task's default job: 8 steps an epoch, 2 epochs.
RESUMABLE = [
    "data.train_images=32",
    "data.val_images=4",
    "data.batch_size=4",
    "trainer.epochs=2",
    "backend.num_threads=1",
]


@pytest.mark.slow
@pytest.mark.parametrize("task", ["detection", "segmentation"])
def test_a_task_run_interrupted_mid_epoch_resumes_to_the_uninterrupted_weights_and_rows(
    task: str, data_root: Path, tmp_path: Path
) -> None:
    args = [f"task={task}", f"data.root={data_root}", *RESUMABLE]
    reference = tmp_path / "reference"  # the same run uninterrupted, trained in this process
    train(compose_config([f"output_dir={reference}", *args]))

    out = tmp_path / "interrupted"
    command = [python(), "-m", "dali_pipes.train", f"output_dir={out}", *args]
    returncode, stderr = signal_mid_epoch(command, out, signal.SIGINT, settle=0.5)
    assert returncode == 130, stderr[-2000:]
    stopped = checkpoint.latest(out / "checkpoints")
    assert stopped is not None and "interrupted_at_batch" in stopped.name, stderr[-2000:]

    resumed = run_cli([f"output_dir={out}", *args, "resume=auto"])
    assert "continuing at epoch 1 (batch " in resumed.stderr
    final = checkpoint.load(out / "checkpoints" / "epoch_0001.pt")
    want = checkpoint.load(reference / "checkpoints" / "epoch_0001.pt")
    for name, tensor in want["model"].items():
        assert torch.equal(final["model"][name], tensor), name
    got, exp = rows(out), rows(reference)
    assert [r["epoch"] for r in got] == ["0", "1"]
    figures = [k for k in exp[0] if k.startswith(("train_", "val_")) or k in ("samples", "lr")]
    for key in figures:
        assert [float(r[key]) for r in got] == pytest.approx(
            [float(r[key]) for r in exp], rel=1e-9
        ), key
