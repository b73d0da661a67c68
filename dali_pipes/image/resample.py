"""DALI's antialiased linear (and cubic) resize of a crop window, as one compiled CPU kernel.

The DALI CPU pipeline resizes every decoded crop window to the output size. DALI's own CPU
``fn.resize`` is a large share of a CPU batch; its maintainers say the CPU implementation
"isn't optimized very much" (NVIDIA/DALI#4581). This kernel computes the same filter in a
fraction of the time (benchmarks/RESULTS.md, "the resize as a compiled kernel"):

- each output pixel's centre, in window pixels, is ``start + (j + 0.5) * scale`` with
  ``scale = (end - start) / n_out`` per axis (DALI's ``roi_start``/``roi_end``);
- its weights are the triangle ``1 - |tap centre - centre| / support`` with
  ``support = max(scale, 1)``: antialiased when shrinking, plain linear interpolation
  when enlarging, normalised to sum 1;
- taps past the window's edge read the edge pixel (DALI clamps; torchvision instead drops
  them and renormalises, see :mod:`dali_pipes.augment.geometry_torch`);
- rows first into a float32 line, then columns, rounded once to uint8;
- ``cubic``: the same with Keys' cubic kernel (a = -0.5) reaching twice as far, DALI's
  ``INTERP_CUBIC`` with antialiasing (a bicubic crop, DINO's); its negative lobes may
  overshoot, so values are clamped.

It agrees with DALI's ``fn.resize`` to within one grey level on rare pixels (float
summation order); ``tests/unit/image/test_resample.py`` holds it to that. The GPU keeps DALI's
``fn.resize``, which is fast there.
"""

from __future__ import annotations

import math
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from dali_pipes.image.compiled import caching_jit

_jit = caching_jit()


@_jit
def _cubic(d: float) -> float:
    """Keys' cubic convolution kernel with a = -0.5 (DALI's and PIL's bicubic) at ``d``."""
    d = abs(d)
    if d < 1.0:
        return (1.5 * d - 2.5) * d * d + 1.0
    if d < 2.0:
        return ((-0.5 * d + 2.5) * d - 4.0) * d + 2.0
    return 0.0


@_jit
def _taps(n_in: int, start: float, end: float, n_out: int, cubic: bool) -> Any:
    """Each output line's taps along one axis: indices clamped to ``[0, n_in)``, normalised
    weights (``[n_out, T]`` each, the nonzero ones first) and how many are nonzero."""
    scale = (end - start) / n_out
    support = max(abs(scale), 1.0)
    radius = 2.0 if cubic else 1.0  # the filter's reach in output pixels
    reach = math.ceil(radius * support) + 1
    width = 2 * reach + 1
    index = np.zeros((n_out, width), np.int32)
    weight = np.zeros((n_out, width), np.float32)
    count = np.zeros(n_out, np.int32)
    for j in range(n_out):
        centre = start + (j + 0.5) * scale
        first = math.floor(centre) - reach
        total = 0.0
        n = 0
        for t in range(width):
            tap = first + t
            d = abs(tap + 0.5 - centre) / support
            w = _cubic(d) if cubic else 1.0 - d
            keep = w != 0.0 if cubic else w > 0.0
            if keep:
                index[j, n] = min(max(tap, 0), n_in - 1)
                weight[j, n] = w
                total += w
                n += 1
        for t in range(n):
            weight[j, t] /= total
        count[j] = n
    return index, weight, count


@_jit
def resize_window(image: Any, start: Any, end: Any, out: Any, cubic: bool = False) -> None:
    """Resize the region ``start``..``end`` (y, x; window pixels, fractional) of ``image``
    (uint8 ``[h, w, c]``) into ``out`` (uint8 ``[oh, ow, c]``); ``cubic``: Keys' cubic
    filter (a = -0.5, reach 2 output pixels) instead of the triangle."""
    h, w, channels = image.shape
    oh, ow, _ = out.shape
    rows, row_w, row_n = _taps(h, start[0], end[0], oh, cubic)
    cols, col_w, col_n = _taps(w, start[1], end[1], ow, cubic)
    flat = image.reshape(h, w * channels)
    line = np.empty(w * channels, np.float32)
    for j in range(oh):
        # One output row: the weighted sum of its source rows (contiguous, vectorised).
        weight = row_w[j, 0]
        source = flat[rows[j, 0]]
        for k in range(line.size):
            line[k] = weight * source[k]
        for t in range(1, row_n[j]):
            weight = row_w[j, t]
            source = flat[rows[j, t]]
            for k in range(line.size):
                line[k] += weight * source[k]
        # Then each output pixel of that row from the line's columns (RGB unrolled: the
        # three sums in one pass over the taps beat a loop over the channels).
        for i in range(ow):
            if channels == 3:
                r = g = b = np.float32(0.0)
                for t in range(col_n[i]):
                    weight = col_w[i, t]
                    p = cols[i, t] * 3
                    r += weight * line[p]
                    g += weight * line[p + 1]
                    b += weight * line[p + 2]
                out[j, i, 0] = min(max(round(r), 0), 255)
                out[j, i, 1] = min(max(round(g), 0), 255)
                out[j, i, 2] = min(max(round(b), 0), 255)
                continue
            for c in range(channels):
                acc = np.float32(0.0)
                for t in range(col_n[i]):
                    acc += col_w[i, t] * line[cols[i, t] * channels + c]
                out[j, i, c] = min(max(round(acc), 0), 255)


def _resize_one(
    image: np.ndarray, start: np.ndarray, end: np.ndarray, size: np.ndarray, cubic: bool
) -> Any:
    out = np.empty((int(size[0]), int(size[1]), image.shape[2]), dtype=np.uint8)
    resize_window(image, start, end, out, cubic)
    return out


def _resize_share(
    args: tuple[list[Any], ...], out: list[Any], first: int, step: int, cubic: bool
) -> None:
    """Samples ``first``, ``first + step``, ... of a batch into ``out`` (one thread's share:
    strided, so the large and small windows spread evenly)."""
    images, starts, ends, sizes = args
    for k in range(first, len(images), step):
        out[k] = _resize_one(images[k], starts[k], ends[k], sizes[k], cubic)


class WindowResize:
    """The callable of a DALI ``python_function`` (``batch_processing=True``) that resizes
    a batch of crop windows: inputs the windows (uint8 HWC), each one's ROI start and end
    (y, x) and output size (h, w), as the loader feeds them to ``fn.resize``.

    DALI runs a ``python_function`` on one thread; the kernel releases the GIL, so the
    batch is split into one share per thread of its own (DALI's, which would otherwise do
    this work, are idle while it runs): a task per thread, not per sample.
    """

    def __init__(self, threads: int) -> None:
        self._threads = max(1, threads)
        self._pool: ThreadPoolExecutor | None = ThreadPoolExecutor(
            self._threads, thread_name_prefix="dali-pipes-resize"
        )
        self._lock = threading.Lock()

    def __call__(
        self, images: list[Any], starts: list[Any], ends: list[Any], sizes: list[Any]
    ) -> list[np.ndarray]:
        return self._resize((images, starts, ends, sizes), cubic=False)

    def cubic(
        self, images: list[Any], starts: list[Any], ends: list[Any], sizes: list[Any]
    ) -> list[np.ndarray]:
        """The same with Keys' cubic filter (a bicubic crop: DINO's)."""
        return self._resize((images, starts, ends, sizes), cubic=True)

    def _resize(self, args: tuple[list[Any], ...], cubic: bool) -> list[np.ndarray]:
        out: list[Any] = [None] * len(args[0])
        shares: list[Future[None]] = []
        with self._lock:
            if self._pool is not None:
                try:
                    shares = [
                        self._pool.submit(_resize_share, args, out, k, self._threads, cubic)
                        for k in range(self._threads)
                    ]
                except RuntimeError:  # the interpreter is exiting: its pools take no work
                    shares = []
        if not shares:  # a batch DALI still runs while the loader closes: done inline
            _resize_share(args, out, 0, 1, cubic)
        for share in shares:
            share.result()
        return out

    def close(self) -> None:
        """Stop the threads (the batches already handed to them finish first)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
