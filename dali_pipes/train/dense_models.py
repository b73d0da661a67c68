"""Small detection and segmentation models for the embedded sample data, so that
``python -m dali_pipes.train task=detection`` and ``task=segmentation`` learn something
real in CPU minutes: the sample CNN's blocks as the backbone of torchvision's
``FasterRCNN``, and as the encoder of a fully convolutional segmenter. torchvision's own
detection and segmentation models are the other ``model=`` options (``conf/model/``).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from dali_pipes.train.models import block


def _encoder(width: int) -> nn.Sequential:
    """Three stride-2 blocks: features at an eighth of the input, ``4 * width`` channels."""
    return nn.Sequential(block(3, width), block(width, 2 * width), block(2 * width, 4 * width))


def small_detector(num_classes: int, width: int = 32, **options: Any) -> nn.Module:
    """torchvision's ``FasterRCNN`` on the small encoder: one feature map at stride 8,
    anchors of 16 to 128 px, a light box head. ``options`` go to ``FasterRCNN`` (e.g.
    ``min_size``, ``max_size``, ``image_mean``, ``image_std``)."""
    from torchvision.models.detection import FasterRCNN
    from torchvision.models.detection.anchor_utils import AnchorGenerator
    from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead
    from torchvision.ops import MultiScaleRoIAlign

    backbone = _encoder(width)
    backbone.out_channels = 4 * width  # type: ignore[assignment]
    anchors = AnchorGenerator(sizes=((16, 32, 64, 128),), aspect_ratios=((0.5, 1.0, 2.0),))
    pool = MultiScaleRoIAlign(featmap_names=["0"], output_size=7, sampling_ratio=2)
    hidden = 256
    return FasterRCNN(
        backbone,
        rpn_anchor_generator=anchors,
        box_roi_pool=pool,
        box_head=TwoMLPHead(4 * width * 7 * 7, hidden),
        box_predictor=FastRCNNPredictor(hidden, num_classes),
        **options,
    )


class SmallSegmenter(nn.Module):
    """The small encoder, a 1x1 classifier, and the logits resized to the input's size
    (bilinear), as torchvision's segmentation models give them (``{"out": logits}``)."""

    def __init__(self, num_classes: int, width: int = 32) -> None:
        super().__init__()
        self.encoder = _encoder(width)
        self.classifier = nn.Conv2d(4 * width, num_classes, 1)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        logits = self.classifier(self.encoder(x))
        return {"out": F.interpolate(logits, x.shape[-2:], mode="bilinear", align_corners=False)}
