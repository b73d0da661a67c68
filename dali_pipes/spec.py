"""Backend-neutral description of a loader, validated once.

The dataclasses here are both the typed Hydra schemas (YAML keys equal the field names;
see :mod:`dali_pipes.config`) and the frozen specs the backends consume, so a default
lives in exactly one place and a plain-Python user (``DALIIterator(...)``) gets the same
defaults as ``python -m dali_pipes.train``. ``__post_init__`` checks ranges and turns
lists that OmegaConf produces back into tuples. The augmentation ops are parsed and
validated by :mod:`dali_pipes.augment` (their schemas live with the ops).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dali_pipes.errors import ConfigError, require

if TYPE_CHECKING:
    from dali_pipes.augment import Pipeline
    from dali_pipes.augment.batch import BatchStage
    from dali_pipes.sources import Source

DTYPES = ("float32", "float16", "bfloat16")
DEVICES = ("auto", "gpu", "cpu")
ON_ERROR = ("raise", "skip")
CACHES = (None, "ram", "gpu")
DEFAULT_MAX_PIXELS = 100_000_000  # 100 MP: 10000 x 10000; a 65535 x 65535 header is 4.3 G


def _triple(obj: Any, name: str, key: str) -> tuple[float, float, float]:
    value = tuple(float(v) for v in getattr(obj, name))
    require(len(value) == 3, key, value, "expected three numbers, one per RGB channel")
    object.__setattr__(obj, name, value)
    return value  # type: ignore[return-value]


# --------------------------------------------------------------------------- augment


@dataclass(frozen=True)
class SplitAugment:
    """One split's augmentation, as configured: the decode-fused ``crop`` (its parameters,
    ``op`` naming it), then ``ops`` applied in the listed order (name -> parameters;
    ``null`` disables one; an ``op`` key names the op when the name is only a label), then
    the ``batch`` stage's ops on whole batches (mixup/cutmix, random erasing), same form.

    Turned into a :class:`~dali_pipes.augment.Pipeline` by :class:`AugmentSpec`, which
    knows the split's key for error messages.
    """

    crop: Any = field(default_factory=lambda: {"op": "random_resized_crop"})
    ops: Any = field(default_factory=lambda: {"hflip": {"p": 0.5}})
    batch: Any = field(default_factory=dict)


def _default_val() -> SplitAugment:
    return SplitAugment(crop={"op": "resize_center_crop"}, ops={})


@dataclass(frozen=True)
class AugmentSpec:
    """What every backend does to every image, and the output format of a batch.

    ``imports``: modules imported before the ops are looked up, so ops a user registers in
    their own code (``@dali_pipes.augment.register_op``) can be named in the config.
    """

    train: SplitAugment = field(default_factory=SplitAugment)
    val: SplitAugment = field(default_factory=_default_val)
    # On the 0-1 scale, like torchvision's Normalize; backends multiply by 255.
    mean: tuple[float, float, float] = (0.485, 0.456, 0.406)
    std: tuple[float, float, float] = (0.229, 0.224, 0.225)
    dtype: str = "float32"
    channels_last: bool = False
    imports: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _triple(self, "mean", "augment.mean")
        std = _triple(self, "std", "augment.std")
        require(all(s > 0 for s in std), "augment.std", std, "every value must be > 0")
        require(self.dtype in DTYPES, "augment.dtype", self.dtype, f"choose one of {DTYPES}")
        object.__setattr__(self, "imports", tuple(str(m) for m in self.imports))
        for module in self.imports:
            try:
                importlib.import_module(module)
            except ImportError as exc:
                raise ConfigError(
                    f"augment.imports: cannot import {module!r} ({exc}); "
                    "check the module is on PYTHONPATH"
                ) from None
        from dali_pipes.augment import parse_pipeline
        from dali_pipes.augment.batch import batch_config, parse_batch

        splits = (("train", self.train), ("val", self.val))
        pipelines = {
            split: parse_pipeline(aug.crop, aug.ops, f"augment.{split}") for split, aug in splits
        }
        batches = {split: parse_batch(aug.batch, f"augment.{split}.batch") for split, aug in splits}
        object.__setattr__(self, "_pipelines", pipelines)
        object.__setattr__(self, "_batches", batches)
        # Keep the canonical form (every parameter given), so equal pipelines compare equal.
        for split, pipeline in pipelines.items():
            crop, ops = pipeline.config()
            batch = batch_config(*batches[split])
            object.__setattr__(self, split, SplitAugment(crop=crop, ops=ops, batch=batch))

    def pipeline(self, train: bool) -> Pipeline:
        """The split's crop and ops, validated."""
        return self._pipelines["train" if train else "val"]  # type: ignore[attr-defined]

    def out_size(self, train: bool, epoch: int = 0) -> int:
        """The side of the split's output images in ``epoch`` (a resolution schedule moves it)."""
        return self.pipeline(train).crop.size_at(epoch)

    def batch_stage(
        self, train: bool, num_classes: int, seed: int = 0, rank: int = 0
    ) -> BatchStage | None:
        """The split's batch stage for data of ``num_classes`` (None: no batch ops)."""
        from dali_pipes.augment.batch import BatchStage

        split = "train" if train else "val"
        ops, labels = self._batches[split]  # type: ignore[attr-defined]
        if not ops:
            return None
        return BatchStage(ops, num_classes, seed, rank, f"augment.{split}.batch", labels)


# --------------------------------------------------------------------------- data


@dataclass(frozen=True)
class DataSpec:
    """Fields every dataset kind shares; ``batch_size`` is per process (per GPU).

    ``on_error``: ``raise`` stops at the first file that cannot be read or decoded, naming
    it; ``skip`` reports each such file once, leaves it out and carries on. ``max_pixels``
    rejects a file whose header claims more pixels, before anything is allocated.
    ``exclude`` is a manifest written by ``python -m dali_pipes.scan``: the files it lists
    are left out of the dataset before sharding.
    """

    name: str = "folder"
    batch_size: int = 64
    drop_last: bool = False
    on_error: str = "raise"
    max_pixels: int = DEFAULT_MAX_PIXELS
    exclude: str | None = None
    cache: str | None = None

    def __post_init__(self) -> None:
        require(self.batch_size >= 1, "data.batch_size", self.batch_size, "must be >= 1")
        require(self.cache in CACHES, "data.cache", self.cache, "choose null, ram or gpu")
        require(self.on_error in ON_ERROR, "data.on_error", self.on_error, f"choose {ON_ERROR}")
        require(self.max_pixels >= 1, "data.max_pixels", self.max_pixels, "must be >= 1")


@dataclass(frozen=True)
class FolderData(DataSpec):
    """An ImageFolder tree: ``root/<class>/<image>``.

    With ``train_dir``/``val_dir`` set (``imagenet``: ``train`` and ``val``) each split reads
    its own subfolder; with them unset both splits read ``root`` itself.
    """

    root: str | None = None
    train_dir: str | None = None
    val_dir: str | None = None


@dataclass(frozen=True)
class SampleData(DataSpec):
    """The embedded default dataset, generated on first use into ``root`` (a cache dir)."""

    name: str = "sample"
    root: str | None = None
    train_per_class: int = 120
    val_per_class: int = 40

    def __post_init__(self) -> None:
        super().__post_init__()
        for key in ("train_per_class", "val_per_class"):
            value = getattr(self, key)
            require(value >= 1, f"data.{key}", value, "must be >= 1")


@dataclass(frozen=True)
class ShardData(DataSpec):
    """A dataset packed by ``python -m dali_pipes.pack`` (see :mod:`dali_pipes.shards`).

    ``shuffle_buffer``: each epoch visits the shards in a new order and shuffles samples
    within runs of this many consecutive ones, so reads stay within a few MB of a shard.
    """

    name: str = "shards"
    root: str | None = None
    shuffle_buffer: int = 2048

    def __post_init__(self) -> None:
        super().__post_init__()
        require(self.shuffle_buffer >= 0, "data.shuffle_buffer", self.shuffle_buffer, ">= 0")


@dataclass(frozen=True)
class SyntheticData(DataSpec):
    """No files at all: ``num_samples`` virtual samples for the synthetic backend."""

    name: str = "synthetic"
    num_samples: int = 1024
    num_classes: int = 1000

    def __post_init__(self) -> None:
        super().__post_init__()
        require(self.num_samples >= 1, "data.num_samples", self.num_samples, "must be >= 1")
        require(self.num_classes >= 1, "data.num_classes", self.num_classes, "must be >= 1")


# --------------------------------------------------------------------------- backends


@dataclass(frozen=True)
class BackendSpec:
    """``device``: where batches are produced and returned (auto = GPU when usable)."""

    name: str = "dali"
    device: str = "auto"

    def __post_init__(self) -> None:
        require(self.device in DEVICES, "backend.device", self.device, f"choose one of {DEVICES}")


@dataclass(frozen=True)
class DaliBackend(BackendSpec):
    """NVIDIA DALI: nvJPEG decode + GPU augmentation, or DALI's CPU operators.

    ``num_threads=None`` uses this process's share of the CPU cores. The preallocation
    hints and paddings are passed to DALI's decoder (0 keeps DALI's own default).

    ``fancy_upsampling`` (GPU only): nvJPEG upsamples chroma like libjpeg-turbo, so GPU
    batches match the CPU's to a few grey levels (max 4 on the photos) instead of up to ~70
    at sharp colour edges (mean 0.4 either way). Off, as in DALI, by default: nvJPEG
    (DALI 2.4, nvJPEG < 13.2) declines region decoding with it, so it costs decoding whole
    images -- measured on an H100, ResNet-50 trained 32 % slower (benchmarks/RESULTS.md).
    ``roi_decode``: decode only the crop window (``decoders.image_slice``) rather than the
    whole image and then slice. ``None`` = yes, except on the GPU with ``fancy_upsampling``
    (where nvJPEG would hand the images to libjpeg-turbo on the CPU instead).
    """

    name: str = "dali"
    num_threads: int | None = None
    prefetch_queue_depth: int = 2
    hw_decoder_load: float = 0.65
    preallocate_width_hint: int = 0
    preallocate_height_hint: int = 0
    device_memory_padding: int = 0
    host_memory_padding: int = 0
    read_ahead: int = 2
    fancy_upsampling: bool = False
    roi_decode: bool | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.num_threads is not None:
            require(self.num_threads >= 1, "backend.num_threads", self.num_threads, "must be >= 1")
        require(
            self.prefetch_queue_depth >= 1,
            "backend.prefetch_queue_depth",
            self.prefetch_queue_depth,
            "must be >= 1",
        )
        require(
            0.0 <= self.hw_decoder_load <= 1.0,
            "backend.hw_decoder_load",
            self.hw_decoder_load,
            "need 0..1",
        )
        for key in (
            "preallocate_width_hint",
            "preallocate_height_hint",
            "device_memory_padding",
            "host_memory_padding",
            "read_ahead",
        ):
            value = getattr(self, key)
            require(value >= 0, f"backend.{key}", value, "must be >= 0")


@dataclass(frozen=True)
class TorchBackend(BackendSpec):
    """torchvision decode + transforms v2 in DataLoader workers (the parity reference)."""

    name: str = "torch"
    num_workers: int | None = None
    pin_memory: bool = True
    persistent_workers: bool = True
    prefetch_factor: int = 2

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.num_workers is not None:
            require(self.num_workers >= 0, "backend.num_workers", self.num_workers, "must be >= 0")
        require(
            self.prefetch_factor >= 1,
            "backend.prefetch_factor",
            self.prefetch_factor,
            "must be >= 1",
        )


@dataclass(frozen=True)
class SyntheticBackend(BackendSpec):
    """Batches already on the device: the throughput ceiling, no decoding at all."""

    name: str = "synthetic"


# --------------------------------------------------------------------------- loader


@dataclass(frozen=True)
class SamplingSpec:
    """Which samples this process reads in which order (DistributedSampler semantics)."""

    seed: int = 0
    shuffle: bool = True
    drop_last: bool = False
    rank: int = 0
    world_size: int = 1

    def __post_init__(self) -> None:
        require(self.world_size >= 1, "world_size", self.world_size, "must be >= 1")
        require(
            0 <= self.rank < self.world_size,
            "rank",
            self.rank,
            f"must be in [0, world_size={self.world_size})",
        )
        require(self.seed >= 0, "seed", self.seed, "must be >= 0")


@dataclass(frozen=True, eq=False)
class LoaderSpec:
    """Everything a backend needs to build one split's loader, already validated."""

    source: Source
    train: bool
    batch_size: int
    augment: AugmentSpec
    sampling: SamplingSpec
    backend: BackendSpec
    on_error: str = "raise"
    max_pixels: int = DEFAULT_MAX_PIXELS
    cache: str | None = None  # ram | gpu: decode once (dali_pipes.backends.cached)
    #: Where batches are handed over (the model's device: ``trainer.device``), when that is
    #: not where they are made (``backend.device``): e.g. "cuda:0" for DALI CPU decoding
    #: feeding a GPU model. None: where they are made.
    output_device: str | None = None
