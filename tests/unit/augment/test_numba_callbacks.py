"""The compiled callbacks DALI's numba operator calls (augment.auto.numba_callbacks).

They stand in for the wrappers DALI would compile around each kernel, so they must read
DALI's pointers as DALI lays them out: each sample's output is its image's shape, and the
kernel sees that sample's pixels and parameter row. Samples of different shapes in one
batch, run through a DALI CPU pipeline, give what the kernel gives called from Python.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dali_pipes.augment.auto.kernel import apply_kernel
from dali_pipes.augment.auto.numba_callbacks import operator
from dali_pipes.augment.ops import cpu_kernels


def test_the_grayscale_callback_runs_the_kernel_on_each_sample_of_its_own_shape() -> None:
    from nvidia.dali import fn, pipeline_def, types

    rng = np.random.default_rng(0)
    images = [rng.integers(0, 256, (h, w, 3)).astype(np.float32) for h, w in ((5, 7), (9, 4))]
    rows = [np.array([1.0]), np.array([0.0])]  # grey, then left as it is

    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe() -> Any:
        pixels = fn.external_source(source=lambda: images, dtype=types.FLOAT, layout="HWC")
        packed = fn.external_source(source=lambda: rows, dtype=types.FLOAT64)
        return apply_kernel("the grayscale kernel", cpu_kernels._grayscale_callback, pixels, packed)

    p = pipe()
    p.build()
    (out,) = p.run()
    for i, (image, row) in enumerate(zip(images, rows, strict=True)):
        expected = np.empty_like(image)
        cpu_kernels.run_grayscale(expected, image, row)
        got = np.asarray(out[i])
        assert got.shape == image.shape and np.array_equal(got, expected)
    assert np.array_equal(np.asarray(out[1]), images[1])
    assert not np.array_equal(np.asarray(out[0]), images[0])


def test_one_operator_per_callback_and_process() -> None:
    first = operator(cpu_kernels._blur_callback)
    assert operator(cpu_kernels._blur_callback) is first
    assert operator(cpu_kernels._jitter_callback) is not first
