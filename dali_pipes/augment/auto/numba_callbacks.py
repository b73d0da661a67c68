"""The C callbacks DALI's ``numba_function`` operator calls, compiled once and cached on disk.

DALI's :class:`~nvidia.dali.plugin.numba.NumbaFunction` takes a Python kernel and, each time
an operator is made, compiles two C callbacks around it (the per-sample run and the output
shape setup) with ``numba.cfunc`` and no cache: seconds of CPU per kernel in every process
that builds a CPU pipeline with one (a training run, each ``torchrun`` rank, each test
worker), although the kernels themselves are in numba's disk cache. Here those callbacks
are written out for the one form our kernels take -- ``kernel(out, img, p)``, ``out`` and
``img`` float32 HWC pixels of one shape, ``p`` a float64 row -- as module-level ``cfunc``\\ s
with numba's cache, and handed to DALI's operator ready-made (:func:`operator`).

The callbacks follow the calling convention of DALI's per-sample (``batch_processing=False``)
CPU ``NumbaFunction``: ``run(out_ptrs, out_shape_ptrs, out_ndims, n_outs, in_ptrs,
in_shape_ptrs, in_ndims, n_ins)``, each ``*_ptrs`` an array of addresses (one per output
or input), each ``*_shape_ptrs`` one of addresses of ``int64`` shapes; ``setup(out_shape_ptrs,
out_ndims, n_outs, in_shape_ptrs, in_ndims, n_ins, n_samples)`` with an address per output
(input) and sample. The parity tests of every kernel on DALI's CPU hold them to it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numba
import numpy as np
from numba.core import cgutils, types

from dali_pipes.image.compiled import caching_jit

__all__ = ["RUN_SIGNATURE", "operator", "run_callback", "same_shape", "sample_arrays"]

#: ``void(out_ptrs, out_shape_ptrs, out_ndims, n_outs, in_ptrs, in_shape_ptrs, in_ndims, n_ins)``
RUN_SIGNATURE = types.void(
    types.uint64, types.uint64, types.uint64, types.int32,
    types.uint64, types.uint64, types.uint64, types.int32,
)  # fmt: skip
#: ``void(out_shape_ptrs, out_ndims, n_outs, in_shape_ptrs, in_ndims, n_ins, n_samples)``
SETUP_SIGNATURE = types.void(
    types.uint64, types.uint64, types.int32, types.uint64, types.uint64, types.int32, types.int32
)

_jit = caching_jit()


def _caching_cfunc(signature: Any) -> Callable[[Callable[..., None]], Any]:
    """``numba.cfunc`` with numba's on-disk cache where it has a place for one (as
    :func:`~dali_pipes.image.compiled.caching_jit`), else compiled once per process."""
    try:
        numba.cfunc(types.void(), cache=True)(lambda: None)
    except RuntimeError:
        return numba.cfunc(signature)
    return numba.cfunc(signature, cache=True)


def run_callback() -> Callable[[Callable[..., None]], Any]:
    """The decorator for a module-level per-sample callback (:data:`RUN_SIGNATURE`): each
    kernel has its own few-line callback, ``sample_arrays`` then the kernel, written out
    rather than made by a factory: numba's disk cache is keyed by a function's source
    and place, which a factory's callbacks would share whatever kernel each one holds."""
    return _caching_cfunc(RUN_SIGNATURE)


def _pointer_typing(typingctx: Any, address: Any) -> Any:
    """An integer address as a ``void*`` (what ``numba.carray`` reads from)."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.inttoptr(args[0], cgutils.voidptr_t)

    return types.voidptr(address), codegen


_pointer: Any = numba.extending.intrinsic(_pointer_typing)


@_jit
def _shape(shape_ptrs: Any, i: int, ndim: int) -> Any:
    """The ``int64`` shape at address ``i`` of the array of addresses at ``shape_ptrs``."""
    addresses = numba.carray(_pointer(shape_ptrs), i + 1, dtype=np.int64)
    return numba.carray(_pointer(addresses[i]), ndim, dtype=np.int64)


@_jit
def sample_arrays(out_ptrs: Any, out_shapes: Any, in_ptrs: Any, in_shapes: Any) -> Any:
    """One sample's ``(out, img, p)`` as arrays over DALI's memory (no copy): the float32
    HWC output and image, and the float64 parameter row."""
    outs = numba.carray(_pointer(out_ptrs), 1, dtype=np.int64)
    ins = numba.carray(_pointer(in_ptrs), 2, dtype=np.int64)
    o, i, n = _shape(out_shapes, 0, 3), _shape(in_shapes, 0, 3), _shape(in_shapes, 1, 1)
    out = numba.carray(_pointer(outs[0]), (o[0], o[1], o[2]), dtype=np.float32)
    img = numba.carray(_pointer(ins[0]), (i[0], i[1], i[2]), dtype=np.float32)
    p = numba.carray(_pointer(ins[1]), n[0], dtype=np.float64)
    return out, img, p


@_caching_cfunc(SETUP_SIGNATURE)
def same_shape(
    out_shapes: Any, out_ndims: Any, n_outs: Any, in_shapes: Any, in_ndims: Any, n_ins: Any, n: Any
) -> None:
    """Each sample's output has its image's (the first input's) HWC shape."""
    outs = numba.carray(_pointer(out_shapes), n, dtype=np.int64)  # output 0's, per sample
    ins = numba.carray(_pointer(in_shapes), n, dtype=np.int64)  # input 0's, per sample
    for s in range(n):
        out = numba.carray(_pointer(outs[s]), 3, dtype=np.int64)
        image = numba.carray(_pointer(ins[s]), 3, dtype=np.int64)
        for d in range(3):
            out[d] = image[d]


_OPERATORS: dict[Any, Any] = {}
_LOCK = threading.Lock()


def operator(run: Any) -> Any:
    """DALI's numba operator calling the compiled callback ``run`` (made with
    :func:`run_callback`) per sample, made once per process and callback: an instance can
    be called in any number of pipelines."""
    with _LOCK:
        if run not in _OPERATORS:
            from nvidia.dali import types as dali_types
            from nvidia.dali.plugin.numba import NumbaFunction

            class Compiled(NumbaFunction):
                """DALI's operator given our callbacks' addresses instead of compiling its own."""

                def _get_run_fn_cpu(self, callback: Any, *layout: Any) -> int:
                    return int(callback.address)

                def _get_setup_fn_cpu(self, callback: Any) -> int:
                    return int(callback.address)

            made = Compiled(
                run_fn=run,
                setup_fn=same_shape,
                out_types=[dali_types.FLOAT],
                in_types=[dali_types.FLOAT, dali_types.FLOAT64],
                outs_ndim=[3],
                ins_ndim=[3, 1],
                batch_processing=False,
            )
            # An operator made while DALI records no definition stacks (a graph being
            # checked: backends.dali.trace.origins_not_recorded) lacks the attribute its
            # calls read once recording is back on; None is what DALI gives it otherwise.
            if not hasattr(made, "_definition_frame_end"):
                setattr(made, "_definition_frame_end", None)  # noqa: B010 - DALI's private
            _OPERATORS[run] = made
        return _OPERATORS[run]
