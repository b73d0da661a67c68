"""``data.cache=ram|gpu``: decode every image once, augment from memory every epoch.

For datasets that fit, decoding is the whole cost of an epoch (see benchmarks/RESULTS.md),
and it gives the same pixels every time. This loader decodes the split once
(:mod:`dali_pipes.decode`: torchvision's libjpeg-turbo decode, which equals DALI's CPU
decode; all cores), keeps the uint8 ``[3, H, W]`` images in host memory (``ram``) or on the
GPU (``gpu``), and every epoch applies the split's crop geometry and ops
(:mod:`dali_pipes.augment`) and the normalisation. Order, sharding and augmentation are
those of the other backends for the same (seed, epoch, sample).

``ram``: the torch backend's per-sample transform (including its DALI-style edge lines),
on a thread pool, so outputs equal the torch backend's exactly. ``gpu``: torchvision's
antialiased resize on the GPU without that edge fix (within ~20 grey levels on the
outermost rows/columns of a crop, equal elsewhere up to rounding).

Before decoding, the decoded size is added up from the image headers and checked against
free memory, so a dataset that does not fit is refused in one line instead of running the
machine out of memory.

``ram`` under torchrun (several local ranks, the loader sharded like the job): the node's
local ranks decode disjoint parts into one shared file and all map it
(:mod:`dali_pipes.shared_store`), so a node holds one copy, not one per rank, and the
memory check counts that one copy against the node. A single process keeps its copy in
its own memory.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import torch

from dali_pipes.backends.base import EpochPlan, Loader
from dali_pipes.decode import decode_bytes, header_size
from dali_pipes.device import loader_devices
from dali_pipes.distributed import cpu_share, placement
from dali_pipes.errors import ConfigError, DataError, DeviceError
from dali_pipes.normalize import Batch, Normalizer, normalized
from dali_pipes.shared_store import NodeGroup, Shape, build_shared, node_group
from dali_pipes.sources import ImageSource
from dali_pipes.spec import LoaderSpec
from dali_pipes.transforms import apply_row

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
        # ram: host images, batches normalised on (and handed to) the model's device;
        # gpu: images and augmentation on the GPU the backend runs on.
        made, self.device = loader_devices(spec)
        self.where = spec.cache
        if self.where == "gpu" and made.type != "cuda":
            raise DeviceError(
                f"data.cache=gpu needs the batches on a GPU (backend.device="
                f"{spec.backend.device} resolved to {made}); use data.cache=ram"
            )
        self.store = made if self.where == "gpu" else torch.device("cpu")
        self._pool = ThreadPoolExecutor(cpu_share(), thread_name_prefix="dali-pipes-cache")
        #: Images this process decoded: all of them, or its part of the node's shared copy.
        self.decoded_here = 0
        try:
            self.images: list[torch.Tensor | None] = self._decode_all(spec.source)
        except BaseException:
            self._pool.shutdown(wait=False, cancel_futures=True)
            raise
        self._norm = Normalizer(spec.augment, self.device)

    # ----------------------------------------------------------------- decode once

    def _decode_all(self, source: ImageSource) -> list[torch.Tensor | None]:
        group = node_group(self._fingerprint(source)) if self._node_shares() else None
        if group is not None:
            return self._decode_shared(source, group)
        chunks = [range(i, min(i + _CHUNK, len(source))) for i in range(0, len(source), _CHUNK)]
        shapes = self._pool.map(lambda c: self._shapes(source, c), chunks)
        need = sum(3 * h * w for part in shapes for _, h, w in filter(None, part))
        self._check_fits(need, len(source))
        log.info(
            "data.cache=%s: decoding %d images once (%.2f GiB)",
            self.where,
            len(source),
            need / 2**30,
        )
        images: list[torch.Tensor | None] = []
        for part in self._pool.map(lambda c: self._decode_chunk(source, c), chunks):
            images += part
        self.decoded_here = len(source)
        return images

    def _node_shares(self) -> bool:
        """Whether the node's local ranks share one copy: host memory, several local
        ranks, and this loader sharded like the job (a loader built with a rank and world
        size of its own, e.g. on rank 0 only, may have no peers to share with)."""
        where, sampling = placement(), self.spec.sampling
        return (
            self.where == "ram"
            and where.local_world_size > 1
            and (sampling.rank, sampling.world_size) == (where.rank, where.world_size)
        )

    def _fingerprint(self, source: ImageSource) -> str:
        """What makes two ranks' decoded copies equal: the files and how they are decoded."""
        spec = self.spec
        text = "\0".join([source.root, str(spec.max_pixels), spec.on_error, *source.files])
        return hashlib.sha256(text.encode()).hexdigest()

    def _decode_shared(self, source: ImageSource, group: NodeGroup) -> list[torch.Tensor | None]:
        log.info(
            "data.cache=ram: local rank %d of %d decoding its part of %d images into the "
            "node's shared copy (%s)",
            group.local_rank,
            group.local_world_size,
            len(source),
            group.directory,
        )
        shared = build_shared(
            group,
            len(source),
            measure=lambda indices: self._shapes(source, indices),
            fits=lambda need: self._check_fits(need, len(source), group.local_world_size),
            fill=lambda indices, slot: self._fill(source, indices, slot),
            pool=self._pool,
            workers=cpu_share(),
        )
        for i, reason in sorted(shared.failures.items()):
            self.bad.add(source.files[i], reason, count=False)
        self.decoded_here = shared.filled_here
        log.info(
            "data.cache=ram: local rank %d decoded %d of %d images; the node's one copy "
            "is %.2f GiB",
            group.local_rank,
            shared.filled_here,
            len(source),
            shared.nbytes / 2**30,
        )
        return [None if a is None else torch.from_numpy(a) for a in shared.arrays]

    def _check_fits(self, need: int, count: int, shared_by: int = 1) -> None:
        """Refuse, in one line, a copy that would run the machine (or the GPU) out of memory."""
        free = (
            torch.cuda.mem_get_info(self.device)[0]
            if self.where == "gpu"
            else _available_host_bytes()
        )
        if need > 0.8 * free:
            one_copy = (
                f" (one copy for the node's {shared_by} local ranks)" if shared_by > 1 else ""
            )
            raise ConfigError(
                f"data.cache={self.where}: {count} images need {need / 2**30:.1f} GiB "
                f"decoded{one_copy} but {free / 2**30:.1f} GiB is free; use data.cache=null "
                f"(or {'ram' if self.where == 'gpu' else 'a smaller dataset'})"
            )

    def _shapes(self, source: ImageSource, indices: range) -> list[Shape | None]:
        """Each image's decoded shape from its header (None: unreadable, reported when
        decoding)."""
        shapes: list[Shape | None] = []
        for i, blob in zip(indices, source.read(list(indices)), strict=True):
            try:
                h, w = header_size(blob, source.files[i], self.spec.max_pixels)
            except DataError:
                shapes.append(None)
                continue
            shapes.append((3, h, w))
        return shapes

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

    def _fill(
        self, source: ImageSource, indices: range, slot: Callable[[int], np.ndarray | None]
    ) -> dict[int, str]:
        """Decode ``indices`` into their slots of the shared copy; under ``on_error=skip``
        return the ones that failed, with the reason."""
        torch.set_num_threads(1)
        failed: dict[int, str] = {}
        for i, blob in zip(indices, source.read(list(indices)), strict=True):
            path = source.files[i]
            try:
                image = decode_bytes(blob, path, self.spec.max_pixels)
                target = slot(i)
                if target is None or target.shape != image.shape:
                    said = "no size" if target is None else "x".join(map(str, target.shape))
                    raise DataError(
                        f"{path}: decodes to {'x'.join(map(str, image.shape))} but its header "
                        f"said {said}; the file changed while caching, or re-encode it"
                    )
            except DataError as exc:
                if not self.skip:
                    raise
                failed[i] = str(exc)
                continue
            target[...] = image.numpy()
        return failed

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
        source = spec.source
        assert isinstance(source, ImageSource)
        draw = pipeline.draw(sizes, source.identity(keep), spec.sampling.seed, plan.epoch)
        out = []
        for j, image in enumerate(images):
            assert image is not None
            # The edge fix is NumPy: host images only.
            sample = apply_row(image, draw.geometry, j, exact_edges=not image.is_cuda)
            out.append(pipeline.apply_torch(sample, draw, j))
        labels = torch.as_tensor(source.labels[keep], dtype=torch.int64)
        images_out = torch.stack(out)
        if images_out.is_cuda:  # made on this thread's stream; the consumer uses another
            torch.cuda.current_stream(images_out.device).synchronize()
        return images_out, labels

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        self.images = []
