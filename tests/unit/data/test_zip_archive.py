"""``data=zip``: an ImageFolder inside a zip archive, listed as torchvision lists the
extracted folder and read member by member (dali_pipes/data/zip_archive.py)."""

from __future__ import annotations

import os
import pickle
import shutil
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from torchvision.datasets import ImageFolder

from dali_pipes import ConfigError, DataError, build_loader, compose_config
from dali_pipes.data.zip_archive import ZipData, open_zip


def archive_of(files: dict[str, bytes], path: Path) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
    return path


def test_members_come_in_the_order_and_with_the_labels_imagefolder_gives_the_extracted_tree(
    tmp_path: Path,
) -> None:
    names = [
        "b/z.jpg", "a/sub/deeper/x.JPG", "a/y.png", "a/sub/w.jpeg", "b/notes.txt",
        "b/a.webp", "top.jpg", "__MACOSX/a/._y.png",
    ]  # fmt: skip
    archive = archive_of({n: n.encode() for n in names}, tmp_path / "t.zip")
    source = open_zip(ZipData(root=str(archive)), "train")
    with zipfile.ZipFile(archive) as z:
        z.extractall(tmp_path / "out")
    (tmp_path / "out" / "top.jpg").unlink()  # a file beside the classes: neither lists it
    shutil.rmtree(tmp_path / "out" / "__MACOSX")  # macOS's resource forks: not a class
    folder = ImageFolder(
        str(tmp_path / "out"), is_valid_file=lambda p: Path(p).suffix.lower() != ".txt"
    )
    rel = [Path(p).relative_to(tmp_path / "out").as_posix() for p, _ in folder.samples]
    assert list(source.members) == rel
    assert source.labels.tolist() == [y for _, y in folder.samples]
    assert source.classes == ("a", "b")  # __MACOSX is not a class
    assert source.name(0) == f"{archive.resolve()}:a/y.png"


def test_reads_from_many_threads_and_a_pickled_copy_give_each_members_bytes(
    tmp_path: Path,
) -> None:
    files = {f"c{k % 3}/{k:03d}.jpg": bytes([k]) * (100 + k) for k in range(60)}
    source = open_zip(ZipData(root=str(archive_of(files, tmp_path / "t.zip"))), "train")
    want = [np.frombuffer(files[m], dtype=np.uint8) for m in source.members]
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda i: source.read([i])[0], list(range(len(source))) * 3))
    assert all(np.array_equal(a, b) for a, b in zip(got, want * 3, strict=True))  # type: ignore[arg-type]
    copy = pickle.loads(pickle.dumps(source))
    assert np.array_equal(copy.read([5])[0], want[5])


def test_a_forked_process_opens_the_archive_again_rather_than_share_its_parents_handle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A forked worker inherits the parent's open file and its position: reading through it
    from both would interleave their seeks."""
    source = open_zip(ZipData(root=str(archive_of({"a/x.jpg": b"x"}, tmp_path / "t.zip"))), "train")
    first = source._handle()
    assert source._handle() is first
    monkeypatch.setattr(os, "getpid", lambda: -1)
    assert source._handle() is not first


def test_a_member_that_fails_its_checksum_is_a_bad_sample_named_by_archive_and_member(
    tmp_path: Path,
) -> None:
    archive = tmp_path / "t.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as z:
        z.writestr("a/good.jpg", b"good" * 50)
        z.writestr("a/bent.jpg", b"BENT" * 50)
    raw = bytearray(archive.read_bytes())
    raw[raw.index(b"BENT")] = ord("X")  # one byte changed after the CRC was written
    archive.write_bytes(bytes(raw))
    source = open_zip(ZipData(root=str(archive)), "train")
    good, bent = source.read(
        [source.members.index("a/good.jpg"), source.members.index("a/bent.jpg")]
    )
    assert isinstance(good, np.ndarray) and isinstance(bent, DataError)
    assert str(bent).startswith(f"{archive.resolve()}:a/bent.jpg: unreadable in the archive")


def test_what_cannot_be_read_or_listed_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "not.zip").write_bytes(b"plain text")
    for spec, pattern in [
        (ZipData(), r"^data\.root is not set"),
        (ZipData(root="s3://bucket/a.zip"), r"a zip archive is read from a local disk"),
        (ZipData(root=str(tmp_path / "gone.zip")), r"gone\.zip does not exist"),
        (ZipData(root=str(tmp_path / "not.zip")), r"not\.zip: not a readable zip archive"),
    ]:
        with pytest.raises((ConfigError, DataError), match=pattern):
            open_zip(spec, "train")
    flat = archive_of({"x.jpg": b"x"}, tmp_path / "flat.zip")
    with pytest.raises(DataError, match=r"flat\.zip has no class folders; expected <class>"):
        open_zip(ZipData(root=str(flat)), "train")
    tiff = archive_of({"a/x.tif": b"x", "a/y.jpg": b"y"}, tmp_path / "tiff.zip")
    with pytest.raises(DataError, match=r"tiff\.zip:a/x\.tif: \.tif images are not supported"):
        open_zip(ZipData(root=str(tiff)), "train")
    kept = open_zip(ZipData(root=str(tiff), on_error="skip"), "train")
    assert kept.members == ("a/y.jpg",) and kept.rejected[0][0].endswith("tiff.zip:a/x.tif")


def test_data_zip_trains_the_torch_backend_on_the_folders_batches(
    identity_tree: Path, tmp_path: Path
) -> None:
    archive = tmp_path / "tree.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for path in sorted(identity_tree.rglob("*.jpg")):
            z.write(path, "images/" + path.relative_to(identity_tree).as_posix())
    common = ["backend=torch", "backend.num_workers=0", "augment=small", "data.batch_size=4"]
    zipped = compose_config(
        [
            *common,
            "data=zip",
            f"data.root={archive}",
            "data.train_dir=images",
            "data.val_dir=images",
        ]
    )
    folder = compose_config([*common, "data=folder", f"data.root={identity_tree}"])
    for split in ("train", "val"):
        got, want = build_loader(zipped, split), build_loader(folder, split)
        for (x, y), (x0, y0) in zip(got, want, strict=True):
            assert (x == x0).all() and (y == y0).all()
