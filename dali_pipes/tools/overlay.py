"""Detection targets drawn over their image, for ``show``: each object's mask tinted and
its box outlined with its class name, in a colour per class (torchvision's drawing
utilities); and the caption that sums a sample's objects up."""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch

#: A colour per class label (cycled): distinct hues that read on photos.
PALETTE = (
    (230, 25, 75),
    (60, 180, 75),
    (255, 225, 25),
    (0, 130, 200),
    (245, 130, 48),
    (145, 30, 180),
    (70, 240, 240),
    (240, 50, 230),
    (210, 245, 60),
    (250, 190, 212),
)


def has_targets(labels: Any) -> bool:
    """Whether a batch's labels are detection targets (a dict per image)."""
    return isinstance(labels, list | tuple) and all(isinstance(t, dict) for t in labels)


def overlay(image: torch.Tensor, target: dict[str, Any], classes: tuple[str, ...]) -> torch.Tensor:
    """uint8 ``[3, H, W]`` ``image`` with ``target``'s masks tinted (when it has them) and
    its boxes outlined, each named by its class."""
    from torchvision.utils import draw_bounding_boxes, draw_segmentation_masks

    labels = [int(v) for v in target["labels"]]
    colours = [PALETTE[label % len(PALETTE)] for label in labels]
    drawn = image.expand(3, -1, -1).contiguous()
    masks = target.get("masks")
    if masks is not None and len(masks):
        drawn = draw_segmentation_masks(drawn, masks.bool(), alpha=0.45, colors=colours)
    boxes = torch.as_tensor(target["boxes"]).float()
    if len(boxes):
        names = [classes[label] if label < len(classes) else str(label) for label in labels]
        drawn = draw_bounding_boxes(drawn, boxes, labels=names, colors=colours, width=1)
    return drawn


def objects_caption(target: dict[str, Any], classes: tuple[str, ...]) -> str:
    """How many objects of each class a sample holds, most first ("no objects" if none)."""
    counts = Counter(int(v) for v in target["labels"])
    if not counts:
        return "no objects"
    return ", ".join(
        f"{n} {classes[label] if label < len(classes) else label}"
        for label, n in counts.most_common()
    )


def boxes_difference(a: dict[str, Any], b: dict[str, Any]) -> str:
    """How far two backends' boxes for one sample are apart (the difference column)."""
    x, y = torch.as_tensor(a["boxes"]).float(), torch.as_tensor(b["boxes"]).float()
    if x.shape != y.shape:
        return f"{len(x)} vs {len(y)} boxes"
    if not len(x):
        return "no boxes"
    return f"boxes max {float((x - y).abs().max()):.2f} px"


def overlay_classes(image: torch.Tensor, mask: torch.Tensor, ignore: int = 255) -> torch.Tensor:
    """uint8 ``[3, H, W]`` ``image`` with a segmentation ``mask`` (``[H, W]``, a class per
    pixel) tinted over it: each class but the background (0) in its colour, the ignored
    pixels in grey."""
    from torchvision.utils import draw_segmentation_masks

    values = [int(v) for v in mask.unique().tolist() if int(v) != 0]
    drawn = image.expand(3, -1, -1).contiguous()
    if not values:
        return drawn
    colours = [(128, 128, 128) if v == ignore else PALETTE[v % len(PALETTE)] for v in values]
    masks = torch.stack([mask == v for v in values])
    return draw_segmentation_masks(drawn, masks, alpha=0.45, colors=colours)


def classes_caption(mask: torch.Tensor, ignore: int = 255) -> str:
    """The classes a segmentation mask holds besides the background, and whether it has
    ignored (padded) pixels."""
    values = [int(v) for v in mask.unique().tolist()]
    classes = [str(v) for v in values if v not in (0, ignore)]
    text = f"classes {', '.join(classes)}" if classes else "background only"
    return text + (", padded" if ignore in values else "")
