"""``task=``: the config picks the task and its defaults, an unknown one is refused in one
line, and the segmentation reference's poly schedule decays as it does."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from dali_pipes import compose_config
from dali_pipes.config.specs import to_spec
from dali_pipes.config.trainer import TrainerSpec
from dali_pipes.errors import ConfigError
from dali_pipes.train.schedules import warmup_poly
from dali_pipes.train.tasks import Classification, make_task
from dali_pipes.train.tasks.detection import Detection
from dali_pipes.train.tasks.segmentation import Segmentation


@pytest.mark.parametrize(
    ("task", "kind", "data", "model"),
    [
        ("classification", Classification, "sample", "small_cnn"),
        ("detection", Detection, "sample_objects", "small_detector"),
        ("segmentation", Segmentation, "sample_segmentation", "small_segmenter"),
    ],
)
def test_a_task_picks_its_data_model_and_evaluation(
    task: str, kind: type, data: str, model: str
) -> None:
    pytest.importorskip("pycocotools")
    cfg = compose_config([f"task={task}"])
    assert (cfg.data.name, cfg.model.name) == (data, model)
    made = make_task(cfg, to_spec(cfg.trainer, TrainerSpec), 5)
    assert isinstance(made, kind) and made.name == task


def test_the_command_line_still_chooses_over_the_tasks_defaults() -> None:
    cfg = compose_config(["task=detection", "model=ssdlite320_mobilenet_v3_large", "data.root=x"])
    assert cfg.model.name == "ssdlite320_mobilenet_v3_large" and cfg.data.name == "sample_objects"


def test_an_unknown_task_is_refused_in_one_line() -> None:
    cfg = compose_config(["task=classification", "task.name=tracking"])
    with pytest.raises(ConfigError, match=r"^task='tracking' is not a task; choose one of "):
        make_task(cfg, to_spec(cfg.trainer, TrainerSpec), 5)


def test_the_poly_schedule_warms_up_then_decays_as_the_reference() -> None:
    optimizer = torch.optim.SGD(nn.Linear(1, 1).parameters(), lr=1.0)
    schedule = warmup_poly(optimizer, total_steps=110, warmup_steps=10, power=0.9)
    seen = []
    for _ in range(110):
        seen.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        schedule.step()
    assert seen[0] == pytest.approx(0.1) and seen[9] == pytest.approx(1.0)
    assert seen[10] == pytest.approx(1.0)
    assert seen[60] == pytest.approx((1 - 50 / 100) ** 0.9)
    assert seen[109] == pytest.approx((1 - 99 / 100) ** 0.9)
