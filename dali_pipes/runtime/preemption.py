"""SIGTERM / SIGINT become "stop after this step", agreed by every rank.

A cluster preempts a job with SIGTERM (SLURM, Kubernetes, torchrun passing it on) and a
person stops one with Ctrl-C. Acting inside the signal handler would cut a step in half
(an optimizer step applied to some parameters, or on some ranks only); instead the handler
only records the signal and the training loop asks :meth:`StopRequest.poll` at every step
boundary. Under DDP the ranks must stop after the *same* step, or one waits forever in an
all-reduce the others never join: the flag is summed over ranks on a gloo group of its own
(host memory, so no CUDA synchronisation), and the sum started after step ``s`` is read
after step ``s + 1``. Every rank reads the same sums in the same order, so all decide
together, at the cost of at most one more step. A second signal while the first is being
honoured raises :class:`Interrupted` at once (a person who insists; exit ``128 + signal``),
and ends the process if the clean-up that follows takes more than a moment.

A step boundary may never come: a read blocked on a dead mount, a peer that hangs. So the
first signal also starts a watchdog: if no step boundary is reached within ``grace``
seconds (``trainer.stop_timeout``), it logs why, flushes the logs and ends the process with
``128 + signal``, without a checkpoint (the last one stays the place to resume from).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from types import FrameType
from typing import Any

import torch
import torch.distributed as tdist

#: The signals acted on at a step boundary.
SIGNALS = (signal.SIGTERM, signal.SIGINT)
#: Seconds a signal may wait for a step boundary before the process ends without one.
DEFAULT_GRACE = 30.0
#: Seconds the clean-up after a second signal may take before the process just ends.
SECOND_SIGNAL_GRACE = 2.0

log = logging.getLogger("dali_pipes.train")


class Interrupted(KeyboardInterrupt):
    """A second signal: stop now, without a checkpoint; the exit code is ``128 + signum``."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        """128 + the signal (143 for SIGTERM, 130 for SIGINT)."""
        return 128 + int(self.signum)


class StopRequest:
    """Signal handlers that ask the training loop to stop at a step boundary.

    Use as a context manager around training: the previous handlers come back on exit.
    Outside the main thread (where Python cannot install handlers) it never fires.
    ``grace``: seconds the first signal waits for a step boundary before the watchdog ends
    the process, which then also ends if the clean-up after a second signal hangs (None,
    the default: neither, for use inside a process that must live on, e.g. a notebook).
    """

    def __init__(self, grace: float | None = None) -> None:
        self.signum: int | None = None  # the first signal this process received
        self.agreed = False  # every rank knows a stop was requested
        self.grace = grace
        self._watchdog: threading.Timer | None = None
        self._previous: dict[int, Any] = {}
        self._group: Any = None
        self._pending: tuple[Any, torch.Tensor] | None = None

    # ------------------------------------------------------------------ handlers

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            for sig in SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        if tdist.is_available() and tdist.is_initialized() and tdist.get_world_size() > 1:
            # A group of its own: the flag's all-reduce never queues behind DDP's buckets.
            self._group = tdist.new_group(backend="gloo")
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        self._wait_pending()
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
        if exc_type is None:  # else the watchdog bounds the clean-up too
            self._call_off()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:  # asked twice: stop now, without a checkpoint
            if self.grace is not None:
                _exit_after(SECOND_SIGNAL_GRACE, signum, "clean-up after a second signal")
            raise Interrupted(signum)
        self.signum = signum
        if self.grace is not None:
            self._watchdog = _exit_after(self.grace, signum, "no step boundary")

    def _call_off(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None

    @property
    def name(self) -> str:
        """The signal that asked to stop, by name (for messages)."""
        return signal.Signals(self.signum).name if self.signum is not None else "a rank's signal"

    # ------------------------------------------------------------------ agreement

    def poll(self) -> bool:
        """Called after every step: True when all ranks stop now (the same step on each)."""
        if self.agreed:
            return True
        if self._group is None:
            self.agreed = self.signum is not None
            return self._reached(self.agreed)
        self.agreed = self._reached(self._wait_pending())
        if not self.agreed:  # every rank read the same sum: all launch the next or none does
            flag = torch.tensor([0 if self.signum is None else 1], dtype=torch.int32)
            self._pending = (tdist.all_reduce(flag, group=self._group, async_op=True), flag)
        return self.agreed

    def _reached(self, agreed: bool) -> bool:
        """A step boundary where the ranks agreed to stop: the watchdog is no longer needed."""
        if agreed:
            self._call_off()
        return agreed

    def settle(self) -> bool:
        """At the end of an epoch: whether any rank has been signalled so far, known to all
        (finishes the pending sum and takes one more, synchronously)."""
        if self.agreed or self._group is None:
            self.agreed = self._reached(self.agreed or self.signum is not None)
            return self.agreed
        seen = self._wait_pending()
        flag = torch.tensor([0 if self.signum is None else 1], dtype=torch.int32)
        tdist.all_reduce(flag, group=self._group)
        self.agreed = self._reached(seen or bool(flag.item()))
        return self.agreed

    def _wait_pending(self) -> bool:
        if self._pending is None:
            return False
        work, flag = self._pending
        self._pending = None
        work.wait()
        return bool(flag.item())


def _exit_after(seconds: float, signum: int, why: str) -> threading.Timer:
    """A started daemon timer that ends the process with ``128 + signum`` after ``seconds``,
    logging ``why`` first (the log files are flushed: nothing else can be written safely
    from another thread while the main one is stuck)."""

    def end() -> None:
        log.error(
            "%s: %s within %g s (blocked reading data, or waiting for another rank?); "
            "exiting without a checkpoint: resume=auto continues from the last one",
            signal.Signals(signum).name,
            why,
            seconds,
        )
        for handler in logging.getLogger("dali_pipes").handlers:
            handler.flush()
        os._exit(128 + signum)

    timer = threading.Timer(seconds, end)
    timer.daemon = True
    timer.start()
    return timer


class Preempted(Exception):
    """Training stopped at a step boundary on a signal, after a consistent checkpoint.

    The command line turns it into one line and the exit code ``128 + signal``.
    """

    def __init__(self, signum: int | None, message: str) -> None:
        super().__init__(message)
        self.signum = signum if signum is not None else signal.SIGTERM

    @property
    def exit_code(self) -> int:
        """The process's exit code: 128 + the signal (143 for SIGTERM)."""
        return 128 + int(self.signum)
