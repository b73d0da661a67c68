"""The JSON records of a GPU session (``benchmarks/gpu-session.sh``), beside bench's and doctor's.

``suite``: the gpu test suite's outcome, ``{"gpu_tests": {"collected", "passed", "failed",
"skipped", ...}, "machine": {"gpu", ...}, "commit", "date", "kind"}``, read from pytest's
JUnit XML when the run ended, else from its ``-v`` log (a run cut short still says what
finished, what failed and what never reported). ``train``: the default job's last epoch,
from its ``metrics.csv``. Both name the commit (``dali_pipes.tools.provenance``: the
tree's own, or ``DALI_PIPES_COMMIT``) and the machine; ``kind`` (``h100``, ``h200``, ...)
names the folder they are committed to, ``benchmarks/gpu-<kind>/``.

Usage::

    python benchmarks/gpu_record.py suite --part LOG XML [--part LOG XML] [--collected TXT]
        [--durations N] --out JSON
    python benchmarks/gpu_record.py train --run OUTPUT_DIR --out JSON
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this tree's dali_pipes

from dali_pipes.tools.provenance import commit, version

# "[gw3] [ 81%] FAILED tests/...::name[param]" (xdist -v) or "tests/...::name PASSED [ 5%]"
_XDIST = re.compile(r"^\[gw\d+\] \[\s*\d+%\] (PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS) (\S+)")
_PLAIN = re.compile(r"^(tests/\S+::\S+) (PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS)\b")
# "2 workers [118 items]" (xdist: the selected tests), or "collected 34 items / 32
# deselected / 2 selected" (the count run is the last one, when tests were deselected)
_ITEMS = re.compile(r"\[(\d+) items?\]|collected (\d+) items?(?: / .*?(\d+) selected)?")
_STARTED = re.compile(r"^(tests/\S+::\S+)(?:\s|$)")
# pytest's last line, "1 failed, 1 passed, 32 deselected in 16.48s": a -q log's only counts
_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)\b")
_TOTALS = re.compile(r"^=*\s*(?:\d+ \w+, )*\d+ \w+ in [\d.]+s")


def _outcome(word: str) -> str:
    return {"XFAIL": "skipped", "XPASS": "passed", "ERROR": "failed"}.get(word, word.lower())


def from_log(text: str) -> dict[str, Any]:
    """Counts from a ``pytest -v`` log (under xdist or not): each test's last word."""
    results: dict[str, str] = {}
    started: list[str] = []
    collected = 0
    for line in text.splitlines():
        if m := _XDIST.match(line):
            results[m.group(2)] = _outcome(m.group(1))
        elif m := _PLAIN.match(line):
            results[m.group(1)] = _outcome(m.group(2))
        elif m := _STARTED.match(line):
            started.append(m.group(1))
        if not collected and (m := _ITEMS.search(line)):
            collected = int(m.group(1) or m.group(3) or m.group(2))
    summary = _summary(collected or len(results), results, started, {}, "log")
    totals = [line for line in text.splitlines() if _TOTALS.match(line)]
    if not results and totals:  # a -q log: the counts of its last line, no names
        words = {word: int(n) for n, word in _COUNT.findall(totals[-1])}
        summary["passed"] = words.get("passed", 0) + words.get("xpassed", 0)
        summary["failed"] = words.get("failed", 0) + words.get("error", 0) + words.get("errors", 0)
        summary["skipped"] = words.get("skipped", 0) + words.get("xfailed", 0)
        summary["collected"] = summary["passed"] + summary["failed"] + summary["skipped"]
        summary["not_reported"] = 0
    return summary


def from_junit(xml: str) -> dict[str, Any]:
    """Counts and durations from pytest's ``--junitxml`` report (written when a run ends)."""
    results: dict[str, str] = {}
    durations: dict[str, float] = {}
    for case in ET.fromstring(xml).iter("testcase"):
        module = case.get("classname", "").replace(".", "/")
        name = f"{module}.py::{case.get('name')}"
        tags = {child.tag for child in case}
        results[name] = (
            "failed"
            if tags & {"failure", "error"}
            else "skipped"
            if "skipped" in tags
            else "passed"
        )
        durations[name] = float(case.get("time", 0.0))
    return _summary(len(results), results, [], durations, "junit")


def _summary(
    collected: int,
    results: dict[str, str],
    started: list[str],
    durations: dict[str, float],
    source: str,
) -> dict[str, Any]:
    counts = {
        k: sum(1 for v in results.values() if v == k) for k in ("passed", "failed", "skipped")
    }
    return {
        "collected": collected,
        **counts,
        "not_reported": collected - len(results),
        "failures": sorted(name for name, v in results.items() if v == "failed"),
        "reported": sorted(results),
        # begun and never finished: what a cut-off run was running
        "unfinished": sorted({name for name in started if name not in results}),
        "slowest": [
            {"test": name, "seconds": round(s, 1)}
            for name, s in sorted(durations.items(), key=lambda kv: -kv[1])
        ],
        "source": source,
    }


def part(log: Path, junit: Path) -> dict[str, Any]:
    """One pytest run's counts: each test's outcome and duration from its JUnit XML where
    pytest wrote one (also for an interrupted run: what had finished), else from its log;
    what was collected and what had begun but not finished, from its log."""
    logged = from_log(log.read_text(errors="replace") if log.is_file() else "")
    try:
        tests = from_junit(junit.read_text()) if junit.is_file() else None
    except ET.ParseError:  # cut off while pytest wrote it
        tests = None
    if tests is None:
        return logged
    reported = tests["passed"] + tests["failed"] + tests["skipped"]
    tests["collected"] = max(logged["collected"], reported)
    tests["not_reported"] = tests["collected"] - reported
    tests["unfinished"] = logged["unfinished"]
    return tests


def collected(listing: str) -> list[str]:
    """The test ids of a ``pytest --collect-only -q`` listing."""
    return [line.strip() for line in listing.splitlines() if _STARTED.match(line.strip())]


def suite(
    parts: list[tuple[Path, Path]], durations: int, listing: Path | None = None
) -> dict[str, Any]:
    """The gpu suite's record over its pytest runs (the suite, the memory tests alone);
    ``listing``: the suite's ``--collect-only`` output, what it was to run (the count of a
    run cut before pytest said, and the tests never reported, by name)."""
    runs = [part(log, junit) for log, junit in parts]
    ids = collected(listing.read_text(errors="replace")) if listing and listing.is_file() else []
    if ids and runs:
        first = runs[0]
        first["collected"] = max(first["collected"], len(ids))
        ended = first["passed"] + first["failed"] + first["skipped"]
        first["not_reported"] = first["collected"] - ended
    reported = {name for run in runs for name in run.pop("reported")}
    tests: dict[str, Any] = {}
    for key in ("collected", "passed", "failed", "skipped", "not_reported"):
        tests[key] = sum(run[key] for run in runs)
    for key in ("failures", "unfinished"):
        tests[key] = sorted(name for run in runs for name in run[key])
    tests["never_reported"] = [name for name in ids if name not in reported]
    slowest = sorted((t for run in runs for t in run["slowest"]), key=lambda t: -t["seconds"])
    tests["slowest"] = slowest[:durations]
    tests["source"] = "+".join(run["source"] for run in runs)
    return {"gpu_tests": tests, **_provenance()}


def train(run: Path) -> dict[str, Any]:
    """The default job's last epoch, from its ``metrics.csv``."""
    with (run / "metrics.csv").open() as f:
        rows = list(csv.DictReader(f))
    last = rows[-1] if rows else {}
    keep = ("epoch", "val_top1", "val_top5", "train_top1", "data_wait", "images_per_s")
    return {"default_job": {k: _number(last[k]) for k in keep if k in last}, **_provenance()}


def _number(text: str) -> float | int | str:
    try:
        value = float(text)
    except ValueError:
        return text
    return int(value) if value.is_integer() else value


def _provenance() -> dict[str, Any]:
    machine = _machine()
    return {
        "kind": _kind(str(machine.get("gpu") or "")),
        "machine": machine,
        "commit": commit(),
        "dali_pipes": version(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _machine() -> dict[str, Any]:
    """The GPU (as nvidia-smi names it), the cores, the versions, and whether Triton can
    build its kernels here (a C compiler and Python's headers: torch.compile needs both)."""
    machine: dict[str, Any] = {"gpu": None, "cores": len(os.sched_getaffinity(0))}
    if shutil.which("nvidia-smi"):
        query = "--query-gpu=name,memory.total,driver_version"
        done = subprocess.run(
            ["nvidia-smi", query, "--format=csv,noheader"], capture_output=True, text=True
        )
        if done.returncode == 0 and done.stdout.strip():
            name, memory, driver = (s.strip() for s in done.stdout.splitlines()[0].split(","))
            machine |= {"gpu": name, "gpu_memory": memory, "driver": driver}
    include = Path(sysconfig.get_paths()["include"])
    machine |= {
        "python": platform.python_version(),
        "versions": _versions(),
        "c_compiler": shutil.which("cc") or shutil.which("gcc"),
        "python_headers": (include / "Python.h").is_file(),
    }
    return machine


def _versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for module in ("torch", "torchvision", "nvidia.dali", "triton"):
        try:
            found[module] = __import__(module, fromlist=["__version__"]).__version__
        except ImportError:
            found[module] = None
    return found


def _kind(gpu: str) -> str:
    """``NVIDIA H200`` -> ``h200``; ``cpu`` without a GPU (a dry run)."""
    if not gpu:
        return "cpu"
    model = re.search(r"\b([A-Z]+\d+[A-Z]*)\b", gpu.removeprefix("NVIDIA "))
    return (model.group(1) if model else gpu.split()[-1]).lower()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python benchmarks/gpu_record.py")
    sub = parser.add_subparsers(dest="what", required=True)
    s = sub.add_parser("suite", help="the gpu test suite's record")
    s.add_argument(
        "--part",
        nargs=2,
        type=Path,
        action="append",
        required=True,
        metavar=("LOG", "XML"),
        help="a pytest run's -v log and its --junitxml report (if written); repeatable",
    )
    s.add_argument("--collected", type=Path, help="the suite's pytest --collect-only -q output")
    s.add_argument("--durations", type=int, default=15, help="slowest tests kept")
    s.add_argument("--out", type=Path, required=True)
    t = sub.add_parser("train", help="the default job's record")
    t.add_argument("--run", type=Path, required=True, help="the job's output_dir")
    t.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.what == "suite":
        record = suite([(log, xml) for log, xml in args.part], args.durations, args.collected)
    else:
        record = train(args.run)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    summary = record.get("gpu_tests") or record.get("default_job") or {}
    figures = {k: v for k, v in summary.items() if not isinstance(v, list)}
    print(f"{args.out}: {json.dumps(figures)}")


if __name__ == "__main__":
    main()
