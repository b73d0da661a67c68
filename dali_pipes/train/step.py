"""How a training step runs, whatever the task: autocast, memory format, a step cap, the
progress bar, gradient clipping; and the autocast context and memory format it implies."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class StepConfig:
    """How a step runs: autocast dtype, memory format, a step cap, the progress bar, clipping."""

    autocast: torch.dtype | None
    channels_last: bool
    max_steps: int | None = None
    progress: bool = False
    clip_grad_norm: float | None = None  # max norm of all gradients together; None = off

    def autocasting(self, device: torch.device) -> Any:
        """This step's autocast context on ``device`` (off without a dtype)."""
        return torch.autocast(device.type, dtype=self.autocast, enabled=self.autocast is not None)


def prepare(images: torch.Tensor, cfg: StepConfig) -> torch.Tensor:
    """A batch in the step's memory format (a no-op when the loader already gives it)."""
    if cfg.channels_last:
        return images.contiguous(memory_format=torch.channels_last)
    return images
