"""The ``spdl`` peer: Meta's SPDL, written as its documentation writes a loader.

SPDL's guide ("Building High-Performance DataLoaders") splits a PyTorch dataset into
pipeline stages by the resource each uses, run by :class:`spdl.pipeline.PipelineBuilder`
on a thread pool: a sampler as the source; an I/O stage (read the file) and a CPU stage
(demux, then decode through an FFmpeg filter graph that crops, resizes and flips: its
"data augmentation with filters"), each with its own concurrency; ``aggregate`` into
batches; a collate stage (``spdl.io.convert_frames`` into one buffer, ``spdl.io.to_torch``)
and a sink buffer. Its ImageNet example normalises the uint8 batch in torch, as here.

Each sample's crop window is drawn from the image's size in the demuxed header (SPDL's
filters know nothing of random-resized-crop), with the peer's own NumPy generator keyed
by (seed, epoch, sample): torchvision's window rules, FFmpeg's bilinear scaler.
SPDL's decoders load FFmpeg's shared libraries at run time (``make peer-libs``). Its
per-stage statistics, logged at INFO at the end of every epoch's pipeline, are kept to
warnings and errors, so bench's output stays a table.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dali_pipes.tools.peers.task import PeerTask, PeerUnavailable, need

#: Batches SPDL's sink may hold ready (its ``buffer_size``).
BUFFER = 3


class SpdlLoader:
    """SPDL's pipeline over a :class:`PeerTask`: each ``iter()`` is one epoch, in a fresh
    pipeline (as SPDL's DataLoader-style wrapper does)."""

    def __init__(self, task: PeerTask) -> None:
        self.task = task
        self._io = need("spdl.io", "spdl")
        self._pipeline = need("spdl.pipeline", "spdl")
        try:
            self._io.utils.get_ffmpeg_versions()
        except (OSError, RuntimeError) as exc:
            raise PeerUnavailable(
                f"spdl: FFmpeg's shared libraries are not found ({exc}); run `make peer-libs`"
            ) from None
        logging.getLogger("spdl").setLevel(logging.WARNING)
        self.epoch = 0
        self.note = f"SPDL pipeline, {task.threads} threads, FFmpeg filter-graph crop/resize/flip"

    def __len__(self) -> int:
        return self.task.batches()

    def _read(self, index: int) -> tuple[int, bytes]:
        return index, Path(self.task.files[index]).read_bytes()

    def _filter(self, width: int, height: int, rng: np.random.Generator) -> str:
        g = self.task.geometry(height, width, rng)
        (x, y, w, h), (nh, nw), (top, left) = g.row(0)
        oh, ow = g.out
        steps = [
            f"crop=w={w}:h={h}:x={x}:y={y}",
            f"scale=w={nw}:h={nh}:flags=bilinear",
        ]
        if (nh, nw) != (oh, ow):
            steps.append(f"crop=w={ow}:h={oh}:x={left}:y={top}")
        if rng.random() < self.task.flip:
            steps.append("hflip")
        steps.append("format=pix_fmts=rgb24")
        return ",".join(steps)

    def _decode(self, item: tuple[int, bytes], epoch: int) -> tuple[Any, int]:
        index, data = item
        packets = self._io.demux_image(data, name=self.task.files[index])
        rng = np.random.default_rng((self.task.seed, epoch, index))
        frames = self._io.decode_packets(
            packets, filter_desc=self._filter(packets.width, packets.height, rng)
        )
        return frames, self.task.labels[index]

    def _collate(self, items: list[tuple[Any, int]]) -> tuple[torch.Tensor, torch.Tensor]:
        buffer = self._io.convert_frames([frames for frames, _ in items])
        images = self.task.normalise(self._io.to_torch(buffer))
        return images, torch.tensor([label for _, label in items], dtype=torch.int64)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        epoch, self.epoch = self.epoch, self.epoch + 1
        order = np.random.default_rng((self.task.seed, epoch)).permutation(len(self.task.files))
        threads = self.task.threads
        builder = (
            self._pipeline.PipelineBuilder()
            .add_source(order.tolist())
            .pipe(self._read, concurrency=threads, output_order="input")
            .pipe(lambda item: self._decode(item, epoch), concurrency=threads, output_order="input")
            .aggregate(self.task.batch_size, drop_last=self.task.drop_last)
            .pipe(self._collate)
            .add_sink(BUFFER)
        )
        pipeline = builder.build(num_threads=threads)
        with pipeline.auto_stop():
            yield from pipeline

    def close(self) -> None:
        """Nothing to release: each epoch's pipeline stops when the epoch ends."""

    def __enter__(self) -> SpdlLoader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
