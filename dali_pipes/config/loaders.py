"""A loader (any backend, the batch contract) from a composed config, and where this
process's loaders make batches and its model trains."""

from __future__ import annotations

import torch
from omegaconf import DictConfig

from dali_pipes.backends import Loader, create_loader
from dali_pipes.config.specs import loader_spec, trainer_device
from dali_pipes.runtime.devices import Devices, resolve_devices


def build_loader(
    cfg: DictConfig,
    split: str = "train",
    *,
    rank: int | None = None,
    world_size: int | None = None,
) -> Loader:
    """A loader for ``split`` with the batch contract, from a composed Hydra config.

    Args:
        cfg: a config composed from ``conf/`` (:func:`~dali_pipes.compose_config`, or
            ``@hydra.main``): its ``data``, ``augment``, ``backend``, ``seed`` and, when
            present, ``trainer.device`` decide the loader.
        split: ``train`` (shuffled, training augmentation) or ``val``.
        rank: this process's rank; default: the distributed environment's (torchrun, srun).
        world_size: the number of processes; default: the environment's.

    Returns:
        The backend's loader, used like ``DataLoader(ImageFolder, sampler=
        DistributedSampler)``: iterate it for ``(images, labels)`` each epoch, ``set_epoch``,
        ``len``, ``state_dict``; close it (or use it as a context manager) when done.
    """
    return create_loader(loader_spec(cfg, split, rank=rank, world_size=world_size))


def devices_of(cfg: DictConfig) -> Devices:
    """Where this process makes batches and where its model trains, for a composed config
    (``backend.device`` x ``trainer.device``; see :mod:`dali_pipes.runtime.devices`)."""
    backend = cfg.get("backend") or {}
    return resolve_devices(
        str(backend.get("device", "auto")), trainer_device(cfg), str(backend.get("name", ""))
    )


def model_device(cfg: DictConfig) -> torch.device:
    """The device the model of ``cfg`` trains on -- the ``device`` the loaders that
    :func:`build_loader` makes for ``cfg`` will report -- known before any loader exists, so
    the trainer can choose channels_last and cuDNN autotuning (and the loader's memory
    format) first. One-line :class:`DeviceError`/:class:`ConfigError` for a placement this
    machine cannot give."""
    return devices_of(cfg).model
