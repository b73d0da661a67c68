"""The detection peer: DALI's own SSD example pipeline, to measure the framework tax on
boxes.

A user who can write DALI compares dali_pipes with the training pipeline of DALI's SSD
example (``docs/examples/use_cases/pytorch/single_stage_detector/src/coco_pipeline.py``),
written as DALI's documentation writes it: ``readers.coco`` (boxes as ``ltrb`` in relative
coordinates) -> ``random_bbox_crop`` (SSD's IoU thresholds) -> ``decoders.image_slice`` ->
``bb_flip`` with a ``random.coin_flip`` -> ``resize`` to the output size -> ``hsv`` and
``brightness_contrast`` (the photometric distortion) -> ``crop_mirror_normalize``.
``python -m dali_pipes.bench`` measures it as ``dali-raw`` (CPU) and ``dali-raw-gpu``
when the training crop is ``iou_crop``.

It is a yardstick, not a loader of this package. It does less than the ``ssd`` preset:
no zoom out (the example has none), its colour steps always run, and it gives no masks.
It keeps no batch contract: DALI's PyTorch iterator cannot return a different number of
boxes per image, so each batch's boxes are copied out sample by sample, as a user without
``box_encoder`` has to.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from dali_pipes.augment.ops.iou_crop import IoUCrop
from dali_pipes.backends.specs import DaliBackend, LoaderSpec
from dali_pipes.data.coco import CocoSource
from dali_pipes.errors import DaliPipesError
from dali_pipes.runtime.distributed import cpu_share

READER = "Reader"


def ssd_crop(spec: LoaderSpec) -> tuple[CocoSource, IoUCrop]:
    """The COCO data and the training crop the example realises; anything else is a
    one-line :class:`DaliPipesError`."""
    source, crop = spec.source, spec.augment.pipeline(True).crop
    if not isinstance(source, CocoSource) or not isinstance(crop, IoUCrop):
        raise DaliPipesError(
            "dali-raw on data with boxes is DALI's SSD example: it needs data=coco (or "
            "sample_objects) and augment=ssd; leave dali-raw and dali-raw-gpu out of "
            "bench.candidates"
        )
    return source, crop


def define_ssd_pipeline(spec: LoaderSpec, options: DaliBackend, device_id: int | None) -> Any:
    """DALI's SSD example training pipeline over ``spec``'s COCO data, defined, not built:
    every operator on the CPU for ``device_id=None``, else ``mixed`` decoding and the rest
    on that GPU. Threads, prefetch depth and seed are those of dali_pipes' DALI loader."""
    from nvidia.dali import pipeline_def

    graph = pipeline_def(lambda: _ssd_graph(spec, device_id is not None))
    return graph(
        batch_size=spec.batch_size,
        num_threads=options.num_threads or cpu_share(),
        device_id=device_id,
        prefetch_queue_depth=options.prefetch_queue_depth,
        seed=spec.sampling.seed,
    )


def _ssd_graph(spec: LoaderSpec, gpu: bool) -> tuple[Any, Any, Any]:
    from nvidia.dali import fn, types

    source, crop = ssd_crop(spec)
    height, width = crop.shape_at(0)
    aug = spec.augment
    reader: Any = fn.readers.coco(
        file_root=source.root,
        annotations_file=source.annotations,
        shard_id=spec.sampling.rank,
        num_shards=spec.sampling.world_size,
        ratio=True,
        ltrb=True,
        skip_empty=True,  # as DALI's example (and torchvision's reference) train
        random_shuffle=True,
        pad_last_batch=True,
        name=READER,
    )
    jpegs, boxes, labels = reader
    cropped: Any = fn.random_bbox_crop(
        boxes,
        labels,
        aspect_ratio=[crop.min_aspect_ratio, crop.max_aspect_ratio],
        thresholds=[t for t in crop.options if t < 1.0],
        scaling=[crop.min_scale, crop.max_scale],
        bbox_layout="xyXY",
        allow_no_crop=True,
        num_attempts=crop.trials,
    )
    begin, size, boxes, labels = cropped
    images = fn.decoders.image_slice(
        jpegs, begin, size, device="mixed" if gpu else "cpu", output_type=types.RGB
    )
    flip = fn.random.coin_flip(probability=0.5)
    boxes = fn.bb_flip(boxes, ltrb=True, horizontal=flip)
    images = fn.resize(images, resize_x=width, resize_y=height, min_filter=types.INTERP_TRIANGULAR)
    images = fn.hsv(
        images,
        dtype=types.FLOAT,
        hue=fn.random.uniform(range=[-18.0, 18.0]),  # degrees: torchvision's +-0.05 turns
        saturation=fn.random.uniform(range=[0.5, 1.5]),
    )
    images = fn.brightness_contrast(
        images,
        brightness=fn.random.uniform(range=[0.875, 1.125]),
        contrast=fn.random.uniform(range=[0.5, 1.5]),
        contrast_center=128,
        dtype=types.UINT8,
    )
    images = fn.crop_mirror_normalize(
        images,
        dtype=types.FLOAT,
        output_layout="CHW",
        mean=[255 * m for m in aug.mean],
        std=[255 * s for s in aug.std],
        mirror=flip,
    )
    return images, boxes, labels


class SsdExampleLoader:
    """DALI's SSD example as ``(images, targets)``: the images as one tensor, each image's
    boxes (in pixels) and labels copied out of DALI's output one sample at a time."""

    def __init__(self, spec: LoaderSpec, options: DaliBackend, device_id: int | None) -> None:
        self.pipe = define_ssd_pipeline(spec, options, device_id)
        self.pipe.build()
        self.size = ssd_crop(spec)[1].shape_at(0)
        padded = int(self.pipe.reader_meta(READER)["epoch_size_padded"])
        self.batches = -(-padded // spec.batch_size)
        self.device = torch.device("cuda", device_id) if device_id is not None else None
        self.note = (
            f"DALI's SSD example pipeline, num_threads={options.num_threads or cpu_share()}; "
            "no zoom out, no masks, boxes copied out per sample"
        )

    def __len__(self) -> int:
        return self.batches

    def __iter__(self) -> Iterator[tuple[torch.Tensor, list[dict[str, torch.Tensor]]]]:
        if self.pipe is None:
            raise DaliPipesError("the dali-raw peer loader is closed")
        from nvidia.dali.plugin.pytorch import feed_ndarray

        scale = np.array([self.size[1], self.size[0]] * 2, np.float32)
        for _ in range(self.batches):
            images, boxes, labels = self.pipe.run()
            dense = images.as_tensor()
            out = torch.empty(dense.shape(), dtype=torch.float32, device=self.device)
            stream = torch.cuda.current_stream() if self.device is not None else None
            feed_ndarray(dense, out, cuda_stream=stream)
            targets = [
                {
                    "boxes": torch.from_numpy(np.array(b).reshape(-1, 4) * scale),
                    "labels": torch.from_numpy(np.array(y).reshape(-1).astype(np.int64)),
                }
                for b, y in zip(boxes, labels, strict=True)
            ]
            yield out, targets

    def close(self) -> None:
        """Release DALI's pipeline."""
        self.pipe = None

    def __enter__(self) -> SsdExampleLoader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
