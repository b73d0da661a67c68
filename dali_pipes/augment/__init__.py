"""Augmentation: what an op is and its registry, the per-split pipeline, keyed randomness,
the crop geometry, and the ops themselves (:mod:`.ops`, one module each).

Built-in ops (config name: module of :mod:`.ops`): the decode-fused crops
``random_resized_crop`` and ``resize_center_crop`` (``crop``), ``center_crop`` and
``random_crop`` (torchvision's ``CenterCrop`` / ``RandomCrop`` after an optional resize,
with padding), ``iou_crop``, ``shortest_size``, ``scale_jitter`` and ``whole`` (the
detection references' crops and multi-scale resizes, and no geometry at all); ``hflip``
(``flip``), ``vflip``, ``color_jitter``, ``photometric_distort``, ``grayscale``,
``gaussian_blur``, ``solarize``, ``randaugment``, ``trivialaugment``, ``autoaugment``, and
``random_apply`` (a list of ops applied together with a probability).
Register your own with :func:`register_op` (docs/how-to/augmentation.md).

Batch ops (:mod:`.batch`, after the per-sample ops, on whole batches): ``mixup``
(``mixup``, mixup and cutmix with soft targets) and ``random_erasing`` (``erasing``).
"""

from __future__ import annotations

from dali_pipes.augment.base import Context, CropOp, Op, Params, Row, op_names, register_op
from dali_pipes.augment.batch import BatchOp, BatchStage, register_batch_op
from dali_pipes.augment.ops import (  # noqa: F401 - importing registers the built-in ops
    autoaugment,
    center_crop,
    color_jitter,
    crop,
    erasing,
    fixed_size,
    flip,
    gaussian_blur,
    grayscale,
    iou_crop,
    mixup,
    photometric,
    randaugment,
    random_apply,
    random_crop,
    shortest_size,
    solarize,
    trivialaugment,
    vflip,
    whole,
)
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
