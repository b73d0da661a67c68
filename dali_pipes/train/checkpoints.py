"""Checkpoints that are never half-written, and finding the latest one.

A checkpoint is written to a temporary file in the same directory, flushed to disk, then
renamed over its final name (:mod:`dali_pipes.data.files`): a reader sees the old file or
the new one, never a torn one, even if the process is killed mid-write. An unwritable or
full output directory fails with one clear message and leaves the previous checkpoint in
place; a temporary file a killed run left is removed when the next run starts.
"""

from __future__ import annotations

import pickle
import random
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dali_pipes.data.files import write_atomic
from dali_pipes.errors import DaliPipesError

# epoch_0003.pt: epoch 3 completed; epoch_0003_interrupted_at_batch_000120.pt: stopped
# inside epoch 3 after 120 batches. Either way the name says where training resumes.
_NAME = re.compile(r"^epoch_(\d{4,})(?:_interrupted_at_batch_(\d+))?\.pt$")


def checkpoint_path(directory: Path, epoch: int, interrupted_at: int | None = None) -> Path:
    """Where the checkpoint after ``epoch`` (or inside it, ``interrupted_at`` batches in) goes."""
    if interrupted_at is None:
        return directory / f"epoch_{epoch:04d}.pt"
    return directory / f"epoch_{epoch:04d}_interrupted_at_batch_{interrupted_at:06d}.pt"


def _position(path: Path) -> tuple[int, int] | None:
    """(epoch, batch) training resumes at from this checkpoint, from its name."""
    match = _NAME.match(path.name)
    if match is None:
        return None
    epoch, batch = int(match.group(1)), match.group(2)
    return (epoch + 1, 0) if batch is None else (epoch, int(batch))


def _found(directory: Path) -> list[tuple[tuple[int, int], Path]]:
    if not directory.is_dir():
        return []
    return sorted((pos, p) for p in directory.iterdir() if (pos := _position(p)) is not None)


def save_atomic(state: dict[str, Any], path: Path) -> None:
    """Write ``state`` to ``path`` so that ``path`` always holds a whole checkpoint
    (:func:`dali_pipes.data.files.write_atomic`); a failure is one line naming the path
    and the space needed."""
    write_atomic(
        path,
        lambda f: torch.save(state, f),
        needed=_tensor_bytes(state),
        hint="free space or choose another output_dir; the previous checkpoint is intact",
    )


def _tensor_bytes(obj: Any) -> int:
    """About how many bytes ``torch.save`` writes for ``obj``: its tensors' bytes."""
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, dict):
        return sum(_tensor_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_tensor_bytes(v) for v in obj)
    return 0


def latest(directory: Path) -> Path | None:
    """The checkpoint in ``directory`` that resumes furthest along, if any."""
    found = _found(directory)
    return found[-1][1] if found else None


def prune(directory: Path, keep: int) -> None:
    """Delete all but the ``keep`` furthest-along checkpoints."""
    for _, path in _found(directory)[:-keep]:
        path.unlink(missing_ok=True)


def load(path: Path) -> dict[str, Any]:
    """A checkpoint's contents, unpickling tensors and plain containers only
    (``weights_only=True``): a checkpoint file from elsewhere cannot run code on load."""
    try:
        state: dict[str, Any] = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        reason = str(exc).strip().splitlines()[0]
        raise DaliPipesError(
            f"cannot read checkpoint {path}: it holds objects other than tensors and plain "
            f"values ({reason}); it was not written by this version of dali_pipes"
        ) from None
    except (OSError, RuntimeError, EOFError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DaliPipesError(
            f"cannot read checkpoint {path} ({reason}): it is damaged; delete it (rm {path}) "
            "to resume from the one before it, or start afresh in another output_dir="
        ) from None
    return state


def rng_state(device: torch.device) -> dict[str, Any]:
    """This process's random generators, as tensors and plain numbers only, so that a
    checkpoint loads with ``torch.load(weights_only=True)`` (NumPy's state is an array)."""
    _, keys, pos, has_gauss, gauss = np.random.get_state(legacy=True)
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": {
            "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "gauss": float(gauss),
        },
        "python": random.getstate(),
    }
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def set_rng_state(state: dict[str, Any], device: torch.device) -> None:
    """Restore the generators :func:`rng_state` saved (CUDA's on ``device``)."""
    torch.set_rng_state(state["torch"])
    saved = state["numpy"]
    keys = saved["keys"].numpy().astype(np.uint32)
    np.random.set_state(("MT19937", keys, saved["pos"], saved["has_gauss"], saved["gauss"]))
    random.setstate(state["python"])
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)
