"""What the NVIDIA driver reports that CUDA does not: its version and the JPEG engines' load.

A thin ``ctypes`` binding to the few NVML calls the self-check needs (the driver ships
``libnvidia-ml.so.1``; no Python package is required). Every call answers None where NVML,
the call or the GPU is missing, so a report never fails for want of it.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_SUCCESS = 0


@contextmanager
def session() -> Iterator[Any]:
    """NVML, initialised for the block (None where it cannot be loaded or initialised)."""
    try:
        lib: Any = ctypes.CDLL("libnvidia-ml.so.1")
        if lib.nvmlInit_v2() != _SUCCESS:
            raise OSError("nvmlInit failed")
    except (OSError, AttributeError):
        yield None
        return
    try:
        yield lib
    finally:
        lib.nvmlShutdown()


def driver_version(lib: Any) -> str | None:
    """The driver's version, e.g. ``580.65.06``."""
    if lib is None:
        return None
    buffer = ctypes.create_string_buffer(96)
    if lib.nvmlSystemGetDriverVersion(buffer, ctypes.c_uint(96)) != _SUCCESS:
        return None
    return buffer.value.decode()


def device(lib: Any, uuid: str) -> Any:
    """The NVML handle of the GPU with ``uuid`` (as CUDA names it, ``GPU-`` prefix or not)."""
    if lib is None:
        return None
    handle = ctypes.c_void_p()
    name = uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
    if lib.nvmlDeviceGetHandleByUUID(name.encode(), ctypes.byref(handle)) != _SUCCESS:
        return None
    return handle


def jpeg_utilisation(lib: Any, handle: Any) -> int | None:
    """The JPEG engines' (NVJPG) utilisation in percent over the driver's last sampling
    period; None where the driver or the GPU does not report it (no engine, old driver)."""
    if lib is None or handle is None:
        return None
    try:
        call = lib.nvmlDeviceGetJpgUtilization
    except AttributeError:
        return None
    value, period = ctypes.c_uint(), ctypes.c_uint()
    if call(handle, ctypes.byref(value), ctypes.byref(period)) != _SUCCESS:
        return None
    return int(value.value)
