"""Per-category record of what scan and each backend accept from ../shared/data/corner.

Usage: python benchmarks/corner_report.py [CORNER_DIR]   (prints a Markdown table)
Compares with corner.csv's Pillow column. scan checks with the decoders of backend=dali
(libjpeg-turbo and DALI's CPU decoder). Each backend runs one validation epoch with
data.on_error=skip on the CPU; "accepted" files are the ones it yielded. Last, DALI on the
CPU runs the validation epoch with the scan's manifest as data.exclude and the default
data.on_error=raise (over a copy of the folder without mpo/, which holds no file with an
image extension: a layout error under raise, as for ImageFolder), and the column counts
what it yielded; a decoder error would end the script.
"""

from __future__ import annotations

import csv
import shutil
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from dali_pipes import build_loader, compose_config
from dali_pipes.data.manifest import read_manifest
from dali_pipes.tools.scan import run_scan


def main(corner: Path) -> None:
    rows = [
        r
        for r in csv.DictReader((corner.parent / "corner.csv").open())
        if not r["file"].endswith(".mpo")
    ]
    with tempfile.TemporaryDirectory() as tmp:
        manifest = Path(tmp) / "bad.csv"
        copy = Path(tmp) / "corner"  # without mpo/, for the run under raise (see above)
        shutil.copytree(corner, copy, ignore=lambda d, _: ["mpo"] if Path(d) == corner else [])
        run_scan(
            compose_config(
                ["data=folder", f"data.root={copy}", f"scan.out={manifest}", "scan.splits=[val]"],
                config_name="scan",
            )
        )
        back = {
            str(p.resolve()): str((corner / p.relative_to(copy)).resolve()) for p in copy.rglob("*")
        }
        rejected = {"scan": {back[p] for p in read_manifest(manifest)}}
        rejected["excluded"] = {back[p] for p in _excluded_run(copy, manifest)}
    for backend in ("torch", "dali"):
        cfg = compose_config(
            [
                "data=folder",
                f"data.root={corner}",
                f"backend={backend}",
                "backend.device=cpu",
                "data.on_error=skip",
                "data.batch_size=16",
                "augment.val.crop.resize=36",
                "augment.val.crop.size=32",
            ]
        )
        loader = build_loader(cfg, "val")
        for _ in loader:
            pass
        rejected[backend] = {str(Path(p).resolve()) for p in loader.bad_files}
    table: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in rows:
        path = str((corner / r["class"] / r["file"]).resolve())
        t = table[r["class"]]
        t["files"] += 1
        t["pillow"] += r["pillow_decode"] == "ok"
        for name, bad in rejected.items():
            t[name] += path not in bad
    columns = ["files", "pillow", "scan", "torch", "dali", "excluded"]
    print(
        "| category | files | Pillow decodes | scan accepts | torch accepts | DALI (CPU) accepts "
        "| DALI, exclude + raise |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    total: dict[str, int] = defaultdict(int)
    for name in sorted(table):
        t = table[name]
        for k, v in t.items():
            total[k] += v
        print("| " + " | ".join([name, *(str(t[c]) for c in columns)]) + " |")
    print("| **all** | " + " | ".join(str(total[c]) for c in columns) + " |")


def _excluded_run(root: Path, manifest: Path) -> set[str]:
    """DALI CPU, one validation epoch, data.exclude=manifest, on_error=raise: the resolved
    paths under ``root`` it did not yield (raises on any decoder error)."""
    cfg = compose_config(
        [
            "data=folder",
            f"data.root={root}",
            "backend=dali",
            "backend.device=cpu",
            f"data.exclude={manifest}",
            "data.batch_size=16",
            "augment.val.crop.resize=36",
            "augment.val.crop.size=32",
        ]
    )
    loader = build_loader(cfg, "val")
    files = getattr(loader.spec.source, "files", ())
    assert sum(len(labels) for _, labels in loader) == len(files)
    loader.close()
    yielded = {str(Path(f).resolve()) for f in files}
    return {str(p.resolve()) for p in root.rglob("*") if p.is_file()} - yielded


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/data/corner").resolve())
