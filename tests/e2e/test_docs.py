"""The documentation's Python examples run as written, on the sample data.

Every fenced ``python`` block of ``docs/*.md`` runs in a fresh interpreter. A block that
needs what a test machine lacks (a GPU, ImageNet, the reader's own folder) says so where
the reader sees it, in its title (``title="needs ImageNet: not run by the tests"``), and is
reported as skipped with that title.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

DOCS = REPO / "docs"
FENCE = re.compile(r"^```(?P<info>python[^\n]*)\n(?P<code>.*?)^```", re.S | re.M)
NOT_RUN = "not run by the tests"


def examples(folder: Path = DOCS) -> list[tuple[str, str, str]]:
    """(page:line, the fence's info string, the code) of every Python block."""
    found = []
    for page in sorted(folder.glob("*.md")):
        text = page.read_text()
        for match in FENCE.finditer(text):
            line = text[: match.start()].count("\n") + 1
            found.append((f"{page.name}:{line}", match["info"], match["code"]))
    return found


def test_the_docs_have_examples_that_run_and_mark_the_ones_that_cannot() -> None:
    found = examples()
    runnable = [where for where, info, _ in found if NOT_RUN not in info]
    assert len(runnable) >= 3, runnable
    for where, info, _ in found:  # a skipped block names what it needs, in its title
        if NOT_RUN in info:
            assert re.fullmatch(r'python title="needs [^"]+: not run by the tests"', info), where


def test_the_extraction_finds_blocks_and_their_marks(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text(
        "# A\n\n```python\nx = 1\n```\n\n```bash\nls\n```\n\n"
        '```python title="needs a GPU: not run by the tests"\nimport cupy\n```\n'
    )
    assert examples(tmp_path) == [
        ("a.md:3", "python", "x = 1\n"),
        ("a.md:11", 'python title="needs a GPU: not run by the tests"', "import cupy\n"),
    ]


@pytest.mark.slow
@pytest.mark.parametrize(("where", "info", "code"), examples(), ids=[e[0] for e in examples()])
def test_every_python_example_in_the_docs_runs(
    where: str, info: str, code: str, tmp_path: Path
) -> None:
    if NOT_RUN in info:
        pytest.skip(f"{where}: {info.split('title=', 1)[1]}")
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"{where}:\n{done.stderr[-3000:]}"
