"""The DALI realisation of a batch's geometry for masks: the window sliced (pixels past
the image are the fill: 0 for instance masks, the ignore index for a semantic mask), then
resized to the output nearest neighbour at the ROI where torchvision's ``NEAREST`` resize
samples (:meth:`~dali_pipes.augment.geometry.Geometry.nearest_roi`) and padded past the
resized window, so that the masks equal the torch realisation's (:mod:`.masks_torch`)
pixel for pixel.
"""

from __future__ import annotations

from typing import Any


def masks_through_geometry(
    masks: Any,
    anchor: Any,
    shape: Any,
    roi_start: Any,
    roi_end: Any,
    inside: Any,
    size: Any,
    fill: int,
) -> Any:
    """uint8 HWC ``masks`` (a DataNode, any number of channels) through the geometry fed as
    ``anchor`` (x, y), ``shape`` (w, h) of the window, ``roi_start``/``roi_end`` (y, x) of
    :meth:`~dali_pipes.augment.geometry.Geometry.nearest_roi`, the output's part inside the
    resized window ``inside`` (h, w) and the output's ``size`` (w, h): what lies past the
    resized window is ``fill``."""
    from nvidia.dali import fn, types

    def padded(nodes: Any, at: Any, extent: Any) -> Any:
        return fn.slice(
            nodes,
            at,
            extent,
            axis_names="WH",
            normalized_anchor=False,
            normalized_shape=False,
            out_of_bounds_policy="pad",
            fill_values=fill,
        )

    resized = fn.resize(
        padded(masks, anchor, shape),
        size=inside,
        roi_start=roi_start,
        roi_end=roi_end,
        roi_relative=False,
        interp_type=types.INTERP_NN,
        antialias=False,
    )
    return padded(resized, size * 0, size)  # anchored at (0, 0): padded at the far edges
