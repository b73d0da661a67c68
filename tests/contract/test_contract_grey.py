"""The batch contract for one-channel batches (torchvision's ``Grayscale()``), on every backend.

A loader whose ``augment.torchvision`` ends with one channel yields ``[N, 1, H, W]``
batches of the configured dtype and memory format, with torchvision's values and
ImageFolder's labels: each backend's validation epoch is compared, batch by batch, with
``DataLoader(ImageFolder(root, transform))`` over the same tree (within the crop's
parity bound), and ``pixels`` (what ``show`` and the metrics draw) gives the grey levels
back. The training split draws its crops; it is checked for shape, length and labels.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import torchvision.transforms.v2 as V
from conftest import gpu
from helpers.identity import RESIZE, SIZE
from torchvision.datasets import ImageFolder

from dali_pipes import build_loader, compose_config
from dali_pipes.backends.handover import pixels
from dali_pipes.selfcheck.bounds import DALI_CPU_VS_TORCH, figures

KINDS = [
    "torch",
    "dali-cpu",
    "cache-ram",
    "synthetic",
    pytest.param("dali-gpu", marks=gpu),
    pytest.param("torch-gpu", marks=gpu),
]
TV = "torchvision.transforms.v2"
FLOAT32 = "{_target_: hydra.utils.get_object, path: torch.float32}"
GREY_MEAN, GREY_STD = 0.449, 0.226


def grey(head: str) -> str:
    """A transform by ``_target_``s: ``head``, ``Grayscale()``, [0, 1] floats, Normalize."""
    return (
        f"{{_target_: {TV}.Compose, transforms: [{head}, {{_target_: {TV}.Grayscale}}, "
        f"{{_target_: {TV}.PILToTensor}}, {{_target_: {TV}.ToDtype, dtype: {FLOAT32}, "
        f"scale: true}}, {{_target_: {TV}.Normalize, mean: [{GREY_MEAN}], std: [{GREY_STD}]}}]}}"
    )


TRAIN = grey(f"{{_target_: {TV}.RandomResizedCrop, size: {SIZE}}}")
VAL = grey(
    f"{{_target_: {TV}.Resize, size: {RESIZE}}}, {{_target_: {TV}.CenterCrop, size: {SIZE}}}"
)
REFERENCE = V.Compose(
    [
        V.Resize(RESIZE),
        V.CenterCrop(SIZE),
        V.Grayscale(),
        V.PILToTensor(),
        V.ToDtype(torch.float32, scale=True),
        V.Normalize([GREY_MEAN], [GREY_STD]),
    ]
)


def make(kind: str, root: Path, split: str, *extra: str) -> Any:
    backend = {"cache-ram": "torch"}.get(kind, kind.split("-")[0])
    device = "gpu" if kind.endswith("gpu") else "cpu"
    overrides = [
        "data=folder",
        f"data.root={root}",
        "data.batch_size=4",
        f"backend={backend}",
        f"backend.device={device}",
        f"augment.torchvision.train={TRAIN}",
        f"augment.torchvision.val={VAL}",
        *(["backend.num_workers=1"] if backend == "torch" else []),
        *(["data.cache=ram"] if kind == "cache-ram" else []),
        *extra,
    ]
    return build_loader(compose_config(overrides), split)


@pytest.mark.parametrize("kind", KINDS)
def test_grey_batches_are_one_channel_images_with_torchvisions_values(
    kind: str, identity_tree: Path
) -> None:
    with make(kind, identity_tree, "val") as loader:
        ours = list(loader)
    assert len(ours) == len(loader)
    expected = "cuda" if kind.endswith("gpu") else "cpu"
    for images, labels in ours:
        assert images.shape[1:] == (1, SIZE, SIZE) and images.dtype == torch.float32
        assert images.device.type == expected and labels.dtype == torch.int64
    if kind == "synthetic":
        return
    dataset = ImageFolder(str(identity_tree), REFERENCE)
    theirs = list(torch.utils.data.DataLoader(dataset, batch_size=4))
    assert len(theirs) == len(ours)
    augment = loader.spec.augment
    for (images, labels), (their_images, their_labels) in zip(ours, theirs, strict=True):
        assert torch.equal(labels.cpu(), their_labels)
        seen, expected_pixels = pixels(images, augment), pixels(their_images, augment)
        assert seen.shape == (len(labels), 1, SIZE, SIZE)
        assert DALI_CPU_VS_TORCH.admits(figures(seen.float(), expected_pixels.float()))


@pytest.mark.parametrize("kind", ["torch", "dali-cpu", pytest.param("dali-gpu", marks=gpu)])
def test_grey_training_batches_follow_the_dtype_and_channels_last(
    kind: str, identity_tree: Path
) -> None:
    extra = ("augment.channels_last=true",)
    with make(kind, identity_tree, "train", *extra) as loader:
        batches = list(loader)
    assert len(batches) == len(loader)
    for images, _ in batches:
        assert images.shape[1:] == (1, SIZE, SIZE) and images.dtype == torch.float32
        assert images.is_contiguous(memory_format=torch.channels_last)
