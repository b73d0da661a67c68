"""The peer: DALI's own ResNet-50 example pipeline, to measure the framework tax.

A user who can write DALI compares dali_pipes with the training pipeline of DALI's
ResNet-50 example (``docs/examples/use_cases/pytorch/resnet50/main.py``), written the way
DALI's documentation writes it: ``readers.file`` (DALI's own listing, shuffling and
sharding) -> ``decoders.image_random_crop`` -> ``resize`` to the crop size ->
``crop_mirror_normalize`` with a ``random.coin_flip`` mirror -> ``DALIClassificationIterator``
with ``reader_name``. ``python -m dali_pipes.bench`` measures it as ``dali-raw`` (CPU) and
``dali-raw-gpu`` beside dali_pipes' DALI loader on the same files, batch size, threads,
crop scale/ratio, flip probability and normalisation; the ratio between the two is what
dali_pipes' planned order, shared geometry, header checks and hand-over cost.

It is a yardstick, not a loader of this package: it keeps nothing of the batch contract
that DALI's reader does not give (DistributedSampler order and padding, ``set_epoch``,
resume, skip-on-error), and of the configured training pipeline it realises only the
``random_resized_crop`` and the ``hflip`` probability; other ops and batch ops (mixup,
erasing) are ignored (said in :attr:`ExampleLoader.note`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

from dali_pipes.augment.ops.crop import RandomResizedCrop
from dali_pipes.augment.ops.flip import HorizontalFlip
from dali_pipes.backends.specs import DaliBackend, LoaderSpec
from dali_pipes.data.interface import Source, local_paths_of
from dali_pipes.errors import DaliPipesError
from dali_pipes.runtime.distributed import cpu_share

#: The reader's name, which ``DALIClassificationIterator(reader_name=...)`` asks for.
READER = "Reader"
#: nvJPEG's preallocations in DALI's example (``mixed`` decoding only).
_DEVICE_MEMORY_PADDING = 211025920
_HOST_MEMORY_PADDING = 140544512


def example_crop(spec: LoaderSpec) -> RandomResizedCrop:
    """The configured training crop, which the peer can realise only when it is
    ``random_resized_crop``; anything else raises a one-line :class:`DaliPipesError`."""
    crop = spec.augment.pipeline(True).crop
    if not isinstance(crop, RandomResizedCrop):
        raise DaliPipesError(
            f"dali-raw is DALI's ResNet-50 example (random-resized crop) but the training crop "
            f"is {crop.name}; leave dali-raw and dali-raw-gpu out of bench.candidates"
        )
    return crop


def _folder(spec: LoaderSpec) -> Source:
    source = spec.source
    if not isinstance(source, Source) or local_paths_of(source) is None:
        raise DaliPipesError(
            "dali-raw reads an image folder with DALI's readers.file; use data=folder, "
            "imagenet or sample, or leave dali-raw and dali-raw-gpu out of bench.candidates"
        )
    return source


def example_pipeline(spec: LoaderSpec, options: DaliBackend, device_id: int | None) -> Any:
    """DALI's example training pipeline over ``spec``'s folder, built
    (:func:`define_example_pipeline`)."""
    pipe = define_example_pipeline(spec, options, device_id)
    pipe.build()
    return pipe


def define_example_pipeline(spec: LoaderSpec, options: DaliBackend, device_id: int | None) -> Any:
    """DALI's example training pipeline over ``spec``'s folder, defined but not built.

    ``device_id=None``: every operator on the CPU (``decoders`` on ``cpu``); a GPU index:
    ``mixed`` decoding (nvJPEG) and the rest on that GPU, labels copied there too. Threads,
    prefetch depth and seed are those dali_pipes' DALI loader takes from ``options``/``spec``.
    """
    from nvidia.dali import pipeline_def

    graph = pipeline_def(lambda: _example_graph(spec, options, device_id is not None))
    return graph(
        batch_size=spec.batch_size,
        num_threads=options.num_threads or cpu_share(),
        device_id=device_id,
        prefetch_queue_depth=options.prefetch_queue_depth,
        seed=spec.sampling.seed,
    )


def _example_graph(spec: LoaderSpec, options: DaliBackend, gpu: bool) -> tuple[Any, Any]:
    """readers.file -> decoders.image_random_crop -> resize -> crop_mirror_normalize with a
    coin-flip mirror, as DALI's example writes it."""
    from nvidia.dali import fn, types

    source = _folder(spec)
    crop = example_crop(spec)
    flips = [op.p for op in spec.augment.pipeline(True).ops if isinstance(op, HorizontalFlip)]
    size = crop.size_at(0)
    aug = spec.augment
    jpegs, labels = fn.readers.file(
        file_root=source.root,
        shard_id=spec.sampling.rank,
        num_shards=spec.sampling.world_size,
        random_shuffle=True,
        pad_last_batch=True,
        name=READER,
    )
    decoder: dict[str, Any] = {}
    if gpu:
        decoder = {
            "device_memory_padding": _DEVICE_MEMORY_PADDING,
            "host_memory_padding": _HOST_MEMORY_PADDING,
            "hw_decoder_load": options.hw_decoder_load,
        }
    images = fn.decoders.image_random_crop(
        jpegs,
        device="mixed" if gpu else "cpu",
        output_type=types.RGB,
        random_area=list(crop.scale),
        random_aspect_ratio=list(crop.ratio),
        num_attempts=100,
        **decoder,
    )
    images = fn.resize(images, resize_x=size, resize_y=size, interp_type=types.INTERP_TRIANGULAR)
    mirror = fn.random.coin_flip(probability=flips[0]) if flips else 0
    images = fn.crop_mirror_normalize(
        images,
        dtype=types.FLOAT,
        output_layout="CHW",
        crop=(size, size),
        mean=[255 * m for m in aug.mean],
        std=[255 * s for s in aug.std],
        mirror=mirror,
    )
    return images, labels.gpu() if gpu else labels


class ExampleLoader:
    """The peer pipeline behind DALI's ``DALIClassificationIterator``, as (images, labels).

    Each ``iter()`` is one epoch of the shard DALI's reader gives this rank; the labels are
    turned into int64 ``[N]`` as the example's training loop does. An epoch left mid-way
    continues on the next ``iter()`` (DALI's iterator does not reset mid-epoch).
    """

    def __init__(self, spec: LoaderSpec, options: DaliBackend, device_id: int | None) -> None:
        from nvidia.dali.plugin.pytorch import DALIClassificationIterator, LastBatchPolicy

        self.pipe = example_pipeline(spec, options, device_id)
        policy = LastBatchPolicy.DROP if spec.sampling.drop_last else LastBatchPolicy.PARTIAL
        self._iterator: Any = DALIClassificationIterator(
            self.pipe, reader_name=READER, last_batch_policy=policy, auto_reset=True
        )
        self.note = self._describe(spec, options)

    def _describe(self, spec: LoaderSpec, options: DaliBackend) -> str:
        ops = spec.augment.pipeline(True).ops
        ignored = sorted(
            {op.name for op in ops if not isinstance(op, HorizontalFlip)}
            | {str(params["op"]) for params in spec.augment.train.batch.values()}
        )
        parts = [
            f"DALI's ResNet-50 example pipeline, num_threads={options.num_threads or cpu_share()}",
            "crop + flip only" + (f" (ignores {', '.join(ignored)})" if ignored else ""),
        ]
        crop = example_crop(spec)
        if crop.size_at(0) != crop.size:
            parts.append(f"fixed crop size {crop.size_at(0)} (no resolution schedule)")
        if spec.augment.dtype != "float32" or spec.augment.channels_last:
            parts.append("float32 CHW output")
        listed = int(self.pipe.reader_meta(READER)["epoch_size"])
        if listed != len(spec.source):
            parts.append(f"readers.file lists {listed} files, dali_pipes {len(spec.source)}")
        return "; ".join(parts)

    def __len__(self) -> int:
        return len(self._iterator)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        if self._iterator is None:
            raise DaliPipesError("the dali-raw peer loader is closed")
        for data in self._iterator:
            batch = data[0]
            yield batch["data"], batch["label"].squeeze(-1).long()

    def close(self) -> None:
        """Release DALI's iterator and pipeline."""
        self._iterator = None
        self.pipe = None

    def __enter__(self) -> ExampleLoader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
