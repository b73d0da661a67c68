"""The views of an image are cut from one decode, padded once: views whose crops pad share
one fill colour, which the graph pads the shared decode window with."""

from __future__ import annotations

import pytest

from dali_pipes.augment.spec import AugmentSpec, SplitAugment
from dali_pipes.errors import ConfigError

PADDED = {"op": "random_crop", "size": 32, "padding": 4, "fill": [10, 20, 30]}


def split(views: dict[str, object]) -> AugmentSpec:
    return AugmentSpec(train=SplitAugment(crop=PADDED, ops={}, views=views))


def test_views_that_pad_give_the_one_decode_their_fill() -> None:
    augment = split({"a": {}, "b": {"crop": {"size": 24}}})
    assert augment.views(True).pad_fill() == (10, 20, 30)


def test_a_view_that_does_not_pad_leaves_the_others_fill() -> None:
    plain = {"op": "random_resized_crop", "size": 32}
    augment = split({"a": {}, "b": {"crop": plain}})
    assert augment.views(True).pad_fill() == (10, 20, 30)
    unpadded = AugmentSpec(train=SplitAugment(crop=plain, ops={}, views={"a": {}, "b": {}}))
    assert unpadded.views(True).pad_fill() is None


def test_views_padding_with_two_fills_are_refused_in_one_line() -> None:
    with pytest.raises(ConfigError, match=r"different fill colours .*one fill"):
        split({"a": {}, "b": {"crop": {"fill": [0, 0, 0]}}})
