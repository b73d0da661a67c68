"""Resolution schedules: the training output size follows FFCV's progressive resizing per
epoch on every backend, DALI takes the size as fed data (built once), evaluation keeps
its own resize and crop."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from conftest import BUNDLED_PHOTOS, gpu

from dali_pipes import build_loader, compose_config
from dali_pipes.augment.ops.crop import RandomResizedCrop
from dali_pipes.backends.dali.loader import DaliLoader
from dali_pipes.config.compose import augment_preset
from dali_pipes.errors import ConfigError

PHOTOS = BUNDLED_PHOTOS  # the 13 real photos shipped in the package, 3 classes


def ffcv_resolution(epoch: int, lo: int, hi: int, start: int, end: int) -> int:
    """FFCV's ``get_resolution`` (ffcv-imagenet train_imagenet.py), written out again."""
    if epoch <= start:
        return lo
    if epoch >= end:
        return hi
    return int(np.round(np.interp([epoch], [start, end], [lo, hi])[0] / 32)) * 32


def test_the_ffcv_preset_ramps_160_to_192_as_ffcv_does_and_evaluates_at_224_from_256() -> None:
    spec = augment_preset("ffcv")
    crop = spec.pipeline(True).crop
    assert isinstance(crop, RandomResizedCrop)
    sizes = [spec.out_size(True, epoch) for epoch in range(88)]
    assert sizes == [ffcv_resolution(e, 160, 192, 65, 76) for e in range(88)]
    assert sizes[0] == 160 and sizes[-1] == 192 and set(sizes) == {160, 192}
    assert {spec.out_size(False, e) for e in (0, 70, 87)} == {224}
    assert spec.val.crop["resize"] == 256


def test_a_ramp_rounds_to_the_multiple_between_its_ends() -> None:
    crop = RandomResizedCrop(size=224, start_size=96, start_ramp=2, end_ramp=6, size_multiple=32)
    assert [crop.size_at(e) for e in range(8)] == [96, 96, 96, 128, 160, 192, 224, 224]


BACKENDS = [
    "torch",
    "dali-cpu",
    "synthetic",
    "ram",
    pytest.param("dali-gpu", marks=[gpu, pytest.mark.slow]),
]


@pytest.mark.parametrize("kind", BACKENDS)
def test_each_epochs_size_follows_the_schedule_and_dali_is_built_once(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    builds: list[int] = []
    original = DaliLoader._build

    def counted(self: DaliLoader) -> Any:
        builds.append(1)
        return original(self)

    monkeypatch.setattr(DaliLoader, "_build", counted)
    backend = {"ram": "torch", "synthetic": "synthetic"}.get(kind, kind.split("-")[0])
    cfg = compose_config(
        [
            "data=folder",
            f"data.root={PHOTOS}",
            "data.batch_size=4",
            *(["data.cache=ram"] if kind == "ram" else []),
            "augment=ffcv",
            "augment.train.crop.size=96",
            "augment.train.crop.start_size=32",
            "augment.train.crop.start_ramp=1",
            "augment.train.crop.end_ramp=3",
            "augment.val.crop.size=48",
            "augment.val.crop.resize=56",
            f"backend={backend}",
            f"backend.device={'gpu' if kind.endswith('gpu') else 'cpu'}",
            *(["backend.num_workers=0"] if backend == "torch" else []),
        ]
    )
    with build_loader(cfg, "train") as loader:
        seen = []
        for epoch in range(5):
            loader.set_epoch(epoch)
            shapes = {tuple(images.shape[-3:]) for images, _ in loader}
            seen.append(shapes)
    assert seen == [{(3, s, s)} for s in (32, 32, 64, 96, 96)]
    with build_loader(cfg, "val") as val:
        assert {tuple(images.shape[-2:]) for images, _ in val} == {(48, 48)}
    assert len(builds) == (2 if kind.startswith("dali") else 0), "one pipeline per split"


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("augment.train.crop.start_size=16", r"augment\.train\.crop\.start_size=16 .*>= 32"),
        ("augment.train.crop.end_ramp=10", r"augment\.train\.crop\.end_ramp=10 .*>= 65"),
        ("augment.train.crop.size_multiple=0", r"augment\.train\.crop\.size_multiple=0"),
        ("augment.val.crop.resize=200", r"augment\.val\.crop\.resize=200 .*>= size \(224\)"),
    ],
)
def test_a_bad_schedule_fails_at_composition_with_one_line_naming_the_key(
    override: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        compose_config(["augment=ffcv", override])
    assert "\n" not in str(info.value)
