"""What a backend is given: its options (``backend.*``) and, for one split, the whole
:class:`LoaderSpec` -- the data's source, the augmentation, the sampling, the options --
already validated. The backend options are the typed Hydra schemas of the ``backend``
group."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from dali_pipes.augment.spec import AugmentSpec
from dali_pipes.data.interface import Labelled
from dali_pipes.data.policy import OnError
from dali_pipes.data.samplers import GivenWeights
from dali_pipes.data.specs import DEFAULT_MAX_PIXELS, SamplerSpec, SamplingSpec
from dali_pipes.errors import ConfigError, require
from dali_pipes.runtime.devices import BACKEND_DEVICES


@dataclass(frozen=True)
class BackendSpec:
    """``device``: where batches are produced and returned (auto = GPU when usable)."""

    #: Whether the backend decodes images (False: it makes batches from labels alone, so
    #: it takes a source without images and has nothing for a decode cache to keep).
    reads_images: ClassVar[bool] = True

    name: str = "dali"
    device: str = "auto"

    def __post_init__(self) -> None:
        require(
            self.device in BACKEND_DEVICES,
            "backend.device",
            self.device,
            f"choose one of {BACKEND_DEVICES}",
        )

    @property
    def placement(self) -> str:
        """Where batches are made, in words: ``<name>-<device>`` (``dali-gpu``)."""
        return f"{self.name}-{self.device}"

    def knobs(self, cores: int, gpu: bool) -> list[tuple[str, Sequence[Any]]]:
        """The options ``python -m dali_pipes.doctor`` tunes, one at a time, with the values
        it tries, on a machine with ``cores`` CPU cores for this process (and a GPU:
        ``gpu``). None by default."""
        return []


def thread_counts(cores: int) -> list[int]:
    """Thread or worker counts worth trying with ``cores`` cores: 1, half, all, one more
    and twice as many."""
    return sorted({1, max(1, cores // 2), cores, cores + 1, 2 * cores})


@dataclass(frozen=True)
class DaliBackend(BackendSpec):
    """NVIDIA DALI: nvJPEG decode + GPU augmentation, or DALI's CPU operators.

    ``num_threads=None`` uses this process's share of the CPU cores. The preallocation
    hints and paddings are passed to DALI's decoder (0 keeps DALI's own default).

    ``fancy_upsampling`` (GPU only): nvJPEG upsamples chroma like libjpeg-turbo, so GPU
    batches match the CPU's to a few grey levels instead of tens at sharp colour edges
    (:data:`~dali_pipes.selfcheck.bounds.DALI_GPU_VS_CPU`). Off, as in DALI, by default:
    nvJPEG (DALI 2.4, nvJPEG < 13.2) declines region decoding with it, so it costs decoding
    whole images, which slows GPU training (benchmarks/RESULTS.md has the figure).
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

    def knobs(self, cores: int, gpu: bool) -> list[tuple[str, Sequence[Any]]]:
        """Threads, the prefetch queue's depth and, on a GPU, the hardware decoder's share."""
        knobs: list[tuple[str, Sequence[Any]]] = [
            ("num_threads", thread_counts(cores)),
            ("prefetch_queue_depth", [1, 2, 3, 4]),
        ]
        if gpu:
            knobs.append(("hw_decoder_load", [0.0, 0.35, 0.5, 0.65, 0.8, 0.9, 1.0]))
        return knobs


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

    @property
    def placement(self) -> str:
        """``torch``: its workers decode on the CPU whatever the device."""
        return self.name

    def knobs(self, cores: int, gpu: bool) -> list[tuple[str, Sequence[Any]]]:
        """Workers (none: the main process) and batches prefetched per worker."""
        return [("num_workers", sorted({0, *thread_counts(cores)})), ("prefetch_factor", [2, 4, 8])]


@dataclass(frozen=True)
class SyntheticBackend(BackendSpec):
    """Batches already on the device: the throughput ceiling, no decoding at all."""

    reads_images = False

    name: str = "synthetic"


@dataclass(frozen=True, eq=False)
class LoaderSpec:
    """Everything a backend needs to build one split's loader, already validated.

    ``source``: the split (:mod:`dali_pipes.data.interface`: a ``Source`` of encoded
    images, or for the synthetic backend labels alone).
    """

    source: Labelled
    train: bool
    batch_size: int
    augment: AugmentSpec
    sampling: SamplingSpec
    backend: BackendSpec
    on_error: str = "raise"
    max_pixels: int = DEFAULT_MAX_PIXELS
    cache: str | None = None  # ram | gpu: decode once (dali_pipes.backends.cache.ram)
    #: ``sampling``: the training split's sampler (:mod:`dali_pipes.data.samplers`), or
    #: weights given in memory.
    sampler: SamplerSpec | GivenWeights = field(default_factory=SamplerSpec)
    #: The cache's images at most this many pixels on their long side (None: their own size).
    cache_max_side: int | None = None
    #: Where batches are handed over (the model's device: ``trainer.device``), when that is
    #: not where they are made (``backend.device``): e.g. "cuda:0" for DALI CPU decoding
    #: feeding a GPU model. None: where they are made.
    output_device: str | None = None

    def __post_init__(self) -> None:
        split = "train" if self.train else "val"
        early = any(p.before for p in self.augment.views(self.train).pipelines)
        if self.cache and early:
            raise ConfigError(
                f"data.cache={self.cache} keeps the decoded images, but augment.{split}.before "
                "draws new colours on each whole image every epoch; remove one of them"
            )

    @property
    def policy(self) -> OnError:
        """What a bad sample does (``on_error``), with the seed substitutes are drawn from."""
        return OnError(self.on_error, self.sampling.seed)
