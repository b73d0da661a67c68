"""Segmentation batches keep torchvision's segmentation references' contract: ``(images,
masks)``, images ``[N, 3, H, W]``, masks int64 ``[N, H, W]`` on the images' device, every
mask pixel a class or the ignore index where a crop padded; the backends give the same
masks from the same draw; epochs, resume and rank shards behave as for classification."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import gpu

from dali_pipes import compose_config
from dali_pipes.backends import create_loader
from dali_pipes.backends.base import Loader
from dali_pipes.backends.dali.loader import DaliLoader
from dali_pipes.backends.handover import pixels
from dali_pipes.config.specs import loader_spec
from dali_pipes.data.sample_objects import ensure_sample_segmentation
from dali_pipes.selfcheck.bounds import COLOR_JITTER

KINDS = ["torch", "dali-cpu", "dali-twin", pytest.param("dali-gpu", marks=gpu)]
BATCH = 6
#: A crop that pads (past the image, masks are the ignore index), a flip, a colour op.
PADDED = {"op": "random_crop", "size": [96, 128], "padding": 24, "pad_if_needed": True}
JITTER = "+augment.train.ops.color_jitter={brightness: 0.3}"


@pytest.fixture(scope="module")
def masks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(tmp_path_factory.mktemp("segmentation"))


def make(
    kind: str,
    root: Path,
    *extra: str,
    split: str = "train",
    rank: int = 0,
    world: int = 1,
    crop: dict[str, Any] | None = None,
) -> Loader:
    backend = {
        "torch": ["backend=torch", "backend.num_workers=0"],
        "dali-cpu": ["backend=dali", "backend.device=cpu"],
        "dali-twin": ["backend=dali", "backend.device=cpu"],
        "dali-gpu": ["backend=dali", "backend.device=gpu"],
    }[kind]
    cfg = compose_config(
        [
            "data=sample_segmentation",
            f"data.root={root}",
            "data.train_images=24",
            "data.val_images=8",
            f"data.batch_size={BATCH}",
            "augment=small",
            *backend,
            *extra,
        ]
    )
    spec = loader_spec(cfg, split, rank=rank, world_size=world)
    if crop is not None:  # a crop of another kind than the preset's
        train = replace(spec.augment.train, crop=crop)
        spec = replace(spec, augment=replace(spec.augment, train=train))
    if kind == "dali-twin":  # the GPU's graph, every operator on the CPU
        return DaliLoader(spec, twin=True)
    return create_loader(spec)


def epoch(loader: Loader, number: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    loader.set_epoch(number)
    return [(x.clone(), y.clone()) for x, y in loader]


def same(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(
        torch.equal(x, x0) and torch.equal(y, y0) for (x, y), (x0, y0) in zip(a, b, strict=True)
    )


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("split", ["train", "val"])
def test_batches_are_images_and_their_masks_as_one_int64_tensor(
    kind: str, split: str, masks: Path
) -> None:
    with make(kind, masks, split=split) as loader:
        device = loader.device
        for images, batch_masks in loader:
            assert images.shape[1:] == (3, 64, 64) and images.device == device
            assert batch_masks.dtype == torch.int64 and batch_masks.device == device
            assert batch_masks.shape == (len(images), 64, 64)
            assert set(batch_masks.unique().tolist()) <= {0, 1, 2, 3, 4}


#: The padded random crop with a colour op, and the ``seg`` preset at a smaller size.
SEG = ("augment=seg", "augment.train.crop.size=160", "augment.train.crop.min_size=100",
       "augment.train.crop.max_size=300")  # fmt: skip
PARITY = {"random_crop": ((JITTER,), PADDED, (96, 128)), "seg": (SEG, None, (160, 160))}


@pytest.mark.parametrize("kind", ["dali-cpu", "dali-twin"])
@pytest.mark.parametrize("case", list(PARITY))
def test_dali_masks_are_the_torch_backends_and_padding_is_the_ignore_index(
    kind: str, case: str, masks: Path
) -> None:
    extra, crop, size = PARITY[case]
    with (
        make("torch", masks, *extra, crop=crop) as reference,
        make(kind, masks, *extra, crop=crop) as loader,
    ):
        want, got = epoch(reference, 2), epoch(loader, 2)
        augment = loader.spec.augment
    ignored = 0
    for (x0, y0), (x, y) in zip(want, got, strict=True):
        assert y.shape == (len(y), *size)
        difference = (pixels(x, augment).float() - pixels(x0, augment).float()).abs()
        assert difference.max().item() <= COLOR_JITTER.max
        assert (y == y0).float().mean().item() >= 0.99
        ignored += int((y == 255).sum())
        assert set(y.unique().tolist()) <= {0, 1, 2, 3, 4, 255}
    assert ignored > 0  # some crops padded


@pytest.mark.parametrize("kind", KINDS)
def test_set_epoch_resume_and_rank_shards_follow_the_sampler(kind: str, masks: Path) -> None:
    with make(kind, masks) as loader:
        first = epoch(loader, 3)
        assert same(epoch(loader, 3), first) and not same(epoch(loader, 4), first)
        loader.set_epoch(3)
        batches = iter(loader)
        next(batches)
        state = loader.state_dict()
        del batches
    with make(kind, masks) as resumed:
        resumed.load_state_dict(state)
        assert same([(x, y) for x, y in resumed], first[1:])
    counts = []
    for rank in (0, 1):
        with make(kind, masks, rank=rank, world=2) as part:
            counts.append(sum(len(y) for _, y in epoch(part, 3)))
    assert counts == [12, 12]


def test_the_sample_masks_are_their_objects_classes(masks: Path) -> None:
    root = ensure_sample_segmentation(str(masks), 24, 8)
    assert sorted(p.name for p in root.iterdir()) == ["README.txt", "images", "masks"]
    assert len(list((root / "masks" / "val").glob("*.png"))) == 8
