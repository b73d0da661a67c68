"""The feed's read-ahead: a plan's batches read a few ahead on a thread pool, across the end
of an epoch into the next one.

A batch DALI asks for has been read already, unless the reads fall behind. At an epoch's
end the read-ahead goes on with the first batches of the epoch expected next (the loader
says which: the one after, from its start), so a new epoch does not begin by waiting for
its first files; if the next epoch turns out to be another (``set_epoch``, a resumed
position), those reads are dropped.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, TypeVar

import numpy as np

from dali_pipes.backends.base import EpochPlan

R = TypeVar("R")


class ReadAhead(Generic[R]):
    """``read`` (a plan and the number of one of its batches -> what was read) run
    ``depth`` batches ahead of :meth:`take` on ``threads`` threads."""

    def __init__(self, read: Callable[[EpochPlan, int], R], depth: int, threads: int) -> None:
        self.read = read
        self.depth = depth
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="dali-pipes-read")
        self._plan = EpochPlan(0, [])
        self._reads: deque[Future[R]] = deque()
        self._following: Callable[[], EpochPlan] | None = None
        #: The plan expected next and the reads of its first batches, once this one ends.
        self._next: tuple[EpochPlan, deque[Future[R]]] | None = None

    def start(
        self, plan: EpochPlan, position: int, following: Callable[[], EpochPlan] | None = None
    ) -> None:
        """Read ``plan`` from batch ``position`` on; ``following``: the plan of the epoch
        expected after this one (read into as this one ends), if any."""
        self.stop()
        expected, self._next = self._next, None
        if expected is not None:
            if position == 0 and _same_start(expected[0], plan, len(expected[1])):
                self._reads = expected[1]
            else:
                _cancel(expected[1])
        self._plan, self._following = plan, following
        end = min(position + self.depth, len(plan.batches))
        for k in range(position + len(self._reads), end):
            self._reads.append(self._pool.submit(self.read, plan, k))

    def take(self, position: int) -> R:
        """What was read of the plan's batch ``position`` (the next one), once it is."""
        done = self._reads.popleft().result()
        ahead, plan = position + self.depth, self._plan
        if ahead < len(plan.batches):
            self._reads.append(self._pool.submit(self.read, plan, ahead))
        else:
            self._read_following(ahead - len(self._plan.batches))
        return done

    def _read_following(self, k: int) -> None:
        """Start reading batch ``k`` of the plan expected next."""
        if self._following is None:
            return
        if self._next is None:
            self._next = (self._following(), deque())
        plan, reads = self._next
        if k == len(reads) and k < len(plan.batches):
            reads.append(self._pool.submit(self.read, plan, k))

    def stop(self) -> None:
        """Forget the rest of this plan's reads (a read already running finishes first);
        the reads of the plan expected next are kept for :meth:`start`."""
        _cancel(self._reads)
        for fut in self._reads:
            if not fut.cancelled():
                fut.exception()
        self._reads.clear()
        self._plan, self._following = EpochPlan(0, []), None

    def close(self) -> None:
        """Stop reading, and the threads."""
        self.stop()
        if self._next is not None:
            _cancel(self._next[1])
            self._next = None
        self._pool.shutdown(wait=True, cancel_futures=True)


def _same_start(expected: EpochPlan, plan: EpochPlan, batches: int) -> bool:
    """Whether ``plan`` starts as ``expected`` did, over its first ``batches`` batches."""
    return (
        plan.epoch == expected.epoch
        and plan.first == expected.first
        and len(plan.batches) >= batches
        and all(
            np.array_equal(a, b)
            for a, b in zip(plan.batches[:batches], expected.batches[:batches], strict=True)
        )
        and all(np.array_equal(_again(plan, k), _again(expected, k)) for k in range(batches))
    )


def _again(plan: EpochPlan, k: int) -> np.ndarray:
    """Batch ``k``'s repeat numbers (zeros for first draws)."""
    repeats = plan.repeats_of(k)
    return np.zeros(len(plan.batches[k]), np.int64) if repeats is None else repeats


def _cancel(reads: deque[Future[R]]) -> None:
    for fut in reads:
        fut.cancel()
