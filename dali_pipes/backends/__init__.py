"""Backend registry: a name in ``backend.name`` -> the loader class that implements it.

Modules are imported on first use, so choosing the torch backend never imports DALI.
"""

from __future__ import annotations

import importlib

from dali_pipes.backends.base import Loader, loader_devices
from dali_pipes.backends.specs import LoaderSpec
from dali_pipes.errors import ConfigError, DeviceError

_BACKENDS = {
    "dali": "dali_pipes.backends.dali.loader:DaliLoader",
    "torch": "dali_pipes.backends.torch:TorchLoader",
    "synthetic": "dali_pipes.backends.synthetic:SyntheticLoader",
}


def names() -> tuple[str, ...]:
    """The backend names ``backend.name`` takes."""
    return tuple(_BACKENDS)


def check_name(name: str) -> str:
    """``name`` if a backend has it, else the one-line error listing the ones there are."""
    if name not in _BACKENDS:
        raise ConfigError(f"backend={name!r} is unknown: choose one of {', '.join(_BACKENDS)}")
    return name


def loader_class(name: str) -> type[Loader]:
    """The loader class of backend ``name`` (imported now: DALI only when it is DALI's)."""
    module, _, attr = _BACKENDS[check_name(name)].partition(":")
    cls: type[Loader] = getattr(importlib.import_module(module), attr)
    return cls


def create_loader(spec: LoaderSpec) -> Loader:
    """The backend's loader; with ``cache`` set, a decode-once loader: ``ram`` augments
    with torch on the CPU (:mod:`~dali_pipes.backends.cache.ram`), ``gpu`` with DALI's graph
    on the GPU (:mod:`~dali_pipes.backends.cache.gpu`)."""
    if spec.cache == "gpu" and spec.backend.name != "synthetic":
        made, _ = loader_devices(spec)
        if made.type != "cuda":
            raise DeviceError(
                f"data.cache=gpu needs the batches on a GPU (backend.device="
                f"{spec.backend.device} resolved to {made}); use data.cache=ram"
            )
        from dali_pipes.backends.cache.gpu import DaliCachedLoader

        return DaliCachedLoader(spec)
    if spec.cache is not None and spec.backend.name != "synthetic":
        from dali_pipes.backends.cache.ram import CachedLoader

        return CachedLoader(spec)
    return loader_class(spec.backend.name)(spec)


__all__ = ["Loader", "check_name", "create_loader", "loader_class", "names"]
