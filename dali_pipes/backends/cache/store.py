"""A split's images decoded once and held in memory: what both caches augment from.

For datasets that fit, decoding is the whole cost of an epoch (see benchmarks/RESULTS.md),
and it gives the same pixels every time. :class:`DecodedImages` decodes the split once
(:mod:`dali_pipes.image.decode`: torchvision's libjpeg-turbo decode, which equals DALI's CPU
decode; all cores) into host memory or onto a GPU, as uint8 ``[3, H, W]`` (torch's layout,
``data.cache=ram``) or ``[H, W, 3]`` (DALI's, ``data.cache=gpu``).

With ``data.cache_max_side`` each image is held at most that many pixels on its long side
(:func:`~dali_pipes.image.stored_size.fitted`, the pack's stored size), resized once
after its decode: the copy is smaller, and so is every crop's resize. The augmentation
draws its windows from the sizes held, so every backend crops the same held image alike.

Before decoding, the decoded size is added up from the image headers and checked against
free memory (host or GPU), so a dataset that does not fit is refused in one line instead
of running the machine out of memory.

Host memory under torchrun (several local ranks, the loader sharded like the job): the
node's local ranks decode disjoint parts into one shared file and all map it
(:mod:`dali_pipes.backends.cache.shared`), so a node holds one copy, not one per rank, and the
memory check counts that one copy against the node. A single process keeps its copy in
its own memory.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from dali_pipes.backends.base import BadFiles
from dali_pipes.backends.cache.shared import NodeGroup, Shape, build_shared, node_group
from dali_pipes.backends.specs import LoaderSpec
from dali_pipes.data.interface import Source, images_of
from dali_pipes.data.substitutes import Slot
from dali_pipes.errors import ConfigError, DataError
from dali_pipes.image.decode import Blob, decode_bytes, header_size
from dali_pipes.image.stored_size import fitted, stored_shape
from dali_pipes.runtime.distributed import cpu_share, ranks

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


class DecodedImages:
    """Every image of ``spec.source`` decoded once into ``store`` (host or a GPU).

    ``images[i]`` is sample i's uint8 image, ``None`` for a file that failed under
    ``on_error=skip`` (its reason is in ``bad``); ``channels_last`` stores ``[H, W, 3]``.
    ``decoded_here`` counts the images this process decoded: all of them, or its part of
    the node's shared copy.
    """

    def __init__(
        self,
        spec: LoaderSpec,
        store: torch.device,
        bad: BadFiles,
        pool: ThreadPoolExecutor,
        channels_last: bool = False,
    ) -> None:
        source = images_of(spec.source, "data.cache holds decoded images", "use data.cache=null")
        self.spec = spec
        self.policy = spec.policy
        self.store = store
        self.bad = bad
        self.channels_last = channels_last
        self._pool = pool
        self.decoded_here = 0
        self.images: list[torch.Tensor | None] = self._decode_all(source)
        if store.type == "cuda":  # decoded on the pool's streams: done before anyone reads
            torch.cuda.synchronize(store)

    def _decode_all(self, source: Source) -> list[torch.Tensor | None]:
        group = node_group(self._fingerprint(source)) if self._node_shares() else None
        if group is not None:
            return self._decode_shared(source, group)
        chunks = [range(i, min(i + _CHUNK, len(source))) for i in range(0, len(source), _CHUNK)]
        shapes = self._pool.map(lambda c: self._shapes(source, c), chunks)
        need = sum(3 * h * w for part in shapes for _, h, w in filter(None, part))
        self._check_fits(need, len(source))
        log.info(
            "data.cache=%s: decoding %d images once (%.2f GiB)",
            self.spec.cache,
            len(source),
            need / 2**30,
        )
        images: list[torch.Tensor | None] = []
        for part in self._pool.map(lambda c: self._decode_chunk(source, c), chunks):
            images += part
        self.decoded_here = len(source)
        return images

    def _node_shares(self) -> bool:
        """Whether the node's local ranks share one copy: host memory in torch's layout,
        several local ranks, and this loader sharded like the job (a loader built with a
        rank and world size of its own, e.g. on rank 0 only, may have no peers to share
        with)."""
        where, sampling = ranks(), self.spec.sampling
        return (
            self.store.type == "cpu"
            and not self.channels_last
            and where.local_world_size > 1
            and (sampling.rank, sampling.world_size) == (where.rank, where.world_size)
        )

    def _fingerprint(self, source: Source) -> str:
        """What makes two ranks' decoded copies equal: the samples and how they are decoded."""
        spec = self.spec
        names = (source.name(i) for i in range(len(source)))
        how = [str(spec.max_pixels), str(spec.cache_max_side), spec.on_error]
        text = "\0".join([source.root, *how, *names])
        return hashlib.sha256(text.encode()).hexdigest()

    def _decode_shared(self, source: Source, group: NodeGroup) -> list[torch.Tensor | None]:
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
            self.bad.add(source.name(i), reason, count=False)
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
        on_gpu = self.store.type == "cuda"
        free = torch.cuda.mem_get_info(self.store)[0] if on_gpu else _available_host_bytes()
        if need > 0.8 * free:
            one_copy = (
                f" (one copy for the node's {shared_by} local ranks)" if shared_by > 1 else ""
            )
            raise ConfigError(
                f"data.cache={self.spec.cache}: {count} images need {need / 2**30:.1f} GiB "
                f"decoded{one_copy} but {free / 2**30:.1f} GiB is free; use data.cache=null "
                f"(or {'ram' if on_gpu else 'a smaller dataset'})"
            )

    def _shapes(self, source: Source, indices: range) -> list[Shape | None]:
        """Each image's shape as held, from its header (None: unreadable, reported when
        decoding)."""
        shapes: list[Shape | None] = []
        for i, blob in zip(indices, source.read(list(indices)), strict=True):
            try:
                h, w = header_size(blob, source.name(i), self.spec.max_pixels)
            except DataError:
                shapes.append(None)
                continue
            if self.spec.cache_max_side is not None:
                h, w = stored_shape(h, w, self.spec.cache_max_side)
            shapes.append((3, h, w))
        return shapes

    def _held(self, blob: Blob, name: str) -> torch.Tensor:
        """The image in ``blob`` decoded, as the cache holds it (``data.cache_max_side``)."""
        image = decode_bytes(blob, name, self.spec.max_pixels)
        side = self.spec.cache_max_side
        return image if side is None else fitted(image, side)

    def _decode_chunk(self, source: Source, indices: range) -> list[torch.Tensor | None]:
        torch.set_num_threads(1)
        out: list[torch.Tensor | None] = []
        for i, blob in zip(indices, source.read(list(indices)), strict=True):
            name = source.name(i)
            image = self.policy.attempt(
                name,
                lambda: self._held(blob, name),  # noqa: B023 (run here)
                lambda n, exc: self.bad.add(n, exc, count=False),
            )
            if image is None:
                out.append(None)
                continue
            if self.channels_last:
                image = image.permute(1, 2, 0).contiguous()
            out.append(image.to(self.store) if self.store.type == "cuda" else image)
        return out

    def _fill(
        self, source: Source, indices: range, slot: Callable[[int], np.ndarray | None]
    ) -> dict[int, str]:
        """Decode ``indices`` into their slots of the shared copy; under ``on_error=skip``
        return the ones that failed, with the reason."""
        torch.set_num_threads(1)
        failed: dict[int, str] = {}
        for i, blob in zip(indices, source.read(list(indices)), strict=True):
            path = source.name(i)
            self.policy.attempt(  # each lambda is called before the loop moves on
                path,
                lambda: _fill_slot(self._held(blob, path), path, slot(i)),  # noqa: B023
                lambda _, exc: failed.__setitem__(i, str(exc)),  # noqa: B023
            )
        return failed


def cached_batch(
    spec: LoaderSpec,
    bad: BadFiles,
    images: list[torch.Tensor | None],
    epoch: int,
    batch: np.ndarray,
    slots: np.ndarray,
    repeats: np.ndarray | None = None,
) -> tuple[list[int], np.ndarray | None]:
    """The samples a batch of the plan holds from the decoded copy, with their repeat
    numbers (``repeats``: the plan's, None for first draws): an image that failed to
    decode is reported (counted this epoch) and, under ``on_error=skip``, replaced by its
    substitute (:mod:`dali_pipes.data.substitutes`), which keeps its slot's repeat number;
    under ``drop`` left out."""
    source = images_of(spec.source, "data.cache holds decoded images", "use data.cache=null")
    policy = spec.policy

    def decoded(i: int) -> int | None:
        if images[i] is not None:
            return i
        name = source.name(i)
        bad.add(name, bad.reasons.get(name, "could not be decoded"))
        return None

    keep: list[int] = []
    again: list[int] = []
    numbers = np.zeros(len(batch), np.int64) if repeats is None else repeats
    for i, slot, repeat in zip(batch, slots, numbers, strict=True):
        filled = policy.fill(
            int(i), decoded(int(i)), Slot(epoch, int(slot), len(images)), decoded, source.name
        )
        if filled is not None:
            keep.append(filled.index)
            again.append(int(repeat))
    return keep, None if repeats is None else np.asarray(again, np.int64)


def _fill_slot(image: torch.Tensor, path: str, target: np.ndarray | None) -> bool:
    """Put the decoded ``image`` into ``target``, its slot of the node's shared copy
    (True), or raise the one-line error naming ``path`` (a slot missing or of another size:
    the file changed since its header was read)."""
    if target is None or target.shape != image.shape:
        said = "no size" if target is None else "x".join(map(str, target.shape))
        raise DataError(
            f"{path}: decodes to {'x'.join(map(str, image.shape))} but its header "
            f"said {said}; the file changed while caching, or re-encode it"
        )
    target[...] = image.numpy()
    return True
