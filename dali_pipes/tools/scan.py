"""``python -m dali_pipes.scan data=...``: find every file a training run would trip on.

Each file of each split gets its header checked (format, size, ``data.max_pixels``) and a
full CPU decode (:mod:`dali_pipes.image.decode`: libjpeg-turbo via torchvision, the decoder the
torch backend and the cache use), on all cores with a progress bar. The summary goes to
stdout and the bad files, each with its reason, to a manifest (``scan.out``); pass it back
as ``data.exclude=<manifest>`` and the loaders leave those files out before sharding, so
every rank still sees the same number of samples.
"""

from __future__ import annotations

import collections
import logging
import re
from dataclasses import replace
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig
from tqdm import tqdm

from dali_pipes.config import cli
from dali_pipes.config.schemas import ScanSpec
from dali_pipes.config.specs import to_spec
from dali_pipes.data.manifest import write_manifest
from dali_pipes.data.sources import ImageSource, open_source
from dali_pipes.data.specs import DataSpec
from dali_pipes.errors import DaliPipesError, DataError
from dali_pipes.runtime.distributed import cpu_share

log = logging.getLogger("dali_pipes.scan")


def check_file(path: str, max_pixels: int) -> str:
    """ "" if the file decodes to an image of its header's size, else the reason."""
    from dali_pipes.image.decode import decode_bytes, header_size, read_file

    torch.set_num_threads(1)
    try:
        blob = read_file(path)
        image = decode_bytes(blob, path, max_pixels)
        height, width = header_size(blob, path)
    except DataError as exc:
        return str(exc).removeprefix(f"{path}: ")
    if tuple(image.shape) != (3, height, width):
        return f"decodes to {tuple(image.shape[1:])} but its header says {(height, width)}"
    return ""


def _check(args: tuple[str, int]) -> tuple[str, str]:
    return args[0], check_file(*args)


def kind_of(reason: str) -> str:
    """A short category for the summary: the reason without file-specific numbers."""
    head = reason.split(";")[0]
    head = re.sub(r"\(.*?\)", "(...)", head)
    return re.sub(r"\d+", "N", head).strip()


def run_scan(cfg: DictConfig) -> dict[str, Any]:
    """Check every file of ``cfg.data``'s splits the way a run would; write the manifest of
    bad files for ``data.exclude``; return the report."""
    scan = to_spec(cfg.scan, ScanSpec)
    data = to_spec(cfg.data, DataSpec)
    # List everything, the formats the backends refuse included: they are findings too.
    data = replace(data, on_error="skip", exclude=None)
    files: dict[str, str] = {}  # path -> "" or the reason it was left out at listing
    for split in scan.splits:
        source = open_source(data, split)
        if not isinstance(source, ImageSource):
            raise DaliPipesError("scan needs image files: data=synthetic has none")
        files.update(dict.fromkeys(source.files, ""))
        files.update(dict(source.rejected))
    todo = [(path, data.max_pixels) for path, reason in files.items() if not reason]
    workers = scan.workers or cpu_share()
    with get_context("spawn").Pool(workers) as pool:
        results = pool.imap_unordered(_check, todo, chunksize=8)
        for path, reason in tqdm(results, total=len(todo), desc="scan", unit="file", disable=None):
            files[path] = reason
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
