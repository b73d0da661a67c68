"""Backends: the loader contract (:mod:`.base`), the loaders, and their registry
(:mod:`.registry`: a name in ``backend.name`` -> its options' schema and loader class).

Loader modules are imported on first use, so choosing the torch backend never imports DALI.
"""

from __future__ import annotations

from dali_pipes.backends.base import Loader, loader_devices
from dali_pipes.backends.registry import (
    backend_kind,
    backend_kinds,
    check_name,
    loader_class,
    names,
    register_backend,
)
from dali_pipes.backends.specs import LoaderSpec
from dali_pipes.errors import DeviceError


def create_loader(spec: LoaderSpec) -> Loader:
    """The backend's loader; with ``cache`` set, a decode-once loader: ``ram`` augments
    with torch on the CPU (:mod:`~dali_pipes.backends.cache.ram`), ``gpu`` with DALI's graph
    on the GPU (:mod:`~dali_pipes.backends.cache.gpu`). A backend that reads no images
    (``synthetic``) has nothing to cache: it ignores ``cache``."""
    if spec.cache == "gpu" and spec.backend.reads_images:
        made, _ = loader_devices(spec)
        if made.type != "cuda":
            raise DeviceError(
                f"data.cache=gpu needs the batches on a GPU (backend.device="
                f"{spec.backend.device} resolved to {made}); use data.cache=ram"
            )
        from dali_pipes.backends.cache.gpu import DaliCachedLoader

        return DaliCachedLoader(spec)
    if spec.cache is not None and spec.backend.reads_images:
        from dali_pipes.backends.cache.ram import CachedLoader

        return CachedLoader(spec)
    return loader_class(spec.backend.name)(spec)


__all__ = [
    "Loader",
    "backend_kind",
    "backend_kinds",
    "check_name",
    "create_loader",
    "loader_class",
    "names",
    "register_backend",
]
