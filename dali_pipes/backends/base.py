"""The batch contract every backend implements (docs/reference/loader.md)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from dali_pipes.backends.compat import DataLoaderAttributes
from dali_pipes.backends.images import (
    ImageList,
    Images,
    each_view,
    first_channel,
    has_views,
    stack_samples,
    views_of,
)
from dali_pipes.backends.specs import LoaderSpec
from dali_pipes.backends.targets import check_targets
from dali_pipes.data.interface import Rejects
from dali_pipes.data.mix_order import MixSampler
from dali_pipes.data.policy import BadFiles, warn_drop
from dali_pipes.data.samplers import rank_sampler
from dali_pipes.data.sampling import RankSampler, StreamSampler
from dali_pipes.data.specs import SamplerSpec
from dali_pipes.errors import ConfigError, DataError, DeviceError
from dali_pipes.runtime.devices import resolve_devices

__all__ = [
    "BadFiles",
    "Batch",
    "EpochPlan",
    "ImageList",
    "Images",
    "Loader",
    "each_view",
    "has_views",
    "loader_devices",
    "stack_samples",
    "views_of",
]


#: What every loader yields: ``(images, labels)`` (labels: int64 ``[N]``, or float soft
#: targets ``[N, num_classes]`` after mixup/cutmix; for detection data a list with one
#: target dict per image, :mod:`dali_pipes.backends.targets`); the images are
#: :data:`Images`. Both are typed ``Any`` so that a loop uses them as what its task gives.
Batch = tuple[Any, Any]


#: The layout of :meth:`Loader.state_dict`; bumped when it changes meaning.
STATE_VERSION = 1


def _output_request(output_device: str) -> tuple[str, torch.device | None]:
    """``LoaderSpec.output_device`` -> (a trainer.device choice, the GPU it names)."""
    try:
        device = torch.device(output_device)
    except (RuntimeError, TypeError):
        device = None
    if device is None or device.type not in ("cpu", "cuda"):
        raise ConfigError(
            f"output_device={output_device!r} is invalid: use None, 'cpu', 'cuda' or 'cuda:N'"
        )
    if device.type == "cpu":
        return "cpu", None
    if device.index is None:
        return "cuda", None
    count = torch.cuda.device_count()
    if device.index >= count and torch.cuda.is_available():
        raise DeviceError(
            f"output_device={output_device!r} but {count} CUDA devices are visible; "
            "name one of them, or 'cuda' for this process's GPU"
        )
    return "cuda", device


def loader_devices(spec: LoaderSpec) -> tuple[torch.device, torch.device]:
    """(where a loader decodes and augments, where it hands batches over): the one place
    every backend learns its placement from.

    ``spec.output_device`` None means ``trainer.device=auto`` (the model trains where the
    batches are made); otherwise it names the model's device, as
    :func:`dali_pipes.config.specs.loader_spec` fills it from ``trainer.device``.
    """
    if spec.output_device is None:
        trainer, gpu = "auto", None
    else:
        trainer, gpu = _output_request(spec.output_device)
    devices = resolve_devices(
        spec.backend.device, trainer, spec.backend.name, gpu=gpu, trainer_key="output_device"
    )
    return devices.made, devices.model


@dataclass(frozen=True)
class EpochPlan:
    """One epoch of this rank: its number and its batches of sample indices, in order.

    ``first``: the epoch's batch number of ``batches[0]`` (non-zero when resuming).
    ``positions``: each sample's slot in the epoch order, cut like ``batches``: what a
    substitute for a bad file is drawn for (:mod:`dali_pipes.data.substitutes`).
    ``repeats``: each sample's earlier draws in the epoch, cut like ``batches`` (empty: a
    sampler that visits each sample once), so that a repeat draws its own augmentation.
    """

    epoch: int
    batches: list[np.ndarray]
    first: int = 0
    positions: list[np.ndarray] = field(default_factory=list)
    repeats: list[np.ndarray] = field(default_factory=list)

    def repeats_of(self, k: int) -> np.ndarray | None:
        """Batch ``k``'s repeat numbers (None: every sample's first draw)."""
        return self.repeats[k] if self.repeats else None


def plan_epoch(
    sampler: RankSampler, epoch: int, batch_size: int, start: int = 0, first: int = 0
) -> EpochPlan:
    """``sampler``'s :class:`EpochPlan` of ``epoch`` after the first ``start`` samples of its
    order (``first``: the epoch's batch number of the plan's first batch)."""
    batches = sampler.batches(epoch, batch_size, start)
    positions = sampler.batch_positions(batch_size, start)
    repeats = sampler.repeats(epoch, start)
    if not repeats.any():
        return EpochPlan(epoch, batches, first, positions)
    cut = [repeats[k * batch_size : (k + 1) * batch_size] for k in range(len(batches))]
    return EpochPlan(epoch, batches, first, positions, cut)


def order_kind(spec: LoaderSpec, sampler: RankSampler) -> str:
    """What a loader state's ``sampler`` says: the training split's ``sampling=`` name, or
    for every sample once, whether files or packed shards are read (their orders differ)."""
    name = spec.sampler.name if spec.train else "default"
    if name != "default":
        return name
    if isinstance(sampler, MixSampler):
        return sampler.kind
    return "shards" if isinstance(sampler, StreamSampler) else "files"


@dataclass
class _Progress:
    """How far the latest ``iter`` got, for :meth:`Loader.state_dict` (mutable: counted as
    batches are handed over)."""

    epoch: int
    start: int  # samples of the epoch order consumed before this run, across all ranks
    batches: int  # batches this run yields at most
    yielded: int = 0
    ended: bool = False  # the backend's iterator is exhausted


class Loader(DataLoaderAttributes, ABC):
    """Behaves like ``DataLoader(ImageFolder, sampler=DistributedSampler)`` with transforms.

    ``iter(loader)`` starts an epoch: the one given to :meth:`set_epoch`, else the one after
    the previous ``iter``. Breaking out early and iterating again is fine. ``len(loader)``
    is the number of batches this rank yields per epoch, the same on every rank.

    With ``on_error=skip`` a file that cannot be read or decoded is reported once
    (:attr:`bad_files`), counted (:attr:`skipped`) and replaced in its batch by a
    substitute drawn from (seed, epoch, position), so batches keep their size and every
    rank yields as many samples as the others; ``on_error=drop`` leaves it out instead.

    :meth:`state_dict` / :meth:`load_state_dict` save and restore the position in an epoch
    (torchdata's ``StatefulDataLoader`` convention), also onto another world size or batch
    size: see :meth:`state_dict`. ``len(loader)`` stays the full epoch's count when an
    epoch is resumed part-way; the resumed iterator simply ends earlier.
    """

    device: torch.device

    def __init__(self, spec: LoaderSpec) -> None:
        check_targets(spec)  # data with boxes and masks: what cannot give them, one line
        self.spec = spec
        #: What a bad sample does (``data.on_error``: :mod:`dali_pipes.data.policy`).
        self.policy = spec.policy
        #: This rank's order (:mod:`dali_pipes.data.sampling`); :attr:`sampler` is its
        #: ``DistributedSampler`` face.
        self.rank_sampler = rank_sampler(
            spec.source, spec.sampling, spec.sampler if spec.train else SamplerSpec()
        )
        # What the next ``iter`` runs: the epoch, the samples of its order already consumed
        # (across all ranks) and the epoch's batch number of its first batch.
        self._next_epoch = 0
        self._start = 0
        self._first = 0
        self._run: _Progress | None = None  # the latest iter's progress; None after set_epoch
        self.bad = BadFiles()
        warn_drop(spec.on_error, spec.sampling.world_size)
        if isinstance(spec.source, Rejects):
            for path, reason in spec.source.rejected:
                self.bad.add(path, reason, count=False)
        #: The split's batch ops (mixup/cutmix, random erasing), applied to every batch the
        #: loader yields, on its device; None without any.
        self.batch_stage = spec.augment.batch_stage(
            spec.train, self.num_classes, spec.sampling.seed, spec.sampling.rank
        )
        self.attach_dataloader_attributes()

    def __len__(self) -> int:
        return self.rank_sampler.num_batches(self.spec.batch_size)

    @property
    def batch_size(self) -> int:
        """Samples per batch on this rank (DataLoader's ``batch_size``)."""
        return self.spec.batch_size

    @property
    def next_run(self) -> tuple[int, int]:
        """(the epoch the next ``iter`` runs, samples of its order consumed before it)."""
        return self._next_epoch, self._start

    @property
    def classes(self) -> tuple[str, ...]:
        """The class names, in label order (``ImageFolder``'s sorted folder names)."""
        return self.spec.source.classes

    @property
    def num_classes(self) -> int:
        """How many classes the labels range over."""
        return len(self.spec.source.classes)

    @property
    def skip(self) -> bool:
        """``data.on_error`` is ``skip`` or ``drop``: a bad file is reported, not raised."""
        return self.policy.tolerates

    @property
    def substitutes(self) -> bool:
        """``on_error=skip``: a bad file's slot gets a substitute (``drop``: left out)."""
        return self.policy.substitutes

    @property
    def skipped(self) -> int:
        """Samples left out (unreadable or undecodable) in the current or last epoch."""
        return self.bad.this_epoch

    @property
    def bad_files(self) -> dict[str, str]:
        """Every file left out so far, with the reason."""
        return dict(self.bad.reasons)

    def set_epoch(self, epoch: int, start_batch: int = 0) -> None:
        """Make the next ``iter`` run ``epoch``: order and augmentation are f(seed, epoch).

        ``start_batch`` resumes an epoch part-way (after an interrupted run): the batches
        before it are not read.
        """
        if epoch < 0:
            raise ConfigError(f"epoch={epoch} is invalid: must be >= 0")
        if not 0 <= start_batch <= len(self):
            raise ConfigError(f"start_batch={start_batch} is invalid: must be in [0, {len(self)}]")
        self._next_epoch = int(epoch)
        self._start = int(start_batch) * self._round
        self._first = int(start_batch)
        self._run = None

    @property
    def _round(self) -> int:
        """Samples one batch on every rank consumes."""
        return self.spec.batch_size * self.spec.sampling.world_size

    @property
    def start_batch(self) -> int:
        """The epoch's batch number the next ``iter`` starts at: ``set_epoch``'s
        ``start_batch``, or after :meth:`load_state_dict` the batches of this loader's size
        and world size the saved position amounts to (0 once an ``iter`` has begun)."""
        return self._first

    def state_dict(self) -> dict[str, Any]:
        """Where this loader is in its epochs, as plain ints, strings and bools (it goes
        into checkpoints read with ``torch.load(weights_only=True)``).

        ``epoch`` and ``samples_seen``: the epoch and how many samples of its order the
        batches yielded so far by the latest ``iter`` consumed across all ranks (a batch
        counts once it is handed over; files skipped as bad count too, as positions).
        Once an epoch is fully consumed the state points at the start of the next one;
        before any ``iter`` it is what :meth:`set_epoch` (or :meth:`load_state_dict`) set.
        Ranks that consumed the same number of batches return the same state, so any
        rank's can be saved. ``seed``, ``num_items``, ``shuffle`` and ``sampler`` identify the
        order (checked on load); ``world_size``, ``batch_size`` and ``drop_last`` record the
        run that saved it.
        """
        run = self._run
        if run is None:  # nothing iterated since set_epoch / load_state_dict / construction
            epoch, seen = self._next_epoch, self._start
            done = self.rank_sampler.num_batches(self.spec.batch_size, seen) == 0
        else:
            epoch, seen = run.epoch, run.start + run.yielded * self._round
            done = run.ended or run.yielded >= run.batches
        if done:
            epoch, seen = epoch + 1, 0
        sampling = self.spec.sampling
        return {
            "version": STATE_VERSION,
            "epoch": int(epoch),
            "samples_seen": int(seen),
            "seed": int(sampling.seed),
            "num_items": int(self.rank_sampler.num_items),
            "shuffle": bool(sampling.shuffle),
            "sampler": order_kind(self.spec, self.rank_sampler),
            "world_size": int(sampling.world_size),
            "batch_size": int(self.spec.batch_size),
            "drop_last": bool(sampling.drop_last),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Make the next ``iter`` continue the epoch ``state`` was saved in.

        On the same world size and batch size the rest of the epoch is exactly what the
        uninterrupted run would have yielded, batch for batch (mixing included). On another
        world size or batch size (an elastic restart) the samples not yet consumed are
        dealt out to the new ranks like ``DistributedSampler`` deals out an epoch: each is
        read once, plus only the padding that gives every rank the same count (or with
        ``drop_last`` the usual drop); per-sample augmentation is unchanged, but the batch
        stage's per-batch mixing (keyed by batch position) differs from the saved run's.
        Later epochs are ordinary epochs of this loader. A packed dataset (``data=shards``)
        resumes mid-epoch only on the saved world size. A state from another dataset or
        seed is refused in one line.
        """
        if not isinstance(state, Mapping):
            raise ConfigError(
                f"loader state {type(state).__name__} is invalid: pass the dict "
                "Loader.state_dict() returned"
            )
        got = {key: _state_int(state, key) for key in _STATE_INTS}
        if got["version"] != STATE_VERSION:
            raise ConfigError(
                f"loader state version={got['version']} is not supported: this dali_pipes "
                f"reads version {STATE_VERSION}; save it again with this version"
            )
        mine = self.state_dict()
        for key, hint in _STATE_IDENTITY.items():
            if key in state and state[key] != mine[key]:
                raise ConfigError(
                    f"loader state {key}={state[key]!r} differs from this loader's "
                    f"{key}={mine[key]!r}: {hint}"
                )
        for key, low in (("epoch", 0), ("world_size", 1), ("batch_size", 1)):
            if got[key] < low:
                raise ConfigError(f"loader state {key}={got[key]} is invalid: must be >= {low}")
        seen = got["samples_seen"]
        self.rank_sampler.check_resume(seen, got["world_size"], self.spec.batch_size)
        self._next_epoch = got["epoch"]
        self._start = seen
        self._first = seen // self._round
        self._run = None

    def __iter__(self) -> Iterator[Batch]:
        plan = self._take_epoch()
        return self._staged(plan, self._epoch(plan))

    def _staged(self, plan: EpochPlan, batches: Iterator[Batch]) -> Iterator[Batch]:
        """``batches`` through the batch stage, batch ``k`` keyed as the epoch's batch
        ``plan.first + k`` (so a resumed epoch mixes as the uninterrupted one did), counted
        as they are handed over: the progress :meth:`state_dict` reports; a grey batch's
        first channel (:func:`first_channel`). Every backend's batches pass here, so the
        count and the channel count live in one place."""
        stage, run, augment = self.batch_stage, self._run, self.spec.augment

        def staged() -> Iterator[Batch]:
            for k, (images, labels) in enumerate(batches, start=plan.first):
                if stage is not None:
                    assert isinstance(images, torch.Tensor)  # a split with views has no stage
                    images, labels = stage(images, labels, epoch=plan.epoch, position=k)
                if augment.channels == 1:  # a split with views has three (AugmentSpec)
                    images = first_channel(images, augment.channels_last)
                if run is not None:
                    run.yielded += 1
                yield images, labels
            if run is not None:
                run.ended = True

        return staged()

    def _take_epoch(self) -> EpochPlan:
        epoch, start, first = self._next_epoch, self._start, self._first
        self._next_epoch, self._start, self._first = epoch + 1, 0, 0
        self.bad.epoch_paths = set()
        plan = plan_epoch(self.rank_sampler, epoch, self.spec.batch_size, start, first)
        self._run = _Progress(epoch, start, len(plan.batches))
        return plan

    @abstractmethod
    def _epoch(self, plan: EpochPlan) -> Iterator[Batch]:
        """Yield one epoch's batches."""

    def _report(self, path: str, error: DataError) -> None:
        """A bad file: raise, or (``on_error=skip``) record it and carry on."""
        self.policy.judge(path, error, self.bad.add)

    def close(self) -> None:
        """Release worker processes, threads and pipelines (also done on garbage collection)."""

    def __enter__(self) -> Loader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_STATE_INTS = ("version", "epoch", "samples_seen", "seed", "num_items", "world_size", "batch_size")
#: What fixes the epoch order, so must match on load, and what to do when it does not.
_STATE_IDENTITY = {
    "seed": "the state belongs to another run; build the loader with the saved seed",
    "num_items": "the state belongs to another dataset or split; load it into a loader over "
    "the saved one",
    "shuffle": "the state belongs to another split; load it into a loader of the saved split",
    "sampler": "files, packed shards, each sampling= and each mix's weights are read in "
    "different orders; load it into a loader with the saved sampling and weights, over the "
    "saved data format",
}


def _state_int(state: Mapping[str, Any], key: str) -> int:
    """``state[key]`` as an int, or a one-line error naming the key."""
    if key not in state:
        raise ConfigError(
            f"loader state has no {key!r}: pass the dict Loader.state_dict() returned"
        )
    value = state[key]
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ConfigError(f"loader state {key}={value!r} is invalid: must be an integer")
    return int(value)
