"""The reference pages list everything there is: every parameter of ``DALIIterator`` and
``build_loader`` with its default, every key of every config schema, every command. A
parameter, key or command added to the code and not to its table fails here."""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from docs_blocks import DOCS

import dali_pipes
from dali_pipes.augment.spec import AugmentSpec, SplitAugment
from dali_pipes.backends.registry import backend_kinds
from dali_pipes.config.schemas import BenchSpec, DoctorSpec, PackSpec, ScanSpec, ShowSpec
from dali_pipes.config.trainer import TrainerSpec
from dali_pipes.data.registry import source_kinds
from dali_pipes.data.specs import SamplerSpec

ROW = re.compile(r"^\|\s*`(?P<name>[^`]+)`[^|]*\|(?P<rest>.*)$", re.M)


def rows(*pages: Path) -> dict[str, str]:
    """Table rows whose first cell starts with a code name: name -> the rest of the row."""
    found: dict[str, str] = {}
    for page in pages:
        for match in ROW.finditer(page.read_text()):
            found.setdefault(match["name"].split("=")[0].strip(), match["rest"])
    return found


def spellings(value: Any) -> set[str]:
    """How a default may be written in a table: Python's repr, either quote, no
    underscores in numbers, a whole float as an int."""
    text = repr(value)
    found = {text, str(value), text.replace("'", '"')}
    if isinstance(value, float) and value.is_integer():
        found.add(str(int(value)))
    if isinstance(value, str):
        found.add(value)
    return found


def parameters(function: Any) -> dict[str, Any]:
    return {
        name: p.default
        for name, p in inspect.signature(function).parameters.items()
        if name != "self"
    }


@pytest.mark.parametrize(
    "function",
    [dali_pipes.DALIIterator.__init__, dali_pipes.build_loader],
    ids=["DALIIterator", "build_loader"],
)
def test_every_parameter_is_in_the_loader_reference_with_its_default(function: Any) -> None:
    table = rows(DOCS / "reference" / "loader.md")
    missing, wrong = [], []
    for name, default in parameters(function).items():
        if name not in table:
            missing.append(name)
        elif default is not inspect.Parameter.empty:
            row = table[name].replace("_", "").replace("`", "")
            if not any(s.replace("_", "") in row for s in spellings(default)):
                wrong.append(f"{name}: default {default!r} not in |{table[name]}")
    assert not missing, f"not in reference/loader.md's tables: {missing}"
    assert not wrong, "\n".join(wrong)


def ours(spec: type) -> bool:
    """A schema of the package's own (not one a test registered in this process)."""
    return spec.__module__.startswith("dali_pipes.")


def schema_keys() -> dict[str, list[str]]:
    """Every config group (and top-level) with the keys of the package's schemas."""
    fields = lambda cls: [f.name for f in dataclasses.fields(cls)]  # noqa: E731
    groups: dict[str, list[str]] = {
        "data": sorted(
            {k for kind in source_kinds() if ours(kind.spec) for k in fields(kind.spec)}
        ),
        "backend": sorted(
            {k for kind in backend_kinds() if ours(kind.spec) for k in fields(kind.spec)}
        ),
        "augment": fields(AugmentSpec) + fields(SplitAugment),
        "trainer": fields(TrainerSpec),
        "bench": fields(BenchSpec),
        "doctor": fields(DoctorSpec),
        "scan": fields(ScanSpec),
        "pack": fields(PackSpec),
        "show": fields(ShowSpec),
        "sampling": fields(SamplerSpec),
        "": ["seed", "resume", "output_dir"],
    }
    return groups


def test_every_key_of_every_config_schema_is_in_the_configuration_reference() -> None:
    table = rows(*sorted((DOCS / "reference").glob("configuration*.md")))
    missing = [
        f"{group}.{key}" if group else key
        for group, keys in schema_keys().items()
        for key in keys
        if key not in table and f"{group}.{key}" not in table
    ]
    assert not missing, f"keys missing from reference/configuration*.md tables: {missing}"


def commands() -> list[str]:
    """Every ``python -m dali_pipes.<name>`` the package has."""
    package = REPO / "dali_pipes"
    found = [p.stem for p in package.glob("*.py") if '__name__ == "__main__"' in p.read_text()]
    found += [p.parent.name for p in package.glob("*/__main__.py")]
    return sorted(found)


def test_every_command_is_in_the_commands_reference() -> None:
    text = (DOCS / "reference" / "commands.md").read_text()
    assert {"train", "bench", "doctor", "selfcheck", "sample"} <= set(commands())
    missing = [name for name in commands() if f"python -m dali_pipes.{name}" not in text]
    assert not missing, f"not in reference/commands.md: {missing}"


def test_a_missing_parameter_or_a_wrong_default_is_found(tmp_path: Path) -> None:
    page = tmp_path / "x.md"
    page.write_text(
        "| name | default |\n| --- | --- |\n| `batch_size` | `64` |\n| `train` | `False` |\n"
    )
    table = rows(page)
    assert set(table) == {"batch_size", "train"}
    assert any(s in table["batch_size"] for s in spellings(64))
    assert not any(s in table["train"] for s in spellings(True))
