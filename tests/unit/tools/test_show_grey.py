"""``show`` draws one-channel batches (torchvision's ``Grayscale()``) like any other."""

from __future__ import annotations

from pathlib import Path

from conftest import BUNDLED_PHOTOS
from helpers.png import check_png
from test_show import grid_width, preview_config

from dali_pipes.selfcheck.bounds import DALI_CPU_VS_TORCH, figures
from dali_pipes.tools.show import run_show

V2 = "torchvision.transforms.v2"
GREY = (
    f"{{_target_: {V2}.Compose, transforms: [{{_target_: {V2}.RandomResizedCrop, size: 48}}, "
    f"{{_target_: {V2}.Grayscale}}, {{_target_: {V2}.PILToTensor}}]}}"
)


def test_a_preview_of_grey_batches_draws_each_sample_on_every_backend(tmp_path: Path) -> None:
    out = tmp_path / "show.png"
    cfg = preview_config(
        out,
        "data=folder",
        f"data.root={BUNDLED_PHOTOS}",
        "data.batch_size=4",
        f"augment.torchvision.train={GREY}",
        f"augment.torchvision.val={GREY}",
        samples=3,
        tile=64,
    )
    shown = run_show(cfg)["shown"]
    for s in shown:
        assert s.images.shape == (3, 1, 48, 48)
    measured = figures(shown[0].images.float(), shown[1].images.float())
    assert DALI_CPU_VS_TORCH.admits(measured), measured  # the same crops, one channel
    check_png(out, width=grid_width(3, 64))
