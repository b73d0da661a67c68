"""The per-view part of a DALI loader's graph: from the decoded image to each view's
normalised batch.

The graph's input part decodes each image once (a plain split: its crop window; a split
with views, :mod:`dali_pipes.augment.views`: the smallest region holding every view's
window), and each view then gets, in one branch of the graph with an output of its own
(views of two sizes never meet in one tensor)::

    slice                  the view's window of the decoded region (views only)
    resize                 antialiased, ROI -> the view's output size (fed)
    the view's ops         each op's DALI graph, fed its parameters
    crop_mirror_normalize  a trailing flip + (x - mean) / std + dtype + layout

What each view is fed is its :class:`~dali_pipes.backends.dali.columns.View` of the
batch's :class:`~dali_pipes.backends.dali.columns.Fed`; a plain split's one view is fed
and graphed exactly as before views existed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from dali_pipes.augment.pipeline import Pipeline
from dali_pipes.augment.spec import AugmentSpec
from dali_pipes.backends.dali.columns import Band, Fed, View


class Placement(Protocol):
    """Where the graph's operators run (:class:`~dali_pipes.backends.dali.graph.GraphDevices`)."""

    @property
    def on_gpu(self) -> bool:
        """The operators run on the GPU."""
        ...

    @property
    def is_twin(self) -> bool:
        """The GPU's realisation with its operators on the CPU."""
        ...

    @property
    def copies_to_gpu(self) -> bool:
        """Operators on the CPU, batches handed to a GPU (DALI's ``.gpu()`` copy)."""
        ...


#: The graph's resize: (windows, ROI start, ROI end, output size, interpolation) -> node.
Resize = Callable[[Any, Any, Any, Any, str], Any]


def window(images: Any, anchor: Any, shape: Any, fill: tuple[int, int, int] | None = None) -> Any:
    """The window (pixel ``anchor`` x, y and ``shape`` w, h per sample) of whole images or
    of a decoded region: the crop window after a whole-image decode, the cached images'
    crop windows, and a view's window. With ``fill`` a window may reach past the image;
    those pixels are ``fill`` (torchvision's constant padding)."""
    from nvidia.dali import fn

    padding: dict[str, Any] = {}
    if fill is not None:
        padding = {"out_of_bounds_policy": "pad", "fill_values": [float(v) for v in fill]}
    return fn.slice(
        images,
        anchor,
        shape,
        axis_names="WH",
        normalized_anchor=False,
        normalized_shape=False,
        **padding,
    )


@dataclass(frozen=True)
class ViewGraph:
    """Where the views' graph runs (``devices``), with which resize, for which split."""

    augment: AugmentSpec
    train: bool
    devices: Placement
    resize: Resize
    #: The padding colour of windows past the image (their bands are placed on it).
    fill: tuple[int, int, int] | None = None

    def outputs(self, images: Any, fed: Fed) -> list[Any]:
        """Each view's normalised batch from the decoded ``images`` and the fed columns,
        in view order."""
        pipelines = self.augment.views(self.train).pipelines
        shared = fed.decode is not None
        outputs = []
        # Indexing, not zip(strict=True): DALI's AutoGraph (conditionals) converts this code
        # and its zip takes no keywords.
        for v in range(len(fed.views)):
            outputs.append(self.view(images, fed.views[v], pipelines[v], shared, fed.band))
        return outputs

    def view(
        self, images: Any, view: View, pipeline: Pipeline, shared: bool, band: Band | None = None
    ) -> Any:
        """One view: its window of the shared decoded region (``shared``: views only),
        resize (of the ``band`` of a padded window, placed on the fill), ops and
        normalisation."""
        from nvidia.dali import fn, types

        if shared:
            images = window(images, view.anchor, view.shape)
        interpolation = pipeline.crop.interpolation
        if band is not None:  # the view's window is the band, in the decoded region
            images = window(images, view.anchor, view.shape, self.fill)
        images = self.resize(images, view.roi_start, view.roi_end, view.out, interpolation)
        if band is not None:  # the resized band placed on the fill
            images = window(images, band.place, band.size, self.fill)
        devices = self.devices
        images, mirror = pipeline.dali(
            images, view.params, gpu=devices.on_gpu, twin=devices.is_twin
        )
        if devices.copies_to_gpu:
            # dali-cpu (as in DALI's ResNet-50 example): the uint8 crops, a quarter of the
            # float32 batch's bytes, are copied by DALI (pinned, asynchronous) and the
            # normalisation runs on the GPU.
            images = images.gpu()
        aug = self.augment
        return fn.crop_mirror_normalize(
            images,
            mirror=0 if mirror is None else mirror,
            mean=[255 * m for m in aug.mean],
            std=[255 * s for s in aug.std],
            dtype={"float16": types.FLOAT16, "uint8": types.UINT8}.get(aug.dtype, types.FLOAT),
            output_layout="HWC" if aug.channels_last else "CHW",
        )
