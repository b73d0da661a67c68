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
its share of the decode ceiling, CPU utilisation and peak host/GPU memory. The table goes
to stdout, everything (with machine and versions) to a JSON file.
"""

from __future__ import annotations

import json
import logging
import math
import platform
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, replace
from datetime import UTC, datetime
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from dali_pipes.augment.spec import AugmentSpec
from dali_pipes.backends import create_loader
from dali_pipes.backends.specs import BackendSpec, DaliBackend, SyntheticBackend, TorchBackend
from dali_pipes.config import cli
from dali_pipes.config.schemas import BenchSpec, PackSpec
from dali_pipes.config.specs import loader_spec, to_spec
from dali_pipes.data.sources import ImageSource, open_source
from dali_pipes.data.specs import ShardData
from dali_pipes.errors import DaliPipesError
from dali_pipes.runtime.devices import local_gpu
from dali_pipes.runtime.distributed import cpu_share
from dali_pipes.tools.measurement import Measurement, measure

log = logging.getLogger("dali_pipes.bench")

# --------------------------------------------------------------------------- candidates


def _baseline(
    source: ImageSource, augment: AugmentSpec, batch: int, workers: int, cuda: bool
) -> Callable[[], Iterable[Any]]:
    """What users write without dali_pipes: ImageFolder + PIL + the same training pipeline
    as torchvision v2 transforms (each op's ``torchvision()``)."""
    from torch.utils.data import DataLoader
    from torchvision import datasets
    from torchvision.transforms import v2

    try:
        steps = augment.pipeline(True).torchvision()
    except NotImplementedError as exc:
        raise DaliPipesError(
            f"bench baseline: {exc}; leave baseline out of bench.candidates"
        ) from None
    transform = v2.Compose(
        [
            *steps,
            v2.PILToTensor(),
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(augment.mean, augment.std),
        ]
    )
    dataset = datasets.ImageFolder(source.root, transform=transform)
    loader = DataLoader(
        dataset,
        batch_size=batch,
        shuffle=True,
        num_workers=workers,
        pin_memory=cuda,
        persistent_workers=workers > 0,
    )

    def epoch() -> Iterable[Any]:
        for images, labels in loader:
            if cuda:  # the copy the user's loop would make
                images = images.cuda(non_blocking=True)
                labels = labels.cuda(non_blocking=True)
            yield images, labels

    return epoch


def _decode_worker(paths: list[str], images: int) -> float:
    from torchvision.io import ImageReadMode, decode_image, read_file

    torch.set_num_threads(1)
    blobs = [read_file(p) for p in paths]
    start, done = time.perf_counter(), 0
    while done < images:
        for blob in blobs:
            decode_image(blob, mode=ImageReadMode.RGB)
            done += 1
            if done >= images:
                break
    return time.perf_counter() - start


def decode_ceiling(source: ImageSource, cores: int, images: int, repeats: int) -> Measurement:
    """Full libjpeg-turbo decodes per second with one process per core (files in memory)."""
    result = Measurement("decode", note=f"full decodes, {cores} processes, files in RAM")
    shards = [list(source.files[i::cores]) for i in range(cores)]
    per = max(1, images // cores)
    with get_context("spawn").Pool(cores) as pool:
        pool.starmap(_decode_worker, [(s, min(per, 16)) for s in shards])  # warm-up
        for _ in range(repeats):
            start = time.perf_counter()
            pool.starmap(_decode_worker, [(s, per) for s in shards])
            result.rates.append(per * cores / (time.perf_counter() - start))
    return result


def _backend_for(cfg: DictConfig, name: str, device: str) -> BackendSpec:
    """The configured backend options when they are for this backend, else its defaults."""
    kind: type[BackendSpec] = {
        "dali": DaliBackend,
        "torch": TorchBackend,
        "synthetic": SyntheticBackend,
    }[name]
    base = to_spec(cfg.backend, BackendSpec)
    fields = asdict(base) if base.name == name else {}
    return kind(**{**fields, "name": name, "device": device})


# --------------------------------------------------------------------------- run


def run_bench(cfg: DictConfig) -> dict[str, Any]:
    bench = to_spec(cfg.bench, BenchSpec)
    spec = loader_spec(cfg, "train", rank=0, world_size=1)
    source = spec.source
    if not isinstance(source, ImageSource):
        raise DaliPipesError("bench needs image files: use data=folder, imagenet or sample")
    cores = cpu_share()
    workers = cores if bench.workers is None else bench.workers
    cuda = torch.cuda.is_available()

    def timed(name: str, epochs: Callable[[], Iterable[Any]]) -> Measurement:
        return measure(
            name,
            epochs,
            warmup_images=bench.warmup_images,
            min_images=bench.min_images,
            repeats=bench.repeats,
            cores=cores,
        )

    def with_backend(name: str, backend: BackendSpec, **changes: Any) -> Callable[[], Measurement]:
        def run() -> Measurement:
            start = time.perf_counter()
            # Each candidate hands batches over where it makes them: a trainer.device of the
            # config would move some candidates' batches and not others.
            candidate = replace(spec, backend=backend, output_device=None, **changes)
            with create_loader(candidate) as loader:
                built = time.perf_counter() - start
                result = timed(name, lambda: loader)
            if changes.get("cache"):
                result.note = f"decoded once in {built:.1f} s before timing"
            return result

        return run

    def on_shards(name: str, backend: BackendSpec) -> Callable[[], Measurement]:
        def run() -> Measurement:
            shards = _packed(cfg, bench.shards)
            result = with_backend(name, backend, source=shards)()
            result.note = f"{len(shards.layout.tars)} shards in {bench.shards}"  # type: ignore[union-attr]
            return result

        return run

    def peer(name: str, device_id: Callable[[], int | None]) -> Callable[[], Measurement]:
        """DALI's own example pipeline (:mod:`~dali_pipes.tools.dali_example`), our threads."""

        def run() -> Measurement:
            from dali_pipes.tools.dali_example import PeerLoader

            options = _backend_for(cfg, "dali", "auto")
            assert isinstance(options, DaliBackend)
            with PeerLoader(spec, options, device_id()) as loader:
                result = timed(name, lambda: loader)
            result.note = loader.note
            return result

        return run

    if {"dali-raw", "dali-raw-gpu"} & set(bench.candidates):
        from dali_pipes.tools.dali_example import peer_crop

        peer_crop(spec)  # a crop the peer cannot realise fails now, before any measuring

    torch_backend = _backend_for(cfg, "torch", "auto")
    assert isinstance(torch_backend, TorchBackend)
    runners: dict[str, Callable[[], Measurement]] = {
        "baseline": lambda: timed(
            "baseline", _baseline(source, spec.augment, spec.batch_size, workers, cuda)
        ),
        "torch": with_backend("torch", replace(torch_backend, num_workers=workers)),
        "dali-cpu": with_backend("dali-cpu", _backend_for(cfg, "dali", "cpu")),
        "dali-gpu": with_backend("dali-gpu", _backend_for(cfg, "dali", "gpu")),
        "synthetic": with_backend("synthetic", _backend_for(cfg, "synthetic", "auto")),
        "decode": lambda: decode_ceiling(source, cores, bench.min_images, bench.repeats),
        "torch-shards": on_shards("torch-shards", replace(torch_backend, num_workers=workers)),
        "dali-cpu-shards": on_shards("dali-cpu-shards", _backend_for(cfg, "dali", "cpu")),
        "dali-gpu-shards": on_shards("dali-gpu-shards", _backend_for(cfg, "dali", "gpu")),
        "cache-ram": with_backend("cache-ram", torch_backend, cache="ram"),
        "cache-gpu": with_backend("cache-gpu", replace(torch_backend, device="gpu"), cache="gpu"),
        "dali-raw": peer("dali-raw", lambda: None),
        "dali-raw-gpu": peer("dali-raw-gpu", lambda: local_gpu().index),  # dali-gpu's GPU
    }
    results: list[Measurement] = []
    for name in tqdm(bench.candidates, desc="bench", unit="loader", disable=None):
        if name in ("dali-gpu", "dali-gpu-shards", "cache-gpu", "dali-raw-gpu") and not cuda:
            results.append(Measurement(name, note="skipped: no CUDA device"))
            continue
        log.info("measuring %s", name)
        results.append(runners[name]())

    report = _report(cfg, source, spec.batch_size, workers, results)
    out = Path(bench.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, default=str))
    print(markdown(report))
    print(f"\nwritten to {out}")
    return report


def _packed(cfg: DictConfig, where: str) -> ImageSource:
    """The train split of the bench's data, packed at ``where`` (packed now if absent)."""
    from dali_pipes.data.shards import MANIFEST
    from dali_pipes.tools.pack import run_pack

    if not (Path(where) / MANIFEST).exists():
        log.info("packing the data into %s for the *-shards candidates", where)
        pack_cfg = OmegaConf.create({"data": cfg.data, "out": where, "pack": {}})
        pack_cfg.pack = OmegaConf.structured(PackSpec)
        run_pack(pack_cfg)
    source = open_source(ShardData(root=where), "train")
    assert isinstance(source, ImageSource)
    return source


def environment() -> dict[str, Any]:
    versions: dict[str, str | None] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
    }
    for module in ("torchvision", "nvidia.dali", "PIL", "numpy"):
        try:
            versions[module] = __import__(module, fromlist=["__version__"]).__version__
        except ImportError:
            versions[module] = None
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
        "commit": _commit(),
    }


def _commit() -> str | None:
    """The checkout's commit (with ``+dirty`` for uncommitted changes), if it is one (an
    installed package's folder may sit inside some other repository: not ours to name)."""
    import subprocess

    root = str(Path(__file__).resolve().parents[2])
    if not (Path(root) / "pyproject.toml").is_file():
        return None

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", root, *args], capture_output=True, text=True)
        if done.returncode:
            raise OSError(done.stderr)
        return done.stdout.strip()

    try:
        head = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except OSError:
        return None
    return head + ("+dirty" if dirty else "")


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
    source: ImageSource,
    batch: int,
    workers: int,
    results: list[Measurement],
) -> dict[str, Any]:
    by_name = {r.name: r for r in results}
    base = by_name.get("baseline")
    ceiling = by_name.get("decode")
    rows = []
    for r in results:
        row = r.as_dict()
        row["vs_baseline"] = r.median / base.median if base and base.rates and r.rates else math.nan
        # a DALI loader against its peer; the peer itself is 1.0, like the baseline
        peer = by_name.get(PEERS.get(r.name, r.name))
        peer = peer if peer and peer.name in PEERS.values() else None
        row["vs_peer"] = r.median / peer.median if peer and peer.rates and r.rates else math.nan
        row["pct_decode_ceiling"] = (
            100 * r.median / ceiling.median if ceiling and ceiling.rates and r.rates else math.nan
        )
        rows.append(row)
    return {
        **environment(),
        "dataset": {"root": source.root, "images": len(source), "classes": source.num_classes},
        "batch_size": batch,
        "workers": workers,
        "augment": OmegaConf.to_container(cfg.augment),
        "results": rows,
    }


#: DALI loaders and their peer, DALI's own example pipeline on the same device: the
#: ``vs_peer`` ratio is dali_pipes' framework tax (< 1) or gain (> 1).
PEERS = {"dali-cpu": "dali-raw", "dali-gpu": "dali-raw-gpu"}

COLUMNS = (
    ("loader", "name", "{}"),
    ("images/s (median)", "images_per_s_median", "{:.0f}"),
    ("min", "images_per_s_min", "{:.0f}"),
    ("max", "images_per_s_max", "{:.0f}"),
    ("× baseline", "vs_baseline", "{:.2f}"),
    ("× DALI example", "vs_peer", "{:.2f}"),
    ("% decode ceiling", "pct_decode_ceiling", "{:.0f}"),
    ("CPU util %", "cpu_util_pct", "{:.0f}"),
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
    cli.run(run_bench, "bench")
