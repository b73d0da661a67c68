"""dali_pipes: GPU-fed image pipelines (NVIDIA DALI) behind a torch DataLoader contract.

``build_loader(cfg, split)`` turns a composed Hydra config into a loader of any backend;
``DALIIterator(data, ...)`` is the DALI loader with plain keyword arguments, over a folder, a
zip archive, a data spec (``FolderData``, ``ParquetData``, ``ShardData``, ``ZipData``; for
detection ``CocoData`` and ``SampleObjectsData``, for segmentation ``SegmentationData`` and
``SampleSegmentationData``), a torchvision ``ImageFolder``, a Hugging
Face dataset or a :class:`Source`. A user's own
op, data source (the :class:`Source` interface) or backend is registered by name with
``register_op``, ``register_source``, ``register_sampler`` or ``register_backend``
(:mod:`dali_pipes.registry`).

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
    from dali_pipes.augment.base import register_op
    from dali_pipes.backends.base import Loader
    from dali_pipes.backends.registry import register_backend
    from dali_pipes.config.compose import compose_config
    from dali_pipes.config.loaders import build_loader
    from dali_pipes.data.interface import Source
    from dali_pipes.data.registry import register_source
    from dali_pipes.data.samplers import register_sampler
    from dali_pipes.data.specs import (
        CocoData,
        FolderData,
        ParquetData,
        SampleObjectsData,
        SampleSegmentationData,
        SegmentationData,
        ShardData,
    )
    from dali_pipes.data.zip_archive import ZipData
    from dali_pipes.iterator import DALIIterator

__version__ = "0.1.0"

_register_schemas()

#: Modules whose paths configs written before the package's layout by layer name in
#: ``_target_`` (``trainer.schedule``, ``trainer.optimizer``, ``model.arch``): the name of
#: each, as an attribute of ``dali_pipes``, is the module that now holds those targets, so
#: ``dali_pipes.recipe.warmup_cosine`` and Hydra's ``_target_`` resolution keep working.
LEGACY_MODULES = {
    "recipe": "dali_pipes.train.schedules",
    "optim": "dali_pipes.train.optimizers",
    "models": "dali_pipes.train.models",
}

_LAZY = {
    "CocoData": "dali_pipes.data.specs",
    "DALIIterator": "dali_pipes.iterator",
    "FolderData": "dali_pipes.data.specs",
    "ParquetData": "dali_pipes.data.specs",
    "SampleObjectsData": "dali_pipes.data.specs",
    "SampleSegmentationData": "dali_pipes.data.specs",
    "SegmentationData": "dali_pipes.data.specs",
    "ShardData": "dali_pipes.data.specs",
    "ZipData": "dali_pipes.data.zip_archive",
    "build_loader": "dali_pipes.config.loaders",
    "compose_config": "dali_pipes.config.compose",
    "Loader": "dali_pipes.backends.base",
    "Source": "dali_pipes.data.interface",
    "register_backend": "dali_pipes.backends.registry",
    "register_op": "dali_pipes.augment",  # the package: importing it registers the built-in ops
    "register_source": "dali_pipes.data.registry",
    "register_sampler": "dali_pipes.data.samplers",
}


def __getattr__(name: str) -> Any:
    """Import the loaders (and with them DALI) and the registries only when they are used;
    resolve :data:`LEGACY_MODULES`."""
    import importlib

    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name in LEGACY_MODULES:
        return importlib.import_module(LEGACY_MODULES[name])
    raise AttributeError(f"module 'dali_pipes' has no attribute {name!r}")


__all__ = [
    "CocoData",
    "ConfigError",
    "DALIIterator",
    "DaliPipesError",
    "DataError",
    "DeviceError",
    "FolderData",
    "Loader",
    "ParquetData",
    "SampleObjectsData",
    "SampleSegmentationData",
    "SegmentationData",
    "ShardData",
    "Source",
    "ZipData",
    "build_loader",
    "compose_config",
    "register_backend",
    "register_op",
    "register_sampler",
    "register_source",
]
