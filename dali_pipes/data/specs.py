"""What a dataset is and how a rank samples it, as configured (``data.*``, ``seed``):
frozen, validated once, and the typed Hydra schemas of the ``data`` group (YAML keys equal
the field names)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from dali_pipes.errors import require
from dali_pipes.image.reads import DEFAULT_READ_TIMEOUT

ON_ERROR = ("raise", "skip", "drop")
#: The ``on_error`` values that carry on past a bad file (``skip`` substitutes, ``drop``
#: leaves it out of its batch).
TOLERATE = ("skip", "drop")
CACHES = (None, "ram", "gpu")
DEFAULT_MAX_PIXELS = 100_000_000  # 100 MP: 10000 x 10000; a 65535 x 65535 header is 4.3 G


def _at_least_one(spec: object, *keys: str) -> None:
    """Refuse, naming the key, a count of ``spec``'s below 1 (how many images to make)."""
    for key in keys:
        value = getattr(spec, key)
        require(value >= 1, f"data.{key}", value, "must be >= 1")


@dataclass(frozen=True)
class DataSpec:
    """Fields every dataset kind shares; ``batch_size`` is per process (per GPU).

    ``on_error``: ``raise`` stops at the first file that cannot be read or decoded, naming
    it; ``skip`` reports each such file once and fills its slot with a substitute drawn
    from (seed, epoch, position), so batches and ranks keep their sizes
    (:mod:`dali_pipes.data.substitutes`); ``drop`` reports it and leaves it out, so its
    batch shrinks (one process only: ranks would yield different counts). ``max_pixels``
    rejects a file whose header claims more pixels, before anything is allocated.
    ``exclude`` is a manifest written by ``python -m dali_pipes.scan``: the files it lists
    are left out of the dataset before sharding. ``read_timeout`` (seconds) bounds each
    file's read: a read past it (a stalled mount) is a bad file under ``on_error``; from a
    bucket, a request silent for a quarter of it is sent again (:mod:`dali_pipes.data.s3`).
    ``cache`` decodes the split once and augments it from memory every epoch;
    ``cache_max_side`` holds each image there at most that many pixels on its long side
    (:mod:`dali_pipes.image.stored_size`), for photos far larger than the training crop.
    """

    #: Whether the data has images to decode (False: labels alone, which only a backend
    #: that reads no images, :attr:`~dali_pipes.backends.specs.BackendSpec.reads_images`,
    #: turns into batches).
    has_images: ClassVar[bool] = True

    name: str = "folder"
    batch_size: int = 64
    drop_last: bool = False
    on_error: str = "raise"
    max_pixels: int = DEFAULT_MAX_PIXELS
    exclude: str | None = None
    cache: str | None = None
    cache_max_side: int | None = None
    read_timeout: float = DEFAULT_READ_TIMEOUT

    @classmethod
    def from_path(cls, path: str) -> DataSpec | None:
        """The data of this kind a path names (``DALIIterator(path)``), or None when this
        kind does not claim it (a zip archive claims ``*.zip``). None here: a path no
        kind claims is an image folder."""
        return None

    def __post_init__(self) -> None:
        require(self.batch_size >= 1, "data.batch_size", self.batch_size, "must be >= 1")
        require(self.cache in CACHES, "data.cache", self.cache, "choose null, ram or gpu")
        if self.cache_max_side is not None:
            side = ("data.cache_max_side", self.cache_max_side)
            require(self.cache_max_side >= 1, *side, "must be >= 1, or null for full size")
            require(self.cache is not None, *side, "set data.cache=ram or gpu, or remove it")
        require(self.on_error in ON_ERROR, "data.on_error", self.on_error, f"choose {ON_ERROR}")
        require(self.max_pixels >= 1, "data.max_pixels", self.max_pixels, "must be >= 1")
        require(self.read_timeout > 0, "data.read_timeout", self.read_timeout, "must be > 0")


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
class CocoData(DataSpec):
    """COCO's layout as published: ``root/train2017/``, ``root/val2017/`` and
    ``root/annotations/instances_{train,val}2017.json`` (each key a path under ``root``).

    Boxes with their categories mapped to contiguous labels from 1 (0 is the background;
    the mapping is the source's ``classes``); crowd annotations are left out unless
    ``crowd``; instance masks (from polygons and RLE, with ``pycocotools``) when ``masks``.
    """

    name: str = "coco"
    root: str | None = None
    train_dir: str = "train2017"
    val_dir: str = "val2017"
    train_annotations: str = "annotations/instances_train2017.json"
    val_annotations: str = "annotations/instances_val2017.json"
    masks: bool = False
    crowd: bool = False


@dataclass(frozen=True)
class SampleObjectsData(CocoData):
    """The embedded sample data with objects (:mod:`dali_pipes.data.sample_objects`),
    generated on first use into ``root`` (a cache folder), read as ``data=coco``."""

    name: str = "sample_objects"
    train_images: int = 96
    val_images: int = 32

    def __post_init__(self) -> None:
        super().__post_init__()
        _at_least_one(self, "train_images", "val_images")

    def folder(self) -> str:
        """The data in COCO's layout (``train2017/``, ``annotations/...``), written on
        first use: what torchvision's ``CocoDetection`` reads."""
        from dali_pipes.data.sample_objects import ensure_sample_objects

        return str(ensure_sample_objects(self.root, self.train_images, self.val_images))


@dataclass(frozen=True)
class SegmentationData(DataSpec):
    """Images with a mask each (a class per pixel), in one of three layouts under ``root``
    (:mod:`dali_pipes.data.segmentation`): ``images/<split>/x.jpg`` with
    ``masks/<split>/x.png``; ADE20K's ``images/<split>`` with ``annotations/<split>``;
    Pascal VOC's ``JPEGImages`` and ``SegmentationClass`` listed by
    ``ImageSets/Segmentation/<split>.txt``. ``train_split``/``val_split`` name each split's
    folder or list (ADE20K's are ``training`` and ``validation``). Masks are palette or grey
    PNGs whose values are the classes; ``ignore_index`` is the value that marks pixels to
    ignore, and the padding a crop adds to a mask. ``num_classes``: how many classes the
    masks hold, 0 (the background) included (21 for Pascal VOC); a segmentation model is
    built for that many. None: not known (the loader names one class)."""

    name: str = "segmentation"
    root: str | None = None
    train_split: str = "train"
    val_split: str = "val"
    ignore_index: int = 255
    num_classes: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        ok = 0 <= self.ignore_index <= 255
        require(ok, "data.ignore_index", self.ignore_index, "a mask value 0..255")
        if self.num_classes is not None:
            ok = 1 <= self.num_classes <= 255
            require(ok, "data.num_classes", self.num_classes, "a class count 1..255")


@dataclass(frozen=True)
class SampleSegmentationData(SegmentationData):
    """The embedded sample data with a mask per image (the sample objects' shapes, each
    pixel its category), generated on first use into ``root`` (a cache folder)."""

    name: str = "sample_segmentation"
    train_images: int = 96
    val_images: int = 32
    num_classes: int | None = 5  # the background and the four shapes

    def __post_init__(self) -> None:
        super().__post_init__()
        _at_least_one(self, "train_images", "val_images")


@dataclass(frozen=True)
class SampleData(DataSpec):
    """The embedded default dataset, generated on first use into ``root`` (a cache dir)."""

    name: str = "sample"
    root: str | None = None
    train_per_class: int = 120
    val_per_class: int = 40

    def __post_init__(self) -> None:
        super().__post_init__()
        _at_least_one(self, "train_per_class", "val_per_class")


@dataclass(frozen=True)
class ShardData(DataSpec):
    """A dataset packed by ``python -m dali_pipes.pack`` (see :mod:`dali_pipes.data.shards`).

    ``shuffle_buffer``: each epoch visits the shards in a new order and shuffles samples
    within runs of this many consecutive ones, so reads stay within a few MB of a shard.
    ``block_mb``: shards in a bucket are read in ranged GETs of this many MiB, each block
    cached by the process for as long as its window needs it
    (:mod:`~dali_pipes.data.shard_reader`).
    """

    name: str = "shards"
    root: str | None = None
    shuffle_buffer: int = 2048
    block_mb: float = 8.0

    def __post_init__(self) -> None:
        super().__post_init__()
        require(self.shuffle_buffer >= 0, "data.shuffle_buffer", self.shuffle_buffer, ">= 0")
        require(self.block_mb > 0, "data.block_mb", self.block_mb, "must be > 0")


@dataclass(frozen=True)
class ParquetData(DataSpec):
    """Parquet files in the Hugging Face Hub layout, ``root/data/<split>-0000K-of-0000N.parquet``
    (see :mod:`dali_pipes.data.parquet`).

    ``image_column``: encoded images (the Hub's ``Image`` struct of ``bytes`` and ``path``,
    or a binary column); ``label_column``: integer labels. ``train_split`` and
    ``val_split`` name the file-name splits the loaders' ``train`` and ``val`` read
    (``val_split=null``: ``validation``, else ``val``). ``shuffle_buffer``: each epoch
    visits the row groups in a new order and shuffles samples within runs of this many
    consecutive ones, so a batch reads a few row groups, not one per sample.
    """

    name: str = "parquet"
    root: str | None = None
    image_column: str = "image"
    label_column: str = "label"
    train_split: str = "train"
    val_split: str | None = None
    shuffle_buffer: int = 2048

    def __post_init__(self) -> None:
        super().__post_init__()
        require(self.shuffle_buffer >= 0, "data.shuffle_buffer", self.shuffle_buffer, ">= 0")
        for key in ("image_column", "label_column", "train_split"):
            require(bool(getattr(self, key)), f"data.{key}", getattr(self, key), "must be set")


@dataclass(frozen=True)
class SyntheticData(DataSpec):
    """No files at all: ``num_samples`` virtual samples for the synthetic backend."""

    has_images = False

    name: str = "synthetic"
    num_samples: int = 1024
    num_classes: int = 1000

    def __post_init__(self) -> None:
        super().__post_init__()
        require(self.num_samples >= 1, "data.num_samples", self.num_samples, "must be >= 1")
        require(self.num_classes >= 1, "data.num_classes", self.num_classes, "must be >= 1")


#: How a mix's labels are made: each source's classes kept apart, or one class list.
MIX_LABELS = ("separate", "shared")


@dataclass(frozen=True)
class MixData(DataSpec):
    """Several datasets read together (:mod:`dali_pipes.data.mix`).

    ``sources``: one entry per dataset, each a mapping of a data kind's keys (``name``:
    ``folder``, ``sample``, ``zip``, a registered kind) with, besides them, ``weight`` (how
    much of each training epoch it makes up; left out on every entry: its size, so each
    sample is read once an epoch) and ``tag`` (what its classes are prefixed with; default
    its place in the list). ``epoch_size``: samples per training epoch (null: all the
    sources' samples). ``labels``: ``separate`` keeps each source's classes apart (source
    ``i``'s labels follow those of the sources before it), ``shared`` maps classes of the
    same name onto one label (the names sorted, as ImageFolder sorts its folders), or a list
    of class names maps each source's classes onto it by name. The validation split reads
    every sample of every source once. ``batch_size``, ``drop_last``, ``cache``,
    ``on_error``, ``max_pixels`` and ``read_timeout`` are the mix's, for all its sources.
    """

    name: str = "mix"
    sources: tuple[Any, ...] = ()
    epoch_size: int | None = None
    labels: Any = "separate"

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "sources", tuple(self.sources))
        require(bool(self.sources), "data.sources", [], "list at least one dataset to mix")
        if self.epoch_size is not None:
            require(self.epoch_size >= 1, "data.epoch_size", self.epoch_size, "must be >= 1")
        if isinstance(self.labels, str):
            require(self.labels in MIX_LABELS, "data.labels", self.labels,
                    f"choose {' or '.join(MIX_LABELS)}, or give a list of class names")  # fmt: skip
        else:
            names = [str(n) for n in self.labels]
            require(len(set(names)) == len(names) > 0, "data.labels", names,
                    "a list of class names must be non-empty, each name once")  # fmt: skip
            object.__setattr__(self, "labels", tuple(names))


@dataclass(frozen=True)
class SamplerSpec:
    """``sampling``: which samples the training split draws in an epoch.

    ``default``: every sample once, ``DistributedSampler``'s order. ``weighted``:
    ``num_samples`` draws (default: the dataset's size) with the probabilities ``weights``
    says, a file of one weight per sample in the dataset's order (``.npy``, or text with one
    number per line), with or without ``replacement``, as ``WeightedRandomSampler``.
    ``class_balanced``: the same with each sample weighted ``count(its class) ** -power``
    (:mod:`dali_pipes.data.weighted`). ``repeated``: DeiT's repeated augmentation, each
    sample ``repeats`` times per epoch on different ranks, each copy augmented anew
    (:mod:`dali_pipes.data.repeated`). The validation split always reads every sample once.
    """

    name: str = "default"
    num_samples: int | None = None
    replacement: bool = True
    weights: str | None = None
    power: float = 1.0
    repeats: int = 3

    def __post_init__(self) -> None:
        if self.num_samples is not None:
            require(self.num_samples >= 1, "sampling.num_samples", self.num_samples, "must be >= 1")
        require(self.power >= 0, "sampling.power", self.power, "must be >= 0")
        require(self.repeats >= 1, "sampling.repeats", self.repeats, "must be >= 1")
        if self.name == "weighted":
            require(self.weights is not None, "sampling.weights", self.weights,
                    "sampling=weighted needs a file of one weight per sample")  # fmt: skip


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
