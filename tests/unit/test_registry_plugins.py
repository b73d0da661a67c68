"""The modules that defined the registries' entries outside the package: what a worker
started afresh imports to know the caller's plug-ins."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import pytest

from dali_pipes.registry import Lazy, Registry


@dataclasses.dataclass(frozen=True)
class _Record:
    kernel: Any
    size: int


def test_plugin_modules_name_the_modules_outside_the_package_that_defined_entries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What a worker started afresh must import to know the caller's names: a class's or
    a function's module, an unimported ``module:attr``'s module, a record's functions'
    module; a record of plain values cannot tell its module (``__main__``: not portable)."""
    from dali_pipes import registry as registries

    held: Registry[Any] = Registry("thing")
    held.register("cls", _Record)
    held.register("named", Lazy("json:dumps"))
    held.register("given", Lazy(os.path.join))
    held.register("record", _Record(lambda x: x, 3))
    held.register("builtin", Registry)  # the package's own: left out
    monkeypatch.setattr(registries, "_PACKAGE", {"thing": held})
    assert registries.plugin_modules() == {__name__, "json", os.path.join.__module__}
    held.register("values", _Record(3, 4))
    assert "__main__" in registries.plugin_modules()
