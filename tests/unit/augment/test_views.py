"""Multi-view splits: the presets' views (count, sizes, order, ops), each view's parameters
drawn as the recipe says, a pure function of (seed, epoch, sample, view), and the config
that changes them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dali_pipes.augment.keyed import VIEW_COUNTERS
from dali_pipes.augment.ops.color_jitter import ColorJitter
from dali_pipes.augment.ops.crop import RandomResizedCrop
from dali_pipes.augment.ops.flip import HorizontalFlip
from dali_pipes.augment.ops.gaussian_blur import GaussianBlur
from dali_pipes.augment.ops.grayscale import Grayscale
from dali_pipes.augment.ops.solarize import Solarize
from dali_pipes.augment.spec import AugmentSpec, SplitAugment
from dali_pipes.augment.views import Views
from dali_pipes.config.compose import augment_preset, compose_config
from dali_pipes.config.specs import one_view, to_spec
from dali_pipes.errors import ConfigError
from dali_pipes.iterator import augment_spec

G, L = (224, 224), (96, 96)
#: Per preset: the views' names and sizes in batch order.
LAYOUT = {
    "simclr": (("view1", G), ("view2", G)),
    "byol": (("view1", G), ("view2", G)),
    "dino": (("global1", G), ("global2", G), *((f"local{k}", L) for k in range(1, 9))),
    "swav": (
        ("global1", G),
        ("global2", G),
        *((f"local{k}", L) for k in range(1, 7)),
    ),
}
#: Per preset and view group: (scale, interpolation, jitter (b, c, s, h), per-op p), from
#: the recipes (lightly's SimCLR/BYOL transforms, DINO's DataAugmentationDINO, VISSL's SwAV).
STRONG = (0.8, 0.8, 0.8, 0.2)
MILD = (0.4, 0.4, 0.2, 0.1)
RECIPE: dict[str, dict[str, Any]] = {
    "simclr": {
        "view": ((0.08, 1.0), "bilinear", STRONG, {"blur": 0.5, "solarize": None}),
    },
    "byol": {
        "view1": ((0.08, 1.0), "bilinear", MILD, {"blur": 1.0, "solarize": None}),
        "view2": ((0.08, 1.0), "bilinear", MILD, {"blur": 0.1, "solarize": 0.2}),
    },
    "dino": {
        "global1": ((0.4, 1.0), "bicubic", MILD, {"blur": 1.0, "solarize": None}),
        "global2": ((0.4, 1.0), "bicubic", MILD, {"blur": 0.1, "solarize": 0.2}),
        "local": ((0.05, 0.4), "bicubic", MILD, {"blur": 0.5, "solarize": None}),
    },
    "swav": {
        "global": ((0.14, 1.0), "bilinear", STRONG, {"blur": 0.5, "solarize": None}),
        "local": ((0.05, 0.14), "bilinear", STRONG, {"blur": 0.5, "solarize": None}),
    },
}


def views_of(preset: str, *overrides: str) -> Views:
    return to_spec(compose_config([f"augment={preset}", *overrides]).augment, AugmentSpec).views(
        True
    )


@pytest.mark.parametrize("preset", list(LAYOUT))
def test_each_preset_makes_its_views_in_order_globals_first(preset: str) -> None:
    augment = augment_preset(preset)
    views = augment.views(True)
    assert augment.multi_view(True) and not augment.multi_view(False)
    assert list(zip(views.names, views.sizes(), strict=True)) == list(LAYOUT[preset])
    assert augment.views(False).pipelines == (augment.pipeline(False),)  # val: one image


@pytest.mark.parametrize("preset", list(RECIPE))
def test_each_views_ops_are_the_recipes(preset: str) -> None:
    views = augment_preset(preset).views(True)
    for group in views.groups:
        scale, interpolation, jitter, p = RECIPE[preset][group.name]
        crop = group.pipeline.crop
        assert isinstance(crop, RandomResizedCrop)
        assert (crop.scale, crop.interpolation, crop.ratio) == (
            scale,
            interpolation,
            (3 / 4, 4 / 3),
        )
        ops: dict[type, Any] = {type(op): op for op in group.pipeline.ops}
        order = [type(op) for op in group.pipeline.ops]
        assert order[:4] == [HorizontalFlip, ColorJitter, Grayscale, GaussianBlur]
        assert ops[HorizontalFlip].p == 0.5 and ops[Grayscale].p == 0.2
        cj = ops[ColorJitter]
        assert (cj.brightness, cj.contrast, cj.saturation, cj.hue, cj.p) == (*jitter, 0.8)
        blur = ops[GaussianBlur]
        assert (blur.p, blur.sigma, blur.kernel_size) == (p["blur"], (0.1, 2.0), (23, 23))
        if p["solarize"] is None:
            assert Solarize not in ops
        else:
            assert order[-1] is Solarize and ops[Solarize] == Solarize(128, p["solarize"])


def draws(views: Views, n: int = 6000, epoch: int = 0) -> list[Any]:
    """Every view's parameters for ``n`` samples of a large landscape image (no crop hits
    torchvision's fallback)."""
    return list(views.draw(np.tile([[3000, 4000]], (n, 1)), np.arange(n), seed=7, epoch=epoch))


def op_params(views: Views, drawn: list[Any], v: int, kind: type) -> dict[str, np.ndarray]:
    pipeline = views.pipelines[v]
    (k,) = [k for k, op in enumerate(pipeline.ops) if isinstance(op, kind)]
    return dict(drawn[v].params[k])


@pytest.mark.parametrize("preset", list(RECIPE))
def test_each_views_parameters_are_drawn_with_the_recipes_probabilities(preset: str) -> None:
    views = augment_preset(preset).views(True)
    drawn = draws(views)
    group_of = [g.name for g in views.groups for _ in range(g.count)]
    for v, name in enumerate(group_of):
        scale, _, jitter, p = RECIPE[preset][name]
        flip = op_params(views, drawn, v, HorizontalFlip)["flip"]
        assert abs(flip.mean() - 0.5) < 0.03, (v, "flip")
        cj = op_params(views, drawn, v, ColorJitter)
        assert abs(cj["apply"].mean() - 0.8) < 0.03, (v, "jitter")
        b = cj["brightness"]
        assert abs(b.min() - (1 - jitter[0])) < 0.01 and abs(b.max() - (1 + jitter[0])) < 0.01
        assert abs(np.abs(cj["hue"]).max() - jitter[3]) < 0.01, (v, "hue")
        assert abs(op_params(views, drawn, v, Grayscale)["gray"].mean() - 0.2) < 0.03, (v, "gray")
        blur = op_params(views, drawn, v, GaussianBlur)
        assert abs(blur["apply"].mean() - p["blur"]) < 0.03, (v, "blur")
        assert 0.1 <= blur["sigma"].min() < 0.15 and 1.95 < blur["sigma"].max() <= 2.0
        if p["solarize"] is not None:
            applied = op_params(views, drawn, v, Solarize)["apply"]
            assert abs(applied.mean() - p["solarize"]) < 0.03, (v, "solarize")
        window = drawn[v].geometry.window
        area = window[:, 2] * window[:, 3] / (3000 * 4000)
        assert scale[0] - 0.01 < area.min() < scale[0] + 0.02, (v, "scale")
        assert scale[1] - 0.05 < area.max() <= scale[1] + 0.01, (v, "scale")


def test_views_of_one_sample_differ_and_their_draws_are_independent() -> None:
    views = augment_preset("dino").views(True)
    drawn = draws(views, n=4000)
    windows = [d.geometry.window for d in drawn]
    assert all((windows[a] != windows[b]).any(axis=1).all() for a in range(10) for b in range(a))
    flips = np.stack([op_params(views, drawn, v, HorizontalFlip)["flip"] for v in range(10)])
    corr = np.corrcoef(flips)
    assert np.abs(corr[~np.eye(10, dtype=bool)]).max() < 0.06  # independent across views


def test_a_views_draws_are_a_function_of_seed_epoch_sample_and_view_alone() -> None:
    views = augment_preset("dino").views(True)
    sizes = np.array([[480, 640], [900, 600], [300, 1200], [512, 512]])
    ids = np.array([3, 10, 11, 42])
    whole = views.draw(sizes, ids, seed=1, epoch=2)
    alone = views.draw(sizes[2:3], ids[2:3], seed=1, epoch=2)  # another batch, same sample
    for v in range(len(views)):
        assert np.array_equal(whole[v].geometry.window[2:3], alone[v].geometry.window)
        for a, b in zip(whole[v].params, alone[v].params, strict=True):
            assert all(np.array_equal(a[k][2:3], b[k]) for k in a)
    other_epoch = views.draw(sizes, ids, seed=1, epoch=3)
    assert not np.array_equal(whole[0].geometry.window, other_epoch[0].geometry.window)
    # View v owns the counters from v * VIEW_COUNTERS: view 0 draws what its pipeline
    # draws alone, view 1 what the same pipeline draws as view 1.
    first = views.pipelines[0].draw(sizes, ids, seed=1, epoch=2)
    assert np.array_equal(first.geometry.window, whole[0].geometry.window)
    second = views.pipelines[1].draw(sizes, ids, seed=1, epoch=2, view=1)
    assert np.array_equal(second.geometry.window, whole[1].geometry.window)
    assert VIEW_COUNTERS > 4 * 10 + 100  # far more counters per view than a pipeline draws


def test_the_local_crops_count_and_both_scale_ranges_are_configurable() -> None:
    views = views_of(
        "dino",
        "augment.train.views.local.count=6",
        "augment.train.crop.scale=[0.32,1.0]",
        "augment.train.views.local.crop.scale=[0.05,0.32]",
    )
    assert len(views) == 8 and views.sizes()[-1] == L
    crops: list[Any] = [p.crop for p in views.pipelines]
    assert [crop.scale for crop in crops] == [(0.32, 1.0)] * 2 + [(0.05, 0.32)] * 6
    assert len(views_of("dino", "augment.train.views.local.count=0")) == 2
    assert len(views_of("dino", "augment.train.views.local=null")) == 2
    # A change of the split's ops reaches every view; a group's own change wins.
    jitter = views_of("dino", "augment.train.ops.color_jitter.hue=0.05")
    assert {op.hue for op in jitter.ops if isinstance(op, ColorJitter)} == {0.05}
    blur = views_of("dino", "augment.train.ops.gaussian_blur.p=0.3")
    assert [next(o.p for o in p.ops if isinstance(o, GaussianBlur)) for p in blur.pipelines][
        :3
    ] == [0.3, 0.1, 0.5]


def test_a_groups_changes_remove_replace_and_add_ops() -> None:
    base = {"op": "random_resized_crop", "size": 32}
    ops = {"hflip": {"p": 0.5}, "grayscale": {"p": 0.2}}
    views = {
        "a": {"ops": {"grayscale": None}},
        "b": {
            "count": 2,
            "crop": {"size": 16},
            "ops": {"hflip": {"p": 1.0}, "sol": {"op": "solarize"}},
        },
        "c": {"crop": {"op": "resize_center_crop", "size": 8, "resize": 8}},
    }
    spec = AugmentSpec(train=SplitAugment(crop=base, ops=ops, views=views))
    a, b, _, c = spec.views(True).pipelines
    assert [op.name for op in a.ops] == ["hflip"]
    assert [(op.name, getattr(op, "p", None)) for op in b.ops] == [
        ("hflip", 1.0),
        ("grayscale", 0.2),
        ("solarize", 0.5),
    ]
    assert b.size() == (16, 16) and c.crop.name == "resize_center_crop" and c.size() == (8, 8)
    assert spec.views(True).names == ("a", "b1", "b2", "c")
    # The canonical form builds the same views (a saved config composes back to them).
    again = AugmentSpec(train=spec.train)
    assert again.views(True) == spec.views(True) and again == spec


@pytest.mark.parametrize(
    ("views", "message"),
    [
        ({"a": {"cont": 2}}, r"augment\.train\.views\.a\.cont is not a key of a view group"),
        ({"a": {"count": -1}}, r"augment\.train\.views\.a\.count=-1"),
        ({"a": {"count": 0}}, r"augment\.train\.views makes no view"),
        ({"a": {"crop": {"size": 0}}}, r"augment\.train\.views\.a\.crop\.size=0"),
        (
            {"a": {"ops": {"blur": {"op": "nope"}}}},
            r"augment\.train\.views\.a\.ops\.blur: unknown op",
        ),
        ([1, 2], r"augment\.train\.views=\[1, 2\] is invalid"),
    ],
)
def test_a_wrong_views_node_is_one_line_naming_the_key(views: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        AugmentSpec(train=SplitAugment(views=views))


def test_batch_ops_and_one_image_consumers_refuse_a_split_with_views_in_one_line() -> None:
    with pytest.raises(ConfigError, match=r"augment\.train\.batch=.*split has views"):
        AugmentSpec(train=SplitAugment(views={"v": {}}, batch={"random_erasing": {"p": 0.5}}))
    with pytest.raises(ConfigError, match=r"augment\.train makes 10 views .*global1, global2"):
        augment_preset("dino").pipeline(True)
    with pytest.raises(ConfigError, match=r"python -m dali_pipes\.train trains on one image"):
        one_view(compose_config(["augment=simclr"]), "python -m dali_pipes.train")


def test_dali_iterators_changes_keep_a_presets_views() -> None:
    spec = augment_spec("dino", image_size=192, flip_prob=0.3)
    views = spec.views(True)
    assert views.sizes()[:3] == ((192, 192), (192, 192), L)  # the globals' size changed
    assert {op.p for op in views.ops if isinstance(op, HorizontalFlip)} == {0.3}
