"""dali_pipes against the loaders people pick instead (issue 29), recorded: three ``bench``
runs on each dataset, one JSON file per run, and a Markdown summary of the ratios.

Usage::

    python benchmarks/bench_peers.py [--photos DIR] [--imagenet-like DIR] [--runs 3]
                                     [--out benchmarks/peers] [--quick] [-- OVERRIDES...]

(``make bench-peers ARGS="..."`` installs the peers first.) Each run is the recorded
command, in a process of its own::

    python -m dali_pipes.bench data=folder data.root=PHOTOS bench.candidates=[...] \\
        bench.out=OUT/photos-runK.json
    python -m dali_pipes.bench data=imagenet data.root=IMAGENET_LIKE data.batch_size=64 \\
        bench.candidates=[...] bench.out=OUT/imagenet-like-runK.json

The candidates: the baseline, DALI on the CPU, DALI's example pipeline, the peers (spdl,
dali-dynamic, ffcv) and, where there is a GPU, their GPU rows. Each JSON file holds the
machine, versions, date, command and commit (``bench`` writes them); the summary
(``OUT/summary.md``, also printed) gives per run DALI CPU's ratio to the baseline and to
every peer that ran, from that run alone, and each row's CPU time per 1,000 images and
peak host memory. ``--quick`` (2 repeats of 512 images after 128 of warm-up) is for a
look on a busy machine; the recorded runs use bench's defaults. The ImageNet-like tree is
made with ``benchmarks/imagenet_like.py`` when absent.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CANDIDATES = (
    "baseline,dali-cpu,dali-raw,spdl,dali-dynamic,ffcv,dali-gpu,dali-raw-gpu,dali-dynamic-gpu"
)
PEERS = ("dali-raw", "spdl", "dali-dynamic", "ffcv")
QUICK = ("bench.repeats=2", "bench.warmup_images=128", "bench.min_images=512")


def datasets(args: argparse.Namespace) -> dict[str, list[str]]:
    """The two datasets' data overrides, by name."""
    return {
        "photos": ["data=folder", f"data.root={args.photos}"],
        "imagenet-like": ["data=imagenet", f"data.root={args.imagenet_like}", "data.batch_size=64"],
    }


def ensure_imagenet_like(photos: Path, where: Path) -> None:
    """Make the ImageNet-like copy of the photos at ``where`` unless it is there."""
    if (where / "train").is_dir():
        return
    script = ROOT / "benchmarks" / "imagenet_like.py"
    subprocess.run([sys.executable, str(script), str(photos), str(where)], check=True)


def run(name: str, data: list[str], k: int, args: argparse.Namespace) -> dict[str, Any]:
    """One bench run on one dataset; its report."""
    out = args.out / f"{name}-run{k}.json"
    command = [
        sys.executable,
        "-m",
        "dali_pipes.bench",
        *data,
        f"bench.candidates=[{CANDIDATES}]",
        f"bench.out={out}",
        f"bench.beton={args.beton}",
        *(QUICK if args.quick else ()),
        *args.overrides,
    ]
    print("$", " ".join(command[1:]), flush=True)
    subprocess.run(command, check=True, cwd=ROOT)
    report: dict[str, Any] = json.loads(out.read_text())
    report["file"] = str(out.relative_to(ROOT) if out.is_relative_to(ROOT) else out)
    return report


def _fmt(value: float | None, spec: str) -> str:
    return "–" if value is None or value != value else format(value, spec)


def summary(reports: dict[str, list[dict[str, Any]]]) -> str:
    """The Markdown summary: per run, DALI CPU against the baseline and every peer."""
    lines = []
    for name, runs in reports.items():
        lines += [
            f"### {name}",
            "",
            "| run | commit | date | baseline img/s | DALI CPU img/s | DALI CPU × baseline | "
            + " | ".join(f"÷ {p}" for p in PEERS)
            + " |",
            "| --- | --- | --- |" + " ---: |" * (3 + len(PEERS)),
        ]
        for k, report in enumerate(runs, 1):
            rows = {r["name"]: r for r in report["results"]}
            ours = rows.get("dali-cpu", {})
            base = rows.get("baseline", {})
            cells = [
                str(k),
                str(report.get("commit")),
                report["date"],
                _fmt(base.get("images_per_s_median"), ".0f"),
                _fmt(ours.get("images_per_s_median"), ".0f"),
                _fmt(ours.get("vs_baseline"), ".2f"),
                *(_fmt(rows.get(p, {}).get("dali_cpu_vs"), ".2f") for p in PEERS),
            ]
            lines.append("| " + " | ".join(cells) + " |")
        lines += [
            "",
            "| run | loader | images/s | CPU s / 1k img | CPU util % | peak host MB | note |",
            "| --- | --- | ---: | ---: | ---: | ---: | --- |",
        ]
        for k, report in enumerate(runs, 1):
            for row in report["results"]:
                util = row.get("cpu_util")
                lines.append(
                    f"| {k} | {row['name']} | {_fmt(row.get('images_per_s_median'), '.0f')} | "
                    f"{_fmt(row.get('cpu_s_per_1k_images'), '.1f')} | "
                    f"{_fmt(None if util is None else 100 * util, '.0f')} | "
                    f"{_fmt(row.get('peak_host_mb'), '.0f')} | {row.get('note', '')} |"
                )
        first = runs[0]
        lines += [
            "",
            f"Machine: {first['machine']}; versions: {first['versions']}; "
            f"files: {', '.join(r['file'] for r in runs)}.",
            "",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--photos", type=Path, default=ROOT.parent / "shared" / "data" / "photos")
    parser.add_argument("--imagenet-like", type=Path, default=Path("/tmp/imagenet-like"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "peers")
    parser.add_argument("--beton", type=Path, default=ROOT / "outputs" / "bench" / "beton")
    parser.add_argument("--only", choices=("photos", "imagenet-like"), help="one dataset")
    parser.add_argument("--quick", action="store_true", help="short timing, for a look")
    parser.add_argument("overrides", nargs="*", help="more bench overrides, after --")
    args = parser.parse_args(argv)
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    reports: dict[str, list[dict[str, Any]]] = {}
    for name, data in datasets(args).items():
        if args.only and name != args.only:
            continue
        if name == "imagenet-like":
            ensure_imagenet_like(args.photos, args.imagenet_like)
        reports[name] = [run(name, data, k, args) for k in range(1, args.runs + 1)]
    text = summary(reports)
    (args.out / "summary.md").write_text(text)
    print(text)
    return text


if __name__ == "__main__":
    main()
