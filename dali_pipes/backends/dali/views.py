"""The per-view part of a DALI loader: each view's fed columns, and its graph from the
decoded image to the normalised batch.

The graph's input part decodes each image once (a plain split: its crop window; a split
with views, :mod:`dali_pipes.augment.views`: the smallest region holding every view's
window), and each view then gets, in one branch of the graph with an output of its own
(views of two sizes never meet in one tensor)::

    slice                  the view's window of the decoded region (views only)
    resize                 antialiased, ROI -> the view's output size (fed)
    the view's ops         each op's DALI graph, fed its parameters
    crop_mirror_normalize  a trailing flip + (x - mean) / std + dtype + layout

The feed gives, after the label and the decode window, one group of columns per view, in
view order (:class:`ViewColumns`): for views the window's anchor (x, y) and shape (w, h) in
the decoded region, then the resize ROI's start and end (y, x), the output size (h, w) and
the view's ops' parameters. A plain split's one group is exactly what it was fed before
views existed, so its graph is unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from dali_pipes.augment.pipeline import Draw, Pipeline
from dali_pipes.augment.spec import AugmentSpec
from dali_pipes.augment.views import Views


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


@dataclass(frozen=True)
class ViewColumns:
    """One view's fed columns: ``windowed`` (its window in the decoded region comes
    first: a split with views) and the NumPy dtype names of its ops' parameters."""

    windowed: bool
    ops: tuple[str, ...]

    @property
    def dtypes(self) -> tuple[str, ...]:
        """Every column's dtype: window anchor and shape, ROI start and end, output size,
        then the ops' parameters."""
        return ("float32",) * (5 if self.windowed else 3) + self.ops


def view_columns(augment: AugmentSpec, train: bool) -> tuple[ViewColumns, ...]:
    """The split's column groups, one per view."""
    windowed = augment.multi_view(train)
    return tuple(ViewColumns(windowed, p.feed_dtypes) for p in augment.views(train).pipelines)


def feed_dtypes(augment: AugmentSpec, train: bool) -> list[str]:
    """Every view's columns' dtypes, in feed order."""
    return [d for group in view_columns(augment, train) for d in group.dtypes]


def decode_window(draws: Sequence[Draw]) -> tuple[np.ndarray, np.ndarray]:
    """Where to decode each image, as DALI's decoders slice it: anchor (x, y) and shape
    (w, h), float32; the smallest region holding every view's window."""
    windows = np.stack([d.geometry.window for d in draws])  # [V, B, 4]: x, y, w, h
    start = windows[..., :2].min(axis=0)
    end = (windows[..., :2] + windows[..., 2:]).max(axis=0)
    return start.astype(np.float32), (end - start).astype(np.float32)


def feed_columns(
    views: Views, draws: Sequence[Draw], windowed: bool
) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """(decode anchor, decode shape, every view's columns in feed order) of a batch."""
    if not windowed:
        (draw,) = draws
        anchor, shape = draw.geometry.decode_window()
    else:
        anchor, shape = decode_window(draws)
    columns: list[np.ndarray] = []
    for pipeline, draw in zip(views.pipelines, draws, strict=True):
        g = draw.geometry
        if windowed:
            columns.append((g.window[:, :2] - anchor).astype(np.float32))
            columns.append(g.window[:, 2:].astype(np.float32))
        roi_start, roi_end = g.roi()
        out = np.tile(np.asarray(g.out, dtype=np.float32), (len(g.window), 1))
        columns += [roi_start, roi_end, out, *pipeline.feed(draw)]
    return anchor, shape, columns


def window(images: Any, anchor: Any, shape: Any) -> Any:
    """The window (pixel ``anchor`` x, y and ``shape`` w, h per sample) of whole images or
    of a decoded region: a view's window, the crop window after a whole-image decode, and
    the cached images' crop windows."""
    from nvidia.dali import fn

    return fn.slice(
        images, anchor, shape, axis_names="WH", normalized_anchor=False, normalized_shape=False
    )


@dataclass(frozen=True)
class ViewGraph:
    """Where the views' graph runs (``devices``), with which resize, for which split."""

    augment: AugmentSpec
    train: bool
    devices: Placement
    resize: Resize

    def outputs(self, images: Any, fed: Sequence[Any]) -> list[Any]:
        """Each view's normalised batch from the decoded ``images`` and the fed columns
        after the label (``fed``), in view order."""
        pipelines = self.augment.views(self.train).pipelines
        groups = view_columns(self.augment, self.train)
        outputs = []
        at = 0
        # Indexing, not zip(strict=True): DALI's AutoGraph (conditionals) converts this code
        # and its zip takes no keywords.
        for v in range(len(groups)):
            nodes = fed[at : at + len(groups[v].dtypes)]
            at += len(groups[v].dtypes)
            outputs.append(self.view(images, nodes, groups[v], pipelines[v]))
        return outputs

    def view(
        self, images: Any, nodes: Sequence[Any], group: ViewColumns, pipeline: Pipeline
    ) -> Any:
        """One view: its window (views only), resize, ops and normalisation."""
        from nvidia.dali import fn, types

        if group.windowed:
            images = window(images, nodes[0], nodes[1])
            nodes = nodes[2:]
        roi_start, roi_end, out, *params = nodes
        images = self.resize(images, roi_start, roi_end, out, pipeline.crop.interpolation)
        devices = self.devices
        images, mirror = pipeline.dali(images, params, gpu=devices.on_gpu, twin=devices.is_twin)
        if devices.copies_to_gpu:
            # dali-cpu (as in DALI's ResNet-50 example): the crops are copied by DALI
            # (pinned, asynchronous) and the normalisation runs on the GPU.
            images = images.gpu()
        aug = self.augment
        return fn.crop_mirror_normalize(
            images,
            mirror=0 if mirror is None else mirror,
            mean=[255 * m for m in aug.mean],
            std=[255 * s for s in aug.std],
            dtype=types.FLOAT16 if aug.dtype == "float16" else types.FLOAT,
            output_layout="HWC" if aug.channels_last else "CHW",
        )
