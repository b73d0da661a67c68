"""``python -m dali_pipes.sample DIR``: write the embedded sample dataset as an image folder.

The default training job generates this dataset in a cache folder by itself; this command
puts a copy where a user can see it and point any loader at it (``DIR/train`` and
``DIR/val`` are torchvision ``ImageFolder`` roots), so the tutorial and the how-to guides
run on real JPEG files without a download.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dali_pipes.data.sample_set import CLASSES, copy_sample_dataset, describe
from dali_pipes.data.specs import SampleData
from dali_pipes.errors import DaliPipesError, DataError, require


def write(out: Path, train_per_class: int, val_per_class: int) -> str:
    """Write the dataset to ``out`` and say what was written; a folder that already holds
    the same dataset is left as it is, any other existing folder is refused."""
    require(train_per_class >= 1, "--train-per-class", train_per_class, "must be >= 1")
    require(val_per_class >= 1, "--val-per-class", val_per_class, "must be >= 1")
    readme = out / "README.txt"
    wanted = describe(train_per_class, val_per_class)
    if out.exists():
        if readme.is_file() and readme.read_text() == wanted:
            return f"{out} already holds the sample dataset"
        raise DataError(f"{out} already exists: choose a new folder or remove it")
    copy_sample_dataset(out, train_per_class, val_per_class)
    total = len(CLASSES) * (train_per_class + val_per_class)
    return (
        f"wrote {total} JPEG files in {len(CLASSES)} classes to {out}: "
        f"{out / 'train'} ({train_per_class} per class) and {out / 'val'} "
        f"({val_per_class} per class)"
    )


def main(argv: list[str] | None = None) -> None:
    """``python -m dali_pipes.sample DIR [--train-per-class N] [--val-per-class N]``."""
    parser = argparse.ArgumentParser(
        prog="python -m dali_pipes.sample",
        description="Write the sample dataset (6 classes of drawn shapes as JPEG files) "
        "to DIR/train and DIR/val, as torchvision's ImageFolder reads them.",
    )
    parser.add_argument("out", type=Path, metavar="DIR", help="a folder that does not exist yet")
    parser.add_argument("--train-per-class", type=int, default=SampleData.train_per_class)
    parser.add_argument("--val-per-class", type=int, default=SampleData.val_per_class)
    args = parser.parse_args(argv)
    try:
        print(write(args.out, args.train_per_class, args.val_per_class))
    except DaliPipesError as exc:
        print(f"dali_pipes: error: {exc}", file=sys.stderr)
        sys.exit(2)
