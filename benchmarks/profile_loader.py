"""Where dali_pipes' DALI CPU loader spends its time per batch (issue 14).

Usage::

    python benchmarks/profile_loader.py [ROOT] [--batch 64] [--epochs 1] [--threads N]
                                        [--augment imagenet] [--out profile.json]
                                        [--cprofile loader.prof]

``ROOT`` (default ``../shared/data/photos`` next to the repository) is an ImageFolder tree;
the loader is ``DALIIterator(ROOT, device="cpu")`` with the given preset. The script
monkeypatches the loader's methods with ``time.perf_counter`` wrappers (the package is not
edited) and splits the wall time of each batch, as the training loop sees it, into:

- the Python feed, DALI's ``external_source`` callback (``_Feed.__call__``), run on the
  main thread inside ``schedule_run``: waiting for the read-ahead file reads and per-batch
  bookkeeping (``_Feed._next_batch``), header parsing (``image_size``), the geometry and op
  parameter draws (``Pipeline.draw``), the op parameter arrays (``Pipeline.feed``);
- DALI's ``schedule_run`` apart from the feed;
- waiting for DALI's outputs (``share_outputs``): the operators (decode, resize, ops,
  normalisation) not yet done when the loop asks;
- the hand-over to torch (``DaliLoader._to_torch``: copies into fresh torch tensors);
- ``release_outputs`` and the rest (generator and batch-stage overhead, the loop).

Sections are exclusive: a section's time excludes the sections it calls. The file reads
themselves run on the feed's thread pool, and the CPU graph's resize kernel
(``WindowResize.__call__``, a ``python_function``) on DALI's executor thread, both
overlapped with the above; they are listed apart (thread-seconds), with every thread
group's CPU time from ``/proc/self/task`` (main thread, read pool, resize threads, DALI's
worker threads) over the timed batches. The first ``--warmup-batches``
batches (pipeline build, prefetch) are left out. ``--cprofile FILE`` also dumps a cProfile
of the main thread over the timed batches (``python -m pstats FILE``). A table goes to
stdout, everything to ``--out``.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import json
import os
import platform
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT_ROOT = REPO.parent / "shared" / "data" / "photos"
_TICKS = os.sysconf("SC_CLK_TCK")


class Sections:
    """Inclusive and exclusive seconds per named section, per thread kind."""

    def __init__(self) -> None:
        self.incl: dict[str, float] = defaultdict(float)
        self.excl: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._local = threading.local()
        self._lock = threading.Lock()

    def reset(self) -> None:
        with self._lock:
            self.incl.clear()
            self.excl.clear()
            self.calls.clear()

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            stack: list[float] = self._local.__dict__.setdefault("stack", [])
            stack.append(0.0)  # time spent in sections this one calls
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                took = time.perf_counter() - start
                inner = stack.pop()
                if stack:
                    stack[-1] += took
                with self._lock:
                    self.incl[name] += took
                    self.excl[name] += took - inner
                    self.calls[name] += 1

        return timed


def _patch(sections: Sections, owner: Any, attrs: tuple[str, ...], name: str) -> str | None:
    """Wrap the first of ``attrs`` that ``owner`` has as section ``name``; the attribute
    patched, or None (the loader changed: the section then reads 0 and is reported)."""
    for attr in attrs:
        if callable(getattr(owner, attr, None)):
            setattr(owner, attr, sections.wrap(name, getattr(owner, attr)))
            return f"{getattr(owner, '__name__', owner)}.{attr}"
    return None


def _patch_resize(sections: Sections) -> str | None:
    """The CPU graph's resize (a ``python_function`` DALI calls on its executor thread)."""
    try:
        from dali_pipes.image.resample import WindowResize
    except ImportError:  # before e7909da: DALI's own fn.resize, inside "wait for outputs"
        return None
    return _patch(sections, WindowResize, ("__call__",), "DALI thread: resize kernel")


def _patch_reads(sections: Sections) -> str | None:
    """The read threads' file reads: the compiled batch reader of local files (since issue
    36), else the source's own reads (before)."""
    try:
        from dali_pipes.image.batch_reads import LocalReads
    except ImportError:
        from dali_pipes.data.sources import ImageSource

        return _patch(sections, ImageSource, ("read",), "pool: file reads")
    return _patch(sections, LocalReads, ("read",), "pool: file reads")


def instrument(sections: Sections) -> dict[str, str | None]:
    """Wrap the DALI loader's feed, pipeline calls and hand-over (class-level patches);
    returns section -> what was patched."""
    from dali_pipes.augment.pipeline import Pipeline
    from dali_pipes.backends.dali import loader as dali

    feed = getattr(dali, "Feed", None) or dali._Feed  # public since 41d6a2d
    patched = {
        "feed: rest of the callback": _patch(
            sections, feed, ("__call__",), "feed: rest of the callback"
        ),
        "feed: wait for reads + bookkeeping": _patch(
            sections, feed, ("_next_batch",), "feed: wait for reads + bookkeeping"
        ),
        # the header reader the backend module calls (its name has changed over time)
        "feed: header parsing": _patch(
            sections, dali, ("header_size", "image_size"), "feed: header parsing"
        ),
        "feed: geometry + op draws": _patch(
            sections, Pipeline, ("draw",), "feed: geometry + op draws"
        ),
        "feed: op parameter arrays": _patch(
            sections, Pipeline, ("feed",), "feed: op parameter arrays"
        ),
        # local files: the compiled batch reader since issue 36; other sources: their reads
        "pool: file reads": _patch_reads(sections),
        # DALI's executor thread, overlapped with the above (CPU graphs since e7909da)
        "DALI thread: resize kernel": _patch_resize(sections),
        "hand-over to torch": _patch(
            sections, dali.DaliLoader, ("_to_torch",), "hand-over to torch"
        ),
    }
    loader = dali.DaliLoader
    build = loader._build

    def built(self: Any) -> Any:
        pipe = build(self)
        pipe.schedule_run = sections.wrap("DALI schedule_run (not the feed)", pipe.schedule_run)
        pipe.share_outputs = sections.wrap("wait for DALI outputs", pipe.share_outputs)
        pipe.release_outputs = sections.wrap("DALI release_outputs", pipe.release_outputs)
        return pipe

    loader._build = built  # type: ignore[method-assign]
    patched["DALI schedule_run (not the feed)"] = "pipeline.schedule_run"
    patched["wait for DALI outputs"] = "pipeline.share_outputs"
    patched["DALI release_outputs"] = "pipeline.release_outputs"
    return patched


def thread_cpu() -> dict[int, tuple[str, float]]:
    """Every thread of this process: native id -> (name, CPU seconds so far)."""
    out = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            comm = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(task.name)] = (comm, (int(fields[11]) + int(fields[12])) / _TICKS)
    return out


def thread_groups(before: dict[int, tuple[str, float]]) -> dict[str, float]:
    """CPU seconds since ``before`` per thread group."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    main = threading.main_thread().native_id
    groups: dict[str, float] = defaultdict(float)
    for tid, (comm, cpu) in thread_cpu().items():
        spent = cpu - before.get(tid, (comm, 0.0))[1]
        if tid == main:
            group = "Python main thread"
        elif names.get(tid, "").startswith("dali-pipes-read"):
            group = "read pool (Python threads)"
        elif names.get(tid, "").startswith("dali-pipes-resize"):
            group = "resize kernel threads"
        elif comm.startswith("[DALI]"):
            group = f"DALI {comm.split(']', 2)[-1].lstrip('0123456789]').strip() or comm}"
        else:
            group = "other threads"
        groups[group] += spent
    return dict(groups)


MAIN_ORDER = (
    "feed: wait for reads + bookkeeping",
    "feed: header parsing",
    "feed: geometry + op draws",
    "feed: op parameter arrays",
    "feed: rest of the callback",
    "DALI schedule_run (not the feed)",
    "wait for DALI outputs",
    "hand-over to torch",
    "DALI release_outputs",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", nargs="?", type=Path, default=DEFAULT_ROOT)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--warmup-batches", type=int, default=2, help="left out (>= 1)")
    parser.add_argument("--threads", type=int, default=None, help="default: the CPU cores")
    parser.add_argument("--augment", default="imagenet", help="a conf/augment preset")
    parser.add_argument("--out", type=Path, default=Path("outputs/profile_loader.json"))
    parser.add_argument("--cprofile", type=Path, default=None, help="dump a main-thread profile")
    args = parser.parse_args()
    if args.warmup_batches < 1:
        parser.error("--warmup-batches must be >= 1 (the first batch builds the pipeline)")

    sections = Sections()
    patched = instrument(sections)
    for name, where in patched.items():
        if where is None:
            print(f"warning: nothing to patch for {name!r} (the loader changed); it reads 0")
    from dali_pipes import DALIIterator

    loader = DALIIterator(
        args.root,
        batch_size=args.batch,
        device="cpu",
        augment=args.augment,
        num_threads=args.threads,
    )
    profile = cProfile.Profile() if args.cprofile else None
    walls: list[float] = []
    images_seen = 0
    seen = 0
    cpu_before: dict[int, tuple[str, float]] = {}
    timed_start = 0.0
    for epoch in range(args.epochs):
        loader.set_epoch(epoch)
        batches = iter(loader)
        while True:
            start = time.perf_counter()
            try:
                _, labels = next(batches)
            except StopIteration:
                break
            took = time.perf_counter() - start
            seen += 1
            if seen == args.warmup_batches:  # warm-up over: count from the next batch on
                sections.reset()
                cpu_before = thread_cpu()
                timed_start = time.perf_counter()
                if profile is not None:
                    profile.enable()
            elif seen > args.warmup_batches:
                walls.append(took)
                images_seen += len(labels)
    if profile is not None:
        profile.disable()
        args.cprofile.parent.mkdir(parents=True, exist_ok=True)
        profile.dump_stats(str(args.cprofile))
    elapsed = time.perf_counter() - timed_start
    groups = thread_groups(cpu_before)
    threads = loader.num_threads
    loader.close()

    n = len(walls)
    if not n:
        raise SystemExit("no timed batches: lower --warmup-batches or raise --epochs")
    wall = sum(walls)
    rows: list[dict[str, Any]] = []
    accounted = 0.0
    for name in (*MAIN_ORDER, "other (loop, generator)"):
        seconds = sections.excl.get(name, 0.0) if name in MAIN_ORDER else wall - accounted
        accounted += seconds
        rows.append({"section": name, "ms_per_batch": 1e3 * seconds / n, "share": seconds / wall})
    feed_total = sum(sections.excl.get(k, 0.0) for k in MAIN_ORDER if k.startswith("feed"))
    reads = sections.incl.get("pool: file reads", 0.0)
    resize = sections.incl.get("DALI thread: resize kernel", 0.0)
    report = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "cores": len(os.sched_getaffinity(0))},
        "command": " ".join(["python", "benchmarks/profile_loader.py", *sys.argv[1:]]),
        "root": str(args.root),
        "files": len(loader.spec.source),
        "batch_size": args.batch,
        "num_threads": threads,
        "augment": args.augment,
        "timed_batches": n,
        "images_per_s": images_seen / wall,
        "wall_ms_per_batch": 1e3 * wall / n,
        "python_feed_ms_per_batch": 1e3 * feed_total / n,
        "sections": rows,
        "pool_file_reads_thread_ms_per_batch": 1e3 * reads / n,
        "dali_thread_resize_kernel_ms_per_batch": 1e3 * resize / n,
        "cpu_seconds_per_thread_group": groups,
        "cpu_util_of_cores": sum(groups.values()) / (elapsed * len(os.sched_getaffinity(0))),
        "calls": dict(sections.calls),
        "patched": patched,
    }
    print(
        f"{args.root}: {n} timed batches of {args.batch}, {threads} DALI threads, "
        f"{report['images_per_s']:.0f} images/s, {report['wall_ms_per_batch']:.1f} ms per batch"
    )
    print("\n| where (main thread, exclusive) | ms / batch | share of wall |")
    print("| --- | ---: | ---: |")
    for row in rows:
        print(f"| {row['section']} | {row['ms_per_batch']:.2f} | {100 * row['share']:.1f} % |")
    share = 100 * feed_total / wall
    print(f"| **Python feed, all of it** | {1e3 * feed_total / n:.2f} | {share:.1f} % |")
    print(f"\nfile reads on the read pool (overlapped): {1e3 * reads / n:.2f} thread-ms per batch")
    print(f"resize kernel, DALI's thread (overlapped): {1e3 * resize / n:.2f} ms per batch")
    print("\n| thread group | CPU s over the timed batches | cores busy |")
    print("| --- | ---: | ---: |")
    for group, cpu in sorted(groups.items(), key=lambda kv: -kv[1]):
        print(f"| {group} | {cpu:.2f} | {cpu / elapsed:.2f} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(f"\nwritten to {args.out}" + (f"; cProfile in {args.cprofile}" if args.cprofile else ""))


if __name__ == "__main__":
    main()
