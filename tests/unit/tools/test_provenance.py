"""A record names the dali_pipes that ran: its tree's version, and its own commit or none.

A lent GPU machine gets a copy of the tree without ``.git``, inside another repository:
bench's and doctor's JSON once carried that repository's commit, and selfcheck printed no
version at all for a tree that is not installed.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import REPO

import dali_pipes
from dali_pipes.tools import bench, provenance
from dali_pipes.tools.provenance import COMMIT_VARIABLE, commit, source_tree, version


def git(where: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(where), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def a_tree(where: Path) -> Path:
    """A project folder: this tree's pyproject.toml (what names dali_pipes' tree)."""
    where.mkdir(parents=True)
    shutil.copy(REPO / "pyproject.toml", where / "pyproject.toml")
    return where


@pytest.fixture
def enclosing(tmp_path: Path) -> Path:
    """A repository with one commit, around the folder the tree is copied into."""
    outer = tmp_path / "outer"
    outer.mkdir()
    git(outer, "init", "-q")
    (outer / "README").write_text("another project\n")
    git(outer, "add", "README")
    git(outer, "commit", "-q", "-m", "theirs")
    return outer


def test_a_copy_without_git_inside_another_repository_never_takes_its_commit(
    enclosing: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = a_tree(enclosing / "copy")
    theirs = git(enclosing, "rev-parse", "--short", "HEAD")
    monkeypatch.delenv(COMMIT_VARIABLE, raising=False)
    assert commit(tree) == "unknown"
    monkeypatch.setenv(COMMIT_VARIABLE, "ee0ee68")
    assert commit(tree) == "ee0ee68" != theirs


def test_a_checkout_of_its_own_gives_its_commit_dirty_or_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = a_tree(tmp_path / "checkout")
    git(tree, "init", "-q")
    git(tree, "add", "pyproject.toml")
    git(tree, "commit", "-q", "-m", "ours")
    ours = git(tree, "rev-parse", "--short", "HEAD")
    monkeypatch.setenv(COMMIT_VARIABLE, "not this")  # git's answer wins in a checkout
    assert commit(tree) == ours
    (tree / "pyproject.toml").write_text((tree / "pyproject.toml").read_text() + "\n")
    assert commit(tree) == f"{ours}+dirty"


def test_the_running_tree_is_found_and_named_by_its_own_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert source_tree() == REPO
    assert version() == dali_pipes.__version__
    record = bench.environment()
    assert record["versions"]["dali_pipes"] == dali_pipes.__version__
    assert record["commit"] == commit()
    # What the GPU machine's copy looks like to it: no tree of its own to ask git about.
    monkeypatch.setattr(provenance, "source_tree", lambda: None)
    monkeypatch.setenv(COMMIT_VARIABLE, "abc1234")
    assert bench.environment()["commit"] == "abc1234"


def test_no_benchmark_script_asks_git_for_its_commit_itself() -> None:
    """Each record a benchmark script writes takes its commit from :func:`commit` (git's
    answer in a copy would be the enclosing repository's); only the cold-clone timing, which
    makes its own clone, asks git."""
    asking = [
        path.name
        for path in sorted((REPO / "benchmarks").glob("*.py"))
        if "rev-parse" in path.read_text()
    ]
    assert asking == []
