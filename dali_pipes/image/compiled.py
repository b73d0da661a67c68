"""numba's ``njit`` as the package's compiled CPU kernels use it.

Kept apart so that only the modules holding a kernel import numba (about half a second),
and only when a CPU pipeline is built.
"""

from __future__ import annotations

from typing import Any

import numba


def caching_jit(**options: Any) -> Any:
    """``njit(nogil=True, **options)`` with numba's on-disk cache where numba finds a
    writable place for it (the package's ``__pycache__`` or the user's cache directory),
    else without: in a container running as a user with neither, the kernel is compiled
    once per process. ``error_model="numpy"`` lets a loop that divides be vectorised (a
    division by zero gives inf or nan instead of raising)."""
    try:
        numba.njit(cache=True)(lambda: 0)  # raises here when there is nowhere to cache
    except RuntimeError:
        return numba.njit(nogil=True, **options)
    return numba.njit(cache=True, nogil=True, **options)
