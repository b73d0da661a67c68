"""Where the GPU path's host time per image goes, and its feed against DALI's reader (issue 36).

Usage::

    python benchmarks/profile_feed.py [--photos DIR] [--imagenet-like DIR] [--rounds 3]
                                      [--min-images 4096] [--out FILE]

Two datasets, alternated in one run, ``--rounds`` times: ``../shared/data/photos`` (batch 64,
``data=folder``) and the ImageNet-like copy (batch 256, ``data=imagenet``; made by
``benchmarks/imagenet_like.py`` with 24 copies when absent). On each, side by side:

- ``feed``: the GPU graph's host side alone (:class:`dali_pipes.tools.host_side.FeedOnly`,
  the ``bench`` candidate of that name): the planned files read and every column fed
  through ``external_source``, nothing decoded;
- ``reader``: DALI's ``fn.readers.file`` alone over the same files
  (:class:`~dali_pipes.tools.host_side.ReaderOnly`), as DALI's examples use it: the files
  mapped into memory, their pages read only when touched (here: each header's);
- ``reader-read``: the same reader with ``dont_use_mmap=True``, reading each file into
  memory as the feed does (and as a decoder would make a mapped file be read).

Each is timed over whole epochs of at least ``--min-images`` images after a warm-up epoch:
images/s; CPU time per image of the process and of its thread groups (``/proc/self/task``:
the main thread, which runs DALI's ``external_source`` callback; DALI's threads; the rest,
the feed's read threads); the wall time per image of the callback and of DALI's whole
``external_source`` stage on the calling thread (the callback, then DALI preparing and
copying its columns). **Host time per image** is the CPU time per image that thread spends
in the ``external_source`` stage (``time.thread_time``: the work, not the waits for the
read-ahead): the serial Python work, under the GIL, on the thread that schedules DALI's
work -- the training loop's -- which sets the ceiling of the GPU path. The read threads'
CPU time is given apart (before: Python reads, the GIL taken and given per file; after:
mostly the compiled loop, which holds no GIL).

Then, per dataset, the ``external_source`` stage runs under cProfile (only inside the stage)
and its time per image is split into sections by the functions it is spent in (exclusive
time, the profiler's overhead included): waiting for the read-ahead reads, header parsing,
bad-file checks and substitutes, the draws (``Pipeline.draw``), DALI preparing the columns,
the rest (list building, ``np.tile``, bookkeeping). A table goes to stdout, everything with
the machine, versions, command and commit to ``--out``.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from profile_loader import thread_cpu  # beside this script

from dali_pipes.tools.provenance import commit

ROOT = Path(__file__).resolve().parents[1]

#: Profile sections: the first whose patterns one occurs in a function's "file:line(name)".
SECTIONS = (
    ("wait for the read-ahead reads", ("_thread.lock", "threading.py", "concurrent/futures")),
    ("DALI preparing the columns", ("nvidia/dali/", "nvidia.dali")),
    ("header parsing", ("headers.py", "header_size", "sizes.py")),
    ("bad-file checks, substitutes", ("_checked", "first_good", "substitutes.py", "_bad")),
    ("draws (Pipeline.draw)", ("dali_pipes/augment/",)),
    ("the next epoch's plan (read ahead)", ("sampling.py", "randperm", "plan_epoch")),
)
REST = "the rest (feed bookkeeping, lists, arrays)"


def groups(before: dict[int, tuple[str, float]], process: float) -> dict[str, float]:
    """CPU seconds since ``before`` per thread group; ``process``: the whole process's.

    Python 3.11 names no OS thread and a feed may read on a thread per batch that ends
    before this is read: the read threads are the process's time outside the main thread
    and DALI's threads."""
    main = threading.main_thread().native_id
    found = {"main thread (callback)": 0.0, "DALI threads": 0.0}
    for tid, (comm, cpu) in thread_cpu().items():
        spent = cpu - before.get(tid, (comm, 0.0))[1]
        if tid == main:
            found["main thread (callback)"] += spent
        elif comm.startswith("[DALI]"):
            found["DALI threads"] += spent
    found["feed read threads"] = max(0.0, process - sum(found.values()))
    return found


class Clock:
    """Wall time and the calling thread's CPU time in a method without arguments, patched
    on its class (optionally profiling inside it); DALI checks that a callback takes no
    argument."""

    def __init__(self, owner: Any, attr: str) -> None:
        self.seconds = 0.0
        self.cpu = 0.0  # not counting what it waited for (the reads), nor other threads'
        self.profile: cProfile.Profile | None = None
        method = getattr(owner, attr)

        def timed(this: Any) -> Any:
            profile = self.profile
            if profile is not None:
                profile.enable()
            start, cpu = time.perf_counter(), time.thread_time()
            try:
                return method(this)
            finally:
                self.seconds += time.perf_counter() - start
                self.cpu += time.thread_time() - cpu
                if profile is not None:
                    profile.disable()

        setattr(owner, attr, timed)


class Clocks:
    """The feed's callback, and DALI's whole ``external_source`` stage around it."""

    def __init__(self) -> None:
        from nvidia.dali.pipeline import Pipeline

        from dali_pipes.backends.dali.feed import Feed

        self.callback = Clock(Feed, "__call__")
        self.stage = Clock(Pipeline, "_run_input_callbacks")

    def reset(self) -> None:
        for clock in (self.callback, self.stage):
            clock.seconds = clock.cpu = 0.0


def timed(loader: Any, min_images: int, clocks: Clocks) -> dict[str, Any]:
    """One timed pass of whole epochs (at least ``min_images`` images), after one more."""
    for _ in loader:  # warm-up epoch
        pass
    clocks.reset()
    before = thread_cpu()
    cpu0, start, seen = time.process_time(), time.perf_counter(), 0
    while seen < min_images:
        for _, labels in loader:
            seen += len(labels)
    wall = time.perf_counter() - start
    cpu = time.process_time() - cpu0
    per_group = groups(before, cpu)
    us = 1e6 / seen
    return {
        "images": seen,
        "images_per_s": seen / wall,
        "cpu_us_per_image": cpu * us,
        "callback_us_per_image": clocks.callback.seconds * us,
        "external_source_stage_us_per_image": clocks.stage.seconds * us,
        "external_source_stage_cpu_us_per_image": clocks.stage.cpu * us,
        "thread_cpu_us_per_image": {k: v * us for k, v in per_group.items()},
        "host_us_per_image": clocks.stage.cpu * us,
    }


def profiled(loader: Any, min_images: int, clocks: Clocks) -> dict[str, float]:
    """The ``external_source`` stage's time per image in :data:`SECTIONS` (cProfile)."""
    profile = cProfile.Profile()
    clocks.stage.profile = profile
    seen = 0
    while seen < min_images:
        for _, labels in loader:
            seen += len(labels)
    clocks.stage.profile = None
    split: dict[str, float] = defaultdict(float)
    for (path, line, func), row in pstats.Stats(profile).stats.items():  # type: ignore[attr-defined]
        where = f"{path}:{line}({func})"
        name = next((s for s, keys in SECTIONS if any(k in where for k in keys)), REST)
        split[name] += row[2]  # exclusive time
    return {name: 1e6 * seconds / seen for name, seconds in split.items()}


def spec_for(data: list[str]) -> Any:
    from dali_pipes.config.compose import compose_config
    from dali_pipes.config.specs import loader_spec

    cfg = compose_config(["backend=dali", *data], "bench")
    return loader_spec(cfg, "train", rank=0, world_size=1)


def summarise(rounds: list[dict[str, Any]], name: str) -> dict[str, float]:
    """Medians over the rounds of dataset ``name``."""
    mine = [r for r in rounds if r["data"] == name]

    def median(kind: str, key: str) -> float:
        return statistics.median(r[kind][key] for r in mine)

    return {
        "feed_images_per_s": median("feed", "images_per_s"),
        "reader_images_per_s": median("reader", "images_per_s"),
        "feed_vs_reader": statistics.median(r["feed_vs_reader"] for r in mine),
        "reader_read_images_per_s": median("reader-read", "images_per_s"),
        "feed_vs_reader_read": statistics.median(r["feed_vs_reader_read"] for r in mine),
        "host_us_per_image": median("feed", "host_us_per_image"),
        "external_source_stage_us_per_image": median("feed", "external_source_stage_us_per_image"),
        "callback_us_per_image": median("feed", "callback_us_per_image"),
        "read_threads_cpu_us_per_image": statistics.median(
            r["feed"]["thread_cpu_us_per_image"]["feed read threads"] for r in mine
        ),
        "feed_cpu_us_per_image": median("feed", "cpu_us_per_image"),
        "reader_cpu_us_per_image": median("reader", "cpu_us_per_image"),
    }


def print_tables(summary: dict[str, dict[str, float]], profiles: dict[str, Any]) -> None:
    keys = (
        ("feed img/s", "feed_images_per_s", "{:.0f}"),
        ("reader img/s", "reader_images_per_s", "{:.0f}"),
        ("feed ÷ reader", "feed_vs_reader", "{:.2f}"),
        ("reader-read img/s", "reader_read_images_per_s", "{:.0f}"),
        ("feed ÷ reader-read", "feed_vs_reader_read", "{:.2f}"),
        ("host µs/img", "host_us_per_image", "{:.1f}"),
        ("external_source stage wall µs/img", "external_source_stage_us_per_image", "{:.1f}"),
        ("of which the callback", "callback_us_per_image", "{:.1f}"),
        ("read threads CPU µs/img", "read_threads_cpu_us_per_image", "{:.1f}"),
        ("feed CPU µs/img", "feed_cpu_us_per_image", "{:.1f}"),
        ("reader CPU µs/img", "reader_cpu_us_per_image", "{:.1f}"),
    )
    print("\n| data | " + " | ".join(title for title, _, _ in keys) + " |")
    print("| --- |" + " ---: |" * len(keys))
    for name, row in summary.items():
        cells = " | ".join(fmt.format(row[key]) for _, key, fmt in keys)
        print(f"| {name} | {cells} |")
    print("\n| external_source stage (cProfile, µs per image) | " + " | ".join(profiles) + " |")
    print("| --- |" + " ---: |" * len(profiles))
    for section in [*(s for s, _ in SECTIONS), REST]:
        cells = " | ".join(f"{p.get(section, 0.0):.1f}" for p in profiles.values())
        print(f"| {section} | {cells} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--photos", type=Path, default=ROOT.parent / "shared" / "data" / "photos")
    parser.add_argument("--imagenet-like", type=Path, default=Path("/tmp/imagenet-like"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--min-images", type=int, default=4096)
    parser.add_argument("--out", type=Path, default=Path("outputs/profile_feed.json"))
    args = parser.parse_args()
    if not (args.imagenet_like / "train").is_dir():
        script = str(ROOT / "benchmarks" / "imagenet_like.py")
        where = [str(args.photos), str(args.imagenet_like), "--copies", "24"]
        subprocess.run([sys.executable, script, *where], check=True)

    from dali_pipes.backends.specs import DaliBackend
    from dali_pipes.tools.bench import environment
    from dali_pipes.tools.host_side import FeedOnly, ReaderOnly, feed_spec

    clocks = Clocks()
    datasets = {
        "photos": ["data=folder", f"data.root={args.photos}", "data.batch_size=64"],
        "imagenet-like": [
            "data=imagenet",
            f"data.root={args.imagenet_like}",
            "data.batch_size=256",
        ],
    }
    loaders: dict[str, dict[str, Any]] = {}
    for name, data in datasets.items():
        spec = spec_for(data)
        options = spec.backend
        assert isinstance(options, DaliBackend)
        feed = FeedOnly(feed_spec(spec, options))
        loaders[name] = {
            "feed": feed,
            "reader": ReaderOnly(spec, options),
            "reader-read": ReaderOnly(spec, options, mmap=False),
        }
    rounds: list[dict[str, Any]] = []
    for k in range(args.rounds):
        for name, group in loaders.items():
            row: dict[str, Any] = {"round": k + 1, "data": name}
            for kind, loader in group.items():
                row[kind] = timed(loader, args.min_images, clocks)
            row["feed_vs_reader"] = row["feed"]["images_per_s"] / row["reader"]["images_per_s"]
            feed_rate, read_rate = row["feed"]["images_per_s"], row["reader-read"]["images_per_s"]
            row["feed_vs_reader_read"] = feed_rate / read_rate
            rounds.append(row)
            print(
                f"round {k + 1} {name}: feed {row['feed']['images_per_s']:.0f} img/s, "
                f"reader {row['reader']['images_per_s']:.0f}, x{row['feed_vs_reader']:.2f}; "
                f"reader-read {row['reader-read']['images_per_s']:.0f}, "
                f"x{row['feed_vs_reader_read']:.2f}; "
                f"host {row['feed']['host_us_per_image']:.1f} us/img",
                flush=True,
            )
    profiles = {
        name: profiled(group["feed"], args.min_images, clocks) for name, group in loaders.items()
    }
    for group in loaders.values():
        for loader in group.values():
            loader.close()
    summary = {name: summarise(rounds, name) for name in datasets}
    report = {
        **environment(),
        "command": " ".join(["python", *sys.argv]),
        "commit": commit(),
        "rounds": rounds,
        "summary": summary,
        "external_source_profile_us_per_image": profiles,
    }
    print_tables(summary, profiles)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, default=str))
    print(f"\nwritten to {args.out}")


if __name__ == "__main__":
    main()
