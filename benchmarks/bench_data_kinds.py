"""``DALIIterator`` over the same photos stored three ways: a folder, a zip archive of it, and
a Hugging Face dataset of it (issue 47): training images per second on DALI's CPU.

Usage::

    python benchmarks/bench_data_kinds.py [--root ../shared/data/photos] [--repeats 5]
        [--batch 32] [--out benchmarks/data-kinds/data-kinds-cpu-photos.json]

The zip holds the folder's files stored as they are (JPEGs do not compress; ``--deflate``
compresses them anyway), the dataset is ``Dataset.from_dict`` of the folder's samples
saved with ``save_to_disk`` (the images' bytes in its Arrow file) and opened with
``load_from_disk``, both written once into a temporary folder. Each repeat times one
training epoch (the ImageNet recipe's 224 px crops) of every kind in turn, after one
untimed epoch each, so the kinds share the machine's noise. The median of the repeats,
each kind against the folder, goes to stdout as a Markdown table and, with every repeat,
the machine, versions, date, command and commit, to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def as_zip(root: Path, out: Path, deflate: bool) -> Path:
    """``root``'s files in a zip archive, class folders at its top."""
    method = zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED
    with zipfile.ZipFile(out, "w", method) as archive:
        for path in sorted(root.rglob("*")):
            if path.is_file() and path.parent != root:
                archive.write(path, path.relative_to(root).as_posix())
    return out


def as_dataset(root: Path, out: Path) -> Any:
    """``root``'s ImageFolder samples as a saved Hugging Face dataset, loaded back."""
    import datasets
    from torchvision.datasets import ImageFolder

    folder = ImageFolder(str(root))
    features = datasets.Features(
        {"image": datasets.Image(), "label": datasets.ClassLabel(names=folder.classes)}
    )
    datasets.Dataset.from_dict(
        {"image": [p for p, _ in folder.samples], "label": [y for _, y in folder.samples]},
        features=features,
    ).save_to_disk(str(out))
    return datasets.load_from_disk(str(out))


def epoch_rate(data: Any, batch: int) -> float:
    """Training images per second over one epoch (after one untimed epoch)."""
    from dali_pipes import DALIIterator

    with DALIIterator(data, batch_size=batch, device="cpu", drop_last=True) as loader:
        for _ in loader:  # warm-up: pipelines built, page cache filled
            pass
        loader.set_epoch(1)
        start, images = time.perf_counter(), 0
        for _, labels in loader:
            images += len(labels)
        return images / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=REPO.parent / "shared" / "data" / "photos")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--deflate", action="store_true")
    parser.add_argument(
        "--out", type=Path, default=REPO / "benchmarks" / "data-kinds" / "data-kinds-cpu.json"
    )
    args = parser.parse_args()

    from dali_pipes.tools.bench import environment

    with tempfile.TemporaryDirectory(prefix="data-kinds-") as tmp:
        kinds: dict[str, Any] = {
            "folder": str(args.root),
            "zip": str(as_zip(args.root, Path(tmp) / "photos.zip", args.deflate)),
            "hf-dataset": as_dataset(args.root, Path(tmp) / "dataset"),
        }
        rates: dict[str, list[float]] = {kind: [] for kind in kinds}
        for repeat in range(args.repeats):
            for kind, data in kinds.items():
                rates[kind].append(epoch_rate(data, args.batch))
            print(f"repeat {repeat}: " + ", ".join(f"{k} {v[-1]:.0f}" for k, v in rates.items()))
    median = {kind: statistics.median(values) for kind, values in rates.items()}
    print("\n| data | img/s (median) | vs folder | repeats |\n| --- | ---: | ---: | --- |")
    for kind, value in median.items():
        runs = ", ".join(f"{v:.0f}" for v in rates[kind])
        print(f"| {kind} | {value:.0f} | {value / median['folder']:.3f} | {runs} |")
    import datasets

    provenance = environment()
    provenance["versions"]["datasets"] = datasets.__version__
    record = {
        **provenance,
        "root": str(args.root),
        "batch": args.batch,
        "zip": "deflated" if args.deflate else "stored",
        "rates": rates,
        "median": median,
        "vs_folder": {kind: value / median["folder"] for kind, value in median.items()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(f"\nrecorded in {args.out}")


if __name__ == "__main__":
    main()
