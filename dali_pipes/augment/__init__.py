"""Augmentation ops: one module each, a registry by name, and the per-split pipeline.

Built-in ops (config name: module): ``random_resized_crop`` and ``resize_center_crop``
(:mod:`.crop`, decode-fused), ``hflip`` (:mod:`.flip`), ``color_jitter``
(:mod:`.color_jitter`), ``grayscale`` (:mod:`.grayscale`), ``gaussian_blur``
(:mod:`.gaussian_blur`), ``randaugment`` (:mod:`.randaugment`), ``trivialaugment``
(:mod:`.trivialaugment`), ``autoaugment`` (:mod:`.autoaugment`). Register your own with
:func:`register_op` (see the README).

Batch ops (:mod:`.batch`, after the per-sample ops, on whole batches): ``mixup``
(:mod:`.mixup`, mixup and cutmix with soft targets) and ``random_erasing``
(:mod:`.erasing`).
"""

from __future__ import annotations

from dali_pipes.augment import (  # noqa: F401 - importing registers the built-in ops
    autoaugment,
    color_jitter,
    crop,
    erasing,
    flip,
    gaussian_blur,
    grayscale,
    mixup,
    randaugment,
    trivialaugment,
)
from dali_pipes.augment.base import Context, CropOp, Op, Params, Row, op_names, register_op
from dali_pipes.augment.batch import BatchOp, BatchStage, register_batch_op
from dali_pipes.augment.pipeline import Draw, Pipeline, parse_pipeline

__all__ = [
    "BatchOp",
    "BatchStage",
    "Context",
    "CropOp",
    "Draw",
    "Op",
    "Params",
    "Pipeline",
    "Row",
    "op_names",
    "parse_pipeline",
    "register_batch_op",
    "register_op",
]
