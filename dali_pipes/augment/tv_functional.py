"""torchvision's ``transforms.v2.functional``, imported on first use.

Importing torchvision imports ``torchvision.models`` and with it ``torch._dynamo``, more CPU
time than torch itself; a DALI training run, a ``python -m`` tool or a DataLoader worker
that never calls a torchvision function should not pay it at start-up. Modules that call
torchvision's functions from their torch realisations import :data:`F` from here: type
checkers see the real module, and at run time the first attribute read imports it.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING, Any

_NAME = "torchvision.transforms.v2.functional"


class _OnFirstUse:
    """Stands for the module until an attribute is read, then forwards to it."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        return getattr(module(), name)


def module() -> ModuleType:
    """torchvision's ``transforms.v2.functional`` (imported by this call if not yet)."""
    return importlib.import_module(_NAME)


if TYPE_CHECKING:
    import torchvision.transforms.v2.functional as F
else:
    F = _OnFirstUse()

__all__ = ["F", "module"]
