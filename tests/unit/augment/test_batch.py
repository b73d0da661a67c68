"""The batch stage: mixup/cutmix with soft targets and random erasing (timm's semantics),
the same on every backend, a pure function of (seed, epoch, batch position)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torchvision.transforms.v2.functional as F
from conftest import BUNDLED_PHOTOS

from dali_pipes import DALIIterator, build_loader, compose_config
from dali_pipes.augment import BatchStage
from dali_pipes.augment.ops.erasing import RandomErasing
from dali_pipes.augment.ops.mixup import Mixup
from dali_pipes.config.compose import augment_preset
from dali_pipes.errors import ConfigError

PHOTOS = BUNDLED_PHOTOS  # the 13 real photos shipped in the package, 3 classes


def numbered(n: int, size: int = 16) -> torch.Tensor:
    """Image i is the constant i + 1: every output pixel says where it came from."""
    return torch.arange(1, n + 1, dtype=torch.float32).view(n, 1, 1, 1).expand(n, 3, size, size)


# --------------------------------------------------------------------------- mixup / cutmix


def test_mixup_and_cutmix_give_float32_soft_targets_whose_rows_sum_to_one() -> None:
    stage = BatchStage((Mixup(label_smoothing=0.1),), num_classes=5, seed=3)
    labels = torch.tensor([0, 1, 2, 3, 4, 4, 1])
    for position in range(40):
        _, targets = stage(numbered(7), labels, epoch=0, position=position)
        assert targets.dtype == torch.float32 and targets.shape == (7, 5)
        assert torch.allclose(targets.sum(dim=1), torch.ones(7), atol=1e-6)
        assert bool((targets >= 0.1 / 5 - 1e-7).all()), "smoothing puts s/C on every class"


def test_cutmix_weight_equals_the_pasted_box_share_of_the_pixels() -> None:
    stage = BatchStage((Mixup(mixup_alpha=0.0, cutmix_alpha=1.0, label_smoothing=0.0),), 8)
    n, size = 8, 20
    labels = torch.arange(n)
    pasted_some = 0
    for position in range(30):
        images, targets = stage(numbered(n, size), labels, epoch=1, position=position)
        for i in range(n):
            own = (images[i, 0] == i + 1).float().mean().item()
            partner = n - 1 - i
            assert targets[i, i].item() == pytest.approx(own, abs=1e-6)
            assert targets[i, partner].item() == pytest.approx(1 - own, abs=1e-6)
            pasted_some += own < 1
    assert pasted_some > 0


def test_mixup_blends_each_image_with_its_partner_in_reversed_order_by_the_target_weight() -> None:
    stage = BatchStage((Mixup(mixup_alpha=0.8, cutmix_alpha=0.0, label_smoothing=0.0),), 6)
    x = torch.randn(6, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    images, targets = stage(x, torch.arange(6), epoch=0, position=5)
    lam = targets[0, 0].item()
    assert 0 < lam < 1
    assert torch.allclose(images, lam * x + (1 - lam) * x.flip(0), atol=1e-6)
    assert torch.equal(x, torch.randn(6, 3, 8, 8, generator=torch.Generator().manual_seed(0)))


def test_an_odd_batch_mixes_its_middle_image_with_itself() -> None:
    stage = BatchStage((Mixup(label_smoothing=0.0),), num_classes=3)
    images, targets = stage(numbered(3), torch.tensor([0, 1, 2]), epoch=0, position=0)
    assert torch.equal(images[1], numbered(3)[1])
    assert torch.equal(targets[1], torch.tensor([0.0, 1.0, 0.0]))


def test_probability_and_switch_probability_choose_as_timm_does() -> None:
    """Over 400 batches: prob 0.5 mixes about half; switch_prob 0.25 picks cutmix for
    about a quarter of those (binomial 4-sigma bounds)."""
    stage = BatchStage((Mixup(prob=0.5, switch_prob=0.25),), num_classes=2)
    chosen = [stage.ops[0].draw(stage.rng(0, k), 4, (8, 8)) for k in range(400)]
    mixed = [p for p in chosen if p["lam"] != 1.0]
    cut = [p for p in mixed if p["cutmix"]]
    assert abs(len(mixed) - 200) < 4 * 10
    assert abs(len(cut) / len(mixed) - 0.25) < 4 * (0.25 * 0.75 / len(mixed)) ** 0.5


def test_mixup_needs_two_classes_and_says_which_key() -> None:
    with pytest.raises(ConfigError, match=r"^augment\.train\.batch\.mixup: .*at least 2 classes"):
        augment_preset("deit").batch_stage(True, num_classes=1)


def test_a_one_class_dataset_with_mixup_fails_when_the_loader_is_built(tmp_path: Path) -> None:
    one = tmp_path / "one"
    one.mkdir()
    (one / "birds").symlink_to((PHOTOS / "birds").resolve())
    cfg = compose_config(
        ["data=folder", f"data.root={one}", "augment=deit", "backend=torch", "backend.device=cpu"]
    )
    with pytest.raises(ConfigError, match=r"augment\.train\.batch\.mixup: .*the data has 1"):
        build_loader(cfg, "train")


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("augment.train.batch.mixup.prob=1.5", r"augment\.train\.batch\.mixup\.prob=1\.5"),
        ("augment.train.batch.random_erasing.mode=noise", r"random_erasing\.mode='noise'"),
        ("+augment.train.batch.cutout={p: 1}", r"unknown batch op 'cutout'; known batch ops:"),
        ("augment.train.batch.random_erasing.min_area=0.5", r"random_erasing\.min_area=0\.5"),
    ],
)
def test_bad_batch_ops_fail_at_composition_with_one_line_naming_the_key(
    override: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        compose_config(["augment=deit", override])
    assert "\n" not in str(info.value)


# --------------------------------------------------------------------------- erasing


def test_erased_boxes_lie_inside_the_image_and_equal_torchvision_erase_for_the_same_box() -> None:
    op = RandomErasing(p=1.0, min_count=1, max_count=3)
    stage = BatchStage((op,), num_classes=2, seed=5)
    x = torch.randn(16, 3, 24, 20)
    out, labels = stage(x, torch.zeros(16, dtype=torch.int64), epoch=2, position=3)
    # Replay the stage's draws: its generator, then the noise seed, then the boxes.
    rng = stage.rng(2, 3)
    noise = torch.Generator().manual_seed(int(rng.integers(2**63 - 1)))
    boxes = op.draw(rng, 16, (24, 20))["boxes"]
    expected = x.clone()
    erased = 0
    for i in range(16):
        for top, left, h, w in boxes[i]:
            if h == 0:
                continue
            assert 0 <= top and top + h <= 24 and 0 <= left and left + w <= 20
            values = torch.randn((3, int(h), int(w)), generator=noise)
            expected[i] = F.erase(expected[i], int(top), int(left), int(h), int(w), values)
            erased += 1
    assert erased >= 16
    assert torch.equal(out, expected)
    assert torch.equal(labels, torch.zeros(16, dtype=torch.int64)), "erasing keeps hard labels"


def test_erasing_probability_and_area_follow_the_parameters() -> None:
    op = RandomErasing(p=0.25, min_area=0.02, max_area=1 / 3)
    boxes = np.concatenate(
        [op.draw(np.random.default_rng(k), 64, (64, 64))["boxes"] for k in range(20)]
    )
    hit = boxes[:, 0, 2] > 0
    assert abs(hit.mean() - 0.25) < 4 * (0.25 * 0.75 / len(hit)) ** 0.5
    area = boxes[hit, 0, 2] * boxes[hit, 0, 3] / 64**2
    assert area.min() >= 0.015 and area.max() <= 0.36  # rounding of h and w moves it a little


# --------------------------------------------------------------------------- loaders


def deit_batches(
    backend: str, epoch: int, start_batch: int = 0, seed: int = 4, extra: tuple[str, ...] = ()
) -> list[Any]:
    cfg = compose_config(
        [
            *extra,
            "data=folder",
            f"data.root={PHOTOS}",
            "data.batch_size=4",
            f"seed={seed}",
            "augment=deit",
            "augment.train.crop.size=48",
            "augment.train.batch.random_erasing.p=0.5",
            f"backend={backend.split('-')[0]}",
            "backend.device=cpu",
            *(["backend.num_workers=0"] if backend == "torch" else []),
        ]
    )
    with build_loader(cfg, "train") as loader:
        loader.set_epoch(epoch, start_batch=start_batch)
        return [(images.clone(), targets.clone()) for images, targets in loader]


def test_the_same_seed_epoch_and_batch_give_the_same_result_on_every_backend() -> None:
    """Targets are equal exactly; images to the resampling parity of the two backends
    (a grey level or two: < 0.1 after normalising, where a different mixing weight, box or
    noise moves values by whole units). RandAugment is left out here: its per-op parity,
    with its own bounds, is tests/parity/test_op_parity.py's."""
    runs = {
        b: deit_batches(b, epoch=3, extra=("~augment.train.ops.randaugment",))
        for b in ("torch", "dali-cpu")
    }
    for (a, ta), (b, tb) in zip(runs["torch"], runs["dali-cpu"], strict=True):
        assert torch.equal(ta, tb)
        assert ta.dtype == torch.float32 and ta.shape[1] == 3
        assert (a - b).abs().mean().item() < 0.01 and (a - b).abs().max().item() < 0.1


@pytest.mark.parametrize("backend", ["dali-cpu", "torch"])
def test_batch_stage_is_deterministic_and_a_resumed_epoch_replays_it(backend: str) -> None:
    first = deit_batches(backend, epoch=1)
    again = deit_batches(backend, epoch=1)
    for (a, ta), (b, tb) in zip(first, again, strict=True):
        assert torch.equal(a, b) and torch.equal(ta, tb)
    other = deit_batches(backend, epoch=2)
    assert not all(torch.equal(ta, tb) for (_, ta), (_, tb) in zip(first, other, strict=True))
    resumed = deit_batches(backend, epoch=1, start_batch=1)
    assert len(resumed) == len(first) - 1
    for (a, ta), (b, tb) in zip(first[1:], resumed, strict=True):
        assert torch.equal(a, b) and torch.equal(ta, tb)


def test_dali_iterator_applies_the_presets_batch_stage_and_hands_it_out() -> None:
    loader = DALIIterator(PHOTOS, batch_size=4, device="cpu", augment="deit", image_size=32)
    images, targets = next(iter(loader))
    assert targets.shape == (4, 3) and targets.dtype == torch.float32
    assert loader.batch_stage is not None and loader.batch_stage.soft_targets
    # The same object in a loop of one's own: a plain loader's output, hard labels in.
    plain = DALIIterator(PHOTOS, batch_size=4, device="cpu", image_size=32)
    images, labels = next(iter(plain))
    mixed, soft = loader.batch_stage(images, labels, epoch=0, position=0)
    assert mixed.shape == images.shape and soft.shape == (4, 3)
    loader.close()
    plain.close()
