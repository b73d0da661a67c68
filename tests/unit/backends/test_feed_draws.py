"""Where the feed draws: a batch of good files gets its columns on a read thread, ahead of
the callback, with its plan's epoch; a batch holding a bad file is drawn when it is fed,
over the mended samples. Either way the columns are the draws of (seed, epoch, sample)."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

from dali_pipes.backends.base import BadFiles, EpochPlan
from dali_pipes.backends.dali.columns import Fed
from dali_pipes.backends.dali.feed import Feed
from dali_pipes.config.compose import compose_config
from dali_pipes.config.specs import loader_spec


class Draws:
    """Wraps a feed's views: records the thread and epoch of each draw."""

    def __init__(self, views: Any) -> None:
        self.views = views
        self.calls: list[tuple[int, int]] = []  # (thread id, epoch)

    def draw(self, sizes: Any, ids: Any, seed: int, epoch: int, boxes: Any = None) -> Any:
        self.calls.append((threading.get_ident(), epoch))
        return self.views.draw(sizes, ids, seed, epoch, boxes)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.views, name)


def feed_of(root: Path, *overrides: str, preset: str = "randaugment") -> tuple[Feed, Draws]:
    cfg = compose_config(["data=folder", f"data.root={root}", f"augment={preset}", *overrides])
    feed = Feed(
        loader_spec(cfg, "train", rank=0, world_size=1), BadFiles(), read_ahead=2, threads=2
    )
    draws = Draws(feed.columns.views)
    feed.columns.views = cast(Any, draws)  # records each draw, then draws as the views do
    return feed, draws


def expected(feed: Feed, indices: np.ndarray, epoch: int) -> Fed:
    """The columns of ``indices`` drawn here, from their headers."""
    source = feed.source
    sizes = feed.sizes.check(indices, source.read(indices), source.name)[0]
    return feed.columns.make(epoch, indices, None, sizes)


def same(fed: Fed, other: Fed) -> bool:
    return all(np.array_equal(a, b) for a, b in zip(fed.params(), other.params(), strict=True))


@pytest.mark.parametrize("preset", ["randaugment", "dino"])  # one view; ten, decoded once
def test_good_batches_are_drawn_on_a_read_thread_with_their_plans_epoch(
    identity_tree: Path, preset: str
) -> None:
    feed, draws = feed_of(identity_tree, preset=preset)
    plan = EpochPlan(3, [np.arange(0, 6), np.arange(6, 12), np.arange(12, 17)])
    try:
        feed.start(plan)
        fed = [feed.batch() for _ in plan.batches]
        drawn = list(draws.calls)
    finally:
        feed.close()
    here = threading.get_ident()
    assert len(drawn) == len(plan.batches)
    assert all(thread != here for thread, _ in drawn), "the callback drew"
    assert {epoch for _, epoch in drawn} == {3}
    for batch, columns in zip(plan.batches, fed, strict=True):
        assert same(columns, expected(feed, batch, 3))


def test_a_batch_with_a_bad_file_is_drawn_when_fed_over_its_substitute(
    identity_tree: Path, tmp_path: Path
) -> None:
    root = tmp_path / "tree"
    shutil.copytree(identity_tree, root)
    (root / "ant" / "img_00.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    feed, draws = feed_of(root, "data.on_error=skip")
    batches = [np.arange(0, 6), np.arange(6, 12)]
    plan = EpochPlan(1, batches, positions=batches)
    try:
        feed.start(plan)
        first = feed.batch()
        mended = feed.in_flight[0].indices
        drawn_first = list(draws.calls)
        second = feed.batch()
    finally:
        feed.close()
    here = threading.get_ident()
    assert 0 not in mended.tolist() and len(mended) == 6, "sample 0 is substituted"
    assert (here, 1) in drawn_first, "the mended batch is drawn when fed"
    assert same(first, expected(feed, mended, 1))
    assert same(second, expected(feed, plan.batches[1], 1))
    assert feed.bad.reasons, "the bad file is reported"
