"""The counter-based draws are the documented hash, whatever the NumPy implementation keeps
from one call to the next: a resumed run, another backend or another version of the package
draws the same numbers for (seed, epoch, sample, counter)."""

from __future__ import annotations

import numpy as np

from dali_pipes.augment.keyed import uniforms

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def mix(z: int) -> int:
    """splitmix64's finaliser, in Python integers."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def reference(seed: int, epoch: int, sample: int, counter: int) -> float:
    key = mix((seed * GOLDEN + 1) & MASK)
    key = mix(key ^ ((epoch * GOLDEN + 2) & MASK))
    per = mix(key ^ ((sample * GOLDEN) & MASK))
    return (mix((per + counter * GOLDEN) & MASK) >> 11) * 2.0**-53


def test_every_draw_is_the_hash_of_seed_epoch_sample_and_counter() -> None:
    for seed, epoch in ((0, 0), (7, 3), (2**40 + 1, 11), (7, 3)):  # (7, 3) again: kept keys
        samples = np.array([0, 1, 5, 123_456_789])
        got = uniforms(seed, epoch, samples, 3, offset=40)
        want = [[reference(seed, epoch, s, 41 + k) for k in range(3)] for s in samples.tolist()]
        assert got.tolist() == want
