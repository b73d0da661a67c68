"""The batch stage against the real timm (the dev extra installs it): its ``Mixup``
(``mode='batch'``) and ``RandomErasing`` fed the very random numbers our ops draw give the
same images and targets, and its ``SoftTargetCrossEntropy`` takes our soft targets."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
import torch

from dali_pipes.augment import BatchStage
from dali_pipes.augment.ops.erasing import ATTEMPTS, RandomErasing
from dali_pipes.augment.ops.mixup import TIMM_VERSION, Mixup

timm = pytest.importorskip("timm")
from timm.data import mixup as timm_mixup  # noqa: E402
from timm.data import random_erasing as timm_erasing  # noqa: E402
from timm.loss import SoftTargetCrossEntropy  # noqa: E402


class Replay:
    """Stands in for ``numpy.random`` / ``random`` inside timm: hands out, in order, the
    values our op drew for the same decisions."""

    def __init__(self, values: list[float]) -> None:
        self.values = list(values)

    def _next(self, *_: Any, **__: Any) -> Any:
        return self.values.pop(0)

    rand = beta = randint = random = uniform = _next


@contextmanager
def replaying(module: Any, name: str, values: list[float]) -> Iterator[Replay]:
    replay = Replay(values)
    saved = getattr(module, name)
    setattr(module, name, replay)
    try:
        yield replay
    finally:
        setattr(module, name, saved)
    assert not replay.values, "timm took fewer draws than given"


def test_the_semantics_follow_the_installed_timm() -> None:
    assert timm.__version__ == TIMM_VERSION


@pytest.mark.parametrize("size", [(15, 21), (16, 16)], ids=["odd", "even"])
def test_mixup_and_cutmix_equal_timms_for_the_same_lambda_and_box_centre(
    size: tuple[int, int],
) -> None:
    mixup = Mixup(mixup_alpha=0.8, cutmix_alpha=1.0, prob=0.8, switch_prob=0.5)
    stage = BatchStage((mixup,), num_classes=5, seed=11)
    theirs = timm_mixup.Mixup(
        mixup_alpha=0.8,
        cutmix_alpha=1.0,
        prob=0.8,
        switch_prob=0.5,
        mode="batch",
        label_smoothing=0.1,
        num_classes=5,
    )
    x = torch.randn(8, 3, *size, generator=torch.Generator().manual_seed(0))
    labels = torch.tensor([0, 1, 2, 3, 4, 0, 1, 2])
    kinds: dict[str, int] = {"cutmix": 0, "mixup": 0, "none": 0}
    for position in range(300):
        images, targets = stage(x.clone(), labels, epoch=0, position=position)
        # The raw draws of the stage, in its order: noise seed, then the op's.
        rng = stage.rng(0, position)
        rng.integers(2**63 - 1)
        apply, switch = rng.random(2)
        beta_mix, beta_cut = rng.beta(0.8, 0.8), rng.beta(1.0, 1.0)
        cy, cx = int(rng.integers(0, size[0])), int(rng.integers(0, size[1]))
        values: list[float] = [apply]
        if apply < 0.8:
            cut = switch < 0.5
            values += [switch, beta_cut if cut else beta_mix] + ([cy, cx] if cut else [])
        with replaying(timm_mixup.np, "random", values):
            expected, soft = theirs(x.clone(), labels)
        assert torch.allclose(images, expected, atol=1e-6), position
        assert torch.allclose(targets, soft, atol=1e-6), position
        kinds["none" if apply >= 0.8 else "cutmix" if switch < 0.5 else "mixup"] += 1
    assert min(kinds.values()) > 20, kinds


def test_random_erasing_equals_timms_for_the_same_draws() -> None:
    op = RandomErasing(p=0.5, mode="const", min_count=1, max_count=3)
    stage = BatchStage((op,), num_classes=2, seed=4)
    theirs = timm_erasing.RandomErasing(
        probability=0.5, mode="const", min_count=1, max_count=3, device="cpu"
    )
    n, height, width = 16, 24, 20
    assert op.max_count is not None and op.max_aspect is not None
    x = torch.randn(n, 3, height, width, generator=torch.Generator().manual_seed(1))
    erased = 0
    for position in range(20):
        images, _ = stage(x.clone(), torch.zeros(n, dtype=torch.int64), epoch=1, position=position)
        rng = stage.rng(1, position)
        rng.integers(2**63 - 1)
        apply = rng.random(n) < op.p
        count = rng.integers(op.min_count, op.max_count + 1, size=n)
        shape = (n, op.max_count, ATTEMPTS)
        area_u = rng.uniform(op.min_area, op.max_area, size=shape)
        log_aspect = rng.uniform(np.log(op.min_aspect), np.log(op.max_aspect), size=shape)
        # The corners come from our boxes (timm's randint); the rest is replayed raw.
        ours = op.draw(_after_seed(stage, 1, position), n, (height, width))["boxes"]
        values: list[float] = []
        for i in range(n):
            values.append(0.0 if apply[i] else 1.0)
            if not apply[i]:
                continue
            values.append(int(count[i]))
            for b in range(int(count[i])):
                for a in range(ATTEMPTS):
                    values += [area_u[i, b, a], log_aspect[i, b, a]]
                    target = area_u[i, b, a] * height * width / count[i]
                    aspect = math.exp(log_aspect[i, b, a])
                    h = round(math.sqrt(target * aspect))
                    w = round(math.sqrt(target / aspect))
                    if w < width and h < height:
                        top, left = int(ours[i, b, 0]), int(ours[i, b, 1])
                        values += [top, left]
                        erased += 1
                        break
        with replaying(timm_erasing, "random", values):
            expected = theirs(x.clone())
        assert torch.equal(images, expected), position
    assert erased > 50


def _after_seed(stage: BatchStage, epoch: int, position: int) -> np.random.Generator:
    rng = stage.rng(epoch, position)
    rng.integers(2**63 - 1)
    return rng


def test_timms_soft_target_cross_entropy_takes_our_soft_targets() -> None:
    stage = BatchStage((Mixup(label_smoothing=0.1),), num_classes=5, seed=2)
    x = torch.randn(8, 3, 16, 16)
    _, targets = stage(x, torch.tensor([0, 1, 2, 3, 4, 0, 1, 2]), epoch=0, position=1)
    logits = torch.randn(8, 5, requires_grad=True)
    loss = SoftTargetCrossEntropy()(logits, targets)
    expected = torch.sum(-targets * torch.log_softmax(logits, dim=-1), dim=-1).mean()
    assert torch.allclose(loss, expected)
    loss.backward()
    assert logits.grad is not None and torch.isfinite(logits.grad).all()
