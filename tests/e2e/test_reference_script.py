"""A torchvision-reference-style training script runs on DALIIterator, unchanged but for
its loader lines.

tests/probes/classification_reference.py has the shape of torchvision's
``references/classification/train.py`` (``train_one_epoch``, ``evaluate`` reading
``len(data_loader.dataset)``, ``load_data`` with the reference's presets, ``main``) and
builds its loaders with ``DALIIterator(ImageFolder(root, transform=...))``. The same file
with those two lines put back to ``torch.utils.data.DataLoader`` is the torchvision run:
the test checks that the lines are the only difference, trains one epoch on DALI, and
evaluates the same seeded model through both loaders (the batches agree within the parity
bound, so the accuracy and the loss do too).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import TESTS
from helpers.reference_scripts import changed_lines, run_script, with_dataloader

SCRIPT = TESTS / "probes" / "classification_reference.py"
DATALOADER = {
    "data_loader = DALIIterator(": (
        "    data_loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, "
        "sampler=train_sampler, num_workers=2)\n"
    ),
    "data_loader_test = DALIIterator(": (
        "    data_loader_test = torch.utils.data.DataLoader(dataset_test, "
        "batch_size=args.batch_size, sampler=test_sampler, num_workers=2)\n"
    ),
}
SMALL = ["--model", "mobilenet_v3_small", "--device", "cpu", "-b", "32", "--train-crop-size",
         "64", "--val-resize-size", "72", "--val-crop-size", "64"]  # fmt: skip


#: The script reports top-5 accuracy, as torchvision's reference does: a dataset needs at
#: least five classes.
TOP_K = 5


@pytest.fixture(scope="module")
def photo_classes(real_photos: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Real photos in at least five class folders: the shared photos (24 classes), or in a
    bare clone the 13 shipped ones (3 classes), each linked into a class of its own."""
    if sum(1 for p in real_photos.iterdir() if p.is_dir()) >= TOP_K:
        return real_photos
    root = tmp_path_factory.mktemp("photo-classes")
    for k, photo in enumerate(sorted(real_photos.rglob("*.jpg"))):
        (root / f"c{k:02d}").mkdir()
        (root / f"c{k:02d}" / photo.name).symlink_to(photo)
    return root


def torchvision_version(tmp_path: Path) -> Path:
    """The script with its loader lines put back to torch's DataLoader."""
    return with_dataloader(SCRIPT, DATALOADER, tmp_path / "classification_torchvision.py")


def run(script: Path, root: Path, *args: str) -> str:
    return run_script(script, root, [*SMALL, *args])


def test_only_the_loader_lines_differ(tmp_path: Path) -> None:
    changed = changed_lines(SCRIPT, torchvision_version(tmp_path))
    assert len(changed) == 4 and all("data_loader" in line for line in changed), changed


@pytest.mark.slow
def test_the_reference_script_trains_and_evaluates_on_dali(
    photo_classes: Path, tmp_path: Path
) -> None:
    out = run(SCRIPT, photo_classes, "--epochs", "1", "--auto-augment", "ta_wide",
              "--random-erase", "0.1", "--print-freq", "2")  # fmt: skip
    assert "Epoch: [0] [0/" in out and re.search(r"Test:  Acc@1 [\d.]+ Acc@5 [\d.]+ loss", out)
    assert "It looks like the dataset has" not in out  # every sample evaluated once


@pytest.mark.slow
def test_the_same_model_evaluates_alike_through_dali_and_torchvisions_loader(
    photo_classes: Path, tmp_path: Path
) -> None:
    def figures(text: str) -> tuple[float, float]:
        found = re.search(r"Acc@1 ([\d.]+) Acc@5 [\d.]+ loss ([\d.]+)", text)
        assert found is not None, text
        return float(found.group(1)), float(found.group(2))

    dali = figures(run(SCRIPT, photo_classes, "--test-only"))
    reference = figures(run(torchvision_version(tmp_path), photo_classes, "--test-only"))
    samples = sum(1 for p in photo_classes.rglob("*") if p.suffix.lower() == ".jpg")
    assert abs(dali[0] - reference[0]) <= 100.0 / samples + 1e-6  # one image at most
    assert dali[1] == pytest.approx(reference[1], rel=1e-3)
