"""Which dali_pipes made a record: its version and commit, for bench, doctor and selfcheck.

A record must name the code that ran, and only that code. A source tree names its version
in its own ``pyproject.toml`` (an installed package: its metadata). Its commit comes from
git only when the tree is a checkout of its own: a copy without ``.git`` (what a lent GPU
machine gets) may sit inside some other repository, whose commit git would otherwise
report. Such a copy is told its commit in :data:`COMMIT_VARIABLE`; without it the commit
is ``"unknown"``.
"""

from __future__ import annotations

import os
import subprocess
import tomllib
from importlib import metadata
from pathlib import Path

#: The environment variable that names the commit of a tree without ``.git`` of its own
#: (``DALI_PIPES_COMMIT=$(git rev-parse --short HEAD)`` where the copy was made).
COMMIT_VARIABLE = "DALI_PIPES_COMMIT"
UNKNOWN = "unknown"
_DIST = "dali-pipes"


def source_tree() -> Path | None:
    """The project folder this dali_pipes runs from (a checkout, or a copy of one), or
    None for an installed package."""
    root = Path(__file__).resolve().parents[2]
    try:
        project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    except (OSError, KeyError, TypeError, tomllib.TOMLDecodeError):
        return None
    return root if project.get("name") == _DIST else None


def version(tree: Path | None = None) -> str:
    """The version of the dali_pipes that runs: its tree's ``pyproject.toml`` (a source
    tree may run beside an installed release of another version), else the installed
    package's."""
    tree = tree or source_tree()
    if tree is not None:
        return str(tomllib.loads((tree / "pyproject.toml").read_text())["project"]["version"])
    try:
        return metadata.version(_DIST)
    except metadata.PackageNotFoundError:
        return UNKNOWN


def commit(tree: Path | None = None) -> str:
    """The commit of the dali_pipes that runs: git's (``+dirty`` with uncommitted changes)
    where ``tree`` (default: :func:`source_tree`) is a checkout of its own, else
    :data:`COMMIT_VARIABLE`, else ``"unknown"``; never that of a repository around it."""
    tree = tree if tree is not None else source_tree()
    if tree is not None and (tree / ".git").exists():
        try:
            if Path(_git(tree, "rev-parse", "--show-toplevel")).resolve() == tree.resolve():
                head = _git(tree, "rev-parse", "--short", "HEAD")
                dirty = _git(tree, "status", "--porcelain", "--untracked-files=no")
                return head + ("+dirty" if dirty else "")
        except OSError:
            pass
    return os.environ.get(COMMIT_VARIABLE, "").strip() or UNKNOWN


def _git(tree: Path, *args: str) -> str:
    """``git -C tree ARGS``'s output; OSError when git is missing or fails."""
    done = subprocess.run(["git", "-C", str(tree), *args], capture_output=True, text=True)
    if done.returncode:
        raise OSError(done.stderr.strip())
    return done.stdout.strip()
