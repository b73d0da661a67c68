"""One set of ImageFolder listing rules for every tree of class folders: a folder on disk
and the same tree in a zip archive list the same samples and leave out the same files for
the same reasons."""

from __future__ import annotations

import logging
import zipfile
from pathlib import Path

import pytest

from dali_pipes.data.sources import discover_folder
from dali_pipes.data.zip_archive import ZipData, open_zip
from dali_pipes.errors import DataError

TREE = {
    "apple/b.jpg": b"jpeg",
    "apple/sub/a.png": b"png",
    "apple/notes.txt": b"ignored",
    "apple/scan.tif": b"refused",
    "empty/readme.md": b"ignored",
    "pear/c.JPEG": b"jpeg",
}


def both(tmp_path: Path) -> tuple[Path, Path]:
    folder, archive = tmp_path / "tree", tmp_path / "tree.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for name, data in TREE.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(data)
            z.writestr(name, data)
    return folder, archive


def test_a_folder_and_its_zip_list_the_same_samples_and_leave_out_the_same_files(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder, archive = both(tmp_path)
    with caplog.at_level(logging.WARNING):
        on_disk = discover_folder(folder, on_error="skip")
        zipped = open_zip(ZipData(root=str(archive), on_error="skip"), "train")
    assert [Path(f).relative_to(folder).as_posix() for f in on_disk.files] == list(zipped.members)
    assert zipped.members == ("apple/b.jpg", "apple/sub/a.png", "pear/c.JPEG")
    assert on_disk.labels.tolist() == zipped.labels.tolist() == [0, 0, 2]
    assert on_disk.classes == zipped.classes == ("apple", "empty", "pear")
    reasons = [(Path(n).name, why) for n, why in on_disk.rejected]
    assert reasons == [(Path(n).name, why) for n, why in zipped.rejected]
    assert reasons == [("scan.tif", ".tif images are not supported; convert it to JPEG or PNG")]
    empty = [r.getMessage() for r in caplog.records if "empty has no usable images" in r.message]
    assert len(empty) == 2  # the empty class is kept, with a warning, by both


def test_under_raise_both_stop_at_the_same_refused_file(tmp_path: Path) -> None:
    folder, archive = both(tmp_path)
    errors = []
    for make in (
        lambda: discover_folder(folder),
        lambda: open_zip(ZipData(root=str(archive)), "train"),
    ):
        with pytest.raises(DataError) as caught:
            make()
        errors.append(str(caught.value))
    assert all(
        e.endswith(
            "scan.tif: .tif images are not supported; convert it to JPEG or PNG, or remove it"
        )
        for e in errors
    )
