"""The feed's read-ahead: a plan's batches in order, and at an epoch's end the first batches
of the epoch expected next -- used when it comes, dropped when another does."""

from __future__ import annotations

import threading

import numpy as np

from dali_pipes.backends.base import EpochPlan
from dali_pipes.backends.dali.read_ahead import ReadAhead


class Reads:
    """Records every batch read (by its first index), on whichever thread, and checks it
    was read with its plan's epoch (:func:`plan`'s batches start at 100 × epoch)."""

    def __init__(self) -> None:
        self.done: list[int] = []
        self.lock = threading.Lock()

    def __call__(self, plan: EpochPlan, k: int) -> list[int]:
        epoch, batch = plan.epoch, plan.batches[k]
        assert epoch == int(batch[0]) // 100, f"batch {batch} read as epoch {epoch}"
        with self.lock:
            self.done.append(int(batch[0]))
        return batch.tolist()


def plan(epoch: int, batches: int = 3) -> EpochPlan:
    base = 100 * epoch
    return EpochPlan(epoch, [np.arange(base + 10 * k, base + 10 * k + 2) for k in range(batches)])


def test_a_plan_is_read_ahead_and_taken_in_order() -> None:
    reads = Reads()
    ahead = ReadAhead(reads, depth=2, threads=2)
    ahead.start(plan(0), 0)
    assert [ahead.take(k)[0] for k in range(3)] == [0, 10, 20]
    ahead.close()
    assert sorted(reads.done) == [0, 10, 20]


def test_the_next_epochs_first_batches_are_read_as_an_epoch_ends_and_used() -> None:
    reads = Reads()
    ahead = ReadAhead(reads, depth=2, threads=1)
    asked: list[int] = []

    def following() -> EpochPlan:
        asked.append(1)
        return plan(1)

    ahead.start(plan(0), 0, following)
    for k in range(3):
        ahead.take(k)
    assert asked == [1], "the next plan is asked for once"
    ahead.stop()  # the epoch ended
    ahead.start(plan(1), 0)
    assert [ahead.take(k)[0] for k in range(3)] == [100, 110, 120]
    ahead.close()
    assert sorted(reads.done) == [0, 10, 20, 100, 110, 120], "each batch read once"


def test_reads_for_an_epoch_that_does_not_come_are_dropped() -> None:
    reads = Reads()
    ahead = ReadAhead(reads, depth=2, threads=1)
    ahead.start(plan(0), 0, lambda: plan(1))
    for k in range(3):
        ahead.take(k)
    ahead.stop()
    ahead.start(plan(5), 0)  # set_epoch(5) instead of epoch 1
    assert [ahead.take(k)[0] for k in range(3)] == [500, 510, 520]
    ahead.start(plan(6, batches=3), 1)  # a resumed position: nothing read ahead applies
    assert [ahead.take(k)[0] for k in (1, 2)] == [610, 620]
    ahead.close()
