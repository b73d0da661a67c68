"""The solarize op: torchvision's ``RandomSolarize``, drawn from (seed, epoch, sample)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torchvision.transforms.v2.functional as F
from torchvision.transforms import v2

from dali_pipes.augment import Context
from dali_pipes.augment.base import build_op, op_names
from dali_pipes.augment.keyed import uniforms
from dali_pipes.augment.ops.solarize import NEVER, Solarize
from dali_pipes.errors import ConfigError

CTX = Context(size=(8, 8))


def test_solarize_is_registered_with_torchvisions_defaults_and_a_threshold_of_128() -> None:
    assert "solarize" in op_names(crop=False)
    op = build_op({}, "augment.train.ops.solarize", default_name="solarize")
    assert op == Solarize(threshold=128.0, p=0.5)
    assert v2.RandomSolarize(128).p == op.p
    tv = op.torchvision()
    assert isinstance(tv, v2.RandomSolarize) and (tv.threshold, tv.p) == (128.0, 0.5)


@pytest.mark.parametrize(
    ("params", "key"), [({"threshold": 256}, "threshold"), ({"p": 1.5}, "p"), ({"p": "x"}, "p")]
)
def test_a_value_out_of_range_is_one_line_naming_the_key(params: dict, key: str) -> None:
    with pytest.raises(ConfigError, match=rf"^augment\.train\.ops\.solarize\.{key}="):
        build_op(params, "augment.train.ops.solarize", default_name="solarize")


@pytest.mark.parametrize("p", [0.0, 0.2, 0.5, 1.0])
def test_samples_are_solarised_with_probability_p_and_fed_a_threshold_accordingly(p: float) -> None:
    op = Solarize(threshold=100, p=p)
    n = 20_000
    params = op.sample(uniforms(0, 0, np.arange(n), op.draws()), CTX)
    assert abs(params["apply"].mean() - p) < 0.015
    assert params["threshold"].dtype == np.float32
    assert np.all(params["threshold"][params["apply"]] == 100.0)
    assert np.all(params["threshold"][~params["apply"]] == NEVER)
    assert op.dali_params(tuple(params)) == ("threshold",) and not op.needs_conditionals(True)


def test_the_torch_realisation_is_torchvisions_solarize() -> None:
    image = torch.arange(256, dtype=torch.uint8).reshape(1, 16, 16).expand(3, 16, 16)
    op = Solarize(threshold=128, p=0.5)
    assert torch.equal(op.torch(image, {"apply": True}, CTX), F.solarize(image, 128))
    assert torch.equal(op.torch(image, {"apply": False}, CTX), image)
    solarised = op.torch(image, {"apply": True}, CTX)[0].flatten()
    assert solarised[127] == 127 and solarised[128] == 127 and solarised[255] == 0
