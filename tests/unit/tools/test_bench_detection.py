"""``bench`` on data with boxes: the torchvision detection baseline (``CocoDetection``
wrapped for v2, the split's transforms, the reference's collate) and DALI's SSD example
as ``dali-raw`` yield what dali_pipes' loaders yield (images of the split's size, one
target per image with boxes inside it), and ``bench`` reports them side by side. No test
asserts a speed."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from omegaconf import DictConfig

from dali_pipes import compose_config
from dali_pipes.backends.specs import DaliBackend
from dali_pipes.config.specs import loader_spec
from dali_pipes.data.coco import CocoSource
from dali_pipes.data.sample_objects import ensure_sample_objects
from dali_pipes.errors import DaliPipesError
from dali_pipes.tools.bench import run_bench
from dali_pipes.tools.bench_detection import detection_baseline
from dali_pipes.tools.ssd_example import SsdExampleLoader

SSD = ("augment=ssd", "augment.train.crop.size=96")


@pytest.fixture(scope="module")
def objects(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ensure_sample_objects(str(tmp_path_factory.mktemp("objects")), 24, 8)


def config(root: Path, *overrides: str) -> DictConfig:
    return compose_config(["data=coco", f"data.root={root}", "data.batch_size=8", *SSD, *overrides])


def check(images: torch.Tensor, targets: list[dict[str, torch.Tensor]]) -> None:
    assert images.shape == (8, 3, 96, 96) and images.dtype == torch.float32
    assert len(targets) == 8
    for target in targets:
        boxes = target["boxes"]
        assert boxes.shape[1:] == (4,) and len(boxes) == len(target["labels"])
        assert (boxes >= -1e-3).all() and (boxes <= 96 + 1e-3).all()
        assert (boxes[:, 2:] > boxes[:, :2]).all()


def test_the_torchvision_detection_baseline_gives_a_target_per_image(objects: Path) -> None:
    spec = loader_spec(config(objects), "train")
    assert isinstance(spec.source, CocoSource)
    epoch = detection_baseline(spec.source, spec.augment, 8, 0, False)
    images, targets = next(iter(epoch()))
    check(images, targets)


def test_dalis_ssd_example_gives_images_and_each_images_boxes(objects: Path) -> None:
    spec = loader_spec(config(objects), "train")
    with SsdExampleLoader(spec, DaliBackend(device="cpu", num_threads=1), None) as loader:
        images, targets = next(iter(loader))
        assert "no zoom out" in loader.note
    check(images, targets)


def test_bench_reports_the_detection_loaders_beside_their_baseline_and_peer(
    objects: Path, tmp_path: Path
) -> None:
    cfg = compose_config(
        [
            "data=coco",
            f"data.root={objects}",
            "data.batch_size=8",
            *SSD,
            "backend.num_threads=1",
            "bench.repeats=1",
            "bench.warmup_images=8",
            "bench.min_images=16",
            "bench.workers=0",
            "bench.candidates=[baseline,dali-cpu,dali-raw]",
            f"bench.out={tmp_path / 'bench.json'}",
        ],
        config_name="bench",
    )
    rows = {r["name"]: r for r in run_bench(cfg)["results"]}
    assert all(rows[name]["images_per_s_median"] > 0 for name in rows)
    assert "SSD example" in rows["dali-raw"]["note"]


def test_dali_raw_on_boxes_needs_the_ssd_crop_and_says_so_before_measuring(
    objects: Path, tmp_path: Path
) -> None:
    cfg = compose_config(
        [
            "data=coco",
            f"data.root={objects}",
            "augment=small",
            "bench.candidates=[dali-cpu,dali-raw]",
            f"bench.out={tmp_path / 'bench.json'}",
        ],
        config_name="bench",
    )
    with pytest.raises(DaliPipesError, match="augment=ssd; leave dali-raw"):
        run_bench(cfg)
    assert not (tmp_path / "bench.json").exists()
