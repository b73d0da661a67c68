"""Every file dali_pipes writes is whole or absent: full disks, read-only folders, kills."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from helpers.disks import fill, tmpfs
from helpers.errors import one_line

from dali_pipes.data.files import WriteError, remove_stale, write_atomic, write_text


def test_a_write_that_fills_the_disk_keeps_the_previous_file_and_leaves_no_temporary(
    tmp_path: Path,
) -> None:
    with tmpfs(tmp_path / "disk", 256) as disk:
        target = disk / "metrics.csv"
        write_text(target, "epoch\n0\n")
        fill(disk, leave=4096)
        with pytest.raises(WriteError) as exc:
            write_text(target, "x" * 200_000, hint="free space or choose another output_dir")
        message = one_line(exc)
        assert str(target) in message and "No space left on device" in message
        assert "about 195.3 KB needed" in message and "choose another output_dir" in message
        assert target.read_text() == "epoch\n0\n"
        assert sorted(p.name for p in disk.iterdir()) == ["filler.bin", "metrics.csv"]


def test_torch_saves_failed_write_is_reported_as_the_full_disk_it_is(tmp_path: Path) -> None:
    import torch

    with tmpfs(tmp_path / "disk", 256) as disk, pytest.raises(WriteError) as exc:
        write_atomic(disk / "x.pt", lambda f: torch.save(torch.zeros(100_000), f), needed=400_000)
    assert "No space left on device" in one_line(exc) and "about 390.6 KB needed" in one_line(exc)
    assert list(disk.iterdir()) == []


def test_a_read_only_folder_is_one_line_naming_the_file(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "ro", 64, read_only=True) as ro, pytest.raises(WriteError) as exc:
        write_text(ro / "deep" / "config.yaml", "a: 1\n")
    assert str(ro / "deep" / "config.yaml") in one_line(exc)
    assert "Read-only file system" in one_line(exc)


def test_a_written_file_has_the_mode_a_plain_open_gives(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        write_text(tmp_path / "a.txt", "a")
        (tmp_path / "b.txt").write_text("b")
    finally:
        os.umask(old)
    mode = stat.S_IMODE((tmp_path / "a.txt").stat().st_mode)
    assert mode == stat.S_IMODE((tmp_path / "b.txt").stat().st_mode) == 0o644


def test_what_a_killed_writer_left_is_removed_and_nothing_else(tmp_path: Path) -> None:
    for name in (".epoch_0001.pt.k2j3.tmp", "shard-000002.tar.partial", "epoch_0000.pt", "a.tmp"):
        (tmp_path / name).write_bytes(b"x")
    removed = remove_stale(tmp_path)
    assert sorted(p.name for p in removed) == [
        ".epoch_0001.pt.k2j3.tmp",
        "shard-000002.tar.partial",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.tmp", "epoch_0000.pt"]
