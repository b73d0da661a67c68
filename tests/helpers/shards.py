"""Pack a folder with ``python -m dali_pipes.pack``'s function."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dali_pipes import compose_config
from dali_pipes.tools.pack import run_pack


def pack(root: str | Path, out: str | Path, *extra: str) -> dict[str, Any]:
    overrides = ["data=folder", f"data.root={root}", f"out={out}", *extra]
    return run_pack(compose_config(overrides, config_name="pack"))
