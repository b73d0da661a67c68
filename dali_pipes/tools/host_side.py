"""The GPU path's host side alone, and DALI's own reader alone: the ceiling the feed sets.

On a GPU, decoding and augmenting are fast enough that what the host does per image --
reading the planned files and feeding every parameter through ``external_source`` -- can
set the speed. Both are measured here without decoding, so on any machine, with or
without a GPU (``python -m dali_pipes.bench``'s ``feed`` and ``reader`` candidates):

- :class:`FeedOnly`: dali_pipes' DALI loader for the GPU graph, its graph cut to the fed
  columns (:mod:`~dali_pipes.backends.dali.columns`): the planned files read, checked and
  fed with every parameter, nothing decoded. The loader is the GPU graph's CPU twin, whose
  feed is the GPU graph's; its epochs, plan and bookkeeping are the loader's own.
- :class:`ReaderOnly`: DALI's ``fn.readers.file`` over the same folder, the reader of
  DALI's ResNet-50 example (:mod:`~dali_pipes.tools.dali_example`), alone: its files and
  labels, nothing decoded.

In both, the encoded files go where a decoder would take them, to an operator that reads
them in DALI: ``fn.peek_image_shape`` (each image's size from its header), so DALI reads
the bytes it is fed as the decoder does, without copying them out as outputs. Both run on
the CPU with the loader's threads and prefetch depth and hand over the labels' count.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from dali_pipes.backends.base import Batch
from dali_pipes.backends.dali.columns import FedColumns
from dali_pipes.backends.dali.graph import fed_nodes
from dali_pipes.backends.dali.loader import DaliLoader
from dali_pipes.backends.specs import DaliBackend, LoaderSpec
from dali_pipes.data.interface import Source, local_paths_of
from dali_pipes.errors import DaliPipesError
from dali_pipes.runtime.distributed import cpu_share

#: The reader's name, for its epoch size.
READER = "Reader"


class FeedOnly(DaliLoader):
    """The GPU graph's feed alone: the planned files and every fed column, not decoded."""

    def __init__(self, spec: LoaderSpec) -> None:
        super().__init__(spec, twin=True)

    def _define(self) -> Any:
        from nvidia.dali import fn, pipeline_def

        columns = FedColumns.of_split(self.spec.augment, self.spec.train)

        def graph() -> tuple[Any, ...]:
            fed = fed_nodes(self._feed, columns)
            return (fn.peek_image_shape(fed.images), *fed.params())

        return pipeline_def(graph)(
            batch_size=self.spec.batch_size,
            num_threads=self.num_threads,
            device_id=None,
            prefetch_queue_depth=self.options.prefetch_queue_depth,
            seed=self.spec.sampling.seed,
        )

    def _handover(self, outputs: Any) -> Batch:
        """The batch's labels (copied: DALI reuses its buffers); no images."""
        labels = np.array(outputs[1].as_array())
        return torch.empty(0), torch.from_numpy(labels)


class ReaderOnly:
    """DALI's ``fn.readers.file`` over ``spec``'s folder, this rank's shard, shuffled: each
    ``iter()`` one epoch of (encoded files, labels), nothing decoded.

    ``mmap``: DALI's default, the files mapped into memory (their pages read when first
    touched: by ``peek_image_shape`` only the header's here, by a decoder all of them);
    False: the files read into memory (``dont_use_mmap``), as the feed reads them."""

    def __init__(self, spec: LoaderSpec, options: DaliBackend, *, mmap: bool = True) -> None:
        from nvidia.dali import fn, pipeline_def

        source = spec.source
        if not isinstance(source, Source) or local_paths_of(source) is None:
            raise DaliPipesError(
                "the reader candidate reads an image folder with DALI's readers.file; use "
                "data=folder, imagenet or sample, or leave reader out of bench.candidates"
            )
        root = source.root

        def graph() -> tuple[Any, Any]:
            jpegs, labels = fn.readers.file(
                file_root=root,
                shard_id=spec.sampling.rank,
                num_shards=spec.sampling.world_size,
                random_shuffle=True,
                pad_last_batch=True,
                dont_use_mmap=not mmap,
                name=READER,
            )
            return fn.peek_image_shape(jpegs), labels

        self.batch_size = spec.batch_size
        self.pipe = pipeline_def(graph)(
            batch_size=spec.batch_size,
            num_threads=options.num_threads or cpu_share(),
            device_id=None,
            prefetch_queue_depth=options.prefetch_queue_depth,
            seed=spec.sampling.seed,
        )
        self.pipe.build()
        meta = self.pipe.reader_meta(READER)
        self.size = -(-int(meta["epoch_size"]) // spec.sampling.world_size)
        self.note = f"DALI's readers.file alone, {self.size} files per epoch" + (
            "" if mmap else ", read (dont_use_mmap)"
        )

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        left = self.size
        while left > 0:
            _, labels = self.pipe.run()
            n = min(left, len(labels))
            left -= n
            yield torch.empty(0), torch.from_numpy(np.array(labels.as_array()[:n]))

    def close(self) -> None:
        """Release the pipeline."""
        self.pipe = None

    def __enter__(self) -> ReaderOnly:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def feed_spec(spec: LoaderSpec, options: DaliBackend) -> LoaderSpec:
    """``spec`` with the DALI options of the GPU loader whose host side is measured."""
    return replace(spec, backend=replace(options, device="gpu"), output_device=None)
