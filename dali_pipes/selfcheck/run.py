"""Run the self-check: describe the machine, run each check, print one line per result,
write the report, and exit 0 only when every check that ran passed."""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

from dali_pipes.errors import DaliPipesError
from dali_pipes.selfcheck import PHOTOS, environment
from dali_pipes.selfcheck.checks import CHECKS, Setup, gpu_available, repeated_photos, timed
from dali_pipes.selfcheck.report import Report, Result


def run(out: Path, quick: bool = False, echo: bool = True) -> Report:
    """Every check on this machine; the report is written to ``out``."""
    start = time.perf_counter()
    gpu = gpu_available()
    facts = environment.describe()
    results: list[Result] = []

    def say(text: str) -> None:
        if echo:
            print(text, flush=True)

    with tempfile.TemporaryDirectory(prefix="dali-pipes-selfcheck-") as scratch:
        setup = Setup(photos=PHOTOS, work=Path(scratch), gpu=gpu, quick=quick)
        facts["hardware_jpeg_decoder"] = (
            environment.hardware_decoder(repeated_photos(setup, 8), load=0.65)
            if gpu
            else "not checked: no GPU"
        )
        for key, value in _headline(facts).items():
            say(f"{key:<22} {value}")
        if not gpu:
            say(
                "no GPU: the checks run on the CPU (the GPU graphs as their CPU twins); "
                "the GPU half does NOT run"
            )
        for name, check in CHECKS:
            for result in timed(name, partial(check, setup)):
                results.append(result)
                say(result.line())
    facts["seconds"] = round(time.perf_counter() - start, 1)
    report = Report(facts, tuple(results), gpu=gpu, quick=quick)
    md, js = report.write(out)
    say(report.summary())
    say(f"report: {md} and {js} (attach both to a bug report)")
    return report


def _headline(facts: dict[str, object]) -> dict[str, object]:
    """The facts a reader looks for first, one line each."""
    versions = facts["versions"]
    cuda = facts["cuda"]
    assert isinstance(versions, dict) and isinstance(cuda, dict)
    gpu = facts["gpu"]
    if isinstance(gpu, dict):
        gpu = f"{gpu['name']}, {gpu['memory_gib']} GiB, compute {gpu['compute_capability']}"
    return {
        "dali_pipes": f"{versions.get('dali-pipes')} (commit {facts.get('commit')})",
        "DALI": versions.get("nvidia-dali-cuda120"),
        "torch / torchvision": f"{versions.get('torch')} / {versions.get('torchvision')}",
        "CUDA": f"driver {cuda.get('driver')}, torch runtime {cuda.get('torch_runtime')}, "
        f"DALI built with {cuda.get('dali_built_with')}",
        "GPU": gpu,
        "hardware JPEG decoder": facts["hardware_jpeg_decoder"],
        "CPU cores": facts["cpu"]["this_process"] if isinstance(facts["cpu"], dict) else None,
    }


def main(argv: list[str] | None = None) -> None:
    """``python -m dali_pipes.selfcheck [--quick] [--out DIR]``."""
    parser = argparse.ArgumentParser(
        prog="python -m dali_pipes.selfcheck",
        description="Check dali_pipes on this machine (GPU path against the CPU on photos "
        "shipped with the package) and write a report to attach to a bug report.",
    )
    parser.add_argument("--quick", action="store_true", help="a shorter run (under a minute)")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("outputs/selfcheck"),
        help="report folder (default: outputs/selfcheck)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        report = run(args.out, quick=args.quick)
    except DaliPipesError as exc:
        print(f"selfcheck: {exc}", file=sys.stderr)
        sys.exit(2)
    sys.exit(0 if report.passed else 1)
