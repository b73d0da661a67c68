"""Colour ops before the crop (``augment.<split>.before``): run on the whole decoded image
with their own draws, leaving the ops' draws as they were; only ops that keep every pixel
in place, never with views or a decode cache."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision.transforms.v2.functional as F

from dali_pipes import compose_config
from dali_pipes.augment import parse_pipeline
from dali_pipes.augment.spec import AugmentSpec
from dali_pipes.config.specs import loader_spec, to_spec
from dali_pipes.errors import ConfigError

CROP = {"op": "random_resized_crop", "size": 32}
OPS = {"hflip": {"p": 0.5}, "color_jitter": {"brightness": 0.4}}


def test_ops_before_the_crop_draw_after_the_ops_which_draw_as_without_them() -> None:
    plain = parse_pipeline(CROP, OPS, "augment.train")
    early = parse_pipeline(CROP, OPS, "augment.train", {"grayscale": {"p": 0.5}})
    sizes, ids = np.array([[60, 80]] * 16), np.arange(16)
    a = plain.draw(sizes, ids, seed=1, epoch=2)
    b = early.draw(sizes, ids, seed=1, epoch=2)
    assert np.array_equal(a.geometry.window, b.geometry.window)
    for k in range(len(plain.ops)):
        assert all(np.array_equal(a.params[k][n], b.params[k][n]) for n in a.params[k])
    assert len(b.params) == 3  # the op before the crop's come last
    assert 0 < np.mean(b.params[len(early.ops)]["gray"]) < 1


def test_they_run_on_the_whole_image_before_its_window_is_cut() -> None:
    early = parse_pipeline(CROP, {}, "k", {"grayscale": {"p": 1.0}})
    image = torch.randint(0, 256, (3, 60, 80), dtype=torch.uint8)
    draw = early.draw([[60, 80]], [0], seed=0, epoch=0)
    whole = early.apply_before_torch(image, draw, 0)
    assert torch.equal(whole, F.rgb_to_grayscale(image, num_output_channels=3))


@pytest.mark.parametrize(
    ("before", "message"),
    [
        ({"hflip": {"p": 0.5}}, r"^k\.before\.hflip: hflip moves pixels; only colour ops"),
        ({"randaugment": {}}, r"^k\.before\.randaugment: randaugment moves pixels"),
    ],
)
def test_an_op_that_moves_pixels_cannot_come_before_the_crop(
    before: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_pipeline(CROP, {}, "k", before)


def test_views_and_a_decode_cache_are_refused_in_one_line(tmp_path: Path) -> None:
    early = "+augment.train.before.color_jitter={brightness: 0.4}"
    with pytest.raises(ConfigError, match=r"augment\.train\.before=.*the split has views"):
        to_spec(compose_config(["augment=simclr", early]).augment, AugmentSpec)
    cfg = compose_config(["data=sample", f"data.root={tmp_path}", "data.cache=ram", early])
    with pytest.raises(ConfigError, match=r"^data\.cache=ram keeps the decoded images, but "):
        loader_spec(cfg, "train")
