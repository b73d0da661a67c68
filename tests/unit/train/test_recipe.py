"""The trainer's recipe knobs, unit by unit: optimizer and schedule ``_target_`` nodes,
LARS, the losses on hard and soft targets, gradient clipping, soft-target accuracy."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from typing import Any, cast

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from dali_pipes import compose_config
from dali_pipes.backends.base import Loader
from dali_pipes.config.specs import to_spec
from dali_pipes.config.trainer import TrainerSpec
from dali_pipes.errors import ConfigError
from dali_pipes.train.loop import EpochStats, StepConfig, train_one_epoch
from dali_pipes.train.losses import TargetLoss, soft_target_cross_entropy
from dali_pipes.train.optimizers import LARS, make_optimizer
from dali_pipes.train.schedules import make_scheduler, warmup_cosine
from dali_pipes.train.state import trainer_spec
from dali_pipes.train.tasks import Classification


def trainer(*overrides: str) -> TrainerSpec:
    return trainer_spec(compose_config(["data=synthetic", *overrides]).trainer)


def net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(4, 2))


def lrs(scheduler: Any, optimizer: torch.optim.Optimizer, steps: int) -> list[float]:
    out = []
    for _ in range(steps):
        out.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return out


# --------------------------------------------------------------------------- optimizer


def test_the_default_optimizer_and_schedule_are_the_previous_recipe_numerically() -> None:
    """SGD, Nesterov 0.9, lr = base_lr x batch / reference, decay on conv/linear weights only,
    warm-up + cosine -- for the schema default (imagenet) and for the default job's quick."""
    quick = to_spec(compose_config().trainer, TrainerSpec)  # data=sample picks trainer=quick
    for spec, base_lr, wd, batch in ((TrainerSpec(), 0.1, 1e-4, 1024), (quick, 1.0, 5e-4, 32)):
        model = net()
        opt = make_optimizer(model, spec, batch)
        assert type(opt) is torch.optim.SGD
        decay, no_decay = opt.param_groups
        assert decay["lr"] == pytest.approx(base_lr * batch / 256)
        assert decay["momentum"] == 0.9 and decay["nesterov"] is True
        assert decay["weight_decay"] == wd and no_decay["weight_decay"] == 0.0
        assert len(decay["params"]) == 2 and len(no_decay["params"]) == 4
        reference = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=decay["lr"])
        warm = round(spec.warmup_epochs * 10)
        want = lrs(warmup_cosine(reference, 50, warm), reference, 50)
        assert lrs(make_scheduler(opt, spec, 10, 50), opt, 50) == pytest.approx(want)


def test_adamw_and_lars_are_built_from_the_optimizer_node() -> None:
    spec = trainer(
        "trainer.optimizer._target_=torch.optim.AdamW",
        "+trainer.optimizer.betas=[0.9,0.95]",
        "trainer.weight_decay=0.05",
        "trainer.base_lr=0.004",
        "trainer.lr_reference_batch=512",
    )
    opt = make_optimizer(net(), spec, 256)
    assert type(opt) is torch.optim.AdamW
    assert opt.param_groups[0]["lr"] == pytest.approx(0.002)
    assert tuple(opt.param_groups[0]["betas"]) == (0.9, 0.95)
    assert [g["weight_decay"] for g in opt.param_groups] == [0.05, 0.0]

    lars = make_optimizer(
        net(),
        trainer(
            "trainer.optimizer._target_=dali_pipes.train.optimizers.LARS",
            "+trainer.optimizer.eta=0.002",
            "trainer.momentum=0.8",
        ),
        256,
    )
    assert type(lars) is LARS
    group = lars.param_groups[0]
    assert (group["momentum"], group["eta"], group["lr"]) == (0.8, 0.002, pytest.approx(0.1))
    assert "nesterov" not in group  # LARS takes no nesterov; SGD's default is not forced on it


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (["trainer.optimizer._target_=torch.optim.Nope"], "trainer.optimizer._target_="),
        (["trainer.optimizer._target_=no_such_module.Opt"], "trainer.optimizer._target_="),
        (["trainer.optimizer._target_=math.pi"], "trainer.optimizer._target_="),
        (["+trainer.optimizer.betaz=[0.9,0.9]"], "trainer.optimizer.betaz="),
        (["+trainer.optimizer.lr=0.1"], "trainer.optimizer.lr="),
        (
            ["trainer.optimizer._target_=torch.optim.AdamW", "+trainer.optimizer.betas=[2,0.9]"],
            "trainer.optimizer=",
        ),
        (
            ["trainer.schedule._target_=dali_pipes.train.schedules.nope"],
            "trainer.schedule._target_=",
        ),
        (
            [
                "trainer.schedule._target_=dali_pipes.train.schedules.warmup_step",
                "+trainer.schedule.milestones=[60,30]",
            ],
            "trainer.schedule.milestones=",
        ),
        (["trainer.loss=focal"], "trainer.loss="),
        (["trainer.ema_decay=1.0"], "trainer.ema_decay="),
        (["trainer.clip_grad_norm=0"], "trainer.clip_grad_norm="),
    ],
)
def test_bad_recipe_values_are_one_line_config_errors_naming_the_key(
    overrides: list[str], key: str
) -> None:
    with pytest.raises(ConfigError) as info:
        trainer(*overrides)
    message = str(info.value)
    assert message.startswith(key) and "\n" not in message, message


def test_lars_scales_each_step_by_the_trust_ratio_and_skips_groups_without_decay() -> None:
    # w = (3, 4), |w| = 5; g = (0.6, 0.8), |g| = 1; weight decay 0.1, eta 0.001:
    # trust = 0.001 * 5 / (1 + 0.1 * 5) = 1/300; update = trust * (g + 0.1 w) = (0.003, 0.004)
    w = nn.Parameter(torch.tensor([3.0, 4.0], dtype=torch.float64))
    bias = nn.Parameter(torch.tensor([1.0, 1.0], dtype=torch.float64))
    opt = LARS(
        [{"params": [w], "weight_decay": 0.1}, {"params": [bias], "weight_decay": 0.0}],
        lr=1.0,
        momentum=0.5,
        eta=0.001,
    )
    assert float(LARS.trust_ratio(w.detach(), torch.tensor([0.6, 0.8]), 0.1, 0.001)) == (
        pytest.approx(1 / 300)
    )
    grad = torch.tensor([0.6, 0.8], dtype=torch.float64)
    w.grad, bias.grad = grad.clone(), grad.clone()
    opt.step()
    assert w.detach().tolist() == pytest.approx([3 - 0.003, 4 - 0.004])
    assert bias.detach().tolist() == pytest.approx([1 - 0.6, 1 - 0.8])  # plain momentum SGD
    # Second step: the new trust ratio's update plus half of the first (momentum 0.5).
    w1 = w.detach().clone()
    trust = 0.001 * w1.norm() / (grad.norm() + 0.1 * w1.norm())
    expected = w1 - (trust * (grad + 0.1 * w1) + 0.5 * torch.tensor([0.003, 0.004]))
    w.grad = grad.clone()
    opt.step()
    assert w.detach().tolist() == pytest.approx(expected.tolist())
    # A zero weight (or gradient) has no ratio: the step is the plain one.
    zero = torch.zeros(2)
    assert float(LARS.trust_ratio(zero, torch.ones(2), 0.1, 0.001)) == 1.0


# --------------------------------------------------------------------------- schedules


def test_step_and_linear_schedules_at_chosen_steps() -> None:
    """10 steps an epoch, warm-up 0.2 epochs (2 steps), 5 epochs (50 steps)."""
    step = trainer(
        "trainer.schedule._target_=dali_pipes.train.schedules.warmup_step",
        "+trainer.schedule.milestones=[1,3]",
        "+trainer.schedule.gamma=0.5",
        "trainer.warmup_epochs=0.2",
    )
    opt = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    got = lrs(make_scheduler(opt, step, 10, 50), opt, 50)
    assert got[0] == pytest.approx(0.5) and got[1] == pytest.approx(1.0)
    assert got[2] == got[9] == pytest.approx(1.0)
    assert got[10] == got[29] == pytest.approx(0.5)
    assert got[30] == got[49] == pytest.approx(0.25)

    linear = trainer(
        "trainer.schedule._target_=dali_pipes.train.schedules.warmup_linear",
        "trainer.warmup_epochs=0.2",
    )
    opt = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    got = lrs(make_scheduler(opt, linear, 10, 50), opt, 50)
    # after warm-up: 1 - (step - 2) / 48, reaching 0 at step 50
    assert got[0] == pytest.approx(0.5) and got[1] == pytest.approx(1.0)
    assert got[2] == pytest.approx(1.0)
    assert got[26] == pytest.approx(0.5)
    assert got[49] == pytest.approx(1 / 48)


# --------------------------------------------------------------------------- losses


def test_soft_target_cross_entropy_is_the_formula_and_hard_ce_on_one_hot_targets() -> None:
    torch.manual_seed(0)
    logits = torch.randn(5, 4)
    soft = torch.softmax(torch.randn(5, 4), dim=1)
    by_hand = -(soft * torch.log(torch.exp(logits) / torch.exp(logits).sum(1, keepdim=True)))
    loss = TargetLoss("ce", label_smoothing=0.1)  # smoothing is not applied to soft targets
    assert float(loss(logits, soft)) == pytest.approx(float(by_hand.sum(1).mean()), rel=1e-5)
    direct = soft_target_cross_entropy(logits, soft)
    assert float(direct) == pytest.approx(float(loss(logits, soft)))
    labels = torch.tensor([0, 3, 1, 1, 2])
    one_hot = F.one_hot(labels, 4).float()
    assert float(TargetLoss("ce")(logits, one_hot)) == pytest.approx(
        float(F.cross_entropy(logits, labels)), rel=1e-6
    )
    assert float(loss(logits, labels)) == pytest.approx(
        float(F.cross_entropy(logits, labels, label_smoothing=0.1)), rel=1e-6
    )


def test_bce_on_hard_labels_is_the_smoothed_one_hot_formula_and_soft_targets_as_given() -> None:
    logits = torch.tensor([[2.0, -1.0, 0.5], [0.0, 1.5, -2.0]])
    labels = torch.tensor([0, 2])
    s, c = 0.3, 3
    off, on = s / c, 1 - s + s / c  # 0.1 and 0.8
    targets = torch.tensor([[on, off, off], [off, off, on]])
    p = torch.sigmoid(logits)
    by_hand = -(targets * torch.log(p) + (1 - targets) * torch.log(1 - p)).mean()
    assert float(TargetLoss("bce", s)(logits, labels)) == pytest.approx(float(by_hand), rel=1e-6)
    soft = torch.tensor([[0.6, 0.4, 0.0], [0.0, 0.25, 0.75]])
    q = -(soft * torch.log(p) + (1 - soft) * torch.log(1 - p)).mean()
    assert float(TargetLoss("bce", s)(logits, soft)) == pytest.approx(float(q), rel=1e-6)


# --------------------------------------------------------------------------- the loop


class FakeLoader:
    """The part of the loader contract the loop uses: ``device``, ``len`` and ``iter``."""

    def __init__(self, batches: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        self.batches = batches
        self.device = torch.device("cpu")

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        return iter(self.batches)


def run_epoch(
    model: nn.Module,
    batches: list[tuple[torch.Tensor, torch.Tensor]],
    optimizer: torch.optim.Optimizer,
    criterion: nn.Module,
    clip: float | None = None,
    scaler: torch.amp.GradScaler | None = None,
) -> EpochStats:
    return train_one_epoch(
        model,
        cast(Loader, FakeLoader(batches)),
        Classification(criterion),
        optimizer,
        torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0),
        scaler or torch.amp.GradScaler("cpu", enabled=False),
        StepConfig(None, False, clip_grad_norm=clip),
        "test",
    )


def test_a_soft_target_step_trains_and_counts_top1_by_the_targets_argmax() -> None:
    model = nn.Linear(4, 3)
    with torch.no_grad():  # every sample predicts class 0 (logits 2, 1, 0)
        model.weight.zero_()
        model.bias.copy_(torch.tensor([2.0, 1.0, 0.0]))
    images = torch.randn(4, 4)
    soft = torch.tensor([[0.7, 0.2, 0.1], [0.5, 0.4, 0.1], [0.2, 0.6, 0.2], [0.1, 0.1, 0.8]])
    opt = torch.optim.SGD(model.parameters(), lr=0.0)  # the logits stay put
    stats = run_epoch(model, [(images, soft)], opt, TargetLoss("ce"))
    assert stats.correct1 == 2 and stats.samples == 4  # argmaxes 0, 0, 1, 2
    logits = torch.tensor([[2.0, 1.0, 0.0]]).expand(4, 3)
    want = float(soft_target_cross_entropy(logits, soft))
    assert stats.loss_sum / stats.samples == pytest.approx(want, rel=1e-6)
    assert model.weight.grad is not None and model.weight.grad.abs().sum() > 0
    hard = run_epoch(model, [(images, torch.tensor([0, 1, 0, 2]))], opt, TargetLoss("ce"))
    assert hard.correct1 == 2


class RecordingSGD(torch.optim.SGD):
    """SGD that records the global gradient norm it is asked to step with."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.norms: list[float] = []

    def step(self, closure: Any = None) -> Any:
        grads = [p.grad for g in self.param_groups for p in g["params"] if p.grad is not None]
        self.norms.append(float(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))))
        return super().step(closure)


@pytest.mark.parametrize("scaled", [False, True], ids=["fp32", "grad-scaler"])
def test_clip_grad_norm_bounds_the_gradient_norm_of_each_step(scaled: bool) -> None:
    """With a GradScaler the gradients must be unscaled before clipping: clipping the
    scaled ones would leave a norm of clip / scale, far below the bound, not at it."""
    torch.manual_seed(0)
    batches = [(100 * torch.randn(8, 16), torch.randint(0, 4, (8,))) for _ in range(3)]

    def norms(clip: float | None) -> list[float]:
        torch.manual_seed(1)
        model = nn.Linear(16, 4)
        opt = RecordingSGD(model.parameters(), lr=1e-4)
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10) if scaled else None
        run_epoch(model, batches, opt, TargetLoss("ce"), clip, scaler)
        return opt.norms

    free = norms(None)
    assert len(free) == 3 and min(free) > 5.0, free
    clipped = norms(1.0)
    assert clipped == pytest.approx([1.0, 1.0, 1.0], rel=1e-4), clipped
    assert all(math.isfinite(n) for n in clipped)


def test_a_target_that_cannot_be_imported_logs_nothing_besides_its_one_line_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Hydra's public lookup (``hydra.utils.get_object``) logs the error it raises; the
    one-line ConfigError is all the user sees."""
    from dali_pipes.config.targets import locate

    with caplog.at_level(logging.DEBUG), pytest.raises(ConfigError, match="cannot import it"):
        locate({"_target_": "torch.optim.Nope"}, "trainer.optimizer")
    assert [r for r in caplog.records if r.name.startswith("hydra")] == []
    assert locate({"_target_": "torch.optim.SGD"}, "trainer.optimizer") is torch.optim.SGD
