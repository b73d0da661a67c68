"""DALI backend: nvJPEG (``mixed``) or libjpeg-turbo (``cpu``) decode, DALI augmentation.

Pipeline, per batch::

    external_source (encoded bytes, label, crop window, resize ROI, flip)   <- Python feed
    decoders.image_slice  decode only the crop window (region-of-interest decoding)
    resize                antialiased linear, ROI -> output size
    crop_mirror_normalize flip + (x - mean) / std + dtype + layout, fused

The feed, not a DALI reader, decides what is read: the order is the shared
DistributedSampler-equivalent one (:mod:`dali_pipes.sampling`) and the crop windows come
from :mod:`dali_pipes.geometry`, so ``set_epoch``, sharding and padding behave exactly as in
the torch backend, and the two backends compute the same geometry. File reads happen on a
small thread pool a few batches ahead; each image's size is read from its header first, so
a file that is not an image is reported by path before DALI sees it.

With ``device=cpu`` the pipeline is built with ``device_id=None`` and has no GPU operator.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Generator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import torch

from dali_pipes import geometry
from dali_pipes.backends.base import Loader
from dali_pipes.device import resolve_device
from dali_pipes.dist import cpu_share
from dali_pipes.errors import ConfigError, DataError, DeviceError
from dali_pipes.imageinfo import image_size
from dali_pipes.normalize import Batch
from dali_pipes.sources import ImageSource
from dali_pipes.spec import DaliBackend, LoaderSpec

log = logging.getLogger(__name__)


def _read(path: str) -> np.ndarray:
    try:
        return np.fromfile(path, dtype=np.uint8)
    except OSError as exc:
        raise DataError(
            f"{path}: cannot read the file ({exc.strerror or exc}); check it exists and is readable"
        ) from None


class _Feed:
    """``external_source`` callback: returns the next batch of the current epoch's plan."""

    def __init__(self, loader: DaliLoader, threads: int) -> None:
        spec = loader.spec
        assert isinstance(spec.source, ImageSource)
        self.files = spec.source.files
        self.labels = spec.source.labels
        self.augment = spec.augment
        self.train = spec.train
        self.seed = spec.sampling.seed
        self.read_ahead = max(1, loader.options.read_ahead + loader.options.prefetch_queue_depth)
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="dali-pipes-read")
        self._plan: list[np.ndarray] = []
        self._next = 0
        self._epoch = 0
        self._reads: deque[Future[list[np.ndarray]]] = deque()
        self.in_flight: deque[np.ndarray] = deque()  # batches handed to DALI, oldest first

    def start(self, plan: list[np.ndarray], epoch: int) -> None:
        self.stop()
        self._plan, self._next, self._epoch = plan, 0, epoch
        for k in range(min(self.read_ahead, len(plan))):
            self._reads.append(self._submit(plan[k]))

    def stop(self) -> None:
        """Forget the rest of the plan: the next call ends the epoch."""
        for fut in self._reads:
            fut.cancel()
        self._reads.clear()
        self._plan = []
        self._next = 0
        self.in_flight.clear()

    def _submit(self, batch: np.ndarray) -> Future[list[np.ndarray]]:
        paths = [self.files[i] for i in batch]
        return self._pool.submit(lambda: [_read(p) for p in paths])

    def __call__(self) -> tuple[Any, ...]:
        if self._next >= len(self._plan):
            raise StopIteration
        batch = self._plan[self._next]
        blobs = self._reads.popleft().result()
        ahead = self._next + self.read_ahead
        if ahead < len(self._plan):
            self._reads.append(self._submit(self._plan[ahead]))
        self._next += 1
        paths = [self.files[i] for i in batch]
        sizes = np.array([image_size(b, p) for b, p in zip(blobs, paths, strict=True)])
        g = geometry.plan(self.augment, self.train, sizes, batch, self.seed, self._epoch)
        roi_start, roi_end = g.roi()
        self.in_flight.append(batch)
        return (
            blobs,
            self.labels[batch],
            g.window[:, :2].astype(np.float32),
            g.window[:, 2:].astype(np.float32),
            roi_start,
            roi_end,
            g.flip.astype(np.int32),
        )

    def close(self) -> None:
        self.stop()
        self._pool.shutdown(wait=True, cancel_futures=True)


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
        self._feed = _Feed(self, threads=min(8, max(2, self.num_threads)))
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
        from nvidia.dali import fn, types
        from nvidia.dali.pipeline import Pipeline

        gpu = self.device.type == "cuda"
        aug = self.spec.augment
        out = aug.out_size(self.spec.train)
        pipe = Pipeline(
            batch_size=self.spec.batch_size,
            num_threads=self.num_threads,
            device_id=self.device.index if gpu else None,
            prefetch_queue_depth=self.options.prefetch_queue_depth,
            seed=self.spec.sampling.seed,
        )
        decoder: dict[str, Any] = {}
        if gpu:
            decoder = {
                "hw_decoder_load": self.options.hw_decoder_load,
                "preallocate_width_hint": self.options.preallocate_width_hint,
                "preallocate_height_hint": self.options.preallocate_height_hint,
                # Same chroma upsampling as libjpeg-turbo, so GPU and CPU agree.
                "jpeg_fancy_upsampling": True,
            }
            if self.options.device_memory_padding:
                decoder["device_memory_padding"] = self.options.device_memory_padding
            if self.options.host_memory_padding:
                decoder["host_memory_padding"] = self.options.host_memory_padding
        with pipe:
            encoded, labels, anchor, shape, roi_start, roi_end, flip = fn.external_source(
                source=self._feed,
                num_outputs=7,
                batch=True,
                dtype=[
                    types.UINT8,
                    types.INT64,
                    types.FLOAT,
                    types.FLOAT,
                    types.FLOAT,
                    types.FLOAT,
                    types.INT32,
                ],
            )
            images = fn.decoders.image_slice(
                encoded,
                anchor,
                shape,
                device="mixed" if gpu else "cpu",
                output_type=types.RGB,
                adjust_orientation=False,  # like ImageFolder/PIL: EXIF orientation ignored
                normalized_anchor=False,
                normalized_shape=False,
                **decoder,
            )
            images = fn.resize(
                images,
                size=[out, out],
                roi_start=roi_start,
                roi_end=roi_end,
                roi_relative=False,
                antialias=True,
                interp_type=types.INTERP_LINEAR,
            )
            images = fn.crop_mirror_normalize(
                images,
                mirror=flip,
                mean=[255 * m for m in aug.mean],
                std=[255 * s for s in aug.std],
                dtype=types.FLOAT16 if aug.dtype == "float16" else types.FLOAT,
                output_layout="HWC" if aug.channels_last else "CHW",
            )
            pipe.set_outputs(images, labels.gpu() if gpu else labels)
        pipe.build()
        return pipe

    # ----------------------------------------------------------------- epochs

    def __iter__(self) -> Iterator[Batch]:
        if self._active is not None:  # an earlier epoch was left mid-way: drain it first
            self._active.close()
        self._active = self._epoch(self._take_epoch())
        return self._active

    def _epoch(self, epoch: int) -> Generator[Batch, None, None]:
        if self._pipe is None:
            self._pipe = self._build()
        pipe = self._pipe
        self._feed.start(self.sampler.batches(epoch, self.spec.batch_size), epoch)
        finished = False
        try:
            pipe.schedule_run()
            while True:
                try:
                    outputs = pipe.share_outputs(cuda_stream=self._stream())
                except StopIteration:
                    finished = True
                    break
                batch = self._to_torch(outputs)
                self._feed.in_flight.popleft()
                pipe.release_outputs()
                pipe.schedule_run()
                yield batch
        except GeneratorExit:  # the consumer stopped early: drained below, pipeline kept
            raise
        except RuntimeError as exc:
            self._pipe = None  # DALI pipelines do not recover from errors: rebuild next time
            raise self._explain(exc) from None
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

    def _explain(self, exc: RuntimeError) -> Exception:
        """Turn DALI's "Critical error in pipeline" into an error that names the file."""
        suspects = [self.spec.source.files[i] for b in self._feed.in_flight for i in b]  # type: ignore[union-attr]
        from dali_pipes.backends.torch import decode

        for path in suspects:
            try:
                decode(path)
            except DataError as bad:
                return bad
        detail = str(exc).strip().splitlines()
        reason = next(
            (line for line in detail if "rror" in line and "pipeline" not in line),
            detail[0] if detail else "",
        )
        return DataError(f"DALI failed on a batch of {len(suspects)} files ({reason.strip()})")

    def close(self) -> None:
        if self._active is not None:
            self._active.close()
            self._active = None
        self._feed.close()
        self._pipe = None
