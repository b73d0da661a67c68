"""``python -m dali_pipes.sample DIR`` writes the sample dataset where a user asks, as an
ImageFolder pair, once; it refuses a folder that holds anything else."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers.warm import python
from torchvision.datasets import ImageFolder

from dali_pipes.data.sample_set import CLASSES
from dali_pipes.errors import DataError
from dali_pipes.tools.sample import write


def test_the_dataset_is_written_as_two_image_folders_with_a_readme(tmp_path: Path) -> None:
    said = write(tmp_path / "shapes", train_per_class=2, val_per_class=1)
    assert said.startswith(f"wrote 18 JPEG files in 6 classes to {tmp_path / 'shapes'}")
    train = ImageFolder(str(tmp_path / "shapes" / "train"))
    assert tuple(train.classes) == tuple(sorted(CLASSES)) and len(train) == 12
    assert len(ImageFolder(str(tmp_path / "shapes" / "val"))) == 6
    assert "2 per class in train/" in (tmp_path / "shapes" / "README.txt").read_text()


def test_writing_it_again_leaves_it_and_another_folder_is_refused(tmp_path: Path) -> None:
    write(tmp_path / "shapes", 1, 1)
    assert write(tmp_path / "shapes", 1, 1).endswith("already holds the sample dataset")
    with pytest.raises(DataError, match="shapes already exists: choose a new folder"):
        write(tmp_path / "shapes", 2, 1)  # another size: not the same dataset
    (tmp_path / "mine").mkdir()
    with pytest.raises(DataError, match="mine already exists"):
        write(tmp_path / "mine", 1, 1)


def test_the_command_prints_one_line_and_a_refusal_is_one_line_with_exit_code_2(
    tmp_path: Path,
) -> None:
    command = [python(), "-m", "dali_pipes.sample", "--train-per-class", "1"]
    done = subprocess.run([*command, "--val-per-class", "1", "out"], cwd=tmp_path,
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0 and done.stdout.startswith("wrote 12 JPEG files"), done.stderr
    (tmp_path / "taken").mkdir()
    done = subprocess.run([*command, "taken"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 2
    assert (
        done.stderr == "dali_pipes: error: taken already exists: choose a new folder or remove it\n"
    )
