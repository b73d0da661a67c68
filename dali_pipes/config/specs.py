"""A composed config turned into the frozen specs the rest of the package takes: one place.

Each node becomes its dataclass (:func:`to_spec`), validated with the key in a one-line
error; the modules ``augment.imports`` names are imported first (they register a user's
ops), and a trainer node's ``_target_`` nodes are resolved and checked
(:mod:`dali_pipes.config.targets`). Hydra's and OmegaConf's own errors become one line too
(:func:`config_error`). :func:`loader_spec` is everything a backend needs for one split.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterable
from typing import Any, TypeVar

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from dali_pipes.augment.spec import AugmentSpec
from dali_pipes.backends import check_name
from dali_pipes.backends.specs import BackendSpec, LoaderSpec
from dali_pipes.config.targets import check_trainer_targets
from dali_pipes.config.trainer import TrainerSpec
from dali_pipes.data.interface import Labelled
from dali_pipes.data.registry import open_source
from dali_pipes.data.specs import DataSpec, SamplerSpec, SamplingSpec
from dali_pipes.data.storage import is_url
from dali_pipes.errors import ConfigError, DaliPipesError
from dali_pipes.runtime.devices import output_device_for
from dali_pipes.runtime.distributed import active, broadcast, ranks

log = logging.getLogger(__name__)

T = TypeVar("T")


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


def import_user_modules(modules: Iterable[Any]) -> None:
    """Import the modules ``augment.imports`` names, which register a user's own ops."""
    for module in modules:
        try:
            importlib.import_module(str(module))
        except ImportError as exc:
            raise ConfigError(
                f"augment.imports: cannot import {module!r} ({exc}); "
                "check the module is on PYTHONPATH"
            ) from None


def with_torchvision(node: DictConfig) -> DictConfig:
    """The augment node with ``augment.torchvision``'s transforms in their splits and the
    batch format (mean, std, dtype, channels) they output
    (:mod:`dali_pipes.augment.from_torchvision`); the node itself when it gives none."""
    given = node.get("torchvision")
    if not isinstance(given, DictConfig) or all(v is None for v in given.values()):
        return node
    from dali_pipes.augment.from_torchvision import from_config

    splits, out = from_config(OmegaConf.to_container(given, resolve=True))
    node = node.copy()
    for split, aug in splits.items():
        node[split].crop, node[split].ops, node[split].batch = aug.crop, aug.ops, aug.batch
        node[split].before = aug.before
    node.mean, node.std = list(out.mean), list(out.std)
    node.dtype, node.channels = out.dtype, out.channels
    if out.min_box_size is not None:  # SanitizeBoundingBoxes(min_size)
        node.min_box_size = out.min_box_size
    node.torchvision = {"train": None, "val": None}
    return node


def to_spec(node: Any, kind: type[T]) -> T:
    """A config node -> its frozen dataclass, validated; errors become :class:`ConfigError`."""
    if kind is AugmentSpec and isinstance(node, DictConfig):
        import_user_modules(node.get("imports") or ())
        node = with_torchvision(node)
    try:
        obj = OmegaConf.to_object(node) if isinstance(node, DictConfig) else node
    except OmegaConfBaseException as exc:
        raise ConfigError(_one_line(exc)) from None
    if not isinstance(obj, kind):
        raise ConfigError(f"expected a {kind.__name__} config, got {type(obj).__name__}")
    if isinstance(obj, TrainerSpec):
        check_trainer_targets(obj)
    return obj


def one_view(cfg: DictConfig, tool: str) -> None:
    """Refuse, in one line, a training split with views for ``tool``, which trains a
    classifier on one image per sample."""
    augment = to_spec(cfg.augment, AugmentSpec)
    if augment.multi_view(True):
        names = augment.views(True).names
        raise ConfigError(
            f"augment.train.views: {tool} trains on one image per sample, but this augment "
            f"makes {len(names)} views of each ({', '.join(names)}) for self-supervised "
            "training; train on them in a loop of your own (docs/how-to/self-supervised.md, "
            "examples/self_supervised.py), or choose an augment without views"
        )


def check_augment(cfg: DictConfig) -> None:
    """Validate the augment node now, so an unknown op, an unknown parameter or a value out
    of range fails at composition, before data or models are touched."""
    if "augment" in cfg:
        to_spec(cfg.augment, AugmentSpec)


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
    where = ranks()
    train = split == "train"
    sampling = SamplingSpec(
        seed=seed_of(cfg),
        shuffle=train,
        drop_last=data.drop_last and train,
        rank=where.rank if rank is None else rank,
        world_size=where.world_size if world_size is None else world_size,
    )
    source = _open_once(data, split, shared=rank is None and world_size is None)
    if train:
        _warn_if_stored_smaller(source, augment, data)
    return LoaderSpec(
        source=source,
        train=train,
        batch_size=data.batch_size,
        augment=augment,
        sampling=sampling,
        backend=backend,
        on_error=data.on_error,
        max_pixels=data.max_pixels,
        cache=data.cache,
        cache_max_side=data.cache_max_side,
        sampler=to_spec(cfg.sampling, SamplerSpec) if "sampling" in cfg else SamplerSpec(),
        output_device=output_device,
    )


def _warn_if_stored_smaller(source: Labelled, augment: AugmentSpec, data: DataSpec) -> None:
    """One line when a pack stored its images smaller (``pack.max_side``), or the
    decode-once cache holds them smaller (``data.cache_max_side``), than the training
    crop's output (the largest view's, for a split with views): every crop of them is then
    enlarged."""
    packed = getattr(getattr(source, "layout", None), "max_side", None)
    cached = data.cache_max_side
    if (packed is None and cached is None) or augment.own_sizes(True):  # no one crop size
        return
    wanted = max(max(view.size(0)) for view in augment.views(True).pipelines)
    root = getattr(source, "root", "the pack")
    if packed is not None and packed < wanted:
        log.warning(
            "%s stores images at most %d px on their long side (pack.max_side), less than "
            "the %d px training crop: every crop is enlarged; pack again with "
            "pack.max_side=%d or more",
            root, packed, wanted, wanted,
        )  # fmt: skip
    if cached is not None and cached < wanted:
        log.warning(
            "data.cache_max_side=%d holds the images of %s smaller than the %d px training "
            "crop: every crop is enlarged; set data.cache_max_side=%d or more",
            cached, root, wanted, wanted,
        )  # fmt: skip


def trainer_device(cfg: DictConfig) -> str:
    """``trainer.device`` of a config (``auto`` when it has no trainer node)."""
    trainer = cfg.get("trainer")
    return "auto" if trainer is None else str(trainer.get("device", "auto"))


def _output_device(cfg: DictConfig, backend: BackendSpec) -> str | None:
    """``LoaderSpec.output_device`` for ``cfg``: the model's device when ``trainer.device``
    moves it away from where ``backend.device`` alone makes batches, else None (every
    config without ``trainer.device``, and the tools that build loaders without a model)."""
    return output_device_for(backend.device, trainer_device(cfg), backend.name)


def seed_of(cfg: DictConfig) -> int:
    """The top-level ``seed``, checked: a non-negative integer."""
    value = cfg.get("seed", 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"seed={value!r} is invalid: must be an integer >= 0")
    return value


def _open_once(data: DataSpec, split: str, *, shared: bool) -> Labelled:
    """The split's source. A bucket is listed once per job, not once per rank: with a
    process group (and the job's own ranks, ``shared``) rank 0 lists it and sends the
    listing, or its one-line error, to the others; a listing is paginated requests."""
    root = getattr(data, "root", None)
    if not (shared and root and is_url(root) and active()):
        return open_source(data, split)
    listed: Labelled | DaliPipesError | None = None
    if ranks().rank == 0:
        try:
            listed = open_source(data, split)
        except DaliPipesError as exc:
            listed = exc
    listed = broadcast(listed)
    if isinstance(listed, DaliPipesError):
        raise listed
    assert listed is not None
    return listed
