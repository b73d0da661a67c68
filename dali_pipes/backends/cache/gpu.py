"""``data.cache=gpu``: the split decoded once onto the GPU, augmented there by DALI's graph.

Decoding is the whole cost of an epoch for a dataset that fits (benchmarks/RESULTS.md).
The images are decoded once (:class:`~dali_pipes.backends.cache.store.DecodedImages`, the
memory check against the GPU's free memory) and kept on the GPU as uint8 ``[H, W, 3]``.
Every epoch they go to the DALI loader's own graph in place of the decoder's output: a
``slice`` of each crop window (as after a whole-image decode), the same resize, the same
ops' DALI graphs, the same fused ``crop_mirror_normalize``
(:class:`~dali_pipes.backends.dali.loader.DaliLoader`) -- one batched operator per step on
DALI's CUDA stream, no per-sample Python or kernel loop -- and the batch reaches the
consumer's stream through DALI's event, with no device-wide synchronisation. DALI copies
the batch's images into its buffers on a CUDA stream of the loader's own, never on the
default stream the model trains on (whole images: each batch's images occupy DALI's
queue, ``prefetch_queue_depth`` batches deep, besides the cache).

Order, sharding, geometry and op parameters come from the same feed as every backend's
(seed, epoch, sample). On the CPU, where the tests run this class, a cached epoch is
exactly ``backend=dali``'s CPU epoch. On a GPU it differs from ``backend=dali``'s as
libjpeg-turbo's decode of the whole image (the cache's, :mod:`dali_pipes.image.decode`) differs
from nvJPEG's decode of the window. The decoder's options (``roi_decode``,
``fancy_upsampling``, ``hw_decoder_load``, paddings, hints, ``read_ahead``) have nothing to
act on here; with ``backend=torch`` the DALI options take their defaults.
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from dali_pipes.backends.base import BadFiles
from dali_pipes.backends.cache.store import DecodedImages, cached_batch
from dali_pipes.backends.dali.failures import Failure
from dali_pipes.backends.dali.feed import Feed, InFlight, ToFeed
from dali_pipes.backends.dali.graph import CachedPixels, GraphInputs
from dali_pipes.backends.dali.loader import DaliLoader
from dali_pipes.backends.specs import DaliBackend, LoaderSpec
from dali_pipes.runtime.distributed import cpu_share


class _CachedFeed(Feed):
    """The DALI feed over decoded images: two ``external_source`` callbacks, one for the
    images (on their device) and one for everything else (on the CPU).

    Each plan batch is prepared once, by whichever callback DALI calls first for it, and
    each callback takes its part in order, so the two never disagree on the batch.
    """

    def __init__(self, spec: LoaderSpec, bad: BadFiles, images: list[torch.Tensor | None]) -> None:
        super().__init__(spec, bad, read_ahead=0, threads=1)  # reads nothing: no thread
        self.images = images
        self._parts: tuple[deque[Any], deque[Any]] = (deque(), deque())

    def stop(self) -> None:
        super().stop()
        for part in self._parts:
            part.clear()

    def _next_batch(self) -> ToFeed:
        """The next plan batch's decoded images (those that failed to decode substituted,
        or with ``on_error=drop`` left out)."""
        plan = self._plan
        while self._next < len(plan.batches):
            position = self._next
            self._next += 1
            keep, repeats = cached_batch(
                self.spec,
                self.bad,
                self.images,
                plan.epoch,
                plan.batches[position],
                plan.positions[position],
                plan.repeats_of(position),
            )
            if keep:
                kept = [image for i in keep if (image := self.images[i]) is not None]
                sizes = np.asarray([image.shape[:2] for image in kept])
                # DALI takes host images as NumPy arrays (views), GPU ones as they are.
                pixels = [image.numpy() if image.device.type == "cpu" else image for image in kept]
                return ToFeed(position, np.asarray(keep), pixels, sizes, None, None, repeats)
        raise StopIteration

    def _take(self, part: int) -> Any:
        if not self._parts[part]:
            fed = self.batch()
            self._parts[0].append(fed.params())
            self._parts[1].append(fed.images)
        return self._parts[part].popleft()

    def __call__(self) -> tuple[Any, ...]:
        params: tuple[Any, ...] = self._take(0)
        return params

    def pixels(self) -> list[Any]:
        """The batch's decoded images (the images ``external_source``)."""
        images: list[Any] = self._take(1)
        return images


class DaliCachedLoader(DaliLoader):
    """Decoded images in memory on :attr:`made`, DALI's augmentation graph every epoch.

    ``data.cache=gpu`` builds it on the GPU (:func:`dali_pipes.backends.create_loader`
    refuses it without one). On the CPU it is the CPU's graph, which the tests compare with
    ``backend=dali`` batch for batch; ``twin=True`` runs the GPU's graph on the CPU (the
    images held in host memory), its logic without a GPU.
    """

    def __init__(self, spec: LoaderSpec, *, twin: bool = False) -> None:
        if not isinstance(spec.backend, DaliBackend):  # e.g. backend=torch: DALI's defaults
            spec = replace(spec, backend=DaliBackend(device=spec.backend.device))
        super().__init__(spec, twin=twin)

    def _make_feed(self) -> Feed:
        """Decode the split once (the base loader's file feed is not needed), then feed
        the decoded images."""
        pool = ThreadPoolExecutor(cpu_share(), thread_name_prefix="dali-pipes-cache")
        try:
            self.store = DecodedImages(self.spec, self.made, self.bad, pool, channels_last=True)
        finally:  # decoding is done (or failed: what is queued is dropped)
            pool.shutdown(wait=False, cancel_futures=True)
        # DALI copies the images in here, not on the model's default stream.
        self._copy_stream = torch.cuda.Stream(self.made) if self.made.type == "cuda" else None
        return _CachedFeed(self.spec, self.bad, self.store.images)

    @property
    def decoded_here(self) -> int:
        """How many of the split's images this process decoded (its share of the node's copy)."""
        return self.store.decoded_here

    def _inputs(self) -> GraphInputs:
        """The cached images, on the graph's operator device, and their parameters."""
        feed = self._feed
        assert isinstance(feed, _CachedFeed)
        return CachedPixels(feed, feed.pixels, self._copy_stream)

    def _blame(self, failure: Exception, reason: str, suspects: list[InFlight]) -> int:
        """No file is read or decoded here: a DALI failure is never a file's."""
        failure.add_note(
            f"while DALI augmented cached images ({self.made}): not a file's fault (the "
            f"images were decoded when caching); compare with data.cache=null"
        )
        raise failure

    def device_hint(self, kind: Failure) -> str:
        hint = super().device_hint(kind)
        if kind == "memory":
            hint += "; or data.cache=ram, which holds the decoded images in host memory"
        return hint

    def close(self) -> None:
        super().close()
        if self._copy_stream is not None:  # a copy still running reads the cached images
            self._copy_stream.synchronize()
        self.store.images.clear()
