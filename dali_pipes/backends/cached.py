"""``data.cache=ram|gpu``: decode every image once, augment from memory every epoch.

For datasets that fit, decoding is the whole cost of an epoch (see benchmarks/RESULTS.md),
and it gives the same pixels every time. This loader decodes the split once (torchvision's
libjpeg-turbo decode, which equals DALI's CPU decode; all cores), keeps the uint8
``[3, H, W]`` images in host memory (``ram``) or on the GPU (``gpu``), and every epoch
applies the split's crop geometry and ops (:mod:`dali_pipes.augment`) and the
normalisation. Order, sharding and augmentation are
those of the other backends for the same (seed, epoch, sample).

``ram``: the torch backend's per-sample transform (including its DALI-style edge lines),
on a thread pool, so outputs equal the torch backend's exactly. ``gpu``: torchvision's
antialiased resize on the GPU without that edge fix (within ~20 grey levels on the
outermost rows/columns of a crop, equal elsewhere up to rounding).

Before decoding, the decoded size is added up from the image headers and checked against
free memory, so a dataset that does not fit is refused in one line instead of running the
machine out of memory.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import torch

from dali_pipes.backends.base import EpochPlan, Loader
from dali_pipes.backends.torch import decode_bytes
from dali_pipes.device import resolve_device
from dali_pipes.dist import cpu_share
from dali_pipes.errors import ConfigError, DataError, DeviceError
from dali_pipes.imageinfo import image_size
from dali_pipes.normalize import Batch, Normalizer, normalized
from dali_pipes.sources import ImageSource
from dali_pipes.spec import LoaderSpec
from dali_pipes.transforms import apply_geometry

log = logging.getLogger("dali_pipes.data")
_CHUNK = 256  # samples read per call while measuring and decoding


def _available_host_bytes() -> float:
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024.0
    except OSError:
        pass
    return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES"))


class CachedLoader(Loader):
    def __init__(self, spec: LoaderSpec) -> None:
        super().__init__(spec)
        if not isinstance(spec.source, ImageSource):
            raise ConfigError("data.cache holds decoded images; data=synthetic has none")
        self.device = resolve_device(spec.backend.device, spec.backend.name)
        self.where = spec.cache
        if self.where == "gpu" and self.device.type != "cuda":
            raise DeviceError(
                f"data.cache=gpu needs the batches on a GPU (backend.device="
                f"{spec.backend.device} resolved to {self.device}); use data.cache=ram"
            )
        self.store = self.device if self.where == "gpu" else torch.device("cpu")
        self._pool = ThreadPoolExecutor(cpu_share(), thread_name_prefix="dali-pipes-cache")
        self.images: list[torch.Tensor | None] = self._decode_all(spec.source)
        self._norm = Normalizer(spec.augment, self.device)

    # ----------------------------------------------------------------- decode once

    def _decode_all(self, source: ImageSource) -> list[torch.Tensor | None]:
        chunks = [range(i, min(i + _CHUNK, len(source))) for i in range(0, len(source), _CHUNK)]
        need = sum(self._pool.map(lambda c: self._decoded_bytes(source, c), chunks))
        free = (
            torch.cuda.mem_get_info(self.device)[0]
            if self.where == "gpu"
            else _available_host_bytes()
        )
        if need > 0.8 * free:
            raise ConfigError(
                f"data.cache={self.where}: {len(source)} images need {need / 2**30:.1f} GiB "
                f"decoded but {free / 2**30:.1f} GiB is free; use data.cache=null "
                f"(or {'ram' if self.where == 'gpu' else 'a smaller dataset'})"
            )
        log.info(
            "data.cache=%s: decoding %d images once (%.2f GiB)",
            self.where,
            len(source),
            need / 2**30,
        )
        images: list[torch.Tensor | None] = []
        for part in self._pool.map(lambda c: self._decode_chunk(source, c), chunks):
            images += part
        return images

    def _decoded_bytes(self, source: ImageSource, indices: range) -> int:
        total = 0
        for i, blob in zip(indices, source.read(list(indices)), strict=True):
            if isinstance(blob, DataError):
                continue  # reported when decoding
            try:
                h, w = image_size(blob, source.files[i], self.spec.max_pixels)
            except DataError:
                continue
            total += 3 * h * w
        return total

    def _decode_chunk(self, source: ImageSource, indices: range) -> list[torch.Tensor | None]:
        torch.set_num_threads(1)
        out: list[torch.Tensor | None] = []
        for i, blob in zip(indices, source.read(list(indices)), strict=True):
            try:
                image = decode_bytes(blob, source.files[i], self.spec.max_pixels)
            except DataError as exc:
                if not self.skip:
                    raise
                self.bad.add(source.files[i], exc, count=False)
                out.append(None)
                continue
            out.append(image.to(self.store) if self.store.type == "cuda" else image)
        return out

    # ----------------------------------------------------------------- epochs

    def _epoch(self, plan: EpochPlan) -> Iterator[Batch]:
        yield from normalized(self._batches(plan), self._norm, self.device)

    def _batches(self, plan: EpochPlan) -> Iterator[Batch]:
        ahead: Future[Batch | None] | None = None
        for k in range(len(plan.batches) + 1):
            upcoming = (
                self._pool.submit(self._assemble, plan, plan.batches[k])
                if k < len(plan.batches)
                else None
            )
            if ahead is not None and (batch := ahead.result()) is not None:
                yield batch
            ahead = upcoming

    def _assemble(self, plan: EpochPlan, batch: np.ndarray) -> Batch | None:
        keep = [int(i) for i in batch if self.images[int(i)] is not None]
        for i in batch:
            if self.images[int(i)] is None:
                path = self.spec.source.files[int(i)]  # type: ignore[union-attr]
                self.bad.add(path, self.bad.reasons.get(path, "could not be decoded"))
        if not keep:
            return None
        images = [self.images[i] for i in keep]
        sizes = [img.shape[-2:] for img in images]  # type: ignore[union-attr]
        spec = self.spec
        pipeline = spec.augment.pipeline(spec.train)
        draw = pipeline.draw(sizes, keep, spec.sampling.seed, plan.epoch)
        out = []
        for j, image in enumerate(images):
            assert image is not None
            window, resize, crop = draw.geometry.row(j)
            sample = apply_geometry(
                image,
                window,
                resize,
                crop,
                draw.geometry.out,
                exact_edges=not image.is_cuda,  # the edge fix is NumPy: host images only
            )
            out.append(pipeline.apply_torch(sample, draw, j))
        labels = torch.as_tensor(spec.source.labels[keep], dtype=torch.int64)
        images_out = torch.stack(out)
        if images_out.is_cuda:  # made on this thread's stream; the consumer uses another
            torch.cuda.current_stream(images_out.device).synchronize()
        return images_out, labels

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        self.images = []
