"""Detection batches agree across backends from the same draw: DALI on the CPU (and the
GPU's graph realised on the CPU) against the torch backend, the parity reference built on
torchvision's kernels: boxes within 1 px, instance masks on at least 99 % of their pixels,
images within the bound of the split's ops (the crops' alone: the classification bound),
for crops and flips with colour ops and for the ``ssd`` and ``lsj`` presets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from dali_pipes import build_loader, compose_config
from dali_pipes.augment.spec import AugmentSpec
from dali_pipes.backends.dali.loader import DaliLoader
from dali_pipes.backends.handover import pixels
from dali_pipes.config.specs import loader_spec, to_spec
from dali_pipes.data.sample_objects import ensure_sample_objects
from dali_pipes.selfcheck.bounds import DALI_CPU_VS_TORCH, pipeline_bound

OPS = [
    "+augment.train.ops.vflip={p: 0.5}",
    "+augment.train.ops.color_jitter={brightness: 0.3, contrast: 0.3, saturation: 0.3}",
]
#: (preset, split): the overrides and the images' bound.
CASES = {
    ("small", "train"): (OPS, DALI_CPU_VS_TORCH),
    ("small", "val"): ([], DALI_CPU_VS_TORCH),
    ("ssd", "train"): ([], pipeline_bound(["photometric_distort", "hflip"])),
    ("lsj", "train"): (["augment.train.crop.size=256"], DALI_CPU_VS_TORCH),
    # SSD's distortion on the whole image before the crop, as torchvision's reference
    ("ssd-before", "train"): (
        [
            "augment.train.ops.photometric_distort=null",
            "+augment.train.before.photometric_distort={p: 0.5}",
        ],
        pipeline_bound(["photometric_distort", "hflip"]),
    ),
    # images of their own sizes (a list per batch), the crop branch half the time
    ("detr", "train"): (["augment.train.crop.pad_multiple=32"], DALI_CPU_VS_TORCH),
    ("detr", "val"): ([], DALI_CPU_VS_TORCH),
    # torchvision's reference default: each image whole, flipped; padded to a stride
    ("hflip", "train"): (["augment.train.crop.pad_multiple=32", *OPS], DALI_CPU_VS_TORCH),
}
_TORCH: dict[tuple[str, str], tuple[list[Any], AugmentSpec]] = {}


@pytest.fixture(scope="module")
def objects(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ensure_sample_objects(str(tmp_path_factory.mktemp("objects")), 30, 12)


def batches(kind: str, root: Path, preset: str, split: str) -> tuple[list[Any], AugmentSpec]:
    if kind == "torch" and (preset, split) in _TORCH:
        return _TORCH[preset, split]
    backend = ["backend=torch", "backend.num_workers=0"] if kind == "torch" else ["backend=dali"]
    cfg = compose_config(
        [
            "data=coco",
            f"data.root={root}",
            "data.masks=true",
            "data.batch_size=8",
            f"augment={preset.split('-')[0]}",
            "backend.device=cpu",
            *backend,
            *CASES[preset, split][0],
        ]
    )
    if kind == "dali-twin":
        loader: Any = DaliLoader(loader_spec(cfg, split), twin=True)
    else:
        loader = build_loader(cfg, split)
    with loader:
        loader.set_epoch(2)
        made = [(x, y) for x, y in loader], to_spec(cfg.augment, AugmentSpec)
    if kind == "torch":
        _TORCH[preset, split] = made
    return made


def frames(images: Any) -> list[torch.Tensor]:
    """A batch's images as ``[N, 3, H, W]`` tensors: itself, or each image of a list of
    images of their own sizes as a batch of one."""
    return [image[None] for image in images] if isinstance(images, list) else [images]


@pytest.mark.parametrize("kind", ["dali-cpu", "dali-twin"])
@pytest.mark.parametrize("case", list(CASES), ids=[f"{p}-{s}" for p, s in CASES])
def test_dali_boxes_masks_and_images_equal_the_torch_backends(
    kind: str, case: tuple[str, str], objects: Path
) -> None:
    got, augment = batches(kind, objects, *case)
    want, _ = batches("torch", objects, *case)
    bound = CASES[case][1]
    assert bound is not None
    assert len(got) == len(want)
    diff, objects_seen = [], 0
    for (x, ys), (x0, ys0) in zip(got, want, strict=True):
        assert type(x) is type(x0)
        for image, image0 in zip(frames(x), frames(x0), strict=True):
            a, b = pixels(image, augment).float(), pixels(image0, augment).float()
            assert a.shape == b.shape
            diff.append((a - b).abs())
        for y, y0 in zip(ys, ys0, strict=True):
            assert y["image_id"] == y0["image_id"]
            assert torch.equal(y["labels"], y0["labels"]), f"image {y['image_id']}"
            assert y["boxes"].shape == y0["boxes"].shape, f"image {y['image_id']}"
            assert torch.allclose(y["boxes"], y0["boxes"], atol=1.0, rtol=0)
            if len(y0["masks"]):
                agree = (y["masks"] == y0["masks"]).float().mean().item()
                assert agree >= 0.99, f"image {y['image_id']}: masks agree on {agree:.4f}"
            objects_seen += len(y0["labels"])
    every = torch.cat([d.flatten() for d in diff])
    assert every.mean().item() <= bound.mean
    assert every.max().item() <= bound.max
    assert objects_seen >= 10
