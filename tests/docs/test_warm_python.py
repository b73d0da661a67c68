"""The docs' warm interpreter (scripts/warm_python.py) runs a command as a new interpreter
would: the same output, exit status, arguments, import path, streams and signals."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from docs_blocks import environment
from warm_python import WarmPython

SCRIPT = """\
import os, sys
print(__name__, sys.argv[1:], sys.path[0] == os.path.dirname(os.path.abspath(__file__)))
"""
PROBE = """\
import os, sys
names = sorted(k for k in globals() if not k.startswith("__"))
print(sys.argv, repr(sys.path[0]), names, os.environ["PROBE"], os.getcwd())
"""


@pytest.fixture(scope="module")
def shells(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict, dict]]:
    """A folder, and the environments of a cold shell and of one with a warm interpreter."""
    folder = tmp_path_factory.mktemp("warm")
    (folder / "script.py").write_text(SCRIPT)
    cold = environment(folder)
    with WarmPython(cold, folder) as server:
        warm = dict(cold, PATH=f"{server.bin}:{cold['PATH']}")
        yield folder, cold, warm


def run(line: str, folder: Path, env: dict[str, str], stdin: str = "") -> tuple[int, str]:
    done = subprocess.run(
        ["bash", "-c", line],
        cwd=folder,
        env=dict(env, PROBE="seen"),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode, done.stdout + done.stderr


@pytest.mark.parametrize(
    "line",
    [
        "python script.py a 'b c'",
        f"python -c '{PROBE}' x",
        "python -c 'import sys; print(sys.stdin.read().upper())'",
        "python -c 'raise SystemExit(3)'",
        "python -c 'raise SystemExit(\"a message\")'",
        "python -c 'import os; os.kill(os.getpid(), 15)'; echo $?",
        "python -c 'raise ValueError(\"boom\")' 2>&1 | tail -1",
        "python -m dali_pipes.train no_such_key=1",
    ],
)
def test_a_warm_command_gives_what_a_new_interpreter_gives(
    shells: tuple[Path, dict, dict], line: str
) -> None:
    folder, cold, warm = shells
    assert run(line, folder, warm, stdin="some input") == run(
        line, folder, cold, stdin="some input"
    )


def test_a_command_signalled_through_the_shim_ends_as_signalled(
    shells: tuple[Path, dict, dict],
) -> None:
    folder, _, warm = shells
    sleeper = "python -c 'import time; print(1, flush=True); time.sleep(60)'"
    line = f"{sleeper} & sleep 3; kill -TERM $!; wait $!; echo $?"
    code, out = run(line, folder, warm)
    assert code == 0 and out.split() == ["1", "143"]
