"""``data.on_error=skip`` under torchrun (2 ranks, gloo, a real Accelerate run): real photos
with corner-case files mixed into their class folders. Both ranks yield the same number of
samples and batches every epoch (a substitute fills each bad file's slot), so
``gather_for_metrics`` and DDP never wait on a rank that ran short, training finishes, and
every bad file is reported."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import CORNER, REPO
from helpers.once import made_once
from helpers.runs import torchrun_command

from dali_pipes.errors import DataError
from dali_pipes.image.decode import decode_bytes, read_file

PHOTO_CLASSES = 3
CORNER_PER_FOLDER = 2


def mix(real_photos: Path, root: Path) -> Path:
    """The first classes of the real photos with the first files of every corner/ folder
    mixed in among them (round robin over the classes), in ``root``."""
    classes = sorted(p for p in real_photos.iterdir() if p.is_dir())[:PHOTO_CLASSES]
    for folder in classes:
        shutil.copytree(folder, root / folder.name)
    corner = [
        f
        for d in sorted(p for p in CORNER.iterdir() if p.is_dir())
        for f in sorted(x for x in d.iterdir() if x.suffix.lower() in (".jpg", ".jpeg"))[
            :CORNER_PER_FOLDER
        ]
    ]
    for k, path in enumerate(corner):
        shutil.copy(path, root / classes[k % len(classes)].name / f"m{k:03d}_{path.name}")
    return root


@pytest.fixture(scope="session")
def skip_under_torchrun(
    real_photos: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Path]:
    """The mixed folder, and what each of 2 torchrun ranks saw training over it with each
    backend in turn, in one launch (tests/probes/skip_probe.py): ``<backend>/rank<r>.json``.
    Made once per test run (helpers/once.py); read-only."""
    if not CORNER.is_dir():
        pytest.skip(f"corner-case files not found at {CORNER}")

    def make(folder: Path) -> None:
        mixed = mix(real_photos, folder / "mixed")
        out = folder / "out"
        probe = str(REPO / "tests" / "probes" / "skip_probe.py")
        done = subprocess.run(
            torchrun_command(2, probe, str(mixed), str(out), "dali", "torch"),
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-3000:]

    folder, _ = made_once(tmp_path_factory, "skip-under-torchrun", make)
    return folder / "mixed", folder / "out"


def undecodable(root: Path) -> set[str]:
    """The files torchvision's decoder (the torch backend's) rejects."""
    bad = set()
    for path in sorted(root.rglob("*.jp*g")):
        try:
            decode_bytes(read_file(str(path)), str(path), 100_000_000)
        except DataError:
            bad.add(str(path))
    return bad


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["dali", "torch"])
def test_two_ranks_with_bad_files_under_skip_stay_in_step_and_report_every_bad_file(
    skip_under_torchrun: tuple[Path, Path], backend: str
) -> None:
    mixed_photos, out = skip_under_torchrun
    out = out / backend
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]
    files = sum(1 for _ in mixed_photos.rglob("*.jp*g"))
    per_rank = (files + 1) // 2  # DistributedSampler's share, padded
    for epoch in ("0", "1"):
        rows = [r["epochs"][epoch] for r in ranks]
        for key in ("batches", "samples", "val_batches", "val_samples"):
            assert rows[0][key] == rows[1][key], (key, rows)
        assert rows[0]["samples"] == rows[0]["val_samples"] == per_rank
        assert rows[0]["batches"] == ranks[0]["train_len"] == -(-per_rank // 4)
        # gather_for_metrics of a loader Accelerate did not prepare keeps the padding
        assert rows[0]["gathered"] == rows[0]["val_gathered"] == 2 * per_rank
        assert rows[0]["skipped"] + rows[1]["skipped"] > 0
    reported = set(ranks[0]["bad_files"]) | set(ranks[1]["bad_files"])
    expected = undecodable(mixed_photos)
    assert expected and all(re.match(r"m\d{3}_", Path(p).name) for p in reported)
    if backend == "torch":
        assert reported == expected
    else:  # DALI's decoder is the judge there; the files no decoder reads are among them
        assert {p for p in expected if "truncated" in p or "empty" in p} <= reported
