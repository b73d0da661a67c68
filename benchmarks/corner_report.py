"""Per-category record of what scan and each backend accept from ../shared/data/corner.

Usage: python benchmarks/corner_report.py [CORNER_DIR]   (prints a Markdown table)
Compares with corner.csv's Pillow column. Each backend runs one validation epoch with
data.on_error=skip on the CPU; "accepted" files are the ones it yielded.
"""

from __future__ import annotations

import csv
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
        run_scan(
            compose_config(
                ["data=folder", f"data.root={corner}", f"scan.out={manifest}", "scan.splits=[val]"],
                config_name="scan",
            )
        )
        rejected = {"scan": set(read_manifest(manifest))}
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
    columns = ["files", "pillow", "scan", "torch", "dali"]
    print(
        "| category | files | Pillow decodes | scan accepts | torch accepts | DALI (CPU) accepts |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    total: dict[str, int] = defaultdict(int)
    for name in sorted(table):
        t = table[name]
        for k, v in t.items():
            total[k] += v
        print(
            f"| {name} | {t['files']} | {t['pillow']} | {t['scan']} | {t['torch']} | {t['dali']} |"
        )
    print("| **all** | " + " | ".join(str(total[c]) for c in columns) + " |")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/data/corner").resolve())
