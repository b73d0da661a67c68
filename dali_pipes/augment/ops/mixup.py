"""Mixup and cutmix with soft targets, with timm's ``Mixup`` semantics (``mode='batch'``).

The semantics follow timm 1.0.31 (:data:`TIMM_VERSION`; ``tests/unit/augment/
test_timm_mixup.py`` runs that timm's ``Mixup`` on the same draws and compares).

Per batch: with probability ``prob`` the batch is mixed, else it is left alone (its
targets are still soft: smoothed one-hot). When mixed and both alphas are > 0, cutmix is
chosen with probability ``switch_prob``, else mixup; lambda is drawn from
Beta(alpha, alpha) of the chosen one. Each image is mixed with the batch's reversed order
(image ``i`` with image ``N-1-i``), as timm does:

- mixup: ``x = lam * x + (1 - lam) * x.flip(0)``;
- cutmix: a box of ``int(side * sqrt(1 - lam))`` pixels per side, from ``c - cut // 2``
  to ``c + (cut + 1) // 2`` around a uniform centre ``c`` (so exactly ``cut`` wide in an
  odd dimension too, as timm's ``rand_bbox`` since 1.0.x) and clipped to the image, is
  pasted from ``x.flip(0)``; lambda is then corrected to the
  pasted area (``1 - box_area / image_area``), so the targets weigh each image by the
  share of pixels it really has (timm's ``correct_lam``).

Targets: ``lam * one_hot(y) + (1 - lam) * one_hot(y.flip(0))``, each one-hot smoothed by
``label_smoothing`` (``1 - s + s/C`` on the class, ``s/C`` elsewhere): rows sum to 1.
An odd batch (a last partial batch) mixes its middle image with itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from dali_pipes.augment.batch import BatchOp, one_hot, register_batch_op
from dali_pipes.augment.params import number
from dali_pipes.errors import ConfigError

#: The timm release whose ``Mixup`` (``mode='batch'``) these semantics equal.
TIMM_VERSION = "1.0.31"


def cutmix_box(
    size: tuple[int, int], lam: float, cy: int, cx: int
) -> tuple[tuple[int, int, int, int], float]:
    """timm's ``rand_bbox`` + lambda correction for a box centred at (``cy``, ``cx``):
    ((top, bottom, left, right), the pasted-area-corrected lambda). The box spans
    ``[c - cut // 2, c + (cut + 1) // 2)``: ``cut`` pixels, odd or even (timm 1.0.31)."""
    h, w = size
    ratio = float(np.sqrt(1.0 - lam))
    cut_h, cut_w = int(h * ratio), int(w * ratio)
    top, bottom = (int(np.clip(v, 0, h)) for v in (cy - cut_h // 2, cy + (cut_h + 1) // 2))
    left, right = (int(np.clip(v, 0, w)) for v in (cx - cut_w // 2, cx + (cut_w + 1) // 2))
    return (top, bottom, left, right), 1.0 - (bottom - top) * (right - left) / float(h * w)


@register_batch_op
@dataclass(frozen=True)
class Mixup(BatchOp):
    """timm ``Mixup(mixup_alpha, cutmix_alpha, prob, switch_prob, label_smoothing)``."""

    name = "mixup"
    soft_targets = True
    mixup_alpha: float = 0.8
    cutmix_alpha: float = 1.0
    prob: float = 1.0
    switch_prob: float = 0.5
    label_smoothing: float = 0.1

    def __post_init__(self) -> None:
        number(self, "mixup_alpha", 0)
        number(self, "cutmix_alpha", 0)
        number(self, "prob", 0, 1)
        number(self, "switch_prob", 0, 1)
        number(self, "label_smoothing", 0, 1)
        if self.label_smoothing >= 1:
            raise ConfigError(f"label_smoothing={self.label_smoothing} is invalid: need < 1")

    def check(self, num_classes: int, key: str) -> None:
        if num_classes < 2:
            raise ConfigError(
                f"{key}: mixup/cutmix need at least 2 classes, the data has {num_classes}; "
                "remove the mixup op or use a dataset with more classes"
            )

    def draw(self, rng: np.random.Generator, n: int, size: tuple[int, int]) -> dict[str, Any]:
        # Every draw is taken whatever the outcome, so the stream's use is fixed.
        apply, switch = rng.random(2)
        beta_mix = rng.beta(self.mixup_alpha, self.mixup_alpha) if self.mixup_alpha > 0 else 1.0
        beta_cut = rng.beta(self.cutmix_alpha, self.cutmix_alpha) if self.cutmix_alpha > 0 else 1.0
        cy, cx = int(rng.integers(0, size[0])), int(rng.integers(0, size[1]))
        lam, cutmix = 1.0, False
        enabled = self.mixup_alpha > 0 or self.cutmix_alpha > 0
        if enabled and apply < self.prob:
            if self.mixup_alpha > 0 and self.cutmix_alpha > 0:
                cutmix = bool(switch < self.switch_prob)
            else:
                cutmix = self.cutmix_alpha > 0
            lam = float(beta_cut if cutmix else beta_mix)
        box = None
        if cutmix:
            box, lam = cutmix_box(size, lam, cy, cx)
        return {"lam": lam, "cutmix": cutmix, "box": box}

    def apply(
        self,
        images: torch.Tensor,
        targets: torch.Tensor,
        params: Mapping[str, Any],
        noise: torch.Generator,
        num_classes: int,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        lam = float(params["lam"])
        if lam != 1.0:
            if params["cutmix"]:
                top, bottom, left, right = params["box"]
                pasted = images.flip(0)[:, :, top:bottom, left:right]
                images = images.clone()
                images[:, :, top:bottom, left:right] = pasted
            else:
                images = images * lam + images.flip(0) * (1.0 - lam)
        soft = one_hot(targets, num_classes, self.label_smoothing)
        return images, soft * lam + soft.flip(0) * (1.0 - lam)
