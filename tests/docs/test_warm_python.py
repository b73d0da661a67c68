"""The docs' warm interpreter (scripts/warm_python.py) runs a command as a new interpreter
would: the same output, exit status, arguments, import path, streams and signals."""

from __future__ import annotations

import subprocess
import sys
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
    (folder / "lib").mkdir()
    (folder / "lib" / "extra.py").write_text("X = 'from PYTHONPATH'\n")
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
        "python -m torch.distributed.run --standalone --nproc_per_node=1 script.py a 2>&1",
        "torchrun --standalone --nproc_per_node=1 script.py a 2>&1",
        "PYTHONUNBUFFERED= python -u -c 'import sys; print(sys.stdout.write_through)'",
        # Streams buffered as a new interpreter's: by lines on stderr, unbuffered or not
        # as the command's own PYTHONUNBUFFERED says (the server's is set).
        "PYTHONUNBUFFERED= python -c 'import sys; o, e = sys.stdout, sys.stderr; print("
        "o.write_through, o.line_buffering, e.write_through, e.line_buffering)'",
        "PYTHONUNBUFFERED= python -c 'import os; print(\"unflushed\"); os.kill(os.getpid(), 9)'"
        " | cat; echo ${PIPESTATUS[0]}",
        # The garbage a command makes is collected (the server's own objects are frozen).
        "python -c 'import gc, weakref\nclass A: pass\na = A(); a.me = a; r = weakref.ref(a)"
        "\ndel a; gc.collect(); print(r() is None)'",
        # What acts at start-up, which a forked command could not see: run cold.
        "PYTHONPATH=lib python -c 'import extra; print(extra.X)'",
        "OMP_NUM_THREADS=3 python -c 'import torch; print(torch.get_num_threads())'",
    ],
)
def test_a_warm_command_gives_what_a_new_interpreter_gives(
    shells: tuple[Path, dict, dict], line: str
) -> None:
    folder, cold, warm = shells
    assert run(line, folder, warm, stdin="some input") == run(
        line, folder, cold, stdin="some input"
    )


PRELOADED = "python -c 'import sys; print(\"torch._dynamo\" in sys.modules)'"


def test_a_command_runs_warm_unless_its_start_up_environment_differs(
    shells: tuple[Path, dict, dict],
) -> None:
    folder, _, warm = shells
    assert run(PRELOADED, folder, warm) == (0, "True\n")
    assert run(f"OMP_NUM_THREADS=7 {PRELOADED}", folder, warm) == (0, "False\n")
    assert run(f"PYTHONPATH=lib {PRELOADED}", folder, warm) == (0, "False\n")
    # torchrun's variables for its ranks are read when a rank joins: still warm.
    assert run(f"TORCHELASTIC_RUN_ID=x {PRELOADED}", folder, warm) == (0, "True\n")
    # The ranks the torchrun script starts (`python -u`; more than one would be given
    # OMP_NUM_THREADS=1, which this server was not: cold), unless PYTHON_EXEC says otherwise.
    (folder / "preloaded.py").write_text(PRELOADED.split("'")[1])
    rank = "torchrun --standalone --nproc_per_node=1 preloaded.py"
    assert run(rank, folder, warm) == (0, "True\n")
    assert run(rank, folder, dict(warm, PYTHON_EXEC=sys.executable)) == (0, "False\n")


def test_a_warm_commands_collections_skip_what_the_server_imported(
    shells: tuple[Path, dict, dict],
) -> None:
    """A full collection in a forked command would otherwise walk (and copy) every object
    the imports made; DALI collects at every exit."""
    folder, cold, warm = shells
    frozen = "python -c 'import gc; print(gc.get_freeze_count() > 100_000)'"
    assert run(frozen, folder, warm) == (0, "True\n")
    assert run(frozen, folder, cold) == (0, "False\n")


def test_a_command_signalled_through_the_shim_ends_as_signalled(
    shells: tuple[Path, dict, dict],
) -> None:
    folder, _, warm = shells
    sleeper = "python -c 'import time; print(1, flush=True); time.sleep(60)'"
    line = f"{sleeper} & sleep 3; kill -TERM $!; wait $!; echo $?"
    code, out = run(line, folder, warm)
    assert code == 0 and out.split() == ["1", "143"]
