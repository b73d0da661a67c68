"""A split with views is fed through the same named columns as a plain one: a shared
decode window, then each view's window inside it, resize ROI, output size and its own ops'
parameters; a plain split's columns stay its pipeline's."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dali_pipes.augment.spec import AugmentSpec, SplitAugment
from dali_pipes.backends.base import BadFiles, EpochPlan
from dali_pipes.backends.dali.columns import DECODE, GEOMETRY, FedColumns, Window
from dali_pipes.backends.dali.feed import Feed
from dali_pipes.config.compose import augment_preset, compose_config
from dali_pipes.config.specs import loader_spec


def test_a_plain_splits_columns_are_its_pipelines_with_no_decode_window() -> None:
    augment = AugmentSpec(train=SplitAugment(ops={"hflip": {}, "grayscale": {"p": 0.5}}))
    columns = FedColumns.of_split(augment, True)
    assert columns == FedColumns.of(augment.pipeline(True))
    assert not columns.decode and columns.views == 1


def test_views_columns_name_the_shared_decode_window_then_each_views_own_parameters() -> None:
    columns = FedColumns.of_split(augment_preset("byol"), True)
    names = [name for name, _ in columns.columns()]
    assert names[:4] == ["images", "labels", *(name for name, _ in DECODE)]
    first = [n for n in names if n.endswith("[0]")]
    second = [n for n in names if n.endswith("[1]")]
    assert first[: len(GEOMETRY)] == [f"{name}[0]" for name, _ in GEOMETRY]
    assert second[: len(GEOMETRY)] == [f"{name}[1]" for name, _ in GEOMETRY]
    # BYOL's second view alone solarises: the views' columns differ.
    assert not any(n.startswith("solarize.") for n in first)
    assert any(n.startswith("solarize.") for n in second)
    assert len(names) == 4 + len(first) + len(second)

    flat = ["images", *range(len(names) - 1)]
    fed = columns.unflatten(flat)
    assert fed.decode == Window(1, 2) and fed.decoded() == Window(1, 2)
    assert [view.anchor for view in fed.views] == [3, 3 + len(first)]
    assert fed.flat() == tuple(flat)


def test_a_views_feed_decodes_the_smallest_window_holding_every_views_window(
    real_photos: Path,
) -> None:
    cfg = compose_config(["data=folder", f"data.root={real_photos}", "augment=dino"])
    spec = loader_spec(cfg, "train", rank=0, world_size=1)
    feed = Feed(spec, BadFiles(), read_ahead=1, threads=1)
    try:
        batch = np.arange(min(8, len(spec.source)))
        feed.start(EpochPlan(0, [batch]))
        fed = feed.batch()
        in_flight = feed.in_flight[0]
    finally:
        feed.close()
    views = spec.augment.views(True)
    source = feed.source
    sizes = feed.sizes.check(batch, source.read(batch), source.name)[0]
    draws = views.draw(sizes, source.identity(batch), spec.sampling.seed, 0)
    assert fed.decode is not None and len(fed.views) == len(views) == 10
    start, shape = fed.decode
    end = start + shape
    lows, highs = [], []
    for view, draw in zip(fed.views, draws, strict=True):
        window = draw.geometry.window.astype(np.float32)
        # Each view's window, as fed, is its place in the decoded region.
        assert np.array_equal(view.anchor + start, window[:, :2])
        assert np.array_equal(view.shape, window[:, 2:])
        assert (view.anchor >= 0).all() and (view.anchor + view.shape <= shape).all()
        lows.append(window[:, :2])
        highs.append(window[:, :2] + window[:, 2:])
    # The smallest such region: every edge is some view's.
    assert np.array_equal(start, np.min(lows, axis=0))
    assert np.array_equal(end, np.max(highs, axis=0))
    assert np.array_equal(in_flight.anchor, start) and np.array_equal(in_flight.shape, shape)
