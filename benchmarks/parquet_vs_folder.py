"""Images/s of ``data=parquet`` against ``data=folder`` over the same photos, side by side.

Writes the photos (an ImageFolder tree) as a Parquet dataset in the Hugging Face Hub
layout (``data/train-0000K-of-0000N.parquet``, the Hub's Image struct, ClassLabel names,
row groups of ``--rows-per-group`` rows, 100 as the ``datasets`` library writes image
datasets), then times whole training epochs of the torch and DALI CPU backends over the
folder and over the Parquet files, after one warm-up epoch each. The four loaders are
measured in turn, ``--repeats`` times (so a machine that gets busier slows all of them
alike); the JSON has every rate, the machine's load before and after, and the versions.
It also times reading alone (the source's ``read`` over one epoch's batches, nothing
decoded; a fresh copy of the source each pass, so the Parquet row groups are read again)
in CPU seconds of this process, which a busy machine disturbs less than wall time.
Usage::

    python benchmarks/parquet_vs_folder.py [PHOTOS_DIR] [OUT.json] [--epochs 2] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import platform
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import torch
from s3_vs_disk import epoch_rate  # the same timing as the S3 figures (benchmarks/)
from torchvision.datasets import ImageFolder

from dali_pipes import compose_config
from dali_pipes.config.specs import loader_spec
from dali_pipes.data.sampling import sampler_for
from dali_pipes.data.specs import SamplingSpec
from dali_pipes.tools import provenance

KINDS = ("torch", "dali-cpu")
DATA = ("folder", "parquet")


def write_hub(photos: Path, out: Path, files: int, rows_per_group: int, compression: str) -> Path:
    """``photos`` as ``out/data/train-0000K-of-0000N.parquet`` in ImageFolder order."""
    folder = ImageFolder(str(photos))
    image = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    rows = [{"bytes": Path(p).read_bytes(), "path": Path(p).name} for p, _ in folder.samples]
    table = pa.table(
        {"image": pa.array(rows, type=image), "label": pa.array(folder.targets, pa.int64())}
    )
    features = {
        "image": {"_type": "Image"},
        "label": {"names": folder.classes, "_type": "ClassLabel"},
    }
    table = table.replace_schema_metadata(
        {"huggingface": json.dumps({"info": {"features": features}})}
    )
    (out / "data").mkdir(parents=True, exist_ok=True)
    per = -(-table.num_rows // files)
    for k in range(files):
        path = out / "data" / f"train-{k:05d}-of-{files:05d}.parquet"
        pq.write_table(
            table.slice(k * per, per), path, row_group_size=rows_per_group, compression=compression
        )
    return out


def read_cost(data: str, root: Path, passes: int) -> dict[str, float]:
    """Microseconds of CPU and of wall time per image to read one epoch's batches of the
    train split (32 per read), each pass on a fresh copy of the source."""
    cfg = compose_config([f"data={data}", f"data.root={root}", "backend=torch"])
    source = loader_spec(cfg, "train", rank=0, world_size=1).source
    order = sampler_for(source, SamplingSpec()).batches(0, 32)
    cpu = wall = 0.0
    for _ in range(passes):
        fresh = pickle.loads(pickle.dumps(source))  # no row group cached
        start_cpu, start = time.process_time(), time.perf_counter()
        for batch in order:
            fresh.read(batch)
        cpu += time.process_time() - start_cpu
        wall += time.perf_counter() - start
    images = passes * len(source)
    return {"cpu_us": 1e6 * cpu / images, "wall_us": 1e6 * wall / images}


def machine() -> dict[str, Any]:
    """What the figures were taken on, and how busy it was."""
    import nvidia.dali

    commit = provenance.commit()
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": commit,
        "cpus": os.cpu_count(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "dali": nvidia.dali.__version__,
        "pyarrow": pa.__version__,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("photos", nargs="?", type=Path, default=Path("/work/shared/data/photos"))
    parser.add_argument(
        "out", nargs="?", type=Path, default=Path("benchmarks/parquet-vs-folder.json")
    )
    parser.add_argument("--epochs", type=int, default=2, help="timed epochs after a warm-up")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--files", type=int, default=2, help="Parquet files of the split")
    parser.add_argument("--rows-per-group", type=int, default=100)
    parser.add_argument(
        "--compression", default="snappy", help="of the Parquet pages: pyarrow's default, snappy"
    )
    args = parser.parse_args()
    hub = write_hub(
        args.photos, Path(tempfile.mkdtemp(prefix="parquet-vs-folder-")), args.files,
        args.rows_per_group, args.compression,
    )  # fmt: skip
    roots = {"folder": args.photos, "parquet": hub}
    load_before = os.getloadavg()
    rates: dict[str, list[float]] = {f"{k}/{d}": [] for k in KINDS for d in DATA}
    for _ in range(args.repeats):
        for kind in KINDS:
            for data in DATA:
                rate = epoch_rate(kind, data, str(roots[data]), args.epochs)
                rates[f"{kind}/{data}"].append(rate)
    reads = {data: read_cost(data, roots[data], 5 * args.repeats) for data in DATA}
    report = {
        **machine(),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "photos": str(args.photos),
        "images": len(ImageFolder(str(args.photos)).samples),
        "settings": {**vars(args), "photos": str(args.photos), "out": str(args.out)},
        "rates": rates,
        "median": {name: statistics.median(values) for name, values in rates.items()},
        "read_us_per_image": reads,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print("| backend | folder | parquet | parquet / folder |")
    print("| --- | ---: | ---: | ---: |")
    for kind in KINDS:
        folder, parquet = (report["median"][f"{kind}/{d}"] for d in DATA)
        print(f"| {kind} | {folder:.1f} | {parquet:.1f} | {parquet / folder:.2f} |")
    for data in DATA:
        cost = reads[data]
        print(f"read alone, {data}: {cost['cpu_us']:.0f} us CPU, {cost['wall_us']:.0f} us wall")
    print(f"\nload average before {load_before}, after {report['load_average_after']}")


if __name__ == "__main__":
    main()
