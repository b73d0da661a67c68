"""Each batch's columns for the DALI graph, from its draw: every view's window, ROI,
output size and op parameters, the band of a padded window, and data with targets' objects
and masks' columns (:mod:`.columns` names them).

A pure function of the batch (the plan's epoch, its samples and their sizes), so the feed
computes it on whichever thread reads the batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np

from dali_pipes.augment.geometry_band import band
from dali_pipes.augment.pipeline import Draw, Pipeline
from dali_pipes.backends.dali.columns import Band, Fed, View, Window, banded
from dali_pipes.backends.dali.objects import batch_objects, batch_targets
from dali_pipes.backends.specs import LoaderSpec
from dali_pipes.data.interface import Annotated, Source
from dali_pipes.data.sampling import draw_ids


def shared_window(draws: Sequence[Draw]) -> Window:
    """Where a split with views decodes each image: the smallest window holding every
    view's, anchor (x, y) and shape (w, h) in source pixels, float32."""
    windows = np.stack([d.geometry.window for d in draws])  # [V, B, 4]: x, y, w, h
    start = windows[..., :2].min(axis=0)
    end = (windows[..., :2] + windows[..., 2:]).max(axis=0)
    return Window(start.astype(np.float32), (end - start).astype(np.float32))


class BatchColumns:
    """The columns of a batch of ``spec``'s split, whose images ``source`` reads."""

    def __init__(self, spec: LoaderSpec, source: Source) -> None:
        self.identity = source.identity
        self.seed = spec.sampling.seed
        self.labels = spec.source.labels
        self.views = spec.augment.views(spec.train)
        self.multi_view = spec.augment.multi_view(spec.train)
        #: A plain split whose crop pads: each window's band is fed (:data:`.columns.BAND`).
        self.banded = banded(spec.augment, spec.train)
        #: Data with targets: a batch's objects (and masks' columns) of its draw.
        self._annotated = spec.source if isinstance(spec.source, Annotated) else None
        self._objects = None
        if isinstance(spec.source, Annotated):
            pipeline, min_size = self.views.pipelines[0], spec.augment.min_box_size
            self._objects = partial(batch_objects, spec.source, source.name, pipeline, min_size)
        self._out: dict[tuple[int, tuple[int, int]], np.ndarray] = {}

    def make(
        self,
        epoch: int,
        indices: np.ndarray,
        images: Any,
        sizes: np.ndarray,
        repeats: np.ndarray | None = None,
    ) -> Fed:
        """The columns of samples ``indices`` of ``epoch``, of header ``sizes`` (drawn
        ``repeats`` times before in the epoch, if any): every view's draws (on any thread:
        nothing here changes the feed)."""
        ids = draw_ids(self.identity(indices), repeats)
        targets = None if self._annotated is None else batch_targets(self._annotated, indices)
        boxes = None if targets is None else targets[1]
        draws = self.views.draw(sizes, ids, self.seed, epoch, boxes)
        decode = shared_window(draws) if self.multi_view else None
        views = tuple(
            self._view(pipeline, draw, decode)
            for pipeline, draw in zip(self.views.pipelines, draws, strict=True)
        )
        bands = None
        if self.banded:  # the one view's window is its band, in the region decoded
            b = band(draws[0].geometry, sizes)
            params = views[0].params
            views = (View(b.anchor, b.shape, b.roi_start, b.roi_end, b.out, params),)
            bands = Band(b.region, b.region_shape, b.place, b.size)
        if self._objects is None or targets is None:
            return Fed(images, self.labels[indices], views, decode, band=bands)
        objects, masks = self._objects(draws[0], targets, indices, sizes)
        return Fed(images, self.labels[indices], views, decode, masks, objects, bands)

    def _view(self, pipeline: Pipeline, draw: Draw, decode: Window | None) -> View:
        """One view's columns: its window (in the shared ``decode`` window, if any), ROI,
        output size and ops' parameters."""
        g = draw.geometry
        if decode is None:
            anchor, shape = g.decode_window()
        else:
            anchor = (g.window[:, :2] - decode.anchor).astype(np.float32)
            shape = g.window[:, 2:].astype(np.float32)
        roi_start, roi_end = g.roi()
        own = g.outs  # each image a size of its own, or None: all g.out
        out = self._sizes_out(len(g.window), g.out) if own is None else own.astype(np.float32)
        return View(anchor, shape, roi_start, roi_end, out, tuple(pipeline.feed(draw)))

    def _sizes_out(self, n: int, out: tuple[int, int]) -> np.ndarray:
        """The output size column, ``[n, 2]`` float32 (made once per batch length and
        output size, a few kept: views of two sizes; nothing writes to a column handed to
        DALI)."""
        # Read threads call this at once: each works on the dict it took.
        key, kept = (n, out), self._out
        column = kept.get(key)
        if column is None:
            column = np.tile(np.asarray(out, dtype=np.float32), (n, 1))
            if len(kept) >= 8:
                self._out = kept = {}
            kept[key] = column
        return column
