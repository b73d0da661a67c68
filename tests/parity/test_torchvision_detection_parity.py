"""torchvision's SSD reference pipeline given to ``DALIIterator(CocoDetection(...))`` gives
the batches torchvision's own DataLoader gives, within the bounds of the torch backend.

The reference is torchvision as its detection reference runs it (``references/detection``,
``--data-augmentation ssd --use-v2``): ``wrap_dataset_for_transforms_v2(CocoDetection(root,
annFile, transforms=...))`` with the reference's transforms (photometric distortion on the
whole image, zoom out with the reference's fill, IoU crop, flip, ``ToDtype``,
``SanitizeBoundingBoxes``), in a ``DataLoader`` with the reference's collate. Its random
choices are each sample's (seed, epoch, sample) draws, given to torchvision's transforms in
place of their own (``make_params``), so torchvision's kernels realise the very samples the
loader makes: images within the photometric distortion's bound, boxes within 1 px, the
same labels, masks agreeing on at least 99 % of their pixels. Images without objects are
left out of the dataset, as the reference leaves them out of training.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torchvision import tv_tensors
from torchvision.datasets import CocoDetection, wrap_dataset_for_transforms_v2
from torchvision.transforms import v2 as T

from dali_pipes import DALIIterator
from dali_pipes.augment.keyed import uniforms
from dali_pipes.augment.ops.iou_crop import IoUCrop
from dali_pipes.augment.pipeline import Pipeline
from dali_pipes.augment.targets.boxes import Boxes
from dali_pipes.data.sample_objects import ensure_sample_objects
from dali_pipes.selfcheck.bounds import figures, pipeline_bound

pytest.importorskip("pycocotools")

BATCH = 8
SEED, EPOCH = 5, 3
MEAN = (123.0, 117.0, 104.0)  # the reference's fill: a defaultdict torchvision looks up with `in`


def reference_transforms(backend: str) -> T.Compose:
    """``DetectionPresetTrain(data_augmentation="ssd", backend=backend, use_v2=True)``."""
    fill = defaultdict(lambda: MEAN, {tv_tensors.Mask: 0})
    head = [T.ToImage()] if backend == "tv_tensor" else []
    tail = [T.ToImage()] if backend == "pil" else []
    return T.Compose(
        [
            *head,
            T.RandomPhotometricDistort(),
            T.RandomZoomOut(fill=fill),
            T.RandomIoUCrop(),
            T.RandomHorizontalFlip(p=0.5),
            *tail,
            T.ToDtype(torch.float, scale=True),
            T.ConvertBoundingBoxFormat(tv_tensors.BoundingBoxFormat.XYXY),
            T.SanitizeBoundingBoxes(),
            T.ToPureTensor(),
        ]
    )


def coco(root: Path, backend: str, masks: bool) -> Any:
    """The reference's dataset: CocoDetection wrapped for v2, images with objects only."""
    keys = {"image_id", "boxes", "labels", *(["masks"] if masks else [])}
    dataset = CocoDetection(
        str(root / "train2017"),
        str(root / "annotations" / "instances_train2017.json"),
        transforms=reference_transforms(backend),
    )
    dataset.ids = [i for i in dataset.ids if dataset.coco.getAnnIds(imgIds=i)]
    return wrap_dataset_for_transforms_v2(dataset, target_keys=keys)


class Replayed(torch.utils.data.Dataset[Any]):
    """``dataset`` whose transforms make the random choices the loader drew for each sample
    (``pipeline`` at ``SEED``, ``EPOCH``), by replacing their ``make_params``."""

    def __init__(self, dataset: Any, pipeline: Pipeline) -> None:
        self.dataset, self.pipeline = dataset, pipeline
        steps = {type(t).__name__: t for t in dataset.transforms.transforms}
        self.distort = steps["RandomPhotometricDistort"]
        self.zoom, self.crop = steps["RandomZoomOut"], steps["RandomIoUCrop"]
        self.flip = steps["RandomHorizontalFlip"]

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> Any:
        inner = self.dataset._dataset
        info = inner.coco.imgs[inner.ids[index]]
        h, w = int(info["height"]), int(info["width"])
        xywh = np.array([a["bbox"] for a in inner.coco.imgToAnns[inner.ids[index]]], np.float64)
        xyxy = np.concatenate([xywh[:, :2], xywh[:, :2] + xywh[:, 2:]], axis=1)
        boxes = Boxes.of_samples([(xyxy, np.ones(len(xyxy)))])
        pipeline = self.pipeline
        draw = pipeline.draw([(h, w)], [index], SEED, EPOCH, boxes=boxes)
        crop = pipeline.crop
        assert isinstance(crop, IoUCrop)
        u = uniforms(SEED, EPOCH, np.array([index]), crop.draws(), 0)[0]
        zoom, iou = crop.plans
        left, top, cw, ch = zoom.canvas((h, w), u[:4])
        self.zoom.p = 1.0 if (cw, ch) != (w, h) else 0.0
        padding = [left, top, cw - w - left, ch - h - top]
        self.zoom.make_params = lambda _: {"padding": padding}
        shifted = xyxy + np.array([left, top, left, top])
        x, y, nw, nh = (int(v) for v in iou.choose((cw, ch), shifted, u[4:]))
        cx, cy = shifted[:, [0, 2]].mean(1), shifted[:, [1, 3]].mean(1)
        within = torch.from_numpy((x < cx) & (cx < x + nw) & (y < cy) & (cy < y + nh))
        chosen = {"top": y, "left": x, "height": nh, "width": nw, "is_within_crop_area": within}
        self.crop.make_params = lambda _: {} if (nw, nh) == (cw, ch) else chosen
        flip_at = next(k for k, op in enumerate(pipeline.ops) if op.name == "hflip")
        self.flip.p = float(draw.row(flip_at, 0)["flip"])
        distort = draw.row(len(pipeline.ops), 0)  # the op before the crop draws last
        self.distort.make_params = lambda _: photometric_params(distort)
        return self.dataset[index]


def photometric_params(row: dict[str, Any]) -> dict[str, Any]:
    """torchvision's ``RandomPhotometricDistort`` parameters of a drawn row."""
    steps = [int(row[f"at{k}"]) for k in range(4)]
    parts = ("brightness", "contrast", "saturation", "hue")
    params: dict[str, Any] = {
        f"{part}_factor": float(row[part]) if k in steps else None for k, part in enumerate(parts)
    }
    params["contrast_before"] = steps[1] == 1  # the steps' order when contrast comes first
    perm = [int(c) for c in row["permutation"]]
    params["channel_permutation"] = torch.tensor(perm) if perm != [0, 1, 2] else None
    return params


@pytest.fixture(scope="module")
def objects(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ensure_sample_objects(str(tmp_path_factory.mktemp("objects")), 40, 4)


@pytest.mark.parametrize(
    ("backend", "masks"),
    [("tv_tensor", False), ("tv_tensor", True), ("pil", False)],
    ids=["tv_tensor-boxes", "tv_tensor-masks", "pil-boxes"],
)
def test_the_ssd_reference_pipeline_gives_torchvisions_dataloader_batches(
    backend: str, masks: bool, objects: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    loader = DALIIterator(
        coco(objects, backend, masks), batch_size=BATCH, device="cpu", shuffle=False, seed=SEED
    )
    pipeline = loader.spec.augment.pipeline(True)
    assert [op.name for op in pipeline.before] == ["photometric_distort"]
    reference = torch.utils.data.DataLoader(
        Replayed(coco(objects, backend, masks), pipeline),
        batch_size=BATCH,
        collate_fn=lambda batch: tuple(zip(*batch, strict=True)),
    )
    bound = pipeline_bound(["photometric_distort", "hflip"])
    assert bound is not None
    dataset = coco(objects, backend, masks)._dataset
    sizes = {
        i: (dataset.coco.imgs[i]["height"], dataset.coco.imgs[i]["width"]) for i in dataset.ids
    }
    diffs, seen, changed = [], 0, 0
    with loader:
        loader.set_epoch(EPOCH)
        for (images, targets), (their_images, their_targets) in zip(loader, reference, strict=True):
            assert isinstance(images, list) and len(images) == len(their_images)
            for image, theirs, target, want in zip(
                images, their_images, targets, their_targets, strict=True
            ):
                assert image.shape == theirs.shape, f"image {want['image_id']}"
                diffs.append((image * 255 - theirs * 255).abs().flatten())
                assert target["image_id"] == want["image_id"]
                assert torch.equal(target["labels"], want["labels"])
                assert torch.allclose(target["boxes"], want["boxes"].float(), atol=1.0, rtol=0)
                if masks and len(want["labels"]):
                    agree = (target["masks"] == want["masks"]).float().mean().item()
                    assert agree >= 0.99, f"image {want['image_id']}: masks agree {agree:.4f}"
                seen += len(want["labels"])
                changed += int(tuple(image.shape[-2:]) != sizes[want["image_id"]])
    measured = figures(torch.cat(diffs), torch.zeros(1))
    with capsys.disabled():
        print(f"\nSSD reference ({backend}) vs DALIIterator(CocoDetection): {measured}")
    assert bound.admits(measured), f"{measured} exceeds {bound}"
    assert seen >= 40 and changed >= 10  # zoomed out or cropped
