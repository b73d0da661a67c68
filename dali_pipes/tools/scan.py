"""``python -m dali_pipes.scan data=...``: find every file a training run would trip on.

Each file of each split gets its header checked (format, size, ``data.max_pixels``) and a
full decode by every decoder the configured run uses: libjpeg-turbo via torchvision
(:mod:`dali_pipes.image.decode`, the torch backend's and the caches'), and with
``backend=dali`` DALI's own CPU decoder and, where the run decodes on a GPU, nvJPEG, each
with the graph's own options (:meth:`~dali_pipes.backends.dali.graph.DaliGraph.decode`):
the decoders disagree on some files (junk before a JPEG frame header passes libjpeg-turbo,
not DALI). On all cores with a progress bar (fewer than 256 files: in this process). The
summary goes to stdout and the bad files, each with its reason, to a manifest
(``scan.out``); pass it back as ``data.exclude=<manifest>`` and the loaders leave those
files out before sharding, so every rank still sees the same number of samples and a run
with ``data.on_error=raise`` meets no decoder error.
"""

from __future__ import annotations

import collections
import copy
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig
from tqdm import tqdm

from dali_pipes.backends.base import loader_devices
from dali_pipes.backends.dali.blame import Probe
from dali_pipes.backends.dali.graph import DaliGraph, GraphDevices
from dali_pipes.config import cli
from dali_pipes.config.schemas import ScanSpec
from dali_pipes.config.specs import loader_spec, to_spec
from dali_pipes.data.interface import Rejects, Source, images_of
from dali_pipes.data.manifest import write_manifest
from dali_pipes.data.registry import open_source
from dali_pipes.data.sources import SyntheticSource
from dali_pipes.data.specs import DataSpec
from dali_pipes.errors import DataError
from dali_pipes.image.decode import Blob
from dali_pipes.runtime.distributed import cpu_share
from dali_pipes.runtime.pools import fresh_pool

log = logging.getLogger("dali_pipes.scan")


@dataclass(frozen=True)
class Decoders:
    """What each file is checked with: the header limit, and the DALI graphs (one per
    device the run decodes on) whose decoder must accept it too (none: torchvision only)."""

    max_pixels: int
    dali: tuple[DaliGraph, ...] = ()


_probes: dict[int, Probe] = {}  # this worker process's DALI decoders, built once
#: This worker process's sources and decoders (sent once, when the worker starts).
_work: tuple[list[Source], Decoders] | None = None
#: Samples a worker reads per call (a Parquet row group, neighbouring shard members).
CHUNK = 16
#: Fewer files than this are checked in this process when ``scan.workers`` is null: they
#: take less time than a pool's workers take to start.
POOL_FROM = 256


def check_file(path: str, decoders: Decoders | int) -> str:
    """ "" if every decoder decodes the file (a path or a URL) to an image of its header's
    size, else the reason (``decoders`` as a number: ``max_pixels``, torchvision only)."""
    from dali_pipes.data.storage import storage_for
    from dali_pipes.image.reads import DEFAULT_READ_TIMEOUT

    [blob] = storage_for(path).read_many([path], DEFAULT_READ_TIMEOUT)  # a file or an object
    return check_blob(blob, path, decoders)


def check_blob(blob: Blob, path: str, decoders: Decoders | int) -> str:
    """:func:`check_file` for a sample already read (or the error of its read)."""
    from dali_pipes.image.decode import decode_bytes, header_size

    if isinstance(decoders, int):
        decoders = Decoders(decoders)
    torch.set_num_threads(1)
    try:
        image = decode_bytes(blob, path, decoders.max_pixels)
        height, width = header_size(blob, path)
    except DataError as exc:
        return str(exc).removeprefix(f"{path}: ")
    if tuple(image.shape) != (3, height, width):
        return f"decodes to {tuple(image.shape[1:])} but its header says {(height, width)}"
    assert not isinstance(blob, DataError)
    whole = np.asarray([width, height], dtype=np.float32)
    for k, graph in enumerate(decoders.dali):
        probe = _probes.setdefault(k, Probe(graph, _no_hint))
        rejected = probe(blob, np.zeros(2, dtype=np.float32), whole)
        if rejected:
            where = "nvJPEG (the GPU decoder)" if graph.devices.on_gpu else "DALI's CPU decoder"
            return f"{where} rejects it, libjpeg-turbo does not; {rejected}"
    return ""


def _no_hint(kind: str) -> str:
    return f"a {kind} failure while checking files: run the scan again"


def _checked(
    todo: list[tuple[int, list[int]]], workers: int, sources: list[Source], decoders: Decoders
) -> Iterator[list[tuple[str, str]]]:
    """Each chunk of ``todo`` checked (:func:`_check`), by a pool of ``workers`` processes,
    or by this one for a single worker: a pool's workers fork from a fresh interpreter
    that imports torch first, seconds of CPU before the first file."""
    global _work
    if workers > 1:
        preload = [__name__, "torchvision.io"]
        with fresh_pool(workers, preload, _start_worker, (sources, decoders)) as pool:
            yield from pool.imap_unordered(_check, todo)
        return
    threads = torch.get_num_threads()  # check_blob sets one thread, as in a worker
    _start_worker(sources, decoders)
    try:
        yield from map(_check, todo)
    finally:
        _work = None
        _probes.clear()  # this process's DALI decoders, built for this scan
        torch.set_num_threads(threads)


def _start_worker(sources: list[Source], decoders: Decoders) -> None:
    global _work
    _work = (sources, decoders)


def _check(chunk: tuple[int, list[int]]) -> list[tuple[str, str]]:
    """(name, "" or the reason) of each sample of one source's chunk, read in one call."""
    assert _work is not None
    sources, decoders = _work
    source = sources[chunk[0]]
    blobs = source.read(chunk[1])
    return [
        (name := source.name(i), check_blob(blob, name, decoders))
        for i, blob in zip(chunk[1], blobs, strict=True)
    ]


def decoders_for(cfg: DictConfig, data: DataSpec) -> Decoders:
    """The decoders a run of ``cfg`` uses: torchvision, and with ``backend=dali`` DALI's CPU
    decoder and (where the run decodes on a GPU) nvJPEG, with the graph's options."""
    if cfg.backend.get("name") != "dali":
        return Decoders(data.max_pixels)
    listed = copy.deepcopy(cfg)
    listed.data.on_error, listed.data.exclude = "skip", None
    # The decoder's options only: no file list to send to every worker.
    spec = replace(loader_spec(listed, "train"), source=SyntheticSource(1, 1))
    devices = [GraphDevices.cpu()]
    made, _ = loader_devices(spec)
    if made.type == "cuda":
        devices.append(GraphDevices.gpu(made.index or 0))
    return Decoders(data.max_pixels, tuple(DaliGraph(spec, d, num_threads=1) for d in devices))


def kind_of(reason: str) -> str:
    """A short category for the summary: the reason without file-specific numbers."""
    head = reason.split(";")[0]
    head = re.sub(r"\(.*?\)", "(...)", head)
    return re.sub(r"\d+", "N", head).strip()


def run_scan(cfg: DictConfig) -> dict[str, Any]:
    """Check every sample of ``cfg.data``'s splits the way a run would; write the manifest
    of bad ones for ``data.exclude``; return the report."""
    scan = to_spec(cfg.scan, ScanSpec)
    data = to_spec(cfg.data, DataSpec)
    # List everything, the formats the backends refuse included: they are findings too.
    data = replace(data, on_error="skip", exclude=None)
    files: dict[str, str] = {}  # name -> "" or the reason it was left out at listing
    sources: list[Source] = []
    todo: list[tuple[int, list[int]]] = []  # (source, indices): each name checked once
    for split in scan.splits:
        source = images_of(open_source(data, split), "scan checks image files", "choose a dataset")
        sources.append(source)
        fresh = [i for i in range(len(source)) if source.name(i) not in files]
        files.update((source.name(i), "") for i in fresh)
        todo += [(len(sources) - 1, fresh[k : k + CHUNK]) for k in range(0, len(fresh), CHUNK)]
        if isinstance(source, Rejects):
            files.update(dict(source.rejected))
    decoders = decoders_for(cfg, data)
    total = sum(len(chunk) for _, chunk in todo)
    workers = scan.workers or (cpu_share() if total >= POOL_FROM else 1)
    with tqdm(total=total, desc="scan", unit="file", disable=None) as bar:
        for checked in _checked(todo, min(workers, len(todo)), sources, decoders):
            files.update(checked)
            bar.update(len(checked))
    bad = {path: reason for path, reason in files.items() if reason}
    write_manifest(Path(scan.out), bad.items())
    kinds = collections.Counter(kind_of(reason) for reason in bad.values())
    report = {
        "files": len(files),
        "good": len(files) - len(bad),
        "bad": len(bad),
        "kinds": kinds,
        "manifest": str(Path(scan.out)),
    }
    print(summary(report))
    return {**report, "bad_files": bad}


def summary(report: dict[str, Any]) -> str:
    """The report as the lines printed on the terminal."""
    lines = [f"scanned {report['files']} files: {report['good']} good, {report['bad']} bad"]
    for kind, count in report["kinds"].most_common():
        lines.append(f"  {count:6d}  {kind}")
    if report["bad"]:
        lines.append(
            f"manifest: {report['manifest']} (train with data.exclude={report['manifest']})"
        )
    return "\n".join(lines)


def main() -> None:
    """``python -m dali_pipes.scan``."""
    cli.run(run_scan, "scan")
