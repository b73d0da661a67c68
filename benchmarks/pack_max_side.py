"""``pack.max_side``: images/s on large photos, and top-1 on the shared photos, vs the folder.

1. Speed: packs the large photos (1.3-17.9 MP) with ``pack.max_side`` (and JPEGs stored
   baseline, the default), then times whole training epochs (``augment=imagenet``, batch 8)
   of DALI on the CPU and the torch backend over the folder and over the pack, after a
   warm-up epoch, in turn, ``--repeats`` times.
2. Accuracy: packs the shared photos (every one is larger than 512 px on its long side, so
   each is resized) the same way, then trains the small CNN (``trainer=quick``, 128 px
   crops, ``--epochs``) on the folder and on the pack, ``--seeds`` seeds each, and reads
   the last epoch's top-1 on the same images (the photos have no separate validation
   split: this compares what each copy lets the model learn, not generalisation).

The JSON has every rate and accuracy, the machine's load before and after, and the versions.
Usage::

    python benchmarks/pack_max_side.py [--large DIR] [--photos DIR] [--max-side 512] [OUT.json]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from parquet_vs_folder import machine  # the same provenance as the other data benches
from s3_vs_disk import epoch_rate  # the same timing as the other data benches

from dali_pipes import compose_config
from dali_pipes.tools.pack import run_pack

KINDS = ("torch", "dali-cpu")


def packed(root: Path, out: Path, max_side: int) -> dict[str, object]:
    """``root`` packed at ``out`` with ``pack.max_side``; the pack's manifest."""
    overrides = ["data=folder", f"data.root={root}", f"out={out}", f"pack.max_side={max_side}"]
    return run_pack(compose_config(overrides, config_name="pack"))


def accuracy(data: str, root: Path, seed: int, epochs: int, out: Path) -> float:
    """The last epoch's top-1 (%) of a short ``python -m dali_pipes.train`` run."""
    command = [sys.executable, "-m", "dali_pipes.train", f"data={data}", f"data.root={root}"]
    command += ["model=small_cnn", "trainer=quick", f"trainer.epochs={epochs}", f"seed={seed}"]
    command += ["augment.train.crop.size=128", "augment.val.crop.size=128"]
    command += ["augment.val.crop.resize=146", "data.batch_size=32", f"output_dir={out}"]
    subprocess.run(command, check=True, capture_output=True, timeout=3600)
    with open(out / "metrics.csv") as rows:
        return float(list(csv.DictReader(rows))[-1]["val_top1"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", type=Path, default=Path("benchmarks/pack-max-side.json"))
    parser.add_argument("--large", type=Path, default=Path("/work/shared/data/large"))
    parser.add_argument("--photos", type=Path, default=Path("/work/shared/data/photos"))
    parser.add_argument("--max-side", type=int, default=512)
    parser.add_argument("--epochs", type=int, default=3, help="timed epochs after a warm-up")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--train-epochs", type=int, default=20)
    parser.add_argument("--seeds", type=int, default=2)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pack-max-side-"))
    load_before = os.getloadavg()
    stored = {
        "large": packed(args.large, work / "large", args.max_side)["stored"],
        "photos": packed(args.photos, work / "photos", args.max_side)["stored"],
    }
    rates: dict[str, list[float]] = {f"{k}/{d}": [] for k in KINDS for d in ("folder", "pack")}
    large = work / "large"
    for _ in range(args.repeats):
        for kind in KINDS:
            for name, data, root in (("folder", "folder", args.large), ("pack", "shards", large)):
                rate = epoch_rate(kind, data, str(root), args.epochs, 8, "data.drop_last=false")
                rates[f"{kind}/{name}"].append(rate)
    top1: dict[str, list[float]] = {"folder": [], "pack": []}
    for seed in range(args.seeds):
        for name, data, root in (
            ("folder", "folder", args.photos),
            ("pack", "shards", work / "photos"),
        ):
            run = work / f"train-{name}-{seed}"
            top1[name].append(accuracy(data, root, seed, args.train_epochs, run))
    report = {
        **machine(),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "settings": {**vars(args), "out": str(args.out), "large": str(args.large),
                     "photos": str(args.photos)},
        "stored": stored,
        "rates": rates,
        "median": {name: statistics.median(values) for name, values in rates.items()},
        "top1": top1,
    }  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"| images/s, large photos | folder | pack.max_side={args.max_side} | pack ÷ folder |")
    print("| --- | ---: | ---: | ---: |")
    for kind in KINDS:
        folder, pack = (report["median"][f"{kind}/{d}"] for d in ("folder", "pack"))
        print(f"| {kind} | {folder:.1f} | {pack:.1f} | {pack / folder:.2f} |")
    print(f"\ntop-1 after {args.train_epochs} epochs, seeds 0..{args.seeds - 1}: {top1}")
    print(f"stored: {stored}")
    print(f"load average before {load_before}, after {report['load_average_after']}")


if __name__ == "__main__":
    main()
