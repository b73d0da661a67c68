"""A torchvision-reference-style detection script runs on ``DALIIterator(CocoDetection)``,
unchanged but for its loader lines.

tests/probes/detection_reference.py has the shape of torchvision's
``references/detection/train.py`` (``get_dataset`` wrapping ``CocoDetection`` for v2 with
the ``hflip`` preset, ``train_one_epoch`` with the first epoch's warm-up, ``evaluate``
reading the COCO ground truth from ``data_loader.dataset.coco``). The same file with its two
loader lines put back to ``torch.utils.data.DataLoader`` is the torchvision run: the test
checks that the lines are the only difference, trains one epoch on the sample objects
written as COCO, and evaluates one saved model through both loaders.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import TESTS
from helpers.reference_scripts import changed_lines, run_script, with_dataloader

from dali_pipes.data.sample_objects import ensure_sample_objects

pytest.importorskip("pycocotools")

SCRIPT = TESTS / "probes" / "detection_reference.py"
DATALOADER = {
    "data_loader = DALIIterator(": (
        "    data_loader = torch.utils.data.DataLoader(dataset, batch_sampler=train_batch_sampler, "
        "num_workers=2, collate_fn=collate_fn)\n"
    ),
    "data_loader_test = DALIIterator(": (
        "    data_loader_test = torch.utils.data.DataLoader(dataset_test, batch_size=1, "
        "sampler=test_sampler, num_workers=2, collate_fn=collate_fn)\n"
    ),
}
SMALL = ["--model", "fasterrcnn_mobilenet_v3_large_320_fpn", "--device", "cpu", "-b", "4",
         "--min-size", "192", "--max-size", "320"]  # fmt: skip


@pytest.fixture(scope="module")
def coco_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample objects written as COCO: 24 training and 8 validation images."""
    return ensure_sample_objects(str(tmp_path_factory.mktemp("coco")), 24, 8)


def torchvision_version(tmp_path: Path) -> Path:
    """The script with its loader lines put back to torch's DataLoader."""
    return with_dataloader(SCRIPT, DATALOADER, tmp_path / "detection_torchvision.py")


def run(script: Path, root: Path, *args: str) -> str:
    return run_script(script, root, [*SMALL, *args])


def test_only_the_detection_scripts_loader_lines_differ(tmp_path: Path) -> None:
    changed = changed_lines(SCRIPT, torchvision_version(tmp_path))
    assert len(changed) == 4 and all("data_loader" in line for line in changed), changed


@pytest.mark.slow
def test_the_detection_reference_trains_one_epoch_and_a_saved_model_evaluates_alike(
    coco_root: Path, tmp_path: Path
) -> None:
    out = run(SCRIPT, coco_root, "--epochs", "1", "--print-freq", "2",
              "--output-dir", str(tmp_path))  # fmt: skip
    assert re.search(r"Epoch: \[0\] \[0/\d+\] loss [\d.]+ loss_classifier", out), out
    assert "Test: 8 images" in out and "It looks like the dataset has" not in out
    assert re.search(r"Average Precision  \(AP\) @\[ IoU=0.50:0.95 .* = [\d.]+", out), out

    def evaluation(text: str) -> list[str]:
        found = [line for line in text.splitlines() if line.startswith(("Test:", " Average"))]
        assert found, text
        return found

    saved = ["--test-only", "--resume", str(tmp_path / "model_0.pth")]
    dali = evaluation(run(SCRIPT, coco_root, *saved))
    reference = evaluation(run(torchvision_version(tmp_path), coco_root, *saved))
    assert dali == reference
