"""The package shows its layers: few modules at the top, subpackages in an order no import
goes against, and no module, class or function too big to read.

The layers, lowest first (a module may import its own layer and the ones below it, never
one above; ``if TYPE_CHECKING`` imports count, since a type is a dependency too)::

    errors      the one exception family
    registry    the one registry type for things registered by name (ops, batch ops,
                auto-augment operations, data sources, backends) and lazy "module:attr"
                loading: below data, augment and backends, which each keep a registry
    image       decoding, header checks, the compiled resize
    data        sources, shards, sampling, manifests, the sample set, their specs
    augment     ops, the per-split pipeline, keyed randomness, the crop geometry
    runtime     devices, distributed ranks and cores, preemption
    backends    the loader contract and the DALI, torch and synthetic loaders, the caches
    config      Hydra composition, schemas, specs from config, the trainer's spec
    train       the training run, its loop, optimizers, schedules, checkpoints, models
    tools       bench (with DALI's example pipeline), doctor, scan, pack
    selfcheck   python -m dali_pipes.selfcheck
    top         dali_pipes/__init__, iterator (DALIIterator), the tools' entry points
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from test_imports import SRC, Import, graph, modules

LAYERS = (
    "errors",
    "registry",
    "image",
    "data",
    "augment",
    "runtime",
    "backends",
    "config",
    "train",
    "tools",
    "selfcheck",
    "top",
)
MAX_TOP_MODULES = 12
MAX_LINES = {"module": 450, "class": 250, "function": 60}


def layer(module: str) -> str:
    """``dali_pipes.<layer>...`` -> its layer; a top-level module other than errors: top."""
    parts = module.split(".")
    name = parts[1] if len(parts) > 1 else ""
    return name if name in LAYERS[:-1] else "top"


def upward(edges: dict[str, list[Import]]) -> list[str]:
    """Every import from a lower layer into a higher one, one line each."""
    return [
        f"{imp.where()} ({layer(source)}) imports {imp.target} ({layer(imp.target)})"
        for source, found in sorted(edges.items())
        for imp in found
        if LAYERS.index(layer(source)) < LAYERS.index(layer(imp.target))
    ]


def test_no_layer_imports_a_higher_one_type_checking_imports_included() -> None:
    assert {layer(m) for m in modules()} == set(LAYERS)
    found = upward(graph(type_checking=True))
    assert not found, f"layers, lowest first: {' < '.join(LAYERS)}\n" + "\n".join(found)


def test_an_upward_import_is_found_and_named(tmp_path: Path) -> None:
    pkg = tmp_path / "dali_pipes"
    for rel, text in {
        "__init__.py": "",
        "data/__init__.py": "",
        "data/sources.py": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n"
            "    from dali_pipes.backends.specs import LoaderSpec\n"
        ),
        "backends/__init__.py": "",
        "backends/specs.py": "from dali_pipes.data import sources\n",
    }.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    assert upward(graph(pkg)) == []  # without the type-only import, nothing goes up
    assert upward(graph(pkg, type_checking=True)) == [
        "dali_pipes.data.sources:3 (data) imports dali_pipes.backends.specs (backends)"
    ]


def test_at_most_twelve_modules_at_the_top_of_the_package() -> None:
    top = sorted(p.name for p in SRC.glob("*.py"))
    assert len(top) <= MAX_TOP_MODULES, top


def too_big(root: Path = SRC) -> list[str]:
    """Modules, classes and functions longer than :data:`MAX_LINES` allows."""
    found = []
    for path in sorted(root.rglob("*.py")):
        source = path.read_text()
        where = path.relative_to(root.parent)
        lines = len(source.splitlines())
        if lines > MAX_LINES["module"]:
            found.append(f"{where}: module of {lines} lines")
        for node in ast.walk(ast.parse(source)):
            kind = (
                "class"
                if isinstance(node, ast.ClassDef)
                else "function"
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                else None
            )
            if kind is None:
                continue
            assert isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            size = (node.end_lineno or node.lineno) - node.lineno + 1
            if size > MAX_LINES[kind]:
                found.append(f"{where}:{node.lineno}: {kind} {node.name} of {size} lines")
    return found


def test_no_module_class_or_function_is_too_big_to_read() -> None:
    found = too_big()
    assert not found, f"limits {MAX_LINES}:\n" + "\n".join(found)


def test_the_size_check_counts_what_it_should(tmp_path: Path) -> None:
    pkg = tmp_path / "dali_pipes"
    pkg.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(61))
    (pkg / "big.py").write_text(f"def long():\n{body}\n\n\ndef short():\n    return 1\n")
    assert too_big(pkg) == ["dali_pipes/big.py:1: function long of 62 lines"]


@pytest.mark.parametrize("package", sorted(p.parent.name for p in SRC.glob("*/__init__.py")))
def test_every_subpackage_says_its_job_in_its_init(package: str) -> None:
    doc = ast.get_docstring(ast.parse((SRC / package / "__init__.py").read_text()))
    assert doc and len(doc) > 20, f"dali_pipes/{package}/__init__.py has no docstring"


def _public_objects() -> list[tuple[str, object]]:
    """Every public class and function of the package's modules (``__main__`` modules
    run a tool when imported: left out), and their public methods and properties."""
    import importlib
    import inspect
    import pkgutil

    import dali_pipes

    found: list[tuple[str, object]] = []
    for info in pkgutil.walk_packages(dali_pipes.__path__, "dali_pipes."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        found.append((info.name, module))
        for name, obj in vars(module).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != info.name:
                continue
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            found.append((f"{info.name}.{name}", obj))
            if inspect.isclass(obj):
                for attr, value in vars(obj).items():
                    callable_ = inspect.isfunction(value) or isinstance(
                        value, (property, classmethod, staticmethod)
                    )
                    if not attr.startswith("_") and callable_:
                        bound = value if isinstance(value, property) else getattr(obj, attr)
                        found.append((f"{info.name}.{name}.{attr}", bound))
    return found


def test_every_public_module_class_function_and_method_says_what_it_is() -> None:
    """A method that overrides a documented one inherits its docstring (as ``help`` and
    Sphinx show it); a dataclass's generated signature is no docstring."""
    import inspect

    missing = []
    for name, obj in _public_objects():
        doc = inspect.getdoc(obj) or ""
        generated = inspect.isclass(obj) and doc.startswith(f"{obj.__name__}(")
        if not doc.strip() or generated:
            missing.append(name)
    assert not missing, f"{len(missing)} public names without a docstring: {missing}"


@pytest.mark.parametrize(
    "name",
    [
        "dali_pipes.iterator.DALIIterator",
        "dali_pipes.config.loaders.build_loader",
        "dali_pipes.augment.base.register_op",
        "dali_pipes.augment.base.Op",
    ],
)
def test_the_public_api_documents_its_arguments_and_what_it_returns(name: str) -> None:
    import importlib
    import inspect

    module, _, attr = name.rpartition(".")
    doc = inspect.getdoc(getattr(importlib.import_module(module), attr)) or ""
    assert "Args:" in doc and "Returns:" in doc, name


FIGURE = re.compile(r"\d+(\.\d+)?\s?(%|ms\b|MB\b|GiB\b|img/s)")


def test_docstrings_carry_no_measured_figures() -> None:
    """Measurements go stale in docstrings; they live in benchmarks/RESULTS.md. (The
    parity bounds' module states the figures each bound rests on: that is its job.)"""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if path.name == "bounds.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                for line in (ast.get_docstring(node) or "").splitlines():
                    if FIGURE.search(line):
                        found.append(f"{path.relative_to(SRC.parent)}: {line.strip()}")
    assert not found, "\n".join(found)
