"""dali_pipes: GPU-fed image pipelines (NVIDIA DALI) behind a torch DataLoader contract.

``build_loader(cfg, split)`` turns a composed Hydra config into a loader of any backend;
``DALIIterator(root, ...)`` is the DALI loader with plain keyword arguments.

Importing the package registers the config schemas (:mod:`dali_pipes.config.schemas`) in Hydra's
ConfigStore, so our config groups (``data``, ``augment``, ``backend``, ``model``,
``trainer``) compose in any Hydra app that adds ``pkg://dali_pipes.conf`` to its search
path. (Hydra imports the package itself when it first looks there.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dali_pipes.config.schemas import register as _register_schemas
from dali_pipes.errors import ConfigError, DaliPipesError, DataError, DeviceError

if TYPE_CHECKING:
    from dali_pipes.backends.base import Loader
    from dali_pipes.config.compose import compose_config
    from dali_pipes.config.loaders import build_loader
    from dali_pipes.iterator import DALIIterator

__version__ = "0.1.0"

_register_schemas()

_LAZY = {
    "DALIIterator": "dali_pipes.iterator",
    "build_loader": "dali_pipes.config.loaders",
    "compose_config": "dali_pipes.config.compose",
    "Loader": "dali_pipes.backends.base",
}


def __getattr__(name: str) -> Any:
    """Import the loaders (and with them DALI) only when they are used."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'dali_pipes' has no attribute {name!r}")


__all__ = [
    "ConfigError",
    "DALIIterator",
    "DaliPipesError",
    "DataError",
    "DeviceError",
    "Loader",
    "build_loader",
    "compose_config",
]
