"""torchvision's ``Grayscale()`` (one output channel): one-channel batches.

The pipeline is made with three equal channels (``Grayscale(1)`` maps to the grayscale op
like ``Grayscale(3)``) and ``augment.channels=1`` makes every loader hand over the first;
a one-element ``Normalize`` broadcasts to the three. What torchvision does on one channel
and the three equal channels do not reproduce exactly is refused
(tests/unit/augment/test_from_torchvision.py has the messages); here, what is mapped, and
that torchvision itself behaves as the mapping and the messages say.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torchvision.transforms as T
import torchvision.transforms.v2 as V

from dali_pipes.augment.from_torchvision import augment_spec, convert, from_config
from dali_pipes.augment.spec import PIXEL_STD, AugmentSpec, SplitAugment
from dali_pipes.errors import ConfigError
from dali_pipes.iterator import augment_spec as iterator_spec


@pytest.mark.parametrize("tv", [T, V], ids=["v1", "v2"])
def test_grayscale_gives_one_channel_batches_with_torchvisions_values(tv: Any) -> None:
    floats = augment_spec(
        tv.Compose([tv.Resize(64), tv.CenterCrop(56), tv.Grayscale(), tv.ToTensor()])
        if tv is T
        else tv.Compose(
            [tv.Resize(64), tv.CenterCrop(56), tv.Grayscale(), tv.ToImage(),
             tv.ToDtype(torch.float32, scale=True)]
        )
    )  # fmt: skip
    assert floats.channels == 1 and floats.dtype == "float32"
    assert (floats.mean, floats.std) == ((0.0,) * 3, (1.0,) * 3)
    assert list(floats.val.ops.values()) == [{"op": "grayscale", "p": 1.0}]
    normalised = augment_spec(
        [tv.CenterCrop(8), tv.Grayscale(1), tv.ToTensor(), tv.Normalize([0.4], [0.2])]
        if tv is T
        else [tv.CenterCrop(8), tv.Grayscale(1), tv.ToImage(), tv.ToDtype(torch.float32, True),
              tv.Normalize([0.4], [0.2])]
    )  # fmt: skip
    assert (normalised.channels, normalised.mean, normalised.std) == (1, (0.4,) * 3, (0.2,) * 3)
    pixels = augment_spec([tv.CenterCrop(8), tv.Grayscale(), tv.PILToTensor()])
    assert (pixels.channels, pixels.dtype, pixels.std) == (1, "uint8", (PIXEL_STD,) * 3)


def test_grayscale_3_and_random_grayscale_keep_three_channels() -> None:
    assert augment_spec([T.CenterCrop(8), T.Grayscale(3), T.ToTensor()]).channels == 3
    assert augment_spec([T.CenterCrop(8), T.RandomGrayscale(1.0), T.ToTensor()]).channels == 3


def test_color_jitter_after_grayscale_leaves_saturation_and_hue_as_torchvision_does() -> None:
    """torchvision returns a one-channel image as it is from saturation and hue."""
    jitter = T.ColorJitter(0.4, 0.3, 0.2, 0.1)
    after = augment_spec([T.CenterCrop(8), T.Grayscale(), jitter, T.PILToTensor()])
    before = augment_spec([T.CenterCrop(8), jitter, T.Grayscale(), T.PILToTensor()])
    (_, grey), (_, colour) = list(after.val.ops.items())[1], next(iter(before.val.ops.items()))
    assert tuple(grey["brightness"]) == tuple(colour["brightness"]) == (0.6, 1.4)
    assert tuple(grey["contrast"]) == tuple(colour["contrast"]) == (0.7, 1.3)
    assert (grey["saturation"], grey["hue"]) == (0.0, 0.0)
    assert tuple(colour["saturation"]) == (0.8, 1.2) and tuple(colour["hue"]) == (-0.1, 0.1)
    grey_image = torch.randint(0, 256, (1, 6, 6), dtype=torch.uint8)
    for part in (V.ColorJitter(saturation=(0.2, 0.2)), V.ColorJitter(hue=(0.3, 0.3))):
        assert torch.equal(part(grey_image), grey_image)
    for part in (T.ColorJitter(saturation=(0.2, 0.2)), T.ColorJitter(hue=(0.3, 0.3))):
        assert torch.equal(part(grey_image), grey_image)


def test_v2_normalize_of_three_means_after_grayscale_gives_three_channels_like_torchvision() -> (
    None
):
    """v2 broadcasts the grey channel against three means (v1 raises, and is refused)."""
    mean, std = [0.4, 0.5, 0.6], [0.2, 0.25, 0.3]
    steps = [V.CenterCrop(8), V.Grayscale(), V.ToImage(), V.ToDtype(torch.float32, True)]
    converted = convert([*steps, V.Normalize(mean, std)])
    assert (converted.channels, converted.mean, converted.std) == (3, tuple(mean), tuple(std))
    grey = torch.rand(1, 4, 4)
    assert V.Normalize(mean, std)(grey).shape == (3, 4, 4)
    with pytest.raises(RuntimeError):
        T.Normalize(mean, std)(grey)


def test_random_erasing_of_three_values_on_one_channel_raises_in_torchvision_too() -> None:
    grey = torch.rand(1, 16, 16)
    for erasing in (
        T.RandomErasing(1.0, value=[0.1, 0.2, 0.3]),
        V.RandomErasing(1.0, value=[0.1] * 3),
    ):
        with pytest.raises(ValueError, match="single value or 1"):
            erasing(grey)
    one = augment_spec(
        [T.CenterCrop(8), T.Grayscale(), T.ToTensor(), T.RandomErasing(1.0, value=[0.5])]
    )
    assert one.channels == 1 and one.val.batch["random_erasing"]["value"] == 0.5


def test_a_grey_split_beside_a_preset_split_is_refused_in_one_line() -> None:
    node = {
        "_target_": "torchvision.transforms.v2.Compose",
        "transforms": [
            {"_target_": "torchvision.transforms.v2.CenterCrop", "size": 8},
            {"_target_": "torchvision.transforms.v2.Grayscale"},
            {"_target_": "torchvision.transforms.v2.PILToTensor"},
        ],
    }
    with pytest.raises(ConfigError, match=r"augment.torchvision.train gives one-channel batches"):
        from_config({"train": node, "val": None})
    _, out = from_config({"train": node, "val": node})
    dtype, channels = out.dtype, out.channels
    assert (dtype, channels) == ("uint8", 1)


def test_the_spec_takes_one_or_three_channels_one_mean_and_no_views_for_grey() -> None:
    with pytest.raises(ConfigError, match=r"augment.channels=2 is invalid.*choose 1 or 3"):
        AugmentSpec(channels=2)
    with pytest.raises(ConfigError, match=r"augment.channels=1 .*one mean and one std"):
        AugmentSpec(channels=1)  # ImageNet's mean and std differ per channel
    grey = AugmentSpec(channels=1, mean=(0.5,) * 3, std=(0.25,) * 3)
    assert grey.channels == 1
    views = SplitAugment(views={"global": {"count": 2}})
    with pytest.raises(ConfigError, match=r"augment.channels=1 .*has views"):
        AugmentSpec(train=views, channels=1, mean=(0.5,) * 3, std=(0.25,) * 3)


def test_dali_iterator_keeps_a_grey_specs_channels() -> None:
    grey = augment_spec([T.CenterCrop(8), T.Grayscale(), T.PILToTensor()])
    assert iterator_spec(grey).channels == 1
    assert iterator_spec(grey, channels_last=True).channels == 1
