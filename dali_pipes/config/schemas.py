"""Every structured-config schema, and their registration in Hydra's ConfigStore.

Each YAML option in ``conf/`` extends a schema stored under ``schema/<group>/<name>``
(``defaults: [/schema/data/folder@_here_]``), so a misspelt key or a wrongly typed value
fails at composition, and a value out of range fails when the node becomes its frozen
dataclass (``__post_init__``), with the key in the message.

The schemas are the specs: the ``data`` and ``backend`` ones come from their registries
(:mod:`dali_pipes.data.registry`, :mod:`dali_pipes.backends.registry`), so a source or a
backend registered there is a config option too; then :mod:`dali_pipes.augment.spec`, the
trainer's (:class:`dali_pipes.config.trainer.TrainerSpec`) and the tools' nodes, defined
here: ``bench``, ``doctor``, ``scan``, ``pack`` and ``show``. A registered source or backend
without a YAML option in ``conf/`` gets its schema as the option itself (``data=<name>``
works without a file). This module imports no tool, no loader and nothing that composes a
config; ``import dali_pipes`` calls :func:`register`, so the config groups work in any
Hydra app that puts ``pkg://dali_pipes.conf`` on its search path.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from dali_pipes.augment.spec import AugmentSpec
from dali_pipes.backends.registry import backend_kinds
from dali_pipes.config.trainer import TrainerSpec
from dali_pipes.data.registry import SPLITS, source_kinds
from dali_pipes.data.specs import SamplerSpec
from dali_pipes.errors import require

# --------------------------------------------------------------------------- tools' nodes


@dataclass(frozen=True)
class BenchSpec:
    """``bench`` config node."""

    #: names from dali_pipes.tools.bench_candidates.CANDIDATES (checked there); empty: the
    #: default ones
    candidates: tuple[str, ...] = ()
    repeats: int = 5
    warmup_images: int = 256
    min_images: int = 1024  # per timed repeat
    workers: int | None = None  # baseline/torch DataLoader workers; null = all cores
    out: str = "outputs/bench/bench.json"
    #: a pack of the same data for the *-shards candidates; packed there first if absent
    shards: str = "outputs/bench/shards"
    #: the pack.max_side of the *-max-side candidates' pack (bench.shards + "-max-side-N")
    max_side: int = 512
    #: where the ffcv peer keeps its .beton conversions of the data (made there if absent)
    beton: str = "outputs/bench/beton"

    def __post_init__(self) -> None:
        object.__setattr__(self, "candidates", tuple(self.candidates))
        require(self.repeats >= 1, "bench.repeats", self.repeats, "must be >= 1")
        require(self.min_images >= 1, "bench.min_images", self.min_images, "must be >= 1")
        require(self.warmup_images >= 0, "bench.warmup_images", self.warmup_images, ">= 0")
        require(self.max_side >= 16, "bench.max_side", self.max_side, "must be >= 16")


@dataclass(frozen=True)
class DoctorSpec:
    """``doctor`` config node."""

    steps: int = 40  # timed training steps per measurement
    warmup_steps: int = 8
    tune: bool = True
    placements: bool = True  # also measure every placement this machine has
    min_gain: float = 0.03  # a setting must be this much faster to replace the current one
    out_dir: str = "outputs/doctor"

    def __post_init__(self) -> None:
        require(self.min_gain >= 0, "doctor.min_gain", self.min_gain, "must be >= 0")
        require(self.steps >= 1, "doctor.steps", self.steps, "must be >= 1")
        require(self.warmup_steps >= 0, "doctor.warmup_steps", self.warmup_steps, ">= 0")


@dataclass(frozen=True)
class ScanSpec:
    """``scan`` config node."""

    splits: tuple[str, ...] = SPLITS
    out: str = "outputs/scan/bad_files.csv"
    workers: int | None = None  # null = all cores (fewer than 256 files: this process)

    def __post_init__(self) -> None:
        object.__setattr__(self, "splits", tuple(self.splits))
        unknown = set(self.splits) - set(SPLITS)
        require(not unknown, "scan.splits", sorted(unknown), f"choose from {SPLITS}")
        if self.workers is not None:
            require(self.workers >= 1, "scan.workers", self.workers, "must be >= 1 or null")


@dataclass(frozen=True)
class PackSpec:
    """``pack`` config node (``out`` is top-level: ``out=SHARDS``)."""

    shard_size_mb: float = 256.0
    seed: int = 0
    overwrite: bool = False
    baseline: bool = True  # JPEGs stored baseline with optimised tables (lossless; jpegtran)
    max_side: int | None = None  # images stored at most this many pixels on their long side
    quality: int = 95  # the JPEG quality of an image max_side resized

    def __post_init__(self) -> None:
        require(self.shard_size_mb > 0, "pack.shard_size_mb", self.shard_size_mb, "must be > 0")
        require(self.seed >= 0, "pack.seed", self.seed, "must be >= 0")
        require(
            self.max_side is None or self.max_side >= 16,
            "pack.max_side", self.max_side, "must be null or >= 16",
        )  # fmt: skip
        require(1 <= self.quality <= 100, "pack.quality", self.quality, "must be in 1..100")


#: The columns ``show`` can draw, one per loader: DALI on the GPU, DALI on the CPU, torch.
SHOW_BACKENDS = ("dali-gpu", "dali-cpu", "torch")


@dataclass(frozen=True)
class ShowSpec:
    """``show`` config node: what ``python -m dali_pipes.show`` draws and where.

    Without ``run``: the first ``samples`` samples of epoch ``epoch`` of the configured
    training split, as one batch, through the configured pipeline. With ``run`` (a training
    run's ``output_dir``): the batch rank ``rank`` trained on at the run's step ``step``
    (counted from 0), from the run's saved config. ``gallery``: every registered op at a
    few settings on the same photos (``photos``; null = the photos shipped in the package).
    """

    out: str = "outputs/show/show.png"
    epoch: int = 0
    samples: int = 8
    run: str | None = None
    step: int = 0
    rank: int = 0
    gallery: bool = False
    photos: str | None = None
    #: columns, from SHOW_BACKENDS; empty: every one this machine has
    backends: tuple[str, ...] = ()
    tile: int = 160  # pixels per image in the PNG
    amplify: float = 8.0  # the difference image's gain

    def __post_init__(self) -> None:
        object.__setattr__(self, "backends", tuple(self.backends))
        unknown = sorted(set(self.backends) - set(SHOW_BACKENDS))
        require(not unknown, "show.backends", unknown, f"choose from {SHOW_BACKENDS}")
        require(self.epoch >= 0, "show.epoch", self.epoch, "must be >= 0")
        require(self.samples >= 1, "show.samples", self.samples, "must be >= 1")
        require(self.step >= 0, "show.step", self.step, "must be >= 0")
        require(self.rank >= 0, "show.rank", self.rank, "must be >= 0")
        require(16 <= self.tile <= 1024, "show.tile", self.tile, "need 16..1024 pixels")
        require(self.amplify > 0, "show.amplify", self.amplify, "must be > 0")


# --------------------------------------------------------------------------- registration

#: The schemas that are not a registered source or backend.
FIXED_SCHEMAS: dict[tuple[str, str], type] = {
    ("augment", "base"): AugmentSpec,
    ("trainer", "base"): TrainerSpec,
    ("bench", "base"): BenchSpec,
    ("doctor", "base"): DoctorSpec,
    ("scan", "base"): ScanSpec,
    ("pack", "base"): PackSpec,
    ("show", "base"): ShowSpec,
    ("sampling", "base"): SamplerSpec,
}


def schemas() -> dict[tuple[str, str], type]:
    """Every schema by (group, name): the registered sources' and backends', then the rest."""
    return {
        **{("data", kind.name): kind.spec for kind in source_kinds()},
        **{("backend", kind.name): kind.spec for kind in backend_kinds()},
        **FIXED_SCHEMAS,
    }


def config_dir() -> Path:
    """``conf/``: packaged as ``dali_pipes.conf`` in a wheel, top-level in a checkout."""
    spec = importlib.util.find_spec("dali_pipes.conf")
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(__file__).resolve().parents[2] / "conf"


#: What :func:`register` last stored at each ConfigStore place: the schema class and the
#: store's entry made of it.
_stored: dict[tuple[str, str], tuple[type, Any]] = {}


def register() -> None:
    """Put every schema into Hydra's ConfigStore as ``schema/<group>/<name>``, and a
    registered source or backend that has no YAML option in ``conf/`` as the option
    ``<group>/<name>`` itself (idempotent).

    A place that still holds the entry made of the same class is left as it is: making a
    node of a schema costs more than composing a config does, and every
    :func:`~dali_pipes.config.compose.compose_config` calls this."""
    for (group, name), cls in schemas().items():
        _store(f"schema/{group}", name, cls)
        if group in ("data", "backend") and not (config_dir() / group / f"{name}.yaml").exists():
            _store(group, name, cls)


def _store(group: str, name: str, cls: type) -> None:
    """``cls`` as the ConfigStore's ``group/name``, unless it is there already."""
    store = ConfigStore.instance()
    held = store.repo
    for part in group.split("/"):
        held = held.get(part, {})
    entry, stored = held.get(f"{name}.yaml"), _stored.get((group, name))
    if entry is not None and stored is not None and stored[0] is cls and stored[1] is entry:
        return
    node = OmegaConf.structured(cls)
    writable(node)  # a frozen dataclass, but a config the command line may override
    store.store(group=group, name=name, node=node)
    made = store.repo
    for part in group.split("/"):
        made = made[part]
    _stored[(group, name)] = (cls, made[f"{name}.yaml"])


def writable(node: Any) -> None:
    """Clear the read-only flag a frozen dataclass gives ``node`` and its sub-nodes."""
    OmegaConf.set_readonly(node, None)
    if isinstance(node, DictConfig):
        for _, child in node.items_ex(resolve=False):  # sub-nodes as they are, unresolved
            if isinstance(child, DictConfig):
                writable(child)
