"""Small detection and segmentation models for the embedded sample data, so that
``python -m dali_pipes.train task=detection`` and ``task=segmentation`` learn something
real in CPU minutes: a small feature pyramid (the sample CNN's blocks, the deepest
features brought back up to the finer ones, as an FPN does) as the backbone of
torchvision's ``FasterRCNN``, and as the body of a segmenter. torchvision's own detection
and segmentation models are the other ``model=`` options (``conf/model/``).

The pyramid matters on the sample data: telling a circle from a square takes a view of
the whole object, which the finer maps alone do not have.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from dali_pipes.train.models import block


class Pyramid(nn.Module):
    """Four stride-2 blocks (``width`` to ``4 * width`` channels), then top-down: each
    level's features (a 1x1 convolution to ``out_channels``) plus the coarser level's
    upsampled, then a 3x3 convolution. ``forward`` gives the fused map at stride
    ``2 ** level`` (``level`` 1 to 4)."""

    def __init__(self, width: int, out_channels: int, level: int) -> None:
        super().__init__()
        widths = (width, 2 * width, 4 * width, 4 * width)
        cins = (3, *widths[:-1])
        pairs = zip(cins, widths, strict=True)
        self.stages = nn.ModuleList(block(cin, cout) for cin, cout in pairs)
        self.level = level
        self.lateral = nn.ModuleList(nn.Conv2d(w, out_channels, 1) for w in widths[level - 1 :])
        self.smooth = nn.Sequential(
            nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
        )
        self.out_channels = out_channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = []
        for stage in self.stages:
            x = stage(x)
            features.append(x)
        kept = features[self.level - 1 :]
        fused = self.lateral[-1](kept[-1])
        for lateral, finer in zip(self.lateral[-2::-1], kept[-2::-1], strict=True):
            fused = lateral(finer) + F.interpolate(fused, finer.shape[-2:], mode="nearest")
        return self.smooth(fused)


def small_detector(num_classes: int, width: int = 32, **options: Any) -> nn.Module:
    """torchvision's ``FasterRCNN`` on the small pyramid: one feature map at stride 8 that
    sees the coarser levels, anchors of 16 to 128 px, a light box head. ``options`` go to
    ``FasterRCNN`` (e.g. ``min_size``, ``max_size``, ``image_mean``, ``image_std``,
    ``box_batch_size_per_image``)."""
    from torchvision.models.detection import FasterRCNN
    from torchvision.models.detection.anchor_utils import AnchorGenerator
    from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead
    from torchvision.ops import MultiScaleRoIAlign

    channels = 2 * width
    backbone = Pyramid(width, channels, level=3)
    anchors = AnchorGenerator(sizes=((16, 32, 64, 128),), aspect_ratios=((0.5, 1.0, 2.0),))
    pool = MultiScaleRoIAlign(featmap_names=["0"], output_size=7, sampling_ratio=2)
    hidden = 256
    return FasterRCNN(
        backbone,
        rpn_anchor_generator=anchors,
        box_roi_pool=pool,
        box_head=TwoMLPHead(channels * 7 * 7, hidden),
        box_predictor=FastRCNNPredictor(hidden, num_classes),
        **options,
    )


class SmallSegmenter(nn.Module):
    """The small pyramid fused at stride 4, a 1x1 classifier, and the logits resized to
    the input's size (bilinear), as torchvision's segmentation models give them
    (``{"out": logits}``)."""

    def __init__(self, num_classes: int, width: int = 32) -> None:
        super().__init__()
        self.body = Pyramid(width, 2 * width, level=2)
        self.classifier = nn.Conv2d(2 * width, num_classes, 1)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        logits = self.classifier(self.body(x))
        return {"out": F.interpolate(logits, x.shape[-2:], mode="bilinear", align_corners=False)}
