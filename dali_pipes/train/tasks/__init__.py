"""The tasks a run trains (``task=classification|detection|segmentation``): each says
how a batch gives its loss and how an evaluation pass gives the epoch's figures
(:class:`~dali_pipes.train.tasks.base.Task`), so the loop never branches on the task."""

from __future__ import annotations

from typing import Any

from dali_pipes.config.trainer import TrainerSpec
from dali_pipes.errors import ConfigError
from dali_pipes.train.losses import make_criterion
from dali_pipes.train.tasks.base import Evaluated, StepOut, Task
from dali_pipes.train.tasks.classification import Classification

__all__ = ["TASKS", "Classification", "Evaluated", "StepOut", "Task", "make_task"]

#: The tasks by ``task.name``.
TASKS = ("classification", "detection", "segmentation")


def make_task(cfg: Any, spec: TrainerSpec, num_classes: int) -> Task:
    """The task ``cfg.task.name`` names (classification without a ``task`` node), for a
    dataset of ``num_classes`` classes (background included where the task has one)."""
    node = cfg.get("task") if hasattr(cfg, "get") else None
    name = "classification" if node is None else str(node.get("name", "classification"))
    if name == "classification":
        return Classification(make_criterion(spec))
    if name == "detection":
        from dali_pipes.train.tasks.detection import Detection

        return Detection(num_classes, masks=bool(cfg.data.get("masks", False)))
    if name == "segmentation":
        from dali_pipes.train.tasks.segmentation import Segmentation

        return Segmentation(num_classes, int(cfg.data.get("ignore_index", 255)))
    raise ConfigError(f"task={name!r} is not a task; choose one of {', '.join(TASKS)}")
