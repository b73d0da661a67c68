"""The node store's files and processes: writes readers see whole or not at all, the
identity of a live process (a reused pid is told apart), and the sweep of what finished
runs left behind."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger("dali_pipes.data")


def publish(path: Path, data: bytes | np.ndarray, *, replace: bool = True) -> None:
    """Write ``path`` so that readers see all of it or nothing (and, with ``replace=False``,
    only the first writer's)."""
    temp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    with open(temp, "wb") as f:
        if isinstance(data, np.ndarray):
            np.save(f, data)
        else:
            f.write(data)
    try:
        if replace:
            os.replace(temp, path)
        else:
            with suppress(FileExistsError):
                os.link(temp, path)
    finally:
        temp.unlink(missing_ok=True)


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object from ``path``, or None when it is missing or not (yet) whole."""
    try:
        value = json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return value if isinstance(value, dict) else None


def identity(pid: int) -> dict[str, int]:
    """A process's identity: its pid and start time (a reused pid differs in the latter)."""
    return {"pid": pid, "start": start_time(pid) or 0}


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (tells a reused pid apart);
    None when it is gone or a zombie."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    except OSError:  # no /proc: at least tell whether the pid exists
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return 0
    fields = text.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):  # exited, not yet reaped
        return None
    return int(fields[19])


def alive(member: dict[str, int]) -> bool:
    """Whether the process ``member`` names (:func:`identity`) still runs."""
    start = start_time(int(member.get("pid", -1)))
    return start is not None and (start == member.get("start") or not member.get("start"))


def listdir(directory: Path) -> list[str]:
    """The names in ``directory`` (empty when it cannot be listed)."""
    try:
        return os.listdir(directory)
    except OSError:
        return []


def remove(paths: Sequence[Path]) -> None:
    """Delete ``paths``, ignoring those already gone."""
    for path in paths:
        with suppress(OSError):
            path.unlink()


def sweep(directory: Path, mine: str, grace: float) -> None:
    """Remove what runs that are gone left in ``directory``: every file of a key whose
    state names no live process, and any file of this user older than ``grace`` seconds
    whose key has no state at all (a cleanup cut short). Live keys are never touched."""
    user = f"dali_pipes-{os.getuid()}-"
    names = [n for n in listdir(directory) if n.startswith(user) and not n.startswith(mine)]
    keys = {n[len(user) :].split(".", 1)[0].split("-", 1)[0] for n in names}
    now = time.time()
    for key in keys:
        prefix = f"{user}{key}"
        state = read_json(directory / f"{prefix}.state")
        if state is not None and any(alive(m) for m in state.get("members", {}).values()):
            continue
        files = [directory / n for n in names if n.startswith(prefix)]
        if state is None:
            files = [f for f in files if older_than(f, now - grace)]
        if files:
            log.info(
                "data.cache=ram: removing %d files of a finished run (%s*)", len(files), prefix
            )
        remove(files)


def older_than(path: Path, when: float) -> bool:
    """Whether ``path`` was last modified before ``when`` (False when it is gone)."""
    try:
        return path.stat().st_mtime < when
    except OSError:
        return False
