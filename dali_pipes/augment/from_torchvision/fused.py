"""A torchvision pipeline's resizes and crops as one decode-fused crop op.

dali_pipes resizes once, straight from the decoded window to the output (DALI decodes only
the window), so the resizes and crops at the head of a pipeline must be one of the forms
that is a single resize of a window, exactly:

- ``RandomResizedCrop(size)``                      -> ``random_resized_crop``
- ``Resize(int)`` then ``CenterCrop(square)``        -> ``resize_center_crop`` (ImageNet's eval)
- ``Resize(int or (h, w))`` then ``CenterCrop``      -> ``center_crop`` with ``resize``
- ``Resize((h, w))`` alone                          -> ``center_crop`` of the whole size
- ``CenterCrop`` alone                              -> ``center_crop`` (padded where smaller)
- ``[Resize] RandomCrop(size, padding, ...)``        -> ``random_crop`` (padding without a resize)
- ``[RandomZoomOut] RandomIoUCrop [Resize((h, w))]`` -> ``iou_crop`` (SSD's; without the
  resize each crop keeps its own size)
- ``RandomZoomOut`` alone                           -> ``iou_crop`` that keeps the canvas
- ``RandomShortestSize``                            -> ``shortest_size`` (each image its size)
- ``ScaleJitter``                                   -> ``scale_jitter`` without its crop

Anything else (two resizes, a crop before a resize, ``Resize(int)`` alone, whose outputs
differ in size in a way no op here plans) is refused with the transform named.
"""

from __future__ import annotations

from typing import Any

from dali_pipes.augment.from_torchvision.values import Refused

#: Which geometry may follow which (None: the first).
_FOLLOWS = {
    None: (
        "RandomResizedCrop",
        "Resize",
        "CenterCrop",
        "RandomCrop",
        "RandomZoomOut",
        "RandomIoUCrop",
        "RandomShortestSize",
        "ScaleJitter",
    ),
    "Resize": ("CenterCrop", "RandomCrop"),
    "RandomZoomOut": ("RandomIoUCrop",),
    "RandomIoUCrop": ("Resize",),
}
FORMS = (
    "RandomResizedCrop; or Resize, CenterCrop or RandomCrop, or Resize then CenterCrop or "
    "RandomCrop; or [RandomZoomOut] RandomIoUCrop [Resize((h, w))]; or RandomZoomOut; or "
    "RandomShortestSize; or ScaleJitter"
)
#: No zoom out: RandomIoUCrop alone.
_NO_ZOOM = {"zoom_p": 0.0}


class Misplaced(Refused):
    """A geometry transform that cannot follow the one before it; ``index`` is its place in
    the list given to :func:`crop_config`."""

    def __init__(self, message: str, index: int) -> None:
        super().__init__(message)
        self.index = index


def crop_config(steps: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """The crop op config of ``steps`` ((transform name, arguments) in order), or
    :class:`Misplaced` naming the step that breaks the forms above."""
    before: str | None = None
    for index, (name, _) in enumerate(steps):
        if name not in _FOLLOWS.get(before, ()):
            after = f"after {before}" if before else "first"
            raise Misplaced(
                f"cannot come {after}: the resizes and crops must be one of {FORMS} "
                "(one resize, fused with decoding)",
                index,
            )
        before = name
    names = tuple(name for name, _ in steps)
    merged = {key: value for _, step in steps for key, value in step.items()}
    if names == ("RandomResizedCrop",):
        return {"op": "random_resized_crop", **merged}
    if names == ("RandomShortestSize",):
        return {"op": "shortest_size", **merged}
    if names == ("ScaleJitter",):  # no crop: each image at its jittered size
        return {"op": "scale_jitter", **merged, "crop": False}
    if names == ("RandomZoomOut",):  # the canvas kept: a crop whose one choice is "none"
        return {"op": "iou_crop", **merged, "options": [1.0], "size": None}
    if "RandomIoUCrop" in names:
        return _iou_crop(names, merged)
    resize = merged.get("resize")
    if names == ("Resize",):
        if isinstance(resize, int):
            raise Misplaced(
                f"Resize({resize}) alone keeps each image's aspect ratio, so the images differ "
                "in size and cannot be batched: add CenterCrop or RandomCrop after it, or give "
                "Resize a (height, width)",
                0,
            )
        whole = list(resize)  # type: ignore[arg-type]
        return {"op": "center_crop", **merged, "size": whole, "resize": whole}
    if names[-1] == "RandomCrop":
        return {"op": "random_crop", **merged, "resize": _plain(resize)}
    size = merged["size"]
    mode = {"interpolation": merged["interpolation"]} if "interpolation" in merged else {}
    if isinstance(resize, int) and size[0] == size[1] and resize >= size[0]:
        return {"op": "resize_center_crop", "size": size[0], "resize": resize, **mode}
    return {"op": "center_crop", "size": list(size), "resize": _plain(resize), **mode}


def _plain(resize: Any) -> Any:
    """A resize as the config takes it (a list for (height, width))."""
    return list(resize) if isinstance(resize, tuple) else resize


def _iou_crop(names: tuple[str, ...], merged: dict[str, Any]) -> dict[str, Any]:
    """SSD's zoom out and IoU crop, then a resize to (height, width) or none."""
    if names[-1] not in ("RandomIoUCrop", "Resize"):
        raise Misplaced("cannot follow RandomIoUCrop and a resize", len(names) - 1)
    resize = merged.pop("resize", None)
    if isinstance(resize, int):
        raise Misplaced(
            f"Resize({resize}) after RandomIoUCrop keeps each crop's aspect ratio, which is "
            "not supported here; give Resize a (height, width), or leave it out",
            len(names) - 1,
        )
    zoom = {} if "RandomZoomOut" in names else _NO_ZOOM
    size = None if resize is None else list(resize)
    return {"op": "iou_crop", **zoom, **merged, "size": size}
