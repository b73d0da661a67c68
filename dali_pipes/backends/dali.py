"""DALI backend: nvJPEG (``mixed``) or libjpeg-turbo (``cpu``) decode, DALI augmentation.

Pipeline, per batch::

    external_source (encoded bytes, label, crop window, resize ROI, output size,
                     op parameters)  <- feed
    decoders.image_slice  decode only the crop window (region-of-interest decoding), or
      decoders.image + slice   decode whole, then crop (GPU with fancy_upsampling)
    resize                antialiased linear, ROI -> output size
    the split's ops       each op's DALI graph, fed its parameters (conditionals per sample)
    crop_mirror_normalize (a trailing flip) + (x - mean) / std + dtype + layout, fused

The feed, not a DALI reader, decides what is read: the order is the shared
DistributedSampler-equivalent one (:mod:`dali_pipes.sampling`) and the crop windows and op
parameters come from :meth:`dali_pipes.augment.Pipeline.draw`, so ``set_epoch``, sharding
and padding behave exactly as in the torch backend, and the two backends compute the same
geometry and the same random parameters. File reads happen on a
small thread pool a few batches ahead; each image's size is read from its header first, so
a file that is not an image is reported by path before DALI sees it. A packed dataset
(``data=shards``) is read by DALI's webdataset reader in the same planned order
(:mod:`dali_pipes.backends.dali_webdataset`).

With ``device=cpu`` the pipeline is built with ``device_id=None`` and has no GPU operator.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Generator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import Any, NamedTuple

import numpy as np
import torch

from dali_pipes.backends.base import BadFiles, EpochPlan, Loader
from dali_pipes.backends.dali_webdataset import WebdatasetStream
from dali_pipes.device import resolve_device
from dali_pipes.dist import cpu_share
from dali_pipes.errors import ConfigError, DataError, DeviceError
from dali_pipes.imageinfo import image_size
from dali_pipes.normalize import Batch
from dali_pipes.sampling import StreamSampler
from dali_pipes.sources import ImageSource
from dali_pipes.spec import DaliBackend, LoaderSpec

log = logging.getLogger(__name__)


def _dali_types() -> dict[str, Any]:
    from nvidia.dali import types

    return {
        "bool": types.BOOL,
        "uint8": types.UINT8,
        "int32": types.INT32,
        "int64": types.INT64,
        "float32": types.FLOAT,
        "float64": types.FLOAT64,
    }


class _InFlight(NamedTuple):
    position: int  # index of the batch in the epoch plan
    indices: np.ndarray  # the samples DALI was given (bad ones already left out)


class _Feed:
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
        self.in_flight: deque[_InFlight] = deque()  # batches handed to DALI, oldest first

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
                    if isinstance(blob, DataError):
                        raise blob
                    sizes.append(image_size(blob, path, spec.max_pixels))
                except DataError as exc:
                    if spec.on_error != "skip":
                        raise
                    self.bad.add(path, exc)
                    continue
                keep.append(i)
                kept.append(blob)
            if keep:
                return position, np.asarray(keep), kept, np.asarray(sizes)
        raise StopIteration

    def __call__(self) -> tuple[Any, ...]:
        position, indices, blobs, sizes = self._next_batch()
        draw = self.pipeline.draw(sizes, indices, self.spec.sampling.seed, self._plan.epoch)
        g = draw.geometry
        roi_start, roi_end = g.roi()
        self.in_flight.append(_InFlight(position, indices))
        return (
            blobs,
            self.labels[indices],
            g.window[:, :2].astype(np.float32),
            g.window[:, 2:].astype(np.float32),
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


def _reason(exc: BaseException) -> str:
    """The informative line of a DALI error (it wraps the decoder's message in boilerplate)."""
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    useful = [
        ln for ln in lines if "pipeline" not in ln.lower() and not ln.startswith(("File ", "C++"))
    ]
    return (useful or lines or [type(exc).__name__])[-1]


class DaliLoader(Loader):
    def __init__(self, spec: LoaderSpec) -> None:
        super().__init__(spec)
        if not isinstance(spec.backend, DaliBackend):
            raise ConfigError(f"backend={spec.backend.name!r} options given to the DALI backend")
        if not isinstance(spec.source, ImageSource):
            raise ConfigError(
                "backend=dali decodes image files but data=synthetic has none; "
                "use backend=synthetic"
            )
        self.options: DaliBackend = spec.backend
        self.device = resolve_device(spec.backend.device, "dali")
        if self.device.type == "cuda":
            self._check_dali_gpu()
        self.num_threads = self.options.num_threads or cpu_share()
        fancy_on_gpu = self.device.type == "cuda" and self.options.fancy_upsampling
        roi = self.options.roi_decode
        self.roi_decode = not fancy_on_gpu if roi is None else roi
        if self.roi_decode and fancy_on_gpu:
            log.warning(
                "backend.roi_decode=true with backend.fancy_upsampling=true on the GPU: "
                "nvJPEG declines that and DALI decodes those images on the CPU instead; "
                "set one of them to false (or roi_decode=null)"
            )
        read_ahead = max(1, self.options.read_ahead + self.options.prefetch_queue_depth)
        stream = None
        if spec.source.layout is not None:  # a packed dataset: DALI's webdataset reader
            assert isinstance(self.sampler, StreamSampler)
            stream = WebdatasetStream(spec.source.layout, spec.source.labels, self.sampler)
        self._feed = _Feed(
            spec, self.bad, read_ahead, threads=min(8, max(2, self.num_threads)), stream=stream
        )
        self._pipe: Any = None
        self._active: Generator[Batch, None, None] | None = None

    def _check_dali_gpu(self) -> None:
        from nvidia.dali import backend as dali_backend

        count = dali_backend.GetCUDADeviceCount()  # type: ignore[attr-defined]
        if count <= (self.device.index or 0):
            raise DeviceError(
                f"backend=dali device={self.options.device}: DALI sees no CUDA device "
                f"{self.device.index}; check the driver or use backend.device=cpu"
            )

    # ----------------------------------------------------------------- pipeline

    def _build(self) -> Any:
        from nvidia.dali import pipeline_def

        gpu = self.device.type == "cuda"
        dtypes = list(self.spec.augment.pipeline(self.spec.train).feed_dtypes)
        # Conditionals: ops choose per sample (RandAugment's operation, a probability)
        # from the fed parameters with DALI `if` branches. DALI's AutoGraph rewrites the
        # graph function and what it calls, so nothing but graph code runs inside it.
        graph = pipeline_def(partial(self._graph, dtypes), enable_conditionals=True)
        pipe = graph(
            batch_size=self.spec.batch_size,
            num_threads=self.num_threads,
            device_id=self.device.index if gpu else None,
            prefetch_queue_depth=self.options.prefetch_queue_depth,
            seed=self.spec.sampling.seed,
        )
        pipe.build()
        return pipe

    def _graph(self, dtypes: list[str]) -> tuple[Any, Any]:
        """external_source -> decode the crop window -> resize -> ops -> normalise."""
        from nvidia.dali import fn, types

        gpu = self.device.type == "cuda"
        aug = self.spec.augment
        pipeline = aug.pipeline(self.spec.train)
        decoder: dict[str, Any] = {}
        if gpu:
            decoder = {
                "hw_decoder_load": self.options.hw_decoder_load,
                "preallocate_width_hint": self.options.preallocate_width_hint,
                "preallocate_height_hint": self.options.preallocate_height_hint,
                "jpeg_fancy_upsampling": self.options.fancy_upsampling,
            }
            if self.options.device_memory_padding:
                decoder["device_memory_padding"] = self.options.device_memory_padding
            if self.options.host_memory_padding:
                decoder["host_memory_padding"] = self.options.host_memory_padding
        encoded, labels, anchor, shape, roi_start, roi_end, out, *fed = fn.external_source(
            source=self._feed,
            num_outputs=7 + len(dtypes),
            batch=True,
            dtype=[
                types.UINT8,
                types.INT64,
                types.FLOAT,
                types.FLOAT,
                types.FLOAT,
                types.FLOAT,
                types.FLOAT,
                *(_dali_types()[d] for d in dtypes),
            ],
        )
        decoder.update(
            device="mixed" if gpu else "cpu",
            output_type=types.RGB,
            adjust_orientation=False,  # like ImageFolder/PIL: EXIF orientation ignored
        )
        if self.roi_decode:
            images = fn.decoders.image_slice(
                encoded,
                anchor,
                shape,
                normalized_anchor=False,
                normalized_shape=False,
                **decoder,
            )
        else:
            images = fn.decoders.image(encoded, **decoder)
            images = fn.slice(
                images,
                anchor,
                shape,
                axis_names="WH",
                normalized_anchor=False,
                normalized_shape=False,
            )
        images = fn.resize(
            images,
            size=out,  # fed: a resolution schedule changes it without a rebuild
            roi_start=roi_start,
            roi_end=roi_end,
            roi_relative=False,
            antialias=True,
            interp_type=types.INTERP_LINEAR,
        )
        images, mirror = pipeline.dali(images, fed, gpu)
        images = fn.crop_mirror_normalize(
            images,
            mirror=0 if mirror is None else mirror,
            mean=[255 * m for m in aug.mean],
            std=[255 * s for s in aug.std],
            dtype=types.FLOAT16 if aug.dtype == "float16" else types.FLOAT,
            output_layout="HWC" if aug.channels_last else "CHW",
        )
        return images, labels.gpu() if gpu else labels

    # ----------------------------------------------------------------- epochs

    def __iter__(self) -> Iterator[Batch]:
        if self._active is not None:  # an earlier epoch was left mid-way: drain it first
            self._active.close()
        plan = self._take_epoch()
        self._active = self._epoch(plan)
        return self._staged(plan, self._active)

    def _epoch(self, plan: EpochPlan) -> Generator[Batch, None, None]:
        position = 0  # the next plan batch to yield
        while True:
            if self._pipe is None:
                self._pipe = self._build()
            pipe = self._pipe
            self._feed.start(plan, position)
            finished = False
            try:
                pipe.schedule_run()
                while True:
                    try:
                        outputs = pipe.share_outputs(cuda_stream=self._stream())
                    except StopIteration:
                        finished = True
                        return
                    batch = self._to_torch(outputs)
                    position = self._feed.in_flight.popleft().position + 1
                    pipe.release_outputs()
                    pipe.schedule_run()
                    yield batch
            except GeneratorExit:  # the consumer stopped early: drained below, pipeline kept
                raise
            except RuntimeError as exc:
                # DALI stopped on a file its decoder rejects ("Critical error in pipeline");
                # a pipeline does not recover from that, so name the file, then rebuild.
                self._pipe = None
                suspects = list(self._feed.in_flight)
                culprits = self._culprits(suspects)
                if not culprits:
                    raise DataError(f"DALI failed: {_reason(exc)}") from None
                for path, error in culprits:
                    self._report(path, error)  # raises unless on_error=skip
                position = suspects[0].position  # re-feed what DALI had not delivered
            except BaseException:
                self._pipe = None
                raise
            finally:
                if self._pipe is not None:
                    if not finished:
                        self._drain(pipe)
                    pipe.reset()
                self._feed.stop()

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
        from nvidia.dali.plugin.pytorch import feed_ndarray

        stream = self._stream()
        images_dali = outputs[0].as_tensor()
        labels_dali = outputs[1].as_tensor()
        dtype = torch.float16 if self.spec.augment.dtype == "float16" else torch.float32
        images = torch.empty(images_dali.shape(), dtype=dtype, device=self.device)
        labels = torch.empty(labels_dali.shape(), dtype=torch.int64, device=self.device)
        feed_ndarray(images_dali, images, cuda_stream=stream)
        feed_ndarray(labels_dali, labels, cuda_stream=stream)
        if self.spec.augment.dtype == "bfloat16":  # DALI has no bfloat16 output type
            images = images.to(torch.bfloat16)
        if self.spec.augment.channels_last:  # NHWC memory viewed as NCHW: channels_last
            images = images.permute(0, 3, 1, 2)
        return images, labels

    def _culprits(self, suspects: list[_InFlight]) -> list[tuple[str, DataError]]:
        """Which of the files DALI had in flight it cannot decode, and why.

        torchvision's CPU decode names most; a file it decodes but DALI rejects (a format
        corner DALI's decoder does not handle) is found by decoding each file alone in a
        one-sample DALI pipeline.
        """
        from dali_pipes.backends.torch import decode_bytes

        source = self.spec.source
        assert isinstance(source, ImageSource)
        indices = [int(i) for batch in suspects for i in batch.indices]
        found: list[tuple[str, DataError]] = []
        for i in indices:
            try:
                decode_bytes(source.read([i])[0], source.files[i], self.spec.max_pixels)
            except DataError as exc:
                found.append((source.files[i], exc))
        if found:
            return found
        for i in indices:
            path, blob = source.files[i], source.read([i])[0]
            reason = self._probe(blob) if not isinstance(blob, DataError) else str(blob)
            if reason:
                found.append((path, DataError(f"{path}: DALI cannot decode it ({reason})")))
        return found

    def _probe(self, blob: np.ndarray) -> str:
        """Decode one image alone with this loader's DALI decoder: "" if it works."""
        from nvidia.dali import fn, types
        from nvidia.dali.pipeline import Pipeline

        gpu = self.device.type == "cuda"
        pipe = Pipeline(
            batch_size=1,
            num_threads=1,
            device_id=self.device.index if gpu else None,
            prefetch_queue_depth=1,
        )
        with pipe:
            encoded = fn.external_source(name="encoded", dtype=types.UINT8)
            pipe.set_outputs(
                fn.decoders.image(encoded, device="mixed" if gpu else "cpu", output_type=types.RGB)
            )
        try:
            pipe.build()
            pipe.run(encoded=[np.asarray(blob, dtype=np.uint8)])
        except (RuntimeError, OSError) as exc:
            return _reason(exc)
        return ""

    def close(self) -> None:
        if self._active is not None:
            self._active.close()
            self._active = None
        self._feed.close()
        self._pipe = None
