"""Measuring a loader: images/s over repeats, CPU utilisation and CPU time per 1,000
images, peak host and GPU memory.

Host figures cover the whole process tree (DataLoader workers are child processes):
CPU time from ``/proc/<pid>/stat``, memory as the sum of each process's proportional set
size (``Pss`` from ``/proc/<pid>/smaps_rollup``, so pages shared between forked workers
count once). GPU memory is device-wide use (``cudaMemGetInfo``) above the level before the
loader was built, which includes DALI's own allocations that torch cannot see. On a
non-Linux host the host figures are NaN.
"""

from __future__ import annotations

import math
import os
import statistics
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _tree(root: int) -> list[int]:
    """``root`` and all its descendants."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    tree, frontier = [root], [root]
    while frontier:
        frontier = [pid for pid, ppid in parents.items() if ppid in frontier]
        tree += frontier
    return tree


def cpu_seconds(root: int | None = None) -> float:
    """User + system CPU seconds of a process tree so far (default: this process's).

    This process's own time comes from ``time.process_time`` (every thread, to the
    nanosecond), the other processes' from ``/proc``, in whole clock ticks: a loader that
    runs in this process and is timed over a few ticks does not read 0.
    """
    if not Path("/proc/self/stat").exists():
        return math.nan
    me = os.getpid()
    total = 0.0
    for pid in _tree(root or me):
        if pid == me:
            total += time.process_time()
            continue
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / _TICKS
    return total


def host_memory_bytes(root: int | None = None) -> float:
    """Proportional set size (PSS) of process ``root`` (default: this one) and its
    children, in bytes: shared pages counted once over the processes that share them."""
    if not Path("/proc/self/smaps_rollup").exists():
        return math.nan
    total = 0
    for pid in _tree(root or os.getpid()):
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
                    break
        except OSError:
            continue
    return float(total)


def gpu_used_bytes() -> float:
    """Device memory in use on the current GPU (every allocator's, DALI's included)."""
    if not torch.cuda.is_available():
        return math.nan
    free, total = torch.cuda.mem_get_info()
    return float(total - free)


class PeakSampler:
    """Samples host (and GPU) memory in a background thread; keeps the peaks."""

    def __init__(self, interval: float = 0.25) -> None:
        self.interval = interval
        self.host = 0.0
        self.gpu = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def sample(self) -> None:
        """Take one sample of host and GPU memory, keeping the peaks."""
        self.host = max(self.host, host_memory_bytes())
        self.gpu = max(self.gpu, gpu_used_bytes())

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()


@dataclass
class Measurement:
    """Throughput of one candidate; rates are images/s of each timed repeat."""

    name: str
    rates: list[float] = field(default_factory=list)
    cpu_util: float = math.nan  # share of all cores busy while timed, 0..1
    cpu_s_per_1k: float = math.nan  # CPU seconds (all cores, whole process tree) per 1000 images
    peak_host_mb: float = math.nan
    peak_gpu_mb: float = math.nan
    note: str = ""

    @property
    def median(self) -> float:
        """The median images/s over the timed repeats."""
        return statistics.median(self.rates) if self.rates else math.nan

    @property
    def spread(self) -> tuple[float, float]:
        """The lowest and highest images/s over the timed repeats."""
        return (min(self.rates), max(self.rates)) if self.rates else (math.nan, math.nan)

    def as_dict(self) -> dict[str, Any]:
        """The measurement as the JSON report holds it."""
        lo, hi = self.spread
        return {
            "name": self.name,
            "images_per_s_median": self.median,
            "images_per_s_min": lo,
            "images_per_s_max": hi,
            "repeats": self.rates,
            "cpu_util": self.cpu_util,
            "cpu_s_per_1k_images": self.cpu_s_per_1k,
            "peak_host_mb": self.peak_host_mb,
            "peak_gpu_mb": self.peak_gpu_mb,
            "note": self.note,
        }


def _consume(batches: Iterator[Any], images: int, sync: Callable[[], None]) -> int:
    seen = 0
    while seen < images:
        try:
            batch = next(batches)
        except StopIteration:
            break
        seen += len(batch[1])
    sync()
    return seen


def measure(
    name: str,
    epochs: Callable[[], Iterable[Any]],
    *,
    warmup_images: int,
    min_images: int,
    repeats: int,
    cores: int,
    on_repeat: Callable[[], None] = lambda: None,
) -> Measurement:
    """Time ``repeats`` passes of at least ``min_images`` images each, after a warm-up.

    ``epochs()`` returns a fresh iterable of ``(images, labels)`` batches (one epoch); a
    pass chains epochs until it has seen ``min_images``.
    """
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)

    def stream() -> Generator[Any, None, None]:
        while True:
            yield from epochs()

    result = Measurement(name)
    gpu_before = gpu_used_bytes()
    batches = stream()
    with PeakSampler() as peak:
        _consume(batches, warmup_images, sync)
        cpu0, wall0 = cpu_seconds(), time.perf_counter()
        images = 0
        for _ in range(repeats):
            start = time.perf_counter()
            seen = _consume(batches, min_images, sync)
            result.rates.append(seen / (time.perf_counter() - start))
            images += seen
            on_repeat()
        cpu1, wall1 = cpu_seconds(), time.perf_counter()
    batches.close()
    result.cpu_util = (cpu1 - cpu0) / ((wall1 - wall0) * cores)
    result.cpu_s_per_1k = 1000 * (cpu1 - cpu0) / images if images else math.nan
    result.peak_host_mb = peak.host / 2**20
    result.peak_gpu_mb = (peak.gpu - gpu_before) / 2**20 if torch.cuda.is_available() else math.nan
    return result
