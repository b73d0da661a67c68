"""The import graph of ``dali_pipes``: no cycles, no private names across modules.

Every module under ``dali_pipes/`` is parsed with :mod:`ast` (nothing is imported), and
every ``import`` statement counts wherever it is: at module level, inside a function or a
method, under ``if __name__ == "__main__"``. Relative imports are resolved against the
importing module's package. Left out, because they never run: imports under
``if TYPE_CHECKING:``; and, because a parser cannot see them, imports by name through
``importlib`` (the backend registry, the package's lazy attributes).

An edge goes to the module named: ``from dali_pipes.augment import dali_ops`` is an edge to
``dali_pipes.augment.dali_ops`` (a submodule), ``from dali_pipes.augment import Pipeline``
one to ``dali_pipes.augment`` (the package). The package a submodule sits in, which Python
initialises first, does not count: a package's ``__init__`` re-exporting its submodules is
not a cycle. A module importing itself (``from dali_pipes import bench as tool`` when run
as ``__main__``) is not one either.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REPO

PACKAGE = "dali_pipes"
SRC = REPO / PACKAGE


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the dali_pipes module imported (or imported from)
    name: str | None  # the name taken from it (``from target import name``), if any
    line: int

    def where(self) -> str:
        return f"{self.source}:{self.line}"


def module_name(path: Path, root: Path = SRC) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path = SRC) -> dict[str, Path]:
    return {module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _statements(
    tree: ast.AST, type_checking: bool = False
) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement in ``tree``, at any depth; under ``if TYPE_CHECKING`` only
    when ``type_checking`` (its ``else`` branch runs, so it always counts)."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        if not type_checking and isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def imports(name: str, path: Path, known: set[str], type_checking: bool = False) -> list[Import]:
    """The imports of module ``name`` (source at ``path``) that reach a module in ``known``
    (``type_checking``: those under ``if TYPE_CHECKING`` too)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[Import] = []
    for node in _statements(tree, type_checking):
        if isinstance(node, ast.Import):
            for alias in node.names:
                # ``import a.b.c`` binds ``a`` but runs a.b.c: the deepest known module counts
                target = alias.name
                while target and target not in known:
                    target = target.rpartition(".")[0]
                if target:
                    found.append(Import(name, target, None, node.lineno))
            continue
        if node.level:
            base = package.split(".")
            if node.level > 1:
                base = base[: len(base) - node.level + 1]
            origin = ".".join([*base, node.module] if node.module else base)
        else:
            origin = node.module or ""
        if origin not in known:
            continue
        for alias in node.names:
            sub = f"{origin}.{alias.name}"
            if sub in known:
                found.append(Import(name, sub, None, node.lineno))
            else:
                found.append(Import(name, origin, alias.name, node.lineno))
    return found


def graph(root: Path = SRC, type_checking: bool = False) -> dict[str, list[Import]]:
    """Module -> its imports of other package modules (self-imports dropped)."""
    mods = modules(root)
    known = set(mods)
    return {
        name: [i for i in imports(name, path, known, type_checking) if i.target != name]
        for name, path in mods.items()
    }


def find_cycle(edges: dict[str, list[Import]]) -> list[Import] | None:
    """One import cycle as the chain of imports that closes it, or None."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[Import] = []

    def visit(module: str) -> list[Import] | None:
        state[module] = 1
        for imp in edges.get(module, []):
            if state.get(imp.target) == 1:
                start = next(
                    (i for i, step in enumerate(path) if step.source == imp.target), len(path)
                )
                return [*path[start:], imp]
            if imp.target not in state:
                path.append(imp)
                cycle = visit(imp.target)
                if cycle:
                    return cycle
                path.pop()
        state[module] = 2
        return None

    for module in sorted(edges):
        if module not in state:
            cycle = visit(module)
            if cycle:
                return cycle
    return None


def describe(cycle: list[Import]) -> str:
    chain = " -> ".join([cycle[0].source, *(step.target for step in cycle)])
    return f"{chain} (at {', '.join(step.where() for step in cycle)})"


def private_uses(root: Path = SRC) -> list[str]:
    """``from dali_pipes.x import _y`` and ``x._y`` on an imported package module, in
    another module than the one that defines ``_y``."""
    mods = modules(root)
    known = set(mods)
    found = []
    for name, path in mods.items():
        found += [
            f"{imp.where()} imports {imp.target}.{imp.name}"
            for imp in imports(name, path, known)
            if imp.target != name and imp.name and _private(imp.name)
        ]
        tree = ast.parse(path.read_text(), filename=str(path))
        bound = _bound_modules(name, tree, known)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in bound
                and bound[node.value.id] != name
                and _private(node.attr)
            ):
                found.append(f"{name}:{node.lineno} uses {bound[node.value.id]}.{node.attr}")
    return found


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _bound_modules(name: str, tree: ast.AST, known: set[str]) -> dict[str, str]:
    """Local names bound to package modules: ``from dali_pipes import train as t`` -> t."""
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                if sub in known:
                    bound[alias.asname or alias.name] = sub
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname and alias.name in known:
                    bound[alias.asname] = alias.name
    return bound


# --------------------------------------------------------------------------- the tests


def test_the_package_has_no_import_cycle_type_checking_imports_included() -> None:
    cycle = find_cycle(graph(type_checking=True))
    if cycle is not None:
        pytest.fail(f"import cycle: {describe(cycle)}")


def test_no_module_imports_a_private_name_from_another() -> None:
    assert private_uses() == []


# --------------------------------------------------------------------------- the checker


def _write(root: Path, files: dict[str, str]) -> Path:
    pkg = root / PACKAGE
    for rel, text in files.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    return pkg


def test_a_function_level_import_closing_a_cycle_is_found_and_named(tmp_path: Path) -> None:
    pkg = _write(
        tmp_path,
        {
            "__init__.py": "",
            "config.py": "def register():\n    from dali_pipes.tools import bench\n",
            "tools/__init__.py": "",
            "tools/bench.py": "from .. import config\n",
            "plain.py": "from dali_pipes import config\n",
        },
    )
    cycle = find_cycle(graph(pkg))
    assert cycle is not None
    text = describe(cycle)
    assert text.startswith("dali_pipes.config -> dali_pipes.tools.bench -> dali_pipes.config")
    assert "dali_pipes.config:2" in text and "dali_pipes.tools.bench:1" in text


def test_self_imports_and_parent_packages_are_no_cycle_a_type_checking_import_is(
    tmp_path: Path,
) -> None:
    pkg = _write(
        tmp_path,
        {
            "__init__.py": "from dali_pipes.sub import thing\n",
            "sub/__init__.py": "from dali_pipes.sub.thing import X\n",
            "sub/thing.py": (
                "from typing import TYPE_CHECKING\n"
                "from dali_pipes.sub import other\n"
                "if TYPE_CHECKING:\n"
                "    from dali_pipes.spec import Y\n"
                "X = 1\n"
                "if __name__ == '__main__':\n"
                "    from dali_pipes.sub import thing as tool\n"
            ),
            "sub/other.py": "",
            "spec.py": "from dali_pipes.sub.thing import X\n",
        },
    )
    assert find_cycle(graph(pkg)) is None
    cycle = find_cycle(graph(pkg, type_checking=True))
    assert cycle is not None and "dali_pipes.sub.thing:4" in describe(cycle)


def test_private_names_from_other_modules_are_found(tmp_path: Path) -> None:
    pkg = _write(
        tmp_path,
        {
            "__init__.py": "",
            "train.py": "def _build():\n    pass\n\ndef build():\n    return _build()\n",
            "doctor.py": "from dali_pipes.train import _build\nfrom .train import build\n",
            "bench.py": "from dali_pipes import train\n\ntrain._build()\ntrain.build()\n",
        },
    )
    assert sorted(private_uses(pkg)) == [
        "dali_pipes.bench:3 uses dali_pipes.train._build",
        "dali_pipes.doctor:1 imports dali_pipes.train._build",
    ]
