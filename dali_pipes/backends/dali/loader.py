"""DALI backend: nvJPEG (``mixed``) or libjpeg-turbo (``cpu``) decode, DALI augmentation.

Pipeline, per batch::

    external_source (encoded bytes, label, crop window, resize ROI, output size,
                     op parameters; a split with views: the decode window holding
                     every view's, then each view's columns)  <- feed (:mod:`.columns`)
    decoders.image_slice  decode only the crop window (region-of-interest decoding), or
      decoders.image + slice   decode whole, then crop (GPU with fancy_upsampling)
    per view:             (views: slice of the view's window of the decoded region)
    resize                antialiased linear (or cubic), ROI -> output size (on the CPU
                          the same filter as a compiled kernel, :mod:`dali_pipes.image.resample`)
    the split's ops       each op's DALI graph, fed its parameters (conditionals per sample)
    crop_mirror_normalize (a trailing flip) + (x - mean) / std + dtype + layout, fused

The feed, not a DALI reader, decides what is read: the order is the shared
DistributedSampler-equivalent one (:mod:`dali_pipes.data.sampling`) and the crop windows and op
parameters come from :meth:`dali_pipes.augment.Pipeline.draw`, so ``set_epoch``, sharding
and padding behave exactly as in the torch backend, and the two backends compute the same
geometry and the same random parameters. File reads happen on a
small thread pool a few batches ahead; each image's size is read from its header first, so
a file that is not an image is reported by path before DALI sees it. A packed dataset
(``data=shards``) on a local disk is read by DALI's webdataset reader in the same planned
order (:mod:`dali_pipes.backends.dali.webdataset`); shards in a bucket come through the feed.

With ``device=cpu`` the pipeline is built with ``device_id=None`` and has no GPU operator.
When the batches are wanted on a GPU all the same (``LoaderSpec.output_device``: a model on
the GPU fed by CPU decoding, DALI's "dali-cpu" placement), the pipeline is built for that
GPU, every operator up to the normalisation runs on the CPU, and the uint8 crops go to the
GPU with DALI's own ``.gpu()`` copy (pinned, asynchronous) for the fused normalisation.
The graph itself is a :class:`~dali_pipes.backends.dali.graph.DaliGraph`, defined apart
from this loader so that it can be traced and checked without a GPU; ``twin=True`` runs
the GPU's graph with every operator on the CPU (its CPU twin).

Failures: a DALI error from the decoder or another operator that reads the images starts
a search for the file to blame (each file of the batches in flight is decoded alone with
the very decoder of the graph, within a bound); CUDA out-of-memory and other GPU errors are
never blamed on a file: they propagate unchanged with a note saying what to try
(:func:`failure_kind` tells them apart).
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Generator, Iterator
from functools import partial
from typing import TYPE_CHECKING, Any

import torch

from dali_pipes.backends.base import Batch, EpochPlan, Loader, loader_devices, plan_epoch
from dali_pipes.backends.dali import lifecycle
from dali_pipes.backends.dali.blame import BadFileSearch, Probe
from dali_pipes.backends.dali.failures import Failure, failure_kind, reason, sample_paths
from dali_pipes.backends.dali.feed import Feed, InFlight
from dali_pipes.backends.dali.graph import DaliGraph, EncodedFiles, GraphDevices, GraphInputs
from dali_pipes.backends.dali.objects import detection_batch
from dali_pipes.backends.dali.outputs import to_torch
from dali_pipes.backends.dali.stored import stored_reader
from dali_pipes.backends.specs import DaliBackend, LoaderSpec
from dali_pipes.data.interface import Source, images_of
from dali_pipes.errors import ConfigError, DeviceError
from dali_pipes.runtime.distributed import cpu_share

if TYPE_CHECKING:
    from dali_pipes.image.resample import WindowResize

log = logging.getLogger(__name__)


class DaliLoader(Loader):
    #: Bounds of the search for the file that made DALI fail (:mod:`.blame`).
    probe_limit: int = 1024
    probe_seconds: float = 60.0

    def __init__(self, spec: LoaderSpec, *, twin: bool = False) -> None:
        """``twin``: run the GPU's graph with every operator on the CPU, batches on the
        CPU (:class:`~dali_pipes.backends.dali.graph.GraphDevices`): the GPU path's logic
        where there is no GPU, for the tests and ``python -m dali_pipes.selfcheck``."""
        super().__init__(spec)
        if not isinstance(spec.backend, DaliBackend):
            raise ConfigError(f"backend={spec.backend.name!r} options given to the DALI backend")
        images_of(spec.source, "backend=dali decodes image files")
        self.options: DaliBackend = spec.backend
        #: Where the pipeline decodes and augments; :attr:`device`: where batches arrive
        #: (the model's device: a GPU also when made on the CPU, "dali-cpu").
        self.made, self.device = (
            (torch.device("cpu"), torch.device("cpu")) if twin else loader_devices(spec)
        )
        if self.device.type == "cuda":
            require_dali_gpu(self.made, self.device, self.options.device)
        self.num_threads = self.options.num_threads or cpu_share()
        devices = GraphDevices.twin() if twin else GraphDevices.for_loader(self.made, self.device)
        #: The CPU realisation's resize (:mod:`dali_pipes.image.resample`); the GPU's is DALI's.
        self._resize: WindowResize | None = None
        if not devices.gpu_graph:
            from dali_pipes.image.resample import WindowResize  # imports numba: CPU graphs only

            self._resize = WindowResize(self.num_threads)
        #: The graph this loader builds (defined apart from it: it can be traced alone).
        self.graph = DaliGraph(spec, devices, self.num_threads, self._resize)
        if self.options.roi_decode and self.graph.fancy_upsampling:
            log.warning(
                "backend.roi_decode=true with backend.fancy_upsampling=true on the GPU: "
                "nvJPEG declines that and DALI decodes those images on the CPU instead; "
                "set one of them to false (or roi_decode=null)"
            )
        self._feed: Feed = self._make_feed()
        self._pipe: Any = None
        #: The bad-file search's decoder, kept from one search to the next (:mod:`.blame`);
        #: its note needs the devices, not this loader (no reference cycle).
        self._probe = Probe(self.graph, partial(device_hint, self.made, self.device))
        self._owner = threading.get_ident()  # the thread that built the pipeline
        self._active: Generator[Batch, None, None] | None = None

    def _make_feed(self) -> Feed:
        """The ``external_source`` callback: reads the planned files a few batches ahead
        (through DALI's own reader where the source names a stored format that one is
        registered for, :mod:`.stored`: ``pack``'s shards on a local disk; shards in a
        bucket through the source's ranged reads, whose retries, deadlines and bad-file
        handling DALI's own S3 reader does not have)."""
        spec = self.spec
        read_ahead = max(1, self.options.read_ahead + self.options.prefetch_queue_depth)
        stream = stored_reader(self._image_source(), self.rank_sampler)
        threads = min(8, max(2, self.num_threads))
        return Feed(spec, self.bad, read_ahead, threads=threads, stream=stream)

    # ----------------------------------------------------------------- pipeline

    def _inputs(self) -> GraphInputs:
        """Where the graph's images come from: the feed's encoded files."""
        return EncodedFiles(self._feed)

    def _define(self) -> Any:
        """The pipeline, defined but not built (building allocates; this does not)."""
        return self.graph.define(self._inputs())

    def _build(self) -> Any:
        lifecycle.release_orphans()
        self._owner = threading.get_ident()
        pipe = self._define()
        pipe.build()
        lifecycle.opened(self)
        return lifecycle.hold(pipe)

    # ----------------------------------------------------------------- epochs

    def __iter__(self) -> Iterator[Batch]:
        if self._active is not None:  # an earlier epoch was left mid-way: drain it first
            self._active.close()
        plan = self._take_epoch()
        self._active = self._epoch(plan)
        return self._staged(plan, self._active)

    def _epoch(self, plan: EpochPlan) -> Generator[Batch, None, None]:
        position = 0  # the next plan batch to yield
        owner = threading.get_ident()  # the consumer's thread
        while True:
            pipe: Any = None
            outputs: Any = None
            finished = False
            try:
                if self._pipe is None:
                    self._pipe = self._build()
                pipe = self._pipe
                following = partial(plan_epoch, self.rank_sampler, plan.epoch + 1, self.batch_size)
                self._feed.start(plan, position, following)
                pipe.schedule_run()
                while True:
                    try:
                        outputs = pipe.share_outputs(cuda_stream=self._consumer_stream())
                    except StopIteration:
                        finished = True
                        return
                    batch = self._handover(outputs)
                    outputs = None
                    position = self._feed.delivered() + 1
                    pipe.release_outputs()
                    pipe.schedule_run()
                    yield batch
            except GeneratorExit:  # the consumer stopped early: drained below, pipeline kept
                raise
            except Exception as exc:
                # A pipeline does not recover from an error: ended here, rebuilt for what follows
                pipe = outputs = None
                lifecycle.end(self._pipe, exc)
                self._pipe = None  # its last reference: DALI shuts it down here
                kind = failure_kind(exc)
                suspects = list(self._feed.in_flight)
                if kind in ("memory", "device"):
                    exc.add_note(self.device_hint(kind))
                if kind != "data" or not suspects:
                    raise
                why = reason(exc)
                failure = exc.with_traceback(None)  # DALI's frames say nothing to a user
            except BaseException as exc:
                pipe = outputs = None
                lifecycle.end(self._pipe, exc)
                self._pipe = None
                raise
            finally:
                # Finalised on another thread, the garbage collector's on a DALI thread
                # (see lifecycle): waiting for DALI there can deadlock, so no drain; the
                # loader is garbage too and its pipeline is orphaned (__del__).
                if self._pipe is not None and threading.get_ident() == owner:
                    if not finished:
                        self._drain(pipe)
                    pipe.reset()
                self._feed.stop()
            # DALI stopped on a batch: find the file its decoder rejects, outside the
            # handler, so that what the search raises does not chain to DALI's error.
            position = self._blame(failure, why, suspects)

    def _blame(self, failure: Exception, why: str, suspects: list[InFlight]) -> int:
        """After DALI failed on the batches in flight: report the files its decoder rejects
        (raises unless ``on_error=skip``) and return the plan position to re-feed from
        (what DALI had not delivered); raise ``failure``, with a note, when every file
        decodes alone."""
        search = BadFileSearch(
            self._probe,
            self._image_source(),
            self.spec.max_pixels,
            self.probe_limit,
            self.probe_seconds,
        )
        culprits = search.culprits(suspects, why)
        if not culprits:
            files = [self._feed.source.name(i) for b in suspects for i in b.indices]
            failure.add_note(
                f"while the DALI loader was producing a batch: each of the {len(files)} "
                f"files in flight decodes alone with the same decoder ({sample_paths(files)}),"
                " so no file is to blame; lower data.batch_size (memory?), or compare with "
                "backend=torch",
            )
            raise failure
        for path, error in culprits:
            self._report(path, error)  # raises unless on_error=skip
        return suspects[0].position

    def device_hint(self, kind: Failure) -> str:
        """The note a memory or GPU failure gets: where, and what to try."""
        return device_hint(self.made, self.device, kind)

    def _drain(self, pipe: Any) -> None:
        """Consume the batches DALI already has in flight so the next epoch starts clean."""
        self._feed.stop()
        while True:
            try:
                pipe.share_outputs()
            except StopIteration:
                return
            pipe.release_outputs()
            pipe.schedule_run()

    def _handover(self, outputs: Any) -> Batch:
        """DALI's outputs of one batch as the batch the loop gets (:mod:`.outputs`):
        ``(images, labels)``, or ``(views, labels)`` for a split with views; for data
        with targets ``(images, targets)``, its objects kept by the feed (:mod:`.objects`)."""
        augment, train, dlpack = self.spec.augment, self.spec.train, self._dlpack()
        objects = self._feed.in_flight[0].objects if self._feed.in_flight else None
        own, views = augment.own_sizes(train), augment.multi_view(train)
        if objects is None:
            return to_torch(
                outputs, self.device, augment, dlpack=dlpack, views=views, own_sizes=own
            )
        task, masks = getattr(self.spec.source, "task", "detection"), self.graph.masks
        return detection_batch(outputs, objects, masks, self.device, augment, dlpack, task, own)

    def _image_source(self) -> Source:
        return images_of(self.spec.source, "backend=dali decodes image files")

    def _consumer_stream(self) -> Any:
        """The stream DALI's outputs are ready on: the consumer's current one (GPU)."""
        return torch.cuda.current_stream(self.device) if self.device.type == "cuda" else None

    def _dlpack(self) -> bool:
        """Whether torch may take DALI's CPU outputs without a copy: the dynamic executor
        gives each output batch memory of its own."""
        on_cpu = self.made.type == "cpu" and self.device.type == "cpu"
        return on_cpu and self._pipe is not None and bool(self._pipe.exec_dynamic)

    def close_at_exit(self) -> None:
        """The process is ending: close without draining (nothing follows this epoch)."""
        lifecycle.let_go(self._pipe)
        self._pipe = None
        self.close()

    def close(self) -> None:
        if self._active is not None:
            self._active.close()
            self._active = None
        self._feed.close()
        lifecycle.let_go(self._pipe)
        self._pipe = None
        self._probe.close()
        if self._resize is not None:
            self._resize.close()
        lifecycle.closed(self)
        lifecycle.release_orphans()

    def __del__(self, finalizing: Any = sys.is_finalizing) -> None:
        """Collected without :meth:`close` on a thread that did not build the pipeline
        (see :mod:`.lifecycle`): the pipeline is kept for a safe thread to release. Not
        when the interpreter exits: the modules it would call are gone by then (the
        function is bound at definition for that reason), and so is the process."""
        if finalizing():
            return
        pipe = getattr(self, "_pipe", None)
        probe = getattr(self, "_probe", None)
        if threading.get_ident() == getattr(self, "_owner", None):
            # A safe thread: the pipelines go with this loader (no longer held apart).
            lifecycle.let_go(pipe)
            if probe is not None:
                probe.close()
            return
        if pipe is not None:
            lifecycle.orphan(pipe)
            self._pipe = None
        if probe is not None:
            probe.orphan()


def device_hint(made: torch.device, device: torch.device, kind: Failure) -> str:
    """The note a memory or GPU failure of a loader that makes batches on ``made`` for
    ``device`` gets: where, and what to try."""
    where = f"GPU {made}" if made.type == "cuda" else "the CPU"
    if device != made:
        where += f", handing batches to {device}"
    if kind == "memory":
        return (
            f"while the DALI loader was producing a batch ({where}): out of memory, not a "
            "bad file; lower data.batch_size or backend.prefetch_queue_depth, or free "
            "memory held elsewhere"
        )
    return (
        f"while the DALI loader was producing a batch ({where}): a CUDA/GPU failure, not "
        "a bad file; check the GPU (nvidia-smi, Xid errors in dmesg) and rerun with "
        "CUDA_LAUNCH_BLOCKING=1 to locate it"
    )


def require_dali_gpu(made: torch.device, device: torch.device, backend_device: str) -> None:
    """A one-line :class:`DeviceError` unless DALI sees the GPU ``device`` (where batches
    go; ``made``: where they are made, the CPU for dali-cpu)."""
    from nvidia.dali import backend as dali_backend

    count = dali_backend.GetCUDADeviceCount()  # type: ignore[attr-defined]
    if count > (device.index or 0):
        return
    if made.type == "cpu":
        raise DeviceError(
            f"backend=dali device=cpu hands batches to {device} (the model's device) but "
            f"DALI sees no CUDA device {device.index}; check the driver, or keep the model on "
            "the CPU"
        )
    raise DeviceError(
        f"backend=dali device={backend_device}: DALI sees no CUDA device {device.index}; "
        "check the driver or use backend.device=cpu"
    )
