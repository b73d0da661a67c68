"""``python -m dali_pipes.selfcheck``: is this machine's GPU path sound? One command, no
repository, no download.

It prints what a bug report needs (versions, CUDA, the GPU, the hardware JPEG decoder,
cores), traces every GPU graph dali_pipes can build, and runs the GPU path against the
CPU on the real photos shipped in :data:`PHOTOS`: the decoders, every augmentation preset,
``data.cache=gpu``, the hand-over of CPU-made batches to the GPU, the torch backend's CUDA
prefetcher, a short throughput check and GPU memory over a few epochs. Without a GPU the
same checks run on the CPU (the GPU graphs as their CPU twins) and the report says that
the GPU half did not run. Each check is one line: ok, or FAIL with the measured figure and
its bound (:mod:`dali_pipes.selfcheck.bounds`).
"""

from __future__ import annotations

from pathlib import Path

#: 13 real photos in 3 class folders (SOURCE.md: CC0, baseline and progressive, six chroma
#: subsamplings): what the self-check decodes, and the tests' photos in a bare clone.
PHOTOS = Path(__file__).resolve().parent / "photos"
