"""The registries of ops, batch ops and auto-augment operations (one
:class:`~dali_pipes.registry.Registry` each), and what an op knows about itself."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pytest
import torch
import torchvision.transforms as T

from dali_pipes.augment import Context, Op, Params, Row, op_names, register_op
from dali_pipes.augment.auto.operations import REGISTRY, register_operation
from dali_pipes.augment.base import OPS, build_op
from dali_pipes.augment.batch import BATCH_OPS, batch_op_names, register_batch_op
from dali_pipes.augment.from_torchvision import augment_spec
from dali_pipes.augment.ops.mixup import Mixup
from dali_pipes.errors import NameTaken


@dataclass(frozen=True)
class Darken(Op):
    """An op that claims a built-in's name."""

    name = "hflip"
    p: float = 0.5

    def sample(self, u: np.ndarray, ctx: Context) -> Params:
        return {}

    def torch(self, image: torch.Tensor, p: Row, ctx: Context) -> torch.Tensor:
        return image // 2

    def dali(self, images: Any, p: Mapping[str, Any], ctx: Context) -> Any:
        return images * 0.5


def test_a_second_op_under_a_taken_name_fails_in_one_line_naming_the_name_and_its_holder() -> None:
    with pytest.raises(NameTaken) as info:
        register_op(Darken)
    message = str(info.value)
    assert "\n" not in message and isinstance(info.value, ValueError)
    assert message.startswith(
        "op 'hflip' is already registered (held by dali_pipes.augment.ops.flip.HorizontalFlip)"
    )
    assert OPS["hflip"].__name__ == "HorizontalFlip"


def test_replace_true_replaces_an_op_and_the_config_builds_the_new_one() -> None:
    with OPS.restored():
        assert register_op(Darken, replace=True) is Darken
        assert isinstance(build_op({"op": "hflip", "p": 0.2}, "augment.train.ops.x"), Darken)
        assert register_op(replace=True)(Darken) is Darken  # the decorator form
    assert OPS["hflip"].__name__ == "HorizontalFlip"  # restored after the block


def test_an_op_registered_again_from_the_same_place_is_accepted() -> None:
    flip = OPS["hflip"]
    assert register_op(flip) is flip
    again = type(flip.__name__, (flip,), {"__module__": flip.__module__})  # a module re-imported
    again.__qualname__ = flip.__qualname__
    with OPS.restored():
        assert register_op(again) is again and OPS["hflip"] is again


def test_op_and_batch_op_names_are_listable() -> None:
    assert set(op_names()) == set(OPS) and op_names() == tuple(sorted(OPS))
    assert "hflip" in op_names(crop=False) and "random_resized_crop" in op_names(crop=True)
    assert batch_op_names() == tuple(sorted(BATCH_OPS)) and "mixup" in batch_op_names()


def test_a_second_batch_op_under_a_taken_name_fails_in_one_line_and_replace_replaces() -> None:
    @dataclass(frozen=True)
    class Other(Mixup):
        name = "mixup"

    with pytest.raises(NameTaken) as info:
        register_batch_op(Other)
    assert str(info.value).startswith(
        "batch op 'mixup' is already registered (held by dali_pipes.augment.ops.mixup.Mixup)"
    )
    with BATCH_OPS.restored():
        register_batch_op(Other, replace=True)
        assert BATCH_OPS["mixup"] is Other
    assert BATCH_OPS["mixup"] is Mixup


def test_a_second_auto_augment_operation_under_a_taken_name_fails_and_replace_keeps_its_index() -> (
    None
):
    rotate = REGISTRY["Rotate"]
    other = replace(rotate, ranges={"standard": None})
    with pytest.raises(NameTaken) as info:
        register_operation(other)
    message = str(info.value)
    assert "\n" not in message and message.startswith(
        "auto-augment operation 'Rotate' is already registered (held by the affine operation"
    )
    assert register_operation(rotate) is rotate  # the same record again
    index = REGISTRY.names().index("Rotate")
    with REGISTRY.restored():
        register_operation(other, replace=True)
        assert REGISTRY["Rotate"] is other and REGISTRY.names().index("Rotate") == index
    assert REGISTRY["Rotate"] is rotate


def test_whether_p_gates_the_whole_op_is_the_ops_own_and_decides_random_apply() -> None:
    gated = {name for name in OPS if OPS[name].p_gates_all}
    assert gated == {
        "hflip", "vflip", "grayscale", "color_jitter", "gaussian_blur", "solarize",
        "random_apply",
    }  # fmt: skip
    folded = augment_spec(
        [T.CenterCrop(8), T.RandomApply([T.RandomVerticalFlip(0.5)], 0.5), T.ToTensor()]
    )
    assert [dict(p) for p in folded.train.ops.values()] == [{"op": "vflip", "p": 0.25}]
    wrapped = augment_spec([T.CenterCrop(8), T.RandomApply([T.RandAugment()], 0.5), T.ToTensor()])
    [wrapper] = [dict(p) for p in wrapped.train.ops.values()]
    assert wrapper["op"] == "random_apply" and wrapper["p"] == 0.5


def test_the_graph_checks_parameters_are_the_ops_own_and_valid() -> None:
    with_params = {name: OPS[name].graph_params for name in OPS if OPS[name].graph_params}
    assert set(with_params) == {"color_jitter", "gaussian_blur", "grayscale"}
    for name, params in with_params.items():
        op = build_op({"op": name, **params}, f"augment.train.ops.{name}")
        assert 0 < getattr(op, "p", 1.0) < 1, name  # the branch that skips the op is built
