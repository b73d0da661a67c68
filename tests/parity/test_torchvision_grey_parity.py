"""torchvision's ``Grayscale()`` (one channel) on DALI (CPU) and the torch backend gives
torchvision's ``[N, 1, H, W]`` batches.

As in tests/parity/test_torchvision_parity.py (whose comparison this uses): the reference
is ``DataLoader(ImageFolder(root, transform))`` over the photos, compared batch by batch
(shape and dtype equal, labels equal) on the 0-255 scale. The deterministic pipelines
(float and uint8, v1 and v2, with a one-element ``Normalize``) must agree within the crop's
parity bound (PIL's grey conversion rounds where torchvision's tensor one truncates: a grey
level here and there, inside it); the colour ops after ``Grayscale()``, at p=1 with fixed
factors, within their op's bound on top. On every fourth photo at 56 px, to stay cheap.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import torchvision.transforms as T
import torchvision.transforms.v2 as V
from test_torchvision_parity import compare, every_fourth_photo

from dali_pipes.augment.from_torchvision import augment_spec
from dali_pipes.selfcheck.bounds import COLOR_JITTER, DALI_CPU_VS_TORCH, EXACT, Bound

GREY_MEAN, GREY_STD = [0.449], [0.226]
EVAL = [T.Resize(64), T.CenterCrop(56)]
FLOAT = V.ToDtype(torch.float32, scale=True)

#: (the steps after the crop, the op's bound): each ends with one-channel batches.
GREY: dict[str, tuple[list[Any], Bound]] = {
    "v1 Grayscale() ToTensor Normalize([m], [s])": (
        [T.Grayscale(), T.ToTensor(), T.Normalize(GREY_MEAN, GREY_STD)],
        EXACT,
    ),
    "v2 ToImage Grayscale() ToDtype Normalize([m], [s])": (
        [V.ToImage(), V.Grayscale(), FLOAT, V.Normalize(GREY_MEAN, GREY_STD)],
        EXACT,
    ),
    "v1 Grayscale(1) PILToTensor, uint8": ([T.Grayscale(1), T.PILToTensor()], EXACT),
    "v2 Grayscale() ToImage, uint8": ([V.Grayscale(), V.ToImage()], EXACT),
    "Grayscale() ColorJitter(brightness=(1.3, 1.3)) on a tensor": (
        [V.ToImage(), V.Grayscale(), V.ColorJitter(brightness=(1.3, 1.3))],
        COLOR_JITTER,
    ),
    "Grayscale() ColorJitter(contrast=(0.6, 0.6)) on a tensor": (
        [V.ToImage(), V.Grayscale(), V.ColorJitter(contrast=(0.6, 0.6))],
        COLOR_JITTER,
    ),
    "Grayscale() ColorJitter(saturation, hue) on a tensor (torchvision keeps the image)": (
        [V.ToImage(), V.Grayscale(), V.ColorJitter(saturation=(0.2, 0.2), hue=(0.3, 0.3))],
        EXACT,
    ),
    # saturation and hue drawn at random: torchvision keeps a grey image, so only the
    # contrast acts (two fixed factors would act in a random order)
    "Grayscale() RandomApply([ColorJitter(contrast=0.7, saturation=0.4, hue=0.1)], p=1)": (
        [
            V.ToImage(),
            V.Grayscale(),
            V.RandomApply([V.ColorJitter(0, (0.7, 0.7), 0.4, 0.1)], 1.0),
            FLOAT,
            V.Normalize(GREY_MEAN, GREY_STD),
        ],
        COLOR_JITTER,
    ),
    "Grayscale() RandomSolarize(128, p=1) GaussianBlur flip, float": (
        [
            V.ToImage(),
            V.Grayscale(),
            V.RandomSolarize(128, p=1.0),
            V.GaussianBlur(5, (1.0, 1.0)),
            V.RandomHorizontalFlip(1.0),
            FLOAT,
            V.RandomErasing(p=0.0, value=[0.5]),
        ],
        EXACT,
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(GREY))
def test_grayscale_pipelines_give_torchvisions_one_channel_batches(
    name: str, real_photos: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    steps, op_bound = GREY[name]
    dataset = every_fourth_photo(real_photos, T.Compose([*EVAL, *steps]))
    assert augment_spec(dataset.transform).channels == 1
    assert dataset[0][0].shape == (1, 56, 56)  # torchvision's own: one channel
    compare(dataset, op_bound.widen(DALI_CPU_VS_TORCH), name, capsys)
