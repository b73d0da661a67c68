"""Counter-based random numbers: every draw is a hash of (seed, epoch, sample, counter).

This is the one source of randomness for augmentation in every backend. A sample's draws
do not depend on the batch it lands in, the world size, the number of workers or what ran
before, so ``set_epoch`` is reproducible, a resumed epoch replays exactly and all backends
receive the same numbers. "Sample" is the sample's identity
(:meth:`dali_pipes.data.sources.FolderSource.identity`: its file's index in the folder), not its
position in the dataset, so a packed copy of a folder draws the same numbers as the folder.

A pipeline hands each op its own run of counters (the crop takes the first ones, the next
op the ones after, ...), so an op's draws are fixed by its position in the pipeline and
the sample, never by another op's outcome. A split with several views of each sample
(:mod:`dali_pipes.augment.views`) gives view ``v`` the counters from ``v *``
:data:`VIEW_COUNTERS` on, so each view's draws are a function of (seed, epoch, sample,
view), and view 0 draws what a one-view pipeline draws.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
# splitmix64's constants, made once: the draws run per batch on the thread that feeds DALI.
_S30, _S27, _S31, _S11 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11)
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
#: Counters each view of a sample owns (far more than any pipeline draws).
VIEW_COUNTERS = 1 << 32


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a bijective 64-bit hash with good avalanche."""
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


@lru_cache(maxsize=256)
def _epoch_key(seed: int, epoch: int) -> np.ndarray:
    """The key of (seed, epoch), hashed once per pair."""
    with np.errstate(over="ignore"):
        key = _mix(np.array([seed], dtype=np.uint64) * _GOLDEN + np.uint64(1))
        key = _mix(key ^ (np.array([epoch], dtype=np.uint64) * _GOLDEN + np.uint64(2)))
    key.flags.writeable = False
    return key


@lru_cache(maxsize=256)
def _counters(offset: int, n: int) -> np.ndarray:
    """Counters ``offset + 1 .. offset + n``, each times the golden ratio."""
    with np.errstate(over="ignore"):
        counters = np.arange(offset + 1, offset + n + 1, dtype=np.uint64) * _GOLDEN
    counters.flags.writeable = False
    return counters


def uniforms(seed: int, epoch: int, ids: np.ndarray, n: int, offset: int = 0) -> np.ndarray:
    """``[len(ids), n]`` floats in [0, 1): column k of sample i = hash(seed, epoch, i, offset+k+1).

    ``offset`` skips the counters an earlier op of the pipeline owns.
    """
    with np.errstate(over="ignore"):
        key = _epoch_key(int(seed), int(epoch))
        per = _mix(key ^ (np.asarray(ids, dtype=np.uint64) * _GOLDEN))[:, None]
        bits = _mix(per + _counters(int(offset), int(n)))
    return (bits >> _S11).astype(np.float64) * (2.0**-53)


def normal(u1: np.ndarray, u2: np.ndarray) -> np.ndarray:
    """Standard normal values from two uniform draws each (Box-Muller)."""
    return np.sqrt(-2.0 * np.log1p(-u1)) * np.cos(2.0 * np.pi * u2)


def choice(u: np.ndarray, n: int) -> np.ndarray:
    """An index in ``[0, n)`` from each uniform draw, all equally likely."""
    return np.minimum((u * n).astype(np.int64), n - 1)
