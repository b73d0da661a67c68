"""``sampling=<name>``: the registry of training-split samplers, and the built-in ones.

A sampler makes a rank's order from the split's source, the job's
:class:`~dali_pipes.data.specs.SamplingSpec` (seed, rank, world size, drop_last) and the
``sampling`` config (:class:`~dali_pipes.data.specs.SamplerSpec`): a
:class:`~dali_pipes.data.sampling.RankSampler`. Every backend reads the order it makes, so
parity, ``set_epoch``, sharding, mid-epoch resume and replay hold for each as they do for
the shuffle. Register your own with :func:`register_sampler`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dali_pipes.data.interface import Labelled, Mixed, ReadInBlocks
from dali_pipes.data.mix_order import MixSampler
from dali_pipes.data.repeated import RepeatedSampler
from dali_pipes.data.sampling import RankSampler, sampler_for
from dali_pipes.data.specs import SamplerSpec, SamplingSpec
from dali_pipes.data.weighted import WeightedSampler, class_balanced
from dali_pipes.errors import ConfigError
from dali_pipes.registry import Registry

#: ``make(source, sampling, spec)`` -> the rank's order.
MakeSampler = Callable[[Labelled, SamplingSpec, SamplerSpec], RankSampler]

#: Every ``sampling=<name>``, built-in ones first.
SAMPLERS: Registry[MakeSampler] = Registry("sampler")


def register_sampler(name: str, make: MakeSampler, *, replace: bool = False) -> MakeSampler:
    """Make ``sampling=<name>`` available: ``make(source, sampling, spec)`` returns the
    rank's :class:`~dali_pipes.data.sampling.RankSampler` (``sampling``: seed, rank, world
    size; ``spec``: the ``sampling.*`` keys)."""
    return SAMPLERS.register(name, make, replace=replace)


@dataclass(frozen=True)
class GivenWeights:
    """Weights given in memory, with ``WeightedRandomSampler``'s settings (what
    ``DALIIterator(sampler=WeightedRandomSampler(...))`` becomes)."""

    weights: tuple[float, ...]
    num_samples: int
    replacement: bool = True
    name: str = "weighted"


def sampler_spec(given: Any) -> SamplerSpec | GivenWeights:
    """What ``DALIIterator(sampler=...)`` was given, as a spec: None (every sample once),
    a registered name, a :class:`~dali_pipes.data.specs.SamplerSpec`, torch's
    ``WeightedRandomSampler`` (its weights and settings as they are), torch's
    ``DistributedSampler`` or ``RandomSampler`` (every sample once, as here by default),
    or timm's ``RepeatAugSampler`` (its ``num_repeats``)."""
    from torch.utils.data import DistributedSampler, RandomSampler, WeightedRandomSampler

    if given is None or isinstance(given, DistributedSampler | RandomSampler):
        return SamplerSpec()
    if isinstance(given, str):
        return SamplerSpec(name=given)
    if isinstance(given, SamplerSpec):
        return given
    if isinstance(given, WeightedRandomSampler):
        weights = tuple(float(w) for w in given.weights.tolist())
        return GivenWeights(weights, int(given.num_samples), bool(given.replacement))
    if type(given).__name__ == "RepeatAugSampler":  # timm's, without importing timm
        return SamplerSpec(name="repeated", repeats=int(given.num_repeats))
    raise ConfigError(
        f"sampler={type(given).__name__} is not one dali_pipes can read its order from: give "
        f"a name ({', '.join(SAMPLERS)}), a WeightedRandomSampler, or a SamplerSpec"
    )


def rank_sampler(
    source: Labelled, sampling: SamplingSpec, spec: SamplerSpec | GivenWeights
) -> RankSampler:
    """The rank's order under ``sampling=<spec.name>``; one line for a name not registered.
    A mix's training split (:class:`~dali_pipes.data.interface.Mixed`) is read in its
    proportions, under ``sampling=default`` only."""
    shares = source.proportions() if isinstance(source, Mixed) else None
    if shares is not None:
        if spec.name != "default" or isinstance(spec, GivenWeights):
            raise ConfigError(
                f"sampling={spec.name} and a mix of datasets both choose the samples of an "
                "epoch; the mix reads its datasets by their weights: remove sampling"
            )
        return MixSampler(len(source), sampling, shares)
    if isinstance(spec, GivenWeights):
        _not_in_blocks(source, spec.name)
        weights = np.asarray(spec.weights, np.float64)
        return WeightedSampler(len(source), sampling, weights, spec.num_samples, spec.replacement)
    if spec.name not in SAMPLERS:
        raise ConfigError(
            f"sampling={spec.name!r} is not a sampler; choose one of {', '.join(SAMPLERS)}"
        )
    return SAMPLERS[spec.name](source, sampling, spec)


def _default(source: Labelled, sampling: SamplingSpec, spec: SamplerSpec) -> RankSampler:
    if spec.num_samples is not None:
        raise ConfigError(
            f"sampling.num_samples={spec.num_samples} draws samples, which sampling=default "
            "does not (it reads each once): use sampling=weighted or class_balanced"
        )
    return sampler_for(source, sampling)


def _weighted(source: Labelled, sampling: SamplingSpec, spec: SamplerSpec) -> RankSampler:
    return _drawn(source, sampling, spec, _read_weights(str(spec.weights), len(source)))


def _class_balanced(source: Labelled, sampling: SamplingSpec, spec: SamplerSpec) -> RankSampler:
    return _drawn(source, sampling, spec, class_balanced(source.labels, spec.power))


def _repeated(source: Labelled, sampling: SamplingSpec, spec: SamplerSpec) -> RankSampler:
    _not_in_blocks(source, spec.name)
    if spec.num_samples is not None:
        raise ConfigError(
            f"sampling.num_samples={spec.num_samples}: sampling=repeated reads one epoch of "
            "the dataset's size (its copies included); remove it"
        )
    return RepeatedSampler(len(source), sampling, spec.repeats)


def _not_in_blocks(source: Labelled, name: str) -> None:
    if isinstance(source, ReadInBlocks) and source.blocks() is not None:
        raise ConfigError(
            f"sampling={name} reads samples in any order, but this dataset is read in "
            "blocks (data=shards, data=parquet); use it on a folder, or sampling=default"
        )


def _drawn(
    source: Labelled, sampling: SamplingSpec, spec: SamplerSpec, weights: np.ndarray
) -> WeightedSampler:
    _not_in_blocks(source, spec.name)
    draws = len(source) if spec.num_samples is None else spec.num_samples
    return WeightedSampler(len(source), sampling, weights, draws, spec.replacement)


def _read_weights(path: str, count: int) -> np.ndarray:
    """One weight per sample from ``path`` (``.npy``, or text: one number per line)."""
    file = Path(path).expanduser()
    try:
        weights = np.load(file) if file.suffix == ".npy" else np.loadtxt(file, ndmin=1)
    except OSError as exc:
        raise ConfigError(
            f"sampling.weights={path}: cannot read it ({exc.strerror or exc}); give a .npy "
            "file or a text file of one weight per line"
        ) from None
    except ValueError as exc:
        raise ConfigError(
            f"sampling.weights={path}: not a list of numbers ({exc}); write one weight per line"
        ) from None
    weights = np.asarray(weights, np.float64).reshape(-1)
    if weights.size != count:
        raise ConfigError(
            f"sampling.weights={path} holds {weights.size} weights for {count} samples; give "
            "one per sample, in the dataset's order"
        )
    return weights


register_sampler("default", _default)
register_sampler("weighted", _weighted)
register_sampler("class_balanced", _class_balanced)
register_sampler("repeated", _repeated)

__all__ = [
    "SAMPLERS",
    "GivenWeights",
    "MakeSampler",
    "rank_sampler",
    "register_sampler",
    "sampler_spec",
]
