"""A torchvision pipeline becomes the ops, crop and batch format it describes, or one line.

Each supported transform (v1 and v2 alike) maps to its registered op with torchvision's
defaults and argument forms; the conversions give the batch's dtype, mean and std; the
resizes and crops become the decode-fused crop; anything that cannot be mapped exactly is
refused in one line naming the transform, its place and what is supported. Building the
loaders from these specs is the parity tests' part (tests/parity/test_torchvision_parity.py).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torchvision.transforms as T
import torchvision.transforms.v2 as V

from dali_pipes.augment.from_torchvision import SUPPORTED, augment_spec, convert
from dali_pipes.augment.spec import PIXEL_STD, AugmentSpec
from dali_pipes.errors import ConfigError

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
#: The transforms the issue lists, by torchvision's class name.
LISTED = {
    "Resize", "CenterCrop", "RandomResizedCrop", "RandomCrop", "RandomHorizontalFlip",
    "RandomVerticalFlip", "ColorJitter", "RandomGrayscale", "Grayscale", "GaussianBlur",
    "RandomApply", "RandomSolarize", "RandAugment", "TrivialAugmentWide", "AutoAugment",
    "RandomErasing", "ToTensor", "PILToTensor", "ToImage", "ToDtype", "ConvertImageDtype",
    "Normalize",
}  # fmt: skip
#: Issue 48's detection transforms (Resize, RandomCrop, the flip, ToDtype and Normalize are
#: above), and what v2 does to boxes alone.
DETECTION = {
    "RandomPhotometricDistort", "RandomZoomOut", "RandomIoUCrop", "RandomShortestSize",
    "ScaleJitter", "SanitizeBoundingBoxes", "ConvertBoundingBoxFormat", "ClampBoundingBoxes",
}  # fmt: skip


def ops_of(spec: AugmentSpec) -> list[dict[str, Any]]:
    return [dict(params) for params in spec.train.ops.values()]


def refusal(transform: Any) -> str:
    with pytest.raises(ConfigError) as caught:
        convert(transform)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_the_supported_transforms_are_the_listed_ones() -> None:
    """The issues' lists, and v2's ToPureTensor (a type change, the same values)."""
    assert set(SUPPORTED) == LISTED | DETECTION | {"ToPureTensor"}


@pytest.mark.parametrize("tv", [T, V], ids=["v1", "v2"])
def test_the_imagenet_recipes_map_to_the_presets_crops_and_flip(tv: Any) -> None:
    train = augment_spec(
        tv.Compose(
            [
                tv.RandomResizedCrop(224),
                tv.RandomHorizontalFlip(),
                tv.ToTensor(),
                tv.Normalize(MEAN, STD),
            ]
        )
    )
    val = augment_spec(
        tv.Compose([tv.Resize(256), tv.CenterCrop(224), tv.ToTensor(), tv.Normalize(MEAN, STD)])
    )
    preset = AugmentSpec()
    assert train.train.crop == preset.train.crop and train.train.ops == preset.train.ops
    assert val.train.crop == preset.val.crop and not val.train.ops
    assert (train.mean, train.std, train.dtype) == (MEAN, STD, "float32")


@pytest.mark.parametrize("tv", [T, V], ids=["v1", "v2"])
def test_a_bicubic_resize_or_crop_maps_to_a_bicubic_crop(tv: Any) -> None:
    """Given as an InterpolationMode or as PIL's constant (3), on every fused form."""
    bicubic = tv.InterpolationMode.BICUBIC
    forms = {
        "random_resized_crop": [tv.RandomResizedCrop(224, interpolation=3)],
        "resize_center_crop": [tv.Resize(256, interpolation=bicubic), tv.CenterCrop(224)],
        "center_crop": [tv.Resize((200, 150), interpolation=bicubic)],
        "random_crop": [tv.Resize(64, interpolation=bicubic), tv.RandomCrop(56)],
    }
    for op, steps in forms.items():
        crop = augment_spec(tv.Compose([*steps, tv.ToTensor()])).pipeline(True).crop
        assert (crop.name, crop.interpolation) == (op, "bicubic"), op
    plain = augment_spec(tv.Compose([tv.Resize(256), tv.CenterCrop(224), tv.ToTensor()]))
    assert plain.pipeline(True).crop.interpolation == "bilinear"


def test_v1_and_v2_of_every_op_map_alike() -> None:
    def pipeline(tv: Any) -> Any:
        return tv.Compose(
            [
                tv.RandomCrop(32, padding=[1, 2, 3, 4], fill=(10, 20, 30)),
                tv.RandomHorizontalFlip(0.3),
                tv.RandomVerticalFlip(0.2),
                tv.ColorJitter(0.4, (0.5, 1.5), 0.2, 0.1),
                tv.RandomGrayscale(0.2),
                tv.Grayscale(num_output_channels=3),
                tv.GaussianBlur((3, 5), (0.5, 1.0)),
                tv.RandomApply([tv.GaussianBlur(3), tv.RandomVerticalFlip(1.0)], p=0.3),
                tv.RandomSolarize(100, p=0.4),
                tv.RandAugment(num_ops=3, magnitude=7),
                tv.TrivialAugmentWide(num_magnitude_bins=21),
                tv.AutoAugment(tv.AutoAugmentPolicy.CIFAR10),
                tv.PILToTensor(),
                tv.ConvertImageDtype(torch.float32),
                tv.RandomErasing(p=0.6, scale=(0.1, 0.2), ratio=(0.5, 2.0)),
            ]
        )

    v1, v2 = augment_spec(pipeline(T)), augment_spec(pipeline(V))
    assert v1 == v2
    assert v1.train.crop["padding"] == (1, 2, 3, 4) and v1.train.crop["fill"] == (10, 20, 30)
    names = [op["op"] for op in ops_of(v1)]
    assert names == [
        "hflip", "vflip", "color_jitter", "grayscale", "grayscale", "gaussian_blur",
        "random_apply", "solarize", "randaugment", "trivialaugment", "autoaugment",
    ]  # fmt: skip
    jitter = ops_of(v1)[2]
    assert jitter["brightness"] == (0.6, 1.4) and jitter["contrast"] == (0.5, 1.5)
    assert ops_of(v1)[3]["p"] == 0.2 and ops_of(v1)[4]["p"] == 1.0
    assert ops_of(v1)[8]["num_ops"] == 3 and ops_of(v1)[8]["magnitude"] == 7
    assert ops_of(v1)[10]["policy"] == "cifar10"
    assert v1.train.batch["random_erasing"]["max_area"] == 0.2
    assert (v1.mean, v1.std, v1.dtype) == ((0.0,) * 3, (1.0,) * 3, "float32")


@pytest.mark.parametrize(
    ("steps", "crop"),
    [
        ([T.Resize(256), T.CenterCrop(224)], {"op": "resize_center_crop", "resize": 256}),
        ([V.Resize([256]), V.CenterCrop([224])], {"op": "resize_center_crop", "resize": 256}),
        ([T.Resize((300, 200)), T.CenterCrop(150)], {"op": "center_crop", "resize": (300, 200)}),
        ([T.Resize((300, 200))], {"op": "center_crop", "size": (300, 200)}),
        ([T.Resize(160), T.CenterCrop((128, 96))], {"op": "center_crop", "resize": 160}),
        ([T.CenterCrop(224)], {"op": "center_crop", "resize": None}),
        ([V.RandomResizedCrop(176, scale=(0.35, 1))], {"op": "random_resized_crop"}),
        ([T.Resize(256), T.RandomCrop(224)], {"op": "random_crop", "resize": 256}),
        ([T.RandomCrop(32, padding=4)], {"op": "random_crop", "padding": (4, 4, 4, 4)}),
        ([T.RandomCrop(32, pad_if_needed=True)], {"op": "random_crop", "pad_if_needed": True}),
    ],
)
def test_resizes_and_crops_become_one_decode_fused_crop(
    steps: list[Any], crop: dict[str, Any]
) -> None:
    spec = augment_spec(T.Compose([*steps, T.ToTensor()]))
    assert crop.items() <= spec.train.crop.items()


@pytest.mark.parametrize(
    ("steps", "dtype", "mean", "std"),
    [
        ([T.ToTensor()], "float32", 0.0, 1.0),
        ([T.PILToTensor()], "uint8", 0.0, PIXEL_STD),
        ([V.ToImage()], "uint8", 0.0, PIXEL_STD),
        ([V.ToImage(), V.ToPureTensor()], "uint8", 0.0, PIXEL_STD),
        ([V.ToImage(), V.ToDtype(torch.float32, scale=True)], "float32", 0.0, 1.0),
        ([V.ToImage(), V.ToDtype(torch.float16, scale=True)], "float16", 0.0, 1.0),
        ([V.ToImage(), V.ToDtype(torch.float32)], "float32", 0.0, PIXEL_STD),
        ([T.PILToTensor(), T.ConvertImageDtype(torch.bfloat16)], "bfloat16", 0.0, 1.0),
        ([T.ToTensor(), T.Normalize([0.5], [0.25])], "float32", 0.5, 0.25),
        ([T.ToTensor(), T.Normalize([0.5] * 3, [0.5] * 3), T.Normalize([1.0] * 3, [2.0] * 3)],
         "float32", 1.0, 1.0),
        ([V.ToDtype(torch.float32, scale=True), V.ToImage()], "uint8", 0.0, PIXEL_STD),
        ([V.ToImage(), V.ToDtype(torch.float32, scale=True), V.ToDtype(torch.uint8, scale=True)],
         "uint8", 0.0, PIXEL_STD),
    ],
)  # fmt: skip
def test_conversions_give_the_batch_the_transforms_dtype_and_values(
    steps: list[Any], dtype: str, mean: float, std: float
) -> None:
    """A batch holds (pixel / 255 - mean) / std; two Normalizes compose (0.5 + 1 * 0.5 = 1,
    0.5 * 2 = 1); v2's ToDtype passes a PIL image through unchanged, as torchvision does."""
    spec = augment_spec([T.CenterCrop(8), *steps])
    assert spec.dtype == dtype
    assert spec.mean == pytest.approx((mean,) * 3) and spec.std == pytest.approx((std,) * 3)


def test_random_apply_of_one_op_with_a_probability_multiplies_it_and_of_several_wraps_them() -> (
    None
):
    one = augment_spec([T.CenterCrop(8), T.RandomApply([T.ColorJitter(0.4)], p=0.8), T.ToTensor()])
    assert ops_of(one) == [
        {"op": "color_jitter", "brightness": (0.6, 1.4), "contrast": 0.0, "saturation": 0.0,
         "hue": 0.0, "p": 0.8}
    ]  # fmt: skip
    nested = augment_spec(
        [T.CenterCrop(8), T.RandomApply([T.RandomApply([T.RandomGrayscale(0.5)], 0.5)], 0.8),
         T.ToTensor()]
    )  # fmt: skip
    assert ops_of(nested) == [{"op": "grayscale", "p": pytest.approx(0.2)}]
    several = augment_spec(
        [T.CenterCrop(8), T.RandomApply([T.RandAugment(), T.RandomVerticalFlip()], 0.3),
         T.ToTensor()]
    )  # fmt: skip
    [wrapper] = ops_of(several)
    assert wrapper["op"] == "random_apply" and wrapper["p"] == 0.3
    assert [op["op"] for op in wrapper["ops"]] == ["randaugment", "vflip"]


def test_random_erasing_fills_on_the_batchs_scale() -> None:
    """A constant given before Normalize is that colour after it: 0.5 in [0, 1] is
    (0.5 - mean) / std in the batch; noise needs the batch's own scale (after Normalize)."""
    before = augment_spec(
        [T.CenterCrop(8), T.ToTensor(), T.RandomErasing(p=1, value=(0.5, 0.5, 0.5)),
         T.Normalize(MEAN, STD)]
    )  # fmt: skip
    erase = before.train.batch["random_erasing"]
    expected = [(0.5 - m) / s for m, s in zip(MEAN, STD, strict=True)]
    assert erase["mode"] == "const" and erase["value"] == pytest.approx(expected)
    last = augment_spec(
        [T.CenterCrop(8), T.ToTensor(), T.Normalize(MEAN, STD), T.RandomErasing(value="random")]
    )
    assert last.train.batch["random_erasing"]["mode"] == "pixel"
    on_pixels = augment_spec([T.CenterCrop(8), V.ToImage(), V.RandomErasing(value=7)])
    assert on_pixels.train.batch["random_erasing"]["value"] == 7.0
    assert on_pixels.dtype == "uint8"
    message = refusal(
        [T.CenterCrop(8), T.ToTensor(), T.RandomErasing(value="random"), T.Normalize(MEAN, STD)]
    )
    assert "[2] RandomErasing (v1)" in message and "value='random'" in message


class Mine(torch.nn.Module):
    def forward(self, x: Any) -> Any:
        return x


@pytest.mark.parametrize(
    ("pipeline", "expected"),
    [
        ([T.Resize(256), T.CenterCrop(224), T.Lambda(lambda x: x)],
         "[2] torchvision.transforms.transforms.Lambda is not supported; supported"),
        ([T.CenterCrop(8), Mine(), T.ToTensor()],
         "[1] test_from_torchvision.Mine is not supported"),
        ([T.CenterCrop(8), V.RandomChoice([V.RandomVerticalFlip()])],
         "[1] torchvision.transforms.v2._container.RandomChoice is not supported"),
        ([T.Resize(256, interpolation=T.InterpolationMode.NEAREST), T.CenterCrop(224)],
         "[0] Resize (v1): interpolation='nearest' is not supported"),
        ([V.Resize(256, interpolation=1), V.CenterCrop(224)],
         "[0] Resize (v2): interpolation='lanczos'"),
        ([T.Resize(256, max_size=300), T.CenterCrop(224)], "[0] Resize (v1): max_size=300"),
        ([V.ToImage(), V.Resize(256, antialias=False), V.CenterCrop(224)],
         "[1] Resize (v2): antialias=False on a tensor image"),
        ([T.RandomCrop(32, padding=4, padding_mode="reflect")],
         "[0] RandomCrop (v1): padding_mode='reflect' is not supported"),
        ([T.CenterCrop(8), T.Grayscale(2)], "[1] Grayscale (v1): num_output_channels=2 must be"),
        ([T.CenterCrop(8), T.Grayscale(), T.ToTensor(), T.Normalize(MEAN, STD)],
         "[3] Normalize (v1): mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225] give a "
         "number per channel of three, but the image has one channel after Grayscale()"),
        ([T.CenterCrop(8), T.Grayscale(), T.ToTensor(), T.RandomErasing(value=(0.1, 0.2, 0.3))],
         "[3] RandomErasing (v1): value=[0.1, 0.2, 0.3] needs one value: the image has one"),
        ([T.CenterCrop(8), T.Grayscale(), T.RandAugment()],
         "[2] RandAugment (v1): the image has one channel here (after Grayscale() with"),
        ([T.CenterCrop(8), V.Grayscale(), V.AutoAugment()], "[2] AutoAugment (v2): the image has"),
        ([T.CenterCrop(8), T.Grayscale(), T.RandomGrayscale(0.5)],
         "[2] RandomGrayscale (v1): the image has one channel here"),
        ([T.CenterCrop(8), T.Grayscale(), T.Grayscale(3)],
         "[2] Grayscale (v1): the image has one channel here"),
        ([T.CenterCrop(8), T.RandomApply([T.Grayscale()], p=0.5)],
         "[1][0] Grayscale (v1): inside RandomApply it would give some images another channel"),
        ([T.RandomResizedCrop((224, 160))], "[0] RandomResizedCrop (v1): size=(224, 160)"),
        ([T.Resize(256)], "[0] Resize (v1): Resize(256) alone keeps each image's aspect ratio"),
        ([T.Resize(200), T.CenterCrop(224)], "[1] CenterCrop (v1): crop.resize=200 is invalid"),
        ([T.CenterCrop(224), T.Resize(256)], "[1] Resize (v1): cannot come after CenterCrop"),
        ([T.RandomHorizontalFlip(), T.RandomResizedCrop(224)],
         "[1] RandomResizedCrop (v1): a resize or crop must come before every image op ([0] "
         "RandomHorizontalFlip (v1) comes before it)"),
        ([T.CenterCrop(8), T.ColorJitter(0.4), T.RandomResizedCrop(224)],
         "[2] RandomResizedCrop (v1): a resize or crop must come before every image op"),
        ([T.CenterCrop(8), T.ToTensor(), T.Normalize(MEAN, STD), T.ColorJitter(0.4)],
         "[3] ColorJitter (v1): it is given values that are not pixels"),
        ([T.CenterCrop(8), T.ToTensor(), T.RandomErasing(), T.RandomVerticalFlip()],
         "[3] RandomVerticalFlip (v1): RandomErasing works on whole batches"),
        ([T.CenterCrop(8), T.RandomErasing()], "[1] RandomErasing (v1): needs a tensor image"),
        ([T.CenterCrop(8), T.PILToTensor(), T.Normalize(MEAN, STD)],
         "[2] Normalize (v1): needs a float tensor, it is given a uint8 tensor"),
        ([T.CenterCrop(8), V.ToImage(), V.ToDtype(torch.float64, scale=True)],
         "[2] ToDtype (v2): dtype torch.float64 is not supported"),
        ([T.CenterCrop(8), T.ToTensor(), T.ToTensor()],
         "[2] ToTensor (v1): needs a PIL image, it is given a tensor"),
        ([T.CenterCrop(8), T.RandomApply([T.RandomCrop(4)], p=0.5)],
         "[1][0] RandomCrop (v1): only image ops can be inside RandomApply"),
        ([T.CenterCrop(8), T.RandAugment(fill=[1, 2, 3])],
         "[1] RandAugment (v1): fill=[1, 2, 3]: a fill per channel is not supported"),
        ([T.CenterCrop(8), T.ToTensor(), T.RandomErasing(scale=(0.0, 0.3))],
         "[2] RandomErasing (v1): batch.random_erasing.min_area=0.0 is invalid"),
        ([T.CenterCrop(8)], "ends with PIL images"),
    ],
)  # fmt: skip
def test_what_cannot_be_mapped_exactly_is_one_line_naming_the_transform_and_its_place(
    pipeline: list[Any], expected: str
) -> None:
    message = refusal(T.Compose(pipeline))
    assert expected in message, message


def test_an_unsupported_transform_lists_what_is_supported() -> None:
    message = refusal(T.Compose([T.Resize(256), T.CenterCrop(224), T.Lambda(lambda x: x)]))
    assert message.endswith(", ".join(SUPPORTED)) and "RandomErasing" in message


def test_nested_pipelines_are_flattened_and_name_the_inner_place() -> None:
    inner = T.Compose([T.ToTensor(), T.Lambda(lambda x: x)])
    message = refusal(T.Compose([T.CenterCrop(8), inner]))
    assert "[1][1] torchvision.transforms.transforms.Lambda" in message
    sequential = torch.nn.Sequential(V.CenterCrop(8), V.RandomHorizontalFlip(), V.PILToTensor())
    assert ops_of(augment_spec(sequential)) == [{"op": "hflip", "p": 0.5}]
