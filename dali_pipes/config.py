"""Hydra configuration: composition, validation, and config -> loader.

The schemas every YAML option in ``conf/`` extends are in :mod:`dali_pipes.schemas`
(registered when ``dali_pipes`` is imported); a value out of range fails when a node is
turned into its dataclass (:func:`to_spec`), with the key in the message; Hydra's and
OmegaConf's own errors become one line (:func:`config_error`).

``conf/`` sits at the top of the repository and ships inside the wheel as
``dali_pipes.conf``; :func:`config_dir` finds it either way.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import torch
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from dali_pipes.backends import Loader, check_name, create_loader
from dali_pipes.device import Devices, output_device_for, resolve_devices
from dali_pipes.distributed import placement
from dali_pipes.errors import ConfigError
from dali_pipes.schemas import register
from dali_pipes.sources import open_source
from dali_pipes.spec import AugmentSpec, BackendSpec, DataSpec, LoaderSpec, SamplingSpec

T = TypeVar("T")


def config_dir() -> Path:
    """``conf/``: packaged as ``dali_pipes.conf`` in a wheel, top-level in a checkout."""
    spec = importlib.util.find_spec("dali_pipes.conf")
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(__file__).resolve().parent.parent / "conf"


def compose_config(overrides: Sequence[str] = (), config_name: str = "train") -> DictConfig:
    """Compose ``conf/<config_name>.yaml`` with command-line style overrides (for tests,
    notebooks and tools that do not go through ``@hydra.main``)."""
    register()  # done by ``import dali_pipes``; again in case the ConfigStore was cleared
    try:
        with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
            cfg = compose(config_name=config_name, overrides=list(overrides))
    except Exception as exc:
        error = config_error(exc)
        if error is None:
            raise
        raise error from None
    check_augment(cfg)
    return cfg


def check_augment(cfg: DictConfig) -> None:
    """Validate the augment node now, so an unknown op, an unknown parameter or a value out
    of range fails at composition, before data or models are touched."""
    if "augment" in cfg:
        to_spec(cfg.augment, AugmentSpec)


def augment_preset(name: str) -> AugmentSpec:
    """The ``conf/augment/<name>.yaml`` preset as a spec (for use without Hydra)."""
    presets = sorted(p.stem for p in (config_dir() / "augment").glob("*.yaml"))
    if name not in presets:
        raise ConfigError(f"augment={name!r} is unknown: choose one of {', '.join(presets)}")
    return to_spec(compose_config([f"augment={name}"]).augment, AugmentSpec)


def config_error(exc: BaseException) -> ConfigError | None:
    """A Hydra or OmegaConf error (an unknown option, a misspelt key, a wrongly typed value,
    an override that does not parse) as a one-line :class:`ConfigError`; None for any other
    exception (those are not configuration mistakes)."""
    module = type(exc).__module__
    if isinstance(exc, OmegaConfBaseException) or module.split(".")[0] == "hydra":
        return ConfigError(_one_line(exc))
    return None


def _one_line(exc: BaseException) -> str:
    """Hydra/OmegaConf errors span several lines; keep the ones a user acts on."""
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    text = lines[0] if lines else type(exc).__name__
    if "Available options" in str(exc):  # an unknown option: list the real ones
        start = next(i for i, ln in enumerate(lines) if ln.startswith("Available options"))
        options = [ln for ln in lines[start + 1 :] if ":" not in ln and "=" not in ln]
        text += f"; choose one of {', '.join(options)}"
    cause = exc.__cause__
    if cause is not None and str(cause).strip():
        text += ": " + str(cause).strip().splitlines()[0]
    return text


def to_spec(node: Any, kind: type[T]) -> T:
    """A config node -> its frozen dataclass, validated; errors become :class:`ConfigError`."""
    try:
        obj = OmegaConf.to_object(node) if isinstance(node, DictConfig) else node
    except OmegaConfBaseException as exc:
        raise ConfigError(_one_line(exc)) from None
    if not isinstance(obj, kind):
        raise ConfigError(f"expected a {kind.__name__} config, got {type(obj).__name__}")
    return obj


def loader_spec(
    cfg: DictConfig,
    split: str,
    *,
    rank: int | None = None,
    world_size: int | None = None,
) -> LoaderSpec:
    """Everything the backend needs for ``split`` (train or val) of a composed config,
    including where to hand batches over when ``trainer.device`` says the model trains
    elsewhere than the backend makes them (``output_device``)."""
    check_name(str(cfg.backend.get("name", "")))
    data = to_spec(cfg.data, DataSpec)
    augment = to_spec(cfg.augment, AugmentSpec)
    backend = to_spec(cfg.backend, BackendSpec)
    output_device = _output_device(cfg, backend)
    where = placement()
    train = split == "train"
    sampling = SamplingSpec(
        seed=seed_of(cfg),
        shuffle=train,
        drop_last=data.drop_last and train,
        rank=where.rank if rank is None else rank,
        world_size=where.world_size if world_size is None else world_size,
    )
    return LoaderSpec(
        source=open_source(data, split),
        train=train,
        batch_size=data.batch_size,
        augment=augment,
        sampling=sampling,
        backend=backend,
        on_error=data.on_error,
        max_pixels=data.max_pixels,
        cache=data.cache,
        output_device=output_device,
    )


def _trainer_device(cfg: DictConfig) -> str:
    """``trainer.device`` of a config (``auto`` when it has no trainer node)."""
    trainer = cfg.get("trainer")
    return "auto" if trainer is None else str(trainer.get("device", "auto"))


def devices_of(cfg: DictConfig) -> Devices:
    """Where this process makes batches and where its model trains, for a composed config
    (``backend.device`` x ``trainer.device``; see :mod:`dali_pipes.device`)."""
    backend = cfg.get("backend") or {}
    return resolve_devices(
        str(backend.get("device", "auto")), _trainer_device(cfg), str(backend.get("name", ""))
    )


def model_device(cfg: DictConfig) -> torch.device:
    """The device the model of ``cfg`` trains on -- the ``device`` the loaders that
    :func:`build_loader` makes for ``cfg`` will report -- known before any loader exists, so
    the trainer can choose channels_last and cuDNN autotuning (and the loader's memory
    format) first. One-line :class:`DeviceError`/:class:`ConfigError` for a placement this
    machine cannot give."""
    return devices_of(cfg).model


def _output_device(cfg: DictConfig, backend: BackendSpec) -> str | None:
    """``LoaderSpec.output_device`` for ``cfg``: the model's device when ``trainer.device``
    moves it away from where ``backend.device`` alone makes batches, else None (every
    config without ``trainer.device``, and the tools that build loaders without a model)."""
    return output_device_for(backend.device, _trainer_device(cfg), backend.name)


def seed_of(cfg: DictConfig) -> int:
    """The top-level ``seed``, checked: a non-negative integer."""
    value = cfg.get("seed", 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"seed={value!r} is invalid: must be an integer >= 0")
    return value


def build_loader(
    cfg: DictConfig,
    split: str = "train",
    *,
    rank: int | None = None,
    world_size: int | None = None,
) -> Loader:
    """A loader for ``split`` with the batch contract, from a composed Hydra config.

    ``rank``/``world_size`` default to the distributed environment (torchrun).
    """
    return create_loader(loader_spec(cfg, split, rank=rank, world_size=world_size))
