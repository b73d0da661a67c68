"""``python -m dali_pipes.<command>`` without paying the imports again: a warm interpreter.

A docs page runs its commands as a reader would, each in a new process, and so do the
tests (tests/helpers/warm.py). Most of one short command's time on a small machine is
start-up: importing torch, DALI and dali_pipes, and torch's compiler stack, which the
first optimizer imports. A warm interpreter imports them once (what they made frozen out
of the garbage collector's sight, which DALI calls at every exit); each ``python -m
dali_pipes.<command>`` is then a process forked from it, with the command's own
arguments, working directory, environment and standard streams (buffered as a new
interpreter would buffer them), run as ``python -m`` runs a module, and ended as an
interpreter ends (threads joined, ``atexit`` handlers run). The server ends with the
process that started it, even one killed. ``python -c CODE``, ``python SCRIPT.py``,
``python -m torch.distributed.run`` (whose ranks ``--no-python`` with this ``python`` makes
warm too), each with ``-u`` or not, and the ``torchrun`` script (with this ``python`` for
its ranks) go the same way; anything else (other flags) runs the real interpreter, and so
does a command whose environment differs from the server's in a variable that acts when
an interpreter or a library starts (:func:`acts_at_start`: the import path, OpenMP's
threads, ...), which a forked process would not see.

Pieces: :class:`WarmPython` starts the server (``serve``) and writes ``python`` and
``torchrun`` shims into a folder to put first on ``PATH``; the ``python`` shim hands
matching command lines to :func:`client`, which passes its streams to the server over a
Unix socket, relays ``SIGINT``/``SIGTERM``/``SIGHUP`` to the command and exits with its
status.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

#: What the server imports before it forks commands (what they import first anyway: a
#: training run's loader, feed and TensorBoard writer among them).
PRELOAD = (
    "dali_pipes",
    "dali_pipes.config.cli",
    "dali_pipes.train.run",
    "dali_pipes.backends.dali.feed",
    "dali_pipes.backends.dali.blame",
    "torch._dynamo",
    "torch.distributed.launcher.api",  # what torch.distributed.run imports (not itself)
    "torch.utils.tensorboard",
    "torchvision.io",
    "nvidia.dali",
)
#: The commands the shim sends to the server: ``python -m`` of these modules (dali_pipes'
#: commands and torchrun's launcher), ``python -c CODE`` and ``python SCRIPT.py``.
MODULES = ("dali_pipes.", "torch.distributed.run ")
#: Seconds a command waits for the server's socket to appear.
START_TIMEOUT = 120.0
#: Prefixes of environment variables read when an interpreter or a library it imports
#: starts, not when a command uses them.
_AT_START = ("PYTHON", "OMP_", "MKL_", "OPENBLAS_", "KMP_", "LD_", "LC_", "LANG", "TORCH",
             "DALI_", "HYDRA_")  # fmt: skip
#: Those of them read on use: each command's streams are made anew (``PYTHONUNBUFFERED``);
#: dali_pipes reads its own when it needs them; torchrun's for its ranks (the python it
#: starts them with, the elastic agent's, NCCL's) when it starts them or they join.
_ON_USE = ("PYTHONUNBUFFERED", "PYTHON_EXEC", "DALI_PIPES_", "TORCHELASTIC_", "TORCH_NCCL_")
_RELAYED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class WarmPython:
    """A warm interpreter for commands run with ``env`` (the page's environment) in
    ``cwd`` (where the server starts too, so that it imports what they would), and the
    folder of its ``python`` shim (:attr:`bin`, to put first on ``PATH``). Stop it with
    :meth:`close` (a context manager)."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="warm-"))  # short: a socket path <108
        self.socket = self.folder / "s"
        self.bin = self.folder / "bin"
        self.bin.mkdir()
        real = sys.executable
        here = Path(__file__).resolve()
        shim = self.bin / "python"
        matched = [f'"-m {name}"*' for name in MODULES] + ['"-c "*', '*.py" "*', "*.py"]
        torchrun = Path(real).parent / "torchrun"  # the launcher script beside python
        if torchrun.is_file():
            matched.append(f"{shlex.quote(str(torchrun))}*")
        # `-u` (how torchrun starts its ranks) is passed on, warm or not.
        shim.write_text(
            "#!/bin/sh\n"
            'u=; if [ "$1" = -u ]; then u=-u; shift; fi\n'
            f'case "$1 $2 " in {"|".join(matched)}) warm=1;; *) warm=;; esac\n'
            'if [ -n "$warm" ]; then\n'
            f"  exec {shlex.quote(real)} -I -S {shlex.quote(str(here))} "
            f'{shlex.quote(str(self.socket))} $u "$@"\n'
            "fi\n"
            f'exec {shlex.quote(real)} $u "$@"\n'
        )
        shim.chmod(0o755)
        (self.bin / "python3").symlink_to("python")
        if torchrun.is_file():  # the launcher warm, and its ranks (PYTHON_EXEC: their python)
            launcher = self.bin / "torchrun"
            launcher.write_text(
                "#!/bin/sh\n"
                f'PYTHON_EXEC="${{PYTHON_EXEC:-{shim}}}" exec {shlex.quote(str(shim))} '
                f'{shlex.quote(str(torchrun))} "$@"\n'
            )
            launcher.chmod(0o755)
        started = {k: v for k, v in env.items() if acts_at_start(k)}
        (self.folder / "env.json").write_text(json.dumps(started))
        code = f"import sys; sys.path.insert(0, {str(here.parent)!r}); import warm_python; "
        code += f"warm_python.serve({str(self.socket)!r})"
        self.server = subprocess.Popen(
            [real, "-c", code],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.server.pid, signal.SIGKILL)  # the server and any command left
        self.server.wait()
        for path in (self.bin / "python3", self.bin / "python", self.bin / "torchrun", self.socket):
            path.unlink(missing_ok=True)
        (self.folder / "env.json").unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            self.bin.rmdir()
            self.folder.rmdir()

    def __enter__(self) -> WarmPython:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def acts_at_start(name: str) -> bool:
    """Whether the environment variable ``name`` acts when a process starts (an
    interpreter's flags and import path, OpenMP's and BLAS's threads, the locale, what
    torch, DALI or Hydra read at import): a command forked from the server would not see
    a value of its own."""
    return name.startswith(_AT_START) and not name.startswith(_ON_USE)


_THIS_PROCESS: list[WarmPython] = []


def this_process(env: dict[str, str] | None = None) -> WarmPython:
    """This process's warm interpreter, shared by all that run commands in it (the docs'
    pages, the tests): started on first use (again if it died) in an empty folder of its
    own, with ``env`` (by default this process's environment), and stopped when the
    process exits. A command whose start-up variables differ from those runs cold."""
    import atexit
    import shutil

    if _THIS_PROCESS and _THIS_PROCESS[0].server.poll() is None:
        return _THIS_PROCESS[0]
    if not _THIS_PROCESS:
        atexit.register(_close_this_process)
    else:
        _THIS_PROCESS.pop().close()
    home = tempfile.mkdtemp(prefix="warm-home-")
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    _THIS_PROCESS.append(WarmPython(dict(os.environ if env is None else env), Path(home)))
    return _THIS_PROCESS[0]


def _close_this_process() -> None:
    for server in _THIS_PROCESS:
        server.close()


# ---------------------------------------------------------------------------- server


def serve(path: str) -> None:
    """Listen on ``path``, import :data:`PRELOAD`, then fork one process per request."""
    import gc
    import importlib

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)  # clients wait in the backlog while the imports run
    for name in PRELOAD:
        with contextlib.suppress(Exception):  # a command that needs it fails as it would
            importlib.import_module(name)
    # What the imports made lives as long as any command: out of the collector's sight, a
    # command's collections (DALI's at exit among them) skip it, and do not write to
    # (copy) the pages it shares with the server.
    gc.collect()
    gc.freeze()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the request processes reap themselves
    threading.Thread(target=_end_with, args=(os.getppid(),), daemon=True).start()
    while True:
        conn, _ = listener.accept()
        if os.fork() == 0:
            listener.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            _request(conn)  # never returns
        conn.close()


def _end_with(parent: int) -> None:
    """End the server (not the commands it forked) once ``parent`` is gone: a test process
    killed before it could stop its server leaves none behind."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)


def _request(conn: socket.socket) -> None:
    """One request: fork the command, tell the client its pid, relay its exit status."""
    try:
        data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)  # the fds come with the head
        size = struct.unpack("!I", data[:4])[0]
        message = data[4:] + _exactly(conn, size - len(data) + 4)
        request = json.loads(message)
        pid = os.fork()
        if pid == 0:
            conn.close()
            _command(request, fds)  # never returns
        for fd in fds:
            os.close(fd)
        conn.sendall(f"{pid}\n".encode())
        threading.Thread(target=_kill_when_gone, args=(conn, pid), daemon=True).start()
        _, raw = os.waitpid(pid, 0)
        conn.sendall(f"{os.waitstatus_to_exitcode(raw)}\n".encode())
    finally:
        os._exit(0)


def _kill_when_gone(conn: socket.socket, pid: int) -> None:
    """The client went away (killed, timed out) before the command ended: end it too."""
    with contextlib.suppress(OSError):
        while conn.recv(1):
            pass
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _command(request: dict[str, Any], fds: list[int]) -> None:
    """Become ``python -m MODULE ARGS`` (or ``-c CODE``, or ``SCRIPT``): the client's
    streams, folder, environment and arguments, then the code run as ``__main__``, then an
    interpreter's exit."""
    import atexit
    import builtins
    import random
    import runpy

    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    _fresh_streams(unbuffered=request["unbuffered"] or bool(os.environ.get("PYTHONUNBUFFERED")))
    random.seed()  # a fresh interpreter's own seeds, not the server's
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    for number in _RELAYED:
        default = signal.default_int_handler if number == signal.SIGINT else signal.SIG_DFL
        signal.signal(number, default)
    main = sys.modules["__main__"].__dict__  # a fresh interpreter's, not the server's
    main.clear()
    main.update(__name__="__main__", __builtins__=builtins, __doc__=None, __spec__=None)
    flag, rest = request["argv"][1], request["argv"][2:]
    code = 0
    try:
        if flag == "-m":  # python -m MODULE ARGS
            sys.argv, sys.path[0] = list(rest), request["cwd"]
            runpy._run_module_as_main(rest[0])  # type: ignore[attr-defined]  # as -m does
        elif flag == "-c":  # python -c CODE ARGS
            sys.argv, sys.path[0] = ["-c", *rest[1:]], ""
            exec(compile(rest[0], "<string>", "exec"), main)
        else:  # python SCRIPT ARGS
            sys.argv = [flag, *rest]
            sys.path[0] = os.path.dirname(os.path.abspath(flag))
            runpy.run_path(flag, run_name="__main__")
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException:  # what the interpreter prints and returns for an uncaught one
        sys.excepthook(*sys.exc_info())
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]  # as at an interpreter's exit
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _fresh_streams(unbuffered: bool) -> None:
    """``sys.stdout`` and ``sys.stderr`` made for the command's descriptors as a new
    interpreter makes them: stdout line-buffered on a terminal, else in blocks; stderr by
    lines; both unbuffered under ``PYTHONUNBUFFERED`` (what a run printed before it was
    killed is then in its output), whatever the server's own were made with."""
    import io

    for fd, name in ((1, "stdout"), (2, "stderr")):
        old = getattr(sys, name)
        raw = io.FileIO(fd, "w", closefd=False)
        binary: Any = raw if unbuffered else io.BufferedWriter(raw)  # a raw file or a buffer
        stream = io.TextIOWrapper(
            binary,
            encoding=old.encoding,
            errors=old.errors,
            newline="\n",
            line_buffering=not unbuffered and (name == "stderr" or raw.isatty()),
            write_through=unbuffered,
        )
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _exit_code(code: object) -> int:
    """The status ``sys.exit(code)`` gives: an integer as it is, None 0, else 1 (printed)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _exactly(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the warm interpreter's client went away")
        data += chunk
    return data


# ---------------------------------------------------------------------------- client


def client(path: str, argv: list[str], unbuffered: bool = False) -> int:
    """Run ``python ARGV`` (``python -u ARGV``: ``unbuffered``) in the server at ``path``,
    with this process's streams, folder and environment; relay signals to it; return its
    exit status."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    deadline = time.monotonic() + START_TIMEOUT
    while True:  # the server binds its socket a moment after it starts
        try:
            conn.connect(path)
            break
        except (FileNotFoundError, ConnectionRefusedError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    request = {"argv": argv, "unbuffered": unbuffered, "cwd": os.getcwd(), "env": dict(os.environ)}
    message = json.dumps(request).encode()
    socket.send_fds(conn, [struct.pack("!I", len(message)) + message], [0, 1, 2])
    reply = conn.makefile("r")
    pid = int(reply.readline())

    def relay(number: int, _: object) -> None:
        os.kill(pid, number)

    for number in _RELAYED:
        signal.signal(number, relay)
    line = reply.readline()
    return int(line) if line.strip() else 1


def _same_start(path: str) -> bool:
    """Whether this environment and the server's (written beside its ``path``) agree on
    every variable that acts at start-up (:func:`acts_at_start`)."""
    with open(os.path.join(os.path.dirname(path), "env.json")) as f:
        server = json.load(f)
    mine = {k: v for k, v in os.environ.items() if acts_at_start(k)}
    return bool(mine == server)


def main() -> None:
    """The shim's entry: ``warm_python.py SOCKET [-u] -m MODULE ARGS`` (or ``-c``, a script).
    A command whose start-up environment differs from the server's runs cold."""
    if not _same_start(sys.argv[1]):
        os.execv(sys.executable, [sys.executable, *sys.argv[2:]])
    unbuffered = sys.argv[2] == "-u"
    status = client(sys.argv[1], ["python", *sys.argv[2 + unbuffered :]], unbuffered)
    if status < 0:  # killed by a signal: end the same way, as the shell expects
        if -status != signal.SIGKILL:  # whose handler cannot be set, nor needs to be
            signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    sys.exit(status)


if __name__ == "__main__":
    main()
