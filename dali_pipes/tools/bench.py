"""``python -m dali_pipes.bench data=folder data.root=DIR``: every loader, side by side.

On the same files (the train split of any data config) and the same training augmentation,
it measures: the baseline a user would otherwise write (torchvision ``ImageFolder`` + PIL +
the same op list as torchvision v2 transforms + ``DataLoader`` with one worker per core,
pinned memory, persistent workers), the torch
backend, DALI on the CPU, DALI on the GPU (when there is one), the synthetic ceiling, and
the machine's JPEG decode ceiling (full decodes per second on all cores), and on request
DALI's own ResNet-50 example pipeline (``dali-raw``, ``dali-raw-gpu``:
:mod:`dali_pipes.tools.dali_example`).
Each gets the median and range of images/s over repeats (warm-up excluded), its ratio to
the baseline, the DALI loaders' ratio to DALI's example on the same device (``vs_peer``),
its share of the decode ceiling, CPU utilisation, CPU time per 1,000 images (core-seconds)
and peak host/GPU memory, and how many times its rate DALI on the CPU runs at
(``dali_cpu_vs``). The peers users pick instead (``spdl``, ``dali-dynamic``, ``ffcv``:
:mod:`dali_pipes.tools.peers`, the optional extra ``peers``) are candidates too; one that
cannot run here is one line in its row. The table goes to stdout, everything (with
machine and versions) to a JSON file.
"""

from __future__ import annotations

import json
import logging
import math
import platform
import sys
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from dali_pipes.config import cli
from dali_pipes.config.schemas import BenchSpec
from dali_pipes.config.specs import loader_spec, to_spec
from dali_pipes.data.files import write_text
from dali_pipes.data.interface import Annotated, Source, images_of
from dali_pipes.errors import require
from dali_pipes.runtime.distributed import cpu_share
from dali_pipes.tools.advice import bench_advice
from dali_pipes.tools.bench_candidates import (
    CANDIDATES,
    DEFAULTS,
    PEER_CANDIDATES,
    BenchRun,
    peer_task,
)
from dali_pipes.tools.charts import bench_chart
from dali_pipes.tools.measurement import Measurement
from dali_pipes.tools.provenance import commit, version

log = logging.getLogger("dali_pipes.bench")


def run_bench(cfg: DictConfig) -> dict[str, Any]:
    """Measure ``bench.candidates`` (empty: the defaults) on the train split of ``cfg``'s
    data; print the table, write the JSON report, return it."""
    bench = to_spec(cfg.bench, BenchSpec)
    names = bench.candidates or DEFAULTS
    unknown = sorted(set(names) - set(CANDIDATES))
    require(not unknown, "bench.candidates", unknown, f"choose from {', '.join(CANDIDATES)}")
    spec = loader_spec(cfg, "train", rank=0, world_size=1)
    source = images_of(spec.source, "bench measures image loaders", "choose a dataset")
    cores = cpu_share()
    workers = cores if bench.workers is None else bench.workers
    run = BenchRun(cfg, bench, spec, source, cores, workers, torch.cuda.is_available())
    if {"dali-raw", "dali-raw-gpu"} & set(names):
        from dali_pipes.tools.dali_example import example_crop
        from dali_pipes.tools.ssd_example import ssd_crop

        # a crop the peer cannot realise fails now, before any measuring
        ssd_crop(spec) if isinstance(spec.source, Annotated) else example_crop(spec)
    for name in sorted(set(PEER_CANDIDATES) & set(names)):
        peer_task(run, name)  # so does a pipeline the peers cannot realise
    results: list[Measurement] = []
    for name in tqdm(names, desc="bench", unit="loader", disable=None):
        if CANDIDATES[name].gpu and not run.cuda:
            results.append(Measurement(name, note="skipped: no CUDA device"))
            continue
        log.info("measuring %s", name)
        results.append(CANDIDATES[name].measure(run))

    report = _report(cfg, source, spec.batch_size, workers, results)
    out = Path(bench.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text(out, json.dumps(report, indent=2, default=str), hint="choose another bench.out")
    chart = bench_chart(report, out.with_suffix(".png"))
    print(markdown(report))
    print(f"\nwritten to {out} and {chart}\n")
    print("\n".join(bench_advice(report)))
    return report


def environment() -> dict[str, Any]:
    """The machine, versions, date, command and commit a recorded measurement needs."""
    versions: dict[str, str | None] = {
        "dali_pipes": version(),
        "python": platform.python_version(),
        "torch": torch.__version__,
    }
    for module in ("torchvision", "nvidia.dali", "PIL", "numpy"):
        try:
            versions[module] = __import__(module, fromlist=["__version__"]).__version__
        except ImportError:
            versions[module] = None
    for dist in ("spdl-io", "ffcv", "numba", "opencv-python"):  # the peers' packages
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    machine: dict[str, Any] = {
        "platform": platform.platform(),
        "processor": _cpu_model(),
        "cores": cpu_share(),
    }
    if torch.cuda.is_available():
        machine["gpu"] = torch.cuda.get_device_name()
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine,
        "versions": versions,
        "command": _command(),
        "commit": commit(),
    }


def _command() -> str:
    """The command line as typed: ``python -m dali_pipes.<tool> ...`` for our tools."""
    script = Path(sys.argv[0]).resolve()
    package = Path(__file__).resolve().parents[1]  # dali_pipes/
    tool = script.parent.name if script.name == "__main__.py" else script.stem
    if package in script.parents:
        return " ".join([f"python -m dali_pipes.{tool}", *sys.argv[1:]])
    return " ".join(sys.argv)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _report(
    cfg: DictConfig,
    source: Source,
    batch: int,
    workers: int,
    results: list[Measurement],
) -> dict[str, Any]:
    by_name = {r.name: r for r in results}
    base = by_name.get("baseline")
    ceiling = by_name.get("decode")
    ours = by_name.get("dali-cpu")
    rows = []
    for r in results:
        row = r.as_dict()
        row["vs_baseline"] = r.median / base.median if base and base.rates and r.rates else math.nan
        # a DALI loader against its peer; the peer itself is 1.0, like the baseline
        peer = by_name.get(PEERS.get(r.name, r.name))
        peer = peer if peer and peer.name in PEERS.values() else None
        row["vs_peer"] = r.median / peer.median if peer and peer.rates and r.rates else math.nan
        # how many times this loader's rate dali_pipes' DALI CPU loader runs at
        row["dali_cpu_vs"] = ours.median / r.median if ours and ours.rates and r.rates else math.nan
        row["pct_decode_ceiling"] = (
            100 * r.median / ceiling.median if ceiling and ceiling.rates and r.rates else math.nan
        )
        rows.append(row)
    return {
        **environment(),
        "dataset": {"root": source.root, "images": len(source), "classes": len(source.classes)},
        "batch_size": batch,
        "workers": workers,
        "augment": OmegaConf.to_container(cfg.augment),
        "results": rows,
    }


#: DALI loaders and their peer, DALI's own example pipeline on the same device: the
#: ``vs_peer`` ratio is dali_pipes' framework tax (< 1) or gain (> 1); and the GPU graph's
#: host side against the example's reader alone (``feed`` vs ``reader``).
PEERS = {"dali-cpu": "dali-raw", "dali-gpu": "dali-raw-gpu", "feed": "reader"}

COLUMNS = (
    ("loader", "name", "{}"),
    ("images/s (median)", "images_per_s_median", "{:.0f}"),
    ("min", "images_per_s_min", "{:.0f}"),
    ("max", "images_per_s_max", "{:.0f}"),
    ("× baseline", "vs_baseline", "{:.2f}"),
    ("× DALI example", "vs_peer", "{:.2f}"),
    ("dali-cpu ÷ this", "dali_cpu_vs", "{:.2f}"),
    ("% decode ceiling", "pct_decode_ceiling", "{:.0f}"),
    ("CPU util %", "cpu_util_pct", "{:.0f}"),
    ("CPU s / 1k img", "cpu_s_per_1k_images", "{:.1f}"),
    ("peak host MB", "peak_host_mb", "{:.0f}"),
    ("peak GPU MB", "peak_gpu_mb", "{:.0f}"),
    ("note", "note", "{}"),
)


def markdown(report: dict[str, Any]) -> str:
    """The results as a Markdown table ("–" where a figure does not apply)."""

    def cell(row: dict[str, Any], key: str, fmt: str) -> str:
        value = 100 * row["cpu_util"] if key == "cpu_util_pct" else row.get(key, math.nan)
        if isinstance(value, float) and math.isnan(value):
            return "–"
        return fmt.format(value)

    lines = [
        "| " + " | ".join(title for title, _, _ in COLUMNS) + " |",
        "| --- |" + " ---: |" * (len(COLUMNS) - 2) + " --- |",
    ]
    for row in report["results"]:
        lines.append("| " + " | ".join(cell(row, key, fmt) for _, key, fmt in COLUMNS) + " |")
    return "\n".join(lines)


def main() -> None:
    """``python -m dali_pipes.bench``."""
    cli.run(run_bench, "bench")
