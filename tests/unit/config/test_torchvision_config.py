"""``augment.torchvision``: a transform given by ``_target_``s replaces its split.

The node is built with Hydra's ``instantiate`` where a config becomes a spec, mapped like a
transform given in Python, and its output format (dtype, mean, std) becomes the batch's;
what cannot be built or mapped is one line under the key.
"""

from __future__ import annotations

import re

import pytest

from dali_pipes.augment.spec import AugmentSpec
from dali_pipes.config.compose import compose_config
from dali_pipes.config.specs import to_spec
from dali_pipes.errors import ConfigError

V2 = "torchvision.transforms.v2"
FLOAT32 = "{_target_: hydra.utils.get_object, path: torch.float32}"
TRAIN = (
    f"{{_target_: {V2}.Compose, transforms: ["
    f"{{_target_: {V2}.RandomResizedCrop, size: 176, antialias: true}}, "
    f"{{_target_: {V2}.RandomHorizontalFlip}}, {{_target_: {V2}.TrivialAugmentWide}}, "
    f"{{_target_: {V2}.PILToTensor}}, {{_target_: {V2}.ToDtype, dtype: {FLOAT32}, scale: true}}, "
    f"{{_target_: {V2}.Normalize, mean: [0.5, 0.5, 0.5], std: [0.25, 0.25, 0.25]}}, "
    f"{{_target_: {V2}.RandomErasing, p: 0.1}}]}}"
)
VAL = (
    f"{{_target_: {V2}.Compose, transforms: [{{_target_: {V2}.Resize, size: 232}}, "
    f"{{_target_: {V2}.CenterCrop, size: 224}}, {{_target_: {V2}.PILToTensor}}, "
    f"{{_target_: {V2}.ToDtype, dtype: {FLOAT32}, scale: true}}, "
    f"{{_target_: {V2}.Normalize, mean: [0.5, 0.5, 0.5], std: [0.25, 0.25, 0.25]}}]}}"
)


def spec(*overrides: str) -> AugmentSpec:
    return to_spec(compose_config(list(overrides)).augment, AugmentSpec)


def test_the_transforms_replace_their_splits_and_set_the_batch_format() -> None:
    both = spec(f"augment.torchvision.train={TRAIN}", f"augment.torchvision.val={VAL}")
    assert both.train.crop["op"] == "random_resized_crop" and both.train.crop["size"] == 176
    assert [p["op"] for p in both.train.ops.values()] == ["hflip", "trivialaugment"]
    assert both.train.batch["random_erasing"]["p"] == 0.1
    assert both.val.crop == {
        "op": "resize_center_crop",
        "size": 224,
        "resize": 232,
        "interpolation": "bilinear",  # the op's field, filled by the config schema
    }
    assert (both.mean, both.std, both.dtype) == ((0.5,) * 3, (0.25,) * 3, "float32")
    assert both.torchvision == {"train": None, "val": None}
    train_only = spec(f"augment.torchvision.train={TRAIN}")
    assert train_only.val == spec().val and train_only.mean == (0.5,) * 3


def test_splits_that_output_different_batches_are_refused() -> None:
    uint8 = f"{{_target_: {V2}.Compose, transforms: [{{_target_: {V2}.CenterCrop, size: 8}}, {{_target_: {V2}.PILToTensor}}]}}"  # noqa: E501
    with pytest.raises(
        ConfigError, match=re.escape("augment.torchvision: train and val give different")
    ):
        spec(f"augment.torchvision.train={TRAIN}", f"augment.torchvision.val={uint8}")


@pytest.mark.parametrize(
    ("node", "expected"),
    [
        (f"{{_target_: {V2}.NoSuchTransform}}", "augment.torchvision.train: cannot build the"),
        (
            f"{{_target_: {V2}.Compose, transforms: [{{_target_: {V2}.CenterCrop, size: 8}}, "
            f"{{_target_: {V2}.RandomChoice, transforms: "
            f"[{{_target_: {V2}.RandomVerticalFlip}}]}}]}}",
            "augment.torchvision.train: torchvision transform [1]",
        ),
        ("{transforms: []}", "augment.torchvision.train={'transforms': []} is invalid"),
    ],
)
def test_a_node_that_cannot_be_built_or_mapped_is_one_line_under_its_key(
    node: str, expected: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(expected)):
        spec(f"augment.torchvision.train={node}")


def test_a_spec_built_in_python_points_to_the_python_entry() -> None:
    with pytest.raises(ConfigError, match=re.escape("from_torchvision.augment_spec")):
        AugmentSpec(torchvision={"train": object(), "val": None})
