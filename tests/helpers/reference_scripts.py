"""Reference-style training scripts run as their users run them, and their torchvision
twins: the same file with its ``DALIIterator`` loader lines put back to torch's
``DataLoader`` (the drop-in claim is that those lines are the only difference)."""

from __future__ import annotations

import difflib
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from helpers.warm import python


def with_dataloader(script: Path, lines: Mapping[str, str], out: Path) -> Path:
    """``script`` written to ``out`` with each line that starts (after its indent) with a
    key of ``lines`` replaced by that key's value: the torchvision version of a script."""
    swapped = []
    for line in script.read_text().splitlines(keepends=True):
        key = next((k for k in lines if line.strip().startswith(k)), None)
        swapped.append(lines[key] if key else line)
    out.write_text("".join(swapped))
    return out


def changed_lines(ours: Path, theirs: Path) -> list[str]:
    """The lines removed from ``ours`` and added in ``theirs``, with their +/- signs."""
    diff = difflib.unified_diff(
        ours.read_text().splitlines(), theirs.read_text().splitlines(), lineterm="", n=0
    )
    return [d for d in diff if d[:1] in "+-" and not d.startswith(("+++", "---"))]


def run_script(script: Path, data: Path, args: Sequence[str]) -> str:
    """Run ``script --data-path data *args`` in a fresh interpreter; its stdout, or the
    test fails with the end of its stderr."""
    done = subprocess.run(
        [python(), str(script), "--data-path", str(data), *args],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout
