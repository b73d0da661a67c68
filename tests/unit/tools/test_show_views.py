"""``show`` with a split of views: each sample's views side by side, one row per backend,
then a row of their differences; the same views on both backends."""

from __future__ import annotations

from pathlib import Path

import torch
from conftest import BUNDLED_PHOTOS
from helpers.png import check_png
from test_show import preview_config

from dali_pipes.tools.grid import PAD
from dali_pipes.tools.show import run_show


def test_a_preview_of_views_draws_each_samples_views_side_by_side(tmp_path: Path) -> None:
    out = tmp_path / "views.png"
    cfg = preview_config(
        out,
        "data=folder",
        f"data.root={BUNDLED_PHOTOS}",
        "augment=dino",
        "augment.train.crop.size=32",
        "augment.train.views.local.crop.size=16",
        "augment.train.views.local.count=2",
        samples=2,
        tile=48,
    )
    shown = run_show(cfg)["shown"]
    for s in shown:
        assert [tuple(v.shape) for v in s.images] == [(2, 3, 32, 32)] * 2 + [(2, 3, 16, 16)] * 2
    a, b = shown
    assert torch.equal(a.labels, b.labels)
    for x, y in zip(a.images, b.images, strict=True):  # normalised, so ~0.02 per grey level
        assert (x - y).abs().mean() < 0.05
    pixels = check_png(out)
    # 4 views wide (and the row titles); 2 samples x (2 backends + their difference) high
    assert pixels.shape[1] > 4 * (48 + PAD) and pixels.shape[0] > 6 * 48
