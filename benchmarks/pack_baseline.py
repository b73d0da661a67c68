"""Images/s of the photos as a folder, packed as they are, and packed baseline, side by side.

Packs the photos twice (``pack.baseline=false``: the files byte for byte; the default:
JPEGs stored baseline with optimised Huffman tables), then times whole training epochs
(``augment=imagenet``, batch 32) of the torch and DALI CPU backends over the folder and
both packs, after one warm-up epoch each. The six loaders are measured in turn,
``--repeats`` times, so a machine that gets busier slows all of them alike. It also
measures the full-decode rate of each pack's images (libjpeg-turbo, one process per
core, the bytes in memory): the decode ceiling of what was stored. The JSON has every
rate, what the pack converted, the machine's load before and after, and the versions.
Usage::

    python benchmarks/pack_baseline.py [PHOTOS_DIR] [OUT.json] [--epochs 2] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from pathlib import Path

from parquet_vs_folder import machine  # the same provenance as the other data benches
from s3_vs_disk import epoch_rate  # the same timing as the S3 and Parquet figures

from dali_pipes import compose_config
from dali_pipes.data.sources import open_shards
from dali_pipes.data.specs import ShardData
from dali_pipes.errors import DataError
from dali_pipes.tools.bench_baseline import decode_ceiling
from dali_pipes.tools.pack import run_pack

KINDS = ("torch", "dali-cpu")
DATA = ("folder", "as-is", "baseline")


def packed(photos: Path, out: Path, baseline: bool, shard_mb: float) -> dict[str, object]:
    """``photos`` packed at ``out``; the pack's manifest."""
    overrides = ["data=folder", f"data.root={photos}", f"out={out}"]
    overrides += [f"pack.shard_size_mb={shard_mb:g}", f"pack.baseline={str(baseline).lower()}"]
    return run_pack(compose_config(overrides, config_name="pack"))


def stored_images(root: Path) -> list[bytes]:
    """Every image of a pack's train split, as stored."""
    source = open_shards(ShardData(root=str(root)), "train")
    return [b.tobytes() for b in source.read(range(len(source))) if not isinstance(b, DataError)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("photos", nargs="?", type=Path, default=Path("/work/shared/data/photos"))
    parser.add_argument("out", nargs="?", type=Path, default=Path("benchmarks/pack-baseline.json"))
    parser.add_argument("--epochs", type=int, default=2, help="timed epochs after a warm-up")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--shard-mb", type=float, default=8.0)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pack-baseline-"))
    manifests = {
        "as-is": packed(args.photos, work / "as-is", False, args.shard_mb),
        "baseline": packed(args.photos, work / "baseline", True, args.shard_mb),
    }
    roots = {"folder": ("folder", args.photos)}
    roots |= {name: ("shards", work / name) for name in manifests}
    load_before = os.getloadavg()
    rates: dict[str, list[float]] = {f"{k}/{d}": [] for k in KINDS for d in DATA}
    decode: dict[str, list[float]] = {name: [] for name in manifests}
    cores = os.cpu_count() or 1
    images = {name: stored_images(work / name) for name in manifests}
    for _ in range(args.repeats):
        for kind in KINDS:
            for data in DATA:
                config, root = roots[data]
                rates[f"{kind}/{data}"].append(epoch_rate(kind, config, str(root), args.epochs))
        for name, blobs in images.items():
            decode[name] += decode_ceiling(blobs, cores, 2 * len(blobs), 1).rates
    report = {
        **machine(),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "photos": str(args.photos),
        "settings": {**vars(args), "photos": str(args.photos), "out": str(args.out)},
        "stored": manifests["baseline"]["stored"],
        "rates": rates,
        "median": {name: statistics.median(values) for name, values in rates.items()},
        "decode_rates": decode,
        "decode_median": {name: statistics.median(values) for name, values in decode.items()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print("| images/s | folder | pack, files as they are | pack, baseline | baseline / folder |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for kind in KINDS:
        folder, as_is, baseline = (report["median"][f"{kind}/{d}"] for d in DATA)
        print(f"| {kind} | {folder:.1f} | {as_is:.1f} | {baseline:.1f} | {baseline / folder:.2f} |")
    as_is, baseline = (report["decode_median"][d] for d in manifests)
    print(f"| full decode, {cores} cores | | {as_is:.1f} | {baseline:.1f} | |")
    print(f"\nstored: {report['stored']}")
    print(f"load average before {load_before}, after {report['load_average_after']}")


if __name__ == "__main__":
    main()
