"""DALI backend: nvJPEG (``mixed``) or libjpeg-turbo (``cpu``) decode, DALI augmentation.

Pipeline, per batch::

    external_source (encoded bytes, label, crop window, resize ROI, output size,
                     op parameters)  <- feed
    decoders.image_slice  decode only the crop window (region-of-interest decoding), or
      decoders.image + slice   decode whole, then crop (GPU with fancy_upsampling)
    resize                antialiased linear, ROI -> output size (on the CPU the same
                          filter as a compiled kernel, :mod:`dali_pipes.image.resample`)
    the split's ops       each op's DALI graph, fed its parameters (conditionals per sample)
    crop_mirror_normalize (a trailing flip) + (x - mean) / std + dtype + layout, fused

The feed, not a DALI reader, decides what is read: the order is the shared
DistributedSampler-equivalent one (:mod:`dali_pipes.data.sampling`) and the crop windows and op
parameters come from :meth:`dali_pipes.augment.Pipeline.draw`, so ``set_epoch``, sharding
and padding behave exactly as in the torch backend, and the two backends compute the same
geometry and the same random parameters. File reads happen on a
small thread pool a few batches ahead; each image's size is read from its header first, so
a file that is not an image is reported by path before DALI sees it. A packed dataset
(``data=shards``) is read by DALI's webdataset reader in the same planned order
(:mod:`dali_pipes.backends.dali.webdataset`).

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

import atexit
import logging
import re
import threading
import time
import weakref
from collections import deque
from collections.abc import Generator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import numpy as np
import torch

from dali_pipes.backends.base import BadFiles, Batch, EpochPlan, Loader, loader_devices
from dali_pipes.backends.dali.graph import DaliGraph, EncodedFiles, GraphDevices, GraphInputs
from dali_pipes.backends.dali.webdataset import WebdatasetStream
from dali_pipes.backends.specs import DaliBackend, LoaderSpec
from dali_pipes.data.sampling import StreamSampler
from dali_pipes.data.sources import ImageSource
from dali_pipes.errors import ConfigError, DaliPipesError, DataError, DeviceError
from dali_pipes.image.decode import decode_bytes, header_size
from dali_pipes.runtime.distributed import cpu_share

if TYPE_CHECKING:
    from dali_pipes.image.resample import WindowResize

log = logging.getLogger(__name__)


class InFlight(NamedTuple):
    position: int  # index of the batch in the epoch plan
    indices: np.ndarray  # the samples DALI was given (bad ones already left out)
    anchor: np.ndarray  # float32 [n, 2]: each one's crop window (x, y) ...
    shape: np.ndarray  # ... and (w, h), as fed to the decoder: a probe decodes the same


class Feed:
    """``external_source`` callback: returns the next batch of the current epoch's plan.

    Files are read a few batches ahead on a thread pool; each one's header is checked
    (format, size, pixel limit) before DALI sees it. Under ``on_error=skip`` a failing
    file is reported and left out of its batch, and a batch left empty is passed over.
    """

    def __init__(
        self,
        spec: LoaderSpec,
        bad: BadFiles,
        read_ahead: int,
        threads: int,
        stream: WebdatasetStream | None = None,
    ) -> None:
        # Holds what it needs, not the loader: the pipeline holds this callback, and a
        # loader -> pipeline -> callback -> loader cycle would delay freeing them all.
        assert isinstance(spec.source, ImageSource)
        self.spec = spec
        self.bad = bad
        self.source = spec.source
        self.stream = stream
        self.files = spec.source.files
        self.labels = spec.source.labels
        self.read_ahead = read_ahead
        self.pipeline = spec.augment.pipeline(spec.train)
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="dali-pipes-read")
        self._plan = EpochPlan(0, [])
        self._next = 0
        self._reads: deque[Future[list[np.ndarray | DataError]]] = deque()
        self.in_flight: deque[InFlight] = deque()  # batches handed to DALI, oldest first

    def start(self, plan: EpochPlan, position: int = 0) -> None:
        """Feed ``plan`` from batch ``position`` on."""
        self.stop()
        self._plan, self._next = plan, position
        if self.stream is not None:
            self.stream.start(plan, position, self.spec.batch_size)
        for k in range(position, min(position + self.read_ahead, len(plan.batches))):
            self._reads.append(self._submit(plan.batches[k]))

    def stop(self) -> None:
        """Forget the rest of the plan: the next call ends the epoch."""
        for fut in self._reads:
            fut.cancel()
        for fut in self._reads:  # a read already running finishes before the plan changes
            if not fut.cancelled():
                fut.exception()
        self._reads.clear()
        self._plan = EpochPlan(0, [])
        self._next = 0
        self.in_flight.clear()

    def _submit(self, batch: np.ndarray) -> Future[list[np.ndarray | DataError]]:
        read = self.stream.read if self.stream is not None else self.source.read
        return self._pool.submit(read, batch)

    def _next_batch(self) -> tuple[int, np.ndarray, list[np.ndarray], np.ndarray]:
        """The next plan batch with its good files: position, indices, bytes, sizes."""
        batches, spec = self._plan.batches, self.spec
        while self._next < len(batches):
            position, batch = self._next, batches[self._next]
            blobs = self._reads.popleft().result()
            if position + self.read_ahead < len(batches):
                self._reads.append(self._submit(batches[position + self.read_ahead]))
            self._next += 1
            keep, kept, sizes = [], [], []
            for i, blob in zip(batch, blobs, strict=True):
                path = self.files[i]
                if path in self.bad:  # failed earlier, maybe inside DALI
                    self.bad.add(path, self.bad.reasons[path])
                    continue
                try:
                    sizes.append(header_size(blob, path, spec.max_pixels))
                except DataError as exc:
                    if spec.on_error != "skip":
                        raise
                    self.bad.add(path, exc)
                    continue
                assert not isinstance(blob, DataError)  # header_size raised the read error
                keep.append(i)
                kept.append(blob)
            if keep:
                return position, np.asarray(keep), kept, np.asarray(sizes)
        raise StopIteration

    def __call__(self) -> tuple[Any, ...]:
        position, indices, blobs, sizes = self._next_batch()
        ids = self.source.identity(indices)
        draw = self.pipeline.draw(sizes, ids, self.spec.sampling.seed, self._plan.epoch)
        g = draw.geometry
        roi_start, roi_end = g.roi()
        anchor, shape = g.decode_window()
        self.in_flight.append(InFlight(position, indices, anchor, shape))
        return (
            blobs,
            self.labels[indices],
            anchor,
            shape,
            roi_start,
            roi_end,
            np.tile(np.asarray(g.out, dtype=np.float32), (len(indices), 1)),
            *self.pipeline.feed(draw),
        )

    def close(self) -> None:
        self.stop()
        if self.stream is not None:
            self.stream.stop()
        self._pool.shutdown(wait=True, cancel_futures=True)


# --------------------------------------------------------------------------- failures

Failure = Literal["memory", "device", "data", "other"]

# nvImageCodec status codes (nvimgcodec.h) as DALI reports them: "nvImageCodec failure: '#4'".
_CODEC_STATUS = {
    1: "not initialized",
    2: "invalid parameter",
    3: "bad code stream",
    4: "code stream unsupported",
    5: "allocator failure",
    6: "execution failed",
    7: "architecture mismatch",
    8: "internal error",
    9: "implementation unsupported",
    10: "missed dependencies",
    11: "extension not initialized",
    12: "invalid parameter",
    13: "bad code stream",
    14: "code stream unsupported",
    15: "allocator failure",
    16: "architecture mismatch",
    17: "internal error",
    18: "implementation unsupported",
    19: "incomplete bitstream",
    20: "execution failed",
    21: "CUDA call error",
}
_CODEC_CODE = re.compile(r"nvImageCodec failure: '#(\d+)'")
_CODEC_MEMORY = {5, 15}  # the decoder's allocator failed: memory, not the file
_CODEC_DEVICE = {1, 7, 10, 11, 16, 21}  # the GPU, the driver or the install, not the file
# Memory exhaustion as torch, the CUDA runtime/driver and DALI word it. DALI's own CUDA
# allocations fail with "Can't allocate N bytes on device D." (or "... on host.").
_MEMORY = re.compile(
    r"out of memory|cudaErrorMemoryAllocation|CUDA_ERROR_OUT_OF_MEMORY"
    r"|can't allocate \d+ bytes|CUDA allocation failed",
    re.IGNORECASE,
)
# Any other CUDA/GPU failure: torch's "CUDA error: ...", DALI's "CUDA runtime API error
# cudaError... (N):", the driver's CUDA_ERROR_*, NCCL, cuBLAS/cuDNN, faulting kernels.
_DEVICE = re.compile(
    r"\bCUDA (?:error|runtime API error|driver API error)|\bcudaError[A-Za-z]+|\bCUDA_ERROR_[A-Z_]+"
    r"|illegal (?:memory access|instruction|address)|misaligned address|\bECC error"
    r"|unspecified launch failure|device-side assert|\bNCCL\b|CUBLAS_STATUS_|CUDNN_STATUS_"
    r"|no CUDA-capable device|CUDA driver version is insufficient",
    re.IGNORECASE,
)
# DALI's wording for an error raised by an operator while it ran on a batch (its decoders
# among them): "Error in CPU operator `nvidia.dali.fn.decoders.image`, ... encountered:".
_DALI_OPERATOR = re.compile(r"Error (?:in|when executing) (?:CPU|MIXED|GPU) operator")


def failure_kind(exc: BaseException) -> Failure:
    """What an exception raised while producing a batch says about its cause.

    ``memory``: the GPU (or host) ran out of memory. ``device``: another CUDA/GPU or driver
    failure. ``data``: a DALI operator failed on the batch's content -- a file may be to
    blame, and only this kind starts the search for it. ``other``: anything else (our
    own one-line errors, bugs). Memory and device are checked first because DALI reports
    an allocation failure inside its decoder in the same "Error in MIXED operator" frame
    as a corrupt file; a bad file must never be named for a GPU that is full or broken.
    """
    if isinstance(exc, DaliPipesError):
        return "other"
    if isinstance(exc, (torch.cuda.OutOfMemoryError, MemoryError)):
        return "memory"
    text = str(exc)
    codes = {int(c) for c in _CODEC_CODE.findall(text)}
    if _MEMORY.search(text) or codes & _CODEC_MEMORY:
        return "memory"
    if _DEVICE.search(text) or codes & _CODEC_DEVICE:
        return "device"
    if _DALI_OPERATOR.search(text) or "Failed to decode sample" in text or codes:
        return "data"
    return "other"


# DALI's wrapping of an operator's message, and the pipeline definition's traceback.
_BOILERPLATE = re.compile(
    r"Critical error|Current pipeline object|Error (?:in|when executing) (?:CPU|MIXED|GPU) "
    r"operator|which was used in the pipeline definition|File \"|C\+\+ context"
)


def _reason(exc: BaseException) -> str:
    """The informative part of a DALI error, on one line.

    DALI wraps the operator's message in boilerplate ("Critical error in pipeline", the
    pipeline definition's traceback, "Current pipeline object is no longer valid"); the
    message proper follows "encountered:". nvImageCodec's numeric status gets its name.
    """
    text = str(exc).strip()
    if "encountered:" in text:
        text = text.rsplit("encountered:", 1)[1]
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    useful = [ln for ln in lines if not _BOILERPLATE.match(ln)]
    reason = " ".join(useful or lines[-1:]).rstrip(" :") or type(exc).__name__
    code = _CODEC_CODE.search(reason)
    if code and int(code.group(1)) in _CODEC_STATUS:
        reason += f" ({_CODEC_STATUS[int(code.group(1))]})"
    return reason


# Loaders with a pipeline, closed at interpreter exit before DALI shuts its pipelines down.
_open_loaders: weakref.WeakSet[DaliLoader] = weakref.WeakSet()
_exit_hook = False

# Pipelines of loaders the garbage collector found on a thread other than the one that
# built them. The CPU graph runs Python (the resize's ``python_function``) on DALI's
# threads, so a collection can run there; destroying or draining a pipeline from one of
# its own threads (or one whose threads wait for the GIL) deadlocks. They are kept here
# and released on a thread of the program's own: at the next build, close or exit.
_orphans: list[Any] = []
_orphans_lock = threading.Lock()


def _release_orphans() -> None:
    with _orphans_lock:
        orphans = _orphans[:]
        _orphans.clear()
    del orphans  # the pipelines are destroyed here, on the caller's thread


def _close_open_loaders() -> None:
    """Close every loader still holding a pipeline, without draining it.

    DALI's own atexit hook shuts every pipeline down; a suspended epoch (a script that
    stopped after ``next(iter(loader))``) would then be finalised during interpreter
    teardown, drain a pipeline that is gone and print "Exception ignored in ...". Run
    before DALI's hook (atexit runs hooks in reverse order of registration, and this one is
    registered after DALI is imported), it ends those epochs while their pipelines live.
    """
    for loader in list(_open_loaders):
        loader._pipe = None  # the process is ending: nothing to drain for a next epoch
        loader.close()
    _release_orphans()


def _register_exit_hook() -> None:
    global _exit_hook
    if not _exit_hook:
        import nvidia.dali.pipeline  # noqa: F401 - DALI's shutdown hook is registered first

        atexit.register(_close_open_loaders)
        _exit_hook = True


class DaliLoader(Loader):
    #: Bounds of the search for the file that made DALI fail (see :meth:`_culprits`).
    probe_limit: int = 1024
    probe_seconds: float = 60.0

    def __init__(self, spec: LoaderSpec, *, twin: bool = False) -> None:
        """``twin``: run the GPU's graph with every operator on the CPU, batches on the
        CPU (:class:`~dali_pipes.backends.dali.graph.GraphDevices`): the GPU path's logic
        where there is no GPU, for the tests and ``python -m dali_pipes.selfcheck``."""
        super().__init__(spec)
        if not isinstance(spec.backend, DaliBackend):
            raise ConfigError(f"backend={spec.backend.name!r} options given to the DALI backend")
        if not isinstance(spec.source, ImageSource):
            raise ConfigError(
                "backend=dali decodes image files but data=synthetic has none; "
                "use backend=synthetic"
            )
        self.options: DaliBackend = spec.backend
        #: Where the pipeline decodes and augments; :attr:`device`: where batches arrive
        #: (the model's device: a GPU also when made on the CPU, "dali-cpu").
        self.made, self.device = (
            (torch.device("cpu"), torch.device("cpu")) if twin else loader_devices(spec)
        )
        if self.device.type == "cuda":
            self._check_dali_gpu()
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
        self._owner = threading.get_ident()  # the thread that built the pipeline
        self._active: Generator[Batch, None, None] | None = None

    def _make_feed(self) -> Feed:
        """The ``external_source`` callback: reads the planned files a few batches ahead
        (a packed dataset through DALI's webdataset reader)."""
        spec = self.spec
        assert isinstance(spec.source, ImageSource)
        read_ahead = max(1, self.options.read_ahead + self.options.prefetch_queue_depth)
        stream = None
        if spec.source.layout is not None:
            assert isinstance(self.sampler, StreamSampler)
            stream = WebdatasetStream(spec.source.layout, spec.source.labels, self.sampler)
        threads = min(8, max(2, self.num_threads))
        return Feed(spec, self.bad, read_ahead, threads=threads, stream=stream)

    def _check_dali_gpu(self) -> None:
        from nvidia.dali import backend as dali_backend

        count = dali_backend.GetCUDADeviceCount()  # type: ignore[attr-defined]
        if count <= (self.device.index or 0):
            if self.made.type == "cpu":
                raise DeviceError(
                    f"backend=dali device=cpu hands batches to {self.device} (the model's "
                    f"device) but DALI sees no CUDA device {self.device.index}; check the "
                    "driver, or keep the model on the CPU"
                )
            raise DeviceError(
                f"backend=dali device={self.options.device}: DALI sees no CUDA device "
                f"{self.device.index}; check the driver or use backend.device=cpu"
            )

    # ----------------------------------------------------------------- pipeline

    def _inputs(self) -> GraphInputs:
        """Where the graph's images come from: the feed's encoded files."""
        return EncodedFiles(self._feed)

    def _define(self) -> Any:
        """The pipeline, defined but not built (building allocates; this does not)."""
        return self.graph.define(self._inputs())

    def _build(self) -> Any:
        _release_orphans()
        self._owner = threading.get_ident()
        pipe = self._define()
        _register_exit_hook()
        pipe.build()
        _open_loaders.add(self)
        return pipe

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
                self._feed.start(plan, position)
                pipe.schedule_run()
                while True:
                    try:
                        outputs = pipe.share_outputs(cuda_stream=self._stream())
                    except StopIteration:
                        finished = True
                        return
                    batch = self._to_torch(outputs)
                    outputs = None
                    position = self._feed.in_flight.popleft().position + 1
                    pipe.release_outputs()
                    pipe.schedule_run()
                    yield batch
            except GeneratorExit:  # the consumer stopped early: drained below, pipeline kept
                raise
            except Exception as exc:
                # A pipeline does not recover from an error: it is rebuilt for what follows.
                self._pipe = None
                kind = failure_kind(exc)
                suspects = list(self._feed.in_flight)
                if kind in ("memory", "device"):
                    exc.add_note(self._device_hint(kind))
                if kind != "data" or not suspects:
                    raise
                reason = _reason(exc)
                # Kept without its traceback, which holds the failed pipeline's memory.
                failure = exc.with_traceback(None)
            except BaseException:
                self._pipe = None
                raise
            finally:
                # Finalised on another thread, the garbage collector's on a DALI thread
                # (see _orphans): waiting for DALI there can deadlock, so no drain; the
                # loader is garbage too and its pipeline goes to _orphans (__del__).
                if self._pipe is not None and threading.get_ident() == owner:
                    if not finished:
                        self._drain(pipe)
                    pipe.reset()
                self._feed.stop()
            # DALI stopped on a batch: find the file its decoder rejects, outside the
            # handler, so the failed pipeline (held by the error's traceback) is freed.
            pipe = outputs = None
            position = self._blame(failure, reason, suspects)

    def _blame(self, failure: Exception, reason: str, suspects: list[InFlight]) -> int:
        """After DALI failed on the batches in flight: report the files its decoder rejects
        (raises unless ``on_error=skip``) and return the plan position to re-feed from
        (what DALI had not delivered); raise ``failure``, with a note, when every file
        decodes alone."""
        culprits = self._culprits(suspects, reason)
        if not culprits:
            files = [self._feed.files[i] for b in suspects for i in b.indices]
            failure.add_note(
                f"while the DALI loader was producing a batch: each of the {len(files)} "
                f"files in flight decodes alone with the same decoder ({_sample_paths(files)}),"
                " so no file is to blame; lower data.batch_size (memory?), or compare with "
                "backend=torch",
            )
            raise failure
        for path, error in culprits:
            self._report(path, error)  # raises unless on_error=skip
        return suspects[0].position

    def _device_hint(self, kind: Failure) -> str:
        where = f"GPU {self.made}" if self.made.type == "cuda" else "the CPU"
        if self.device != self.made:
            where += f", handing batches to {self.device}"
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

    def _stream(self) -> Any:
        return torch.cuda.current_stream(self.device) if self.device.type == "cuda" else None

    def _to_torch(self, outputs: Any) -> Batch:
        images_dali = outputs[0].as_tensor()
        labels_dali = outputs[1].as_tensor()
        on_cpu = self.made.type == "cpu" and self.device.type == "cpu"
        if on_cpu and self._pipe is not None and self._pipe.exec_dynamic:
            # DALI's dynamic executor gives each output batch memory of its own, kept alive
            # by whoever references it: torch takes it through DLPack, no copy (what DALI's
            # own iterator does). The copy below cost 15 % of a CPU batch's wall time.
            images = torch.from_dlpack(images_dali)
            labels = torch.from_dlpack(labels_dali)
        else:  # GPU outputs: copied on the consumer's stream (not yet measured with DLPack)
            images, labels = self._copy_to_torch(images_dali, labels_dali)
        if self.spec.augment.dtype == "bfloat16":  # DALI has no bfloat16 output type
            images = images.to(torch.bfloat16)
        if self.spec.augment.channels_last:  # NHWC memory viewed as NCHW: channels_last
            images = images.permute(0, 3, 1, 2)
        return images, labels

    def _copy_to_torch(self, images_dali: Any, labels_dali: Any) -> Batch:
        from nvidia.dali.plugin.pytorch import feed_ndarray

        stream = self._stream()
        dtype = torch.float16 if self.spec.augment.dtype == "float16" else torch.float32
        images = torch.empty(images_dali.shape(), dtype=dtype, device=self.device)
        labels = torch.empty(labels_dali.shape(), dtype=torch.int64, device=self.device)
        feed_ndarray(images_dali, images, cuda_stream=stream)
        feed_ndarray(labels_dali, labels, cuda_stream=stream)
        return images, labels

    # ----------------------------------------------------------------- bad files

    def _culprits(self, suspects: list[InFlight], reason: str) -> list[tuple[str, DataError]]:
        """The files DALI had in flight that its decoder rejects, each with a one-line error.

        Each file is decoded alone by :class:`_Probe` with the graph's own decoding op,
        options, device and crop window, oldest batch first (the one DALI was delivering
        failed); the search ends with the first batch that holds a culprit -- another bad
        file further on fails again and is found then. It is bounded by
        :attr:`probe_limit` files and :attr:`probe_seconds`; past that, a one-line error
        names the batch's failure and its suspects. An empty list: every file decodes alone.
        """
        source = self.spec.source
        assert isinstance(source, ImageSource)
        todo = [
            (int(i), batch.anchor[k], batch.shape[k], n)
            for n, batch in enumerate(suspects)
            for k, i in enumerate(batch.indices)
        ]
        found: list[tuple[str, DataError]] = []
        deadline = time.monotonic() + self.probe_seconds
        probe = _Probe(self)
        try:
            for done, (i, anchor, shape, n) in enumerate(todo):
                if found and n != todo[done - 1][3]:
                    break  # the batch with the culprits is done
                if done >= self.probe_limit or time.monotonic() > deadline:
                    if found:
                        break
                    left = [source.files[t[0]] for t in todo[done:]]
                    raise DataError(
                        f"DALI failed on a batch ({reason}); the search for the file stopped "
                        f"after {done} of {len(todo)} files (limits: {self.probe_limit} files, "
                        f"{self.probe_seconds:g} s); suspects: {_sample_paths(left)}; find bad "
                        "files with python -m dali_pipes.scan, then data.exclude=<its manifest>"
                    )
                path, blob = source.files[i], source.read([i])[0]
                if isinstance(blob, DataError):
                    found.append((path, blob))
                    continue
                why = probe(blob, anchor, shape)
                if why:
                    found.append((path, self._decode_error(path, blob, why)))
        finally:
            probe.close()
        return found

    def _decode_error(self, path: str, blob: np.ndarray, why: str) -> DataError:
        """The one-line error for a file DALI's decoder rejects, with torchvision's reason
        when it rejects the file too (more readable than nvImageCodec's status)."""
        try:
            decode_bytes(blob, path, self.spec.max_pixels)
        except DataError as exc:
            return exc
        return DataError(f"{path}: DALI cannot decode it ({why}); remove or replace it")

    def close(self) -> None:
        if self._active is not None:
            self._active.close()
            self._active = None
        self._feed.close()
        self._pipe = None
        if self._resize is not None:
            self._resize.close()
        _open_loaders.discard(self)
        _release_orphans()

    def __del__(self) -> None:
        """Collected without :meth:`close` on a thread that did not build the pipeline
        (see ``_orphans``): the pipeline is kept for a safe thread to release."""
        pipe = getattr(self, "_pipe", None)
        if pipe is not None and threading.get_ident() != getattr(self, "_owner", None):
            with _orphans_lock:
                _orphans.append(pipe)
            self._pipe = None


def _sample_paths(paths: list[str], shown: int = 4) -> str:
    """A few paths for a one-line message, with how many more there are."""
    more = f" (+{len(paths) - shown} more)" if len(paths) > shown else ""
    return ", ".join(paths[:shown]) + more


class _Probe:
    """Decodes one file at a time with a loader's decoder (:meth:`DaliGraph.decode`).

    One batch-of-one pipeline serves every file of a search and is rebuilt only after it
    fails (a DALI pipeline is unusable after an error), so a search costs one build per
    bad file found, not one per file.
    """

    def __init__(self, loader: DaliLoader) -> None:
        self.loader = loader
        self._pipe: Any = None

    def _build(self) -> Any:
        pipe = self.loader.graph.define_decoder()
        pipe.build()
        return pipe

    def __call__(self, blob: np.ndarray, anchor: np.ndarray, shape: np.ndarray) -> str:
        """Why the decoder rejects this file ("" when it decodes it).

        A memory or GPU failure is no verdict on the file: it is raised (with the same note
        as in the main pipeline) and ends the search, as does a failure to build the probe.
        """
        try:
            if self._pipe is None:
                self._pipe = self._build()
            self._pipe.run(
                encoded=[np.asarray(blob, dtype=np.uint8)],
                anchor=[np.asarray(anchor, dtype=np.float32)],
                shape=[np.asarray(shape, dtype=np.float32)],
            )
        except Exception as exc:
            built, self._pipe = self._pipe is not None, None
            kind = failure_kind(exc)
            if kind in ("memory", "device"):
                exc.add_note(self.loader._device_hint(kind))
                raise
            if not built or kind == "other":
                raise
            return _reason(exc)
        return ""

    def close(self) -> None:
        self._pipe = None
