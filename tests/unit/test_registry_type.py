"""The one registry type (dali_pipes/registry.py) and what dali_pipes exports of it: a taken
name refused in one line unless ``replace=True``, the same thing again accepted, the names
listable, ``"module:attr"`` entries imported once, on first use."""

from __future__ import annotations

import subprocess
import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import REPO

from dali_pipes.errors import ConfigError, NameTaken
from dali_pipes.registry import Lazy, Registry, identity


def made_at(module: str, qualname: str) -> type:
    """A new class defined at ``module.qualname``: what importing a module again makes."""
    cls = type(qualname.rpartition(".")[2], (), {})
    cls.__module__, cls.__qualname__ = module, qualname
    return cls


def test_a_second_registration_of_a_taken_name_fails_in_one_line_naming_the_name_and_holder() -> (
    None
):
    registry: Registry[type] = Registry("widget")
    first, other = made_at("pkg.a", "Blue"), made_at("pkg.b", "Blue")
    registry.register("blue", first)
    with pytest.raises(NameTaken) as info:
        registry.register("blue", other)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("widget 'blue' is already registered (held by pkg.a.Blue)")
    assert "replace=True" in message
    assert registry["blue"] is first
    assert isinstance(info.value, ConfigError) and isinstance(info.value, ValueError)


def test_replace_true_replaces_and_keeps_the_names_place() -> None:
    registry: Registry[str] = Registry("colour")
    for name in ("red", "green", "blue"):
        registry.register(name, name.upper())
    registry.register("green", "LIME", replace=True)
    assert registry.names() == ("red", "green", "blue")
    assert registry["green"] == "LIME"


def test_the_same_thing_registered_again_is_accepted() -> None:
    registry: Registry[Any] = Registry("widget")
    cls = made_at("pkg.a", "Blue")
    registry.register("blue", cls)
    registry.register("blue", cls)
    again = made_at("pkg.a", "Blue")  # the module imported a second time
    assert registry.register("blue", again) is again and registry["blue"] is again

    def one(x: int) -> int:
        return x

    registry.register("fn", one)
    with pytest.raises(NameTaken):  # a lambda is itself: another one is another thing
        registry.register("fn", lambda x: x)
    registry.register("record", ("a", 1))
    registry.register("record", ("a", 1))  # equal values are the same


def test_names_are_listable_in_registration_order() -> None:
    registry: Registry[int] = Registry("number")
    for i, name in enumerate(("one", "two", "three")):
        registry.register(name, i)
    assert registry.names() == tuple(registry) == ("one", "two", "three")
    assert len(registry) == 3 and "two" in registry and "four" not in registry
    assert dict(registry.items()) == {"one": 0, "two": 1, "three": 2}
    assert "one, two, three" in repr(registry)


def test_an_empty_or_non_string_name_is_refused() -> None:
    registry: Registry[int] = Registry("number")
    for name in ("", None, 3):
        with pytest.raises(ConfigError, match="a number needs a non-empty name"):
            registry.register(name, 1)  # type: ignore[arg-type]


def test_registrations_inside_restored_are_undone_after_it() -> None:
    registry: Registry[int] = Registry("number")
    registry.register("one", 1)
    with registry.restored():
        registry.register("two", 2)
        registry.register("one", 11, replace=True)
        assert registry.names() == ("one", "two")
    assert dict(registry) == {"one": 1}


@pytest.fixture
def counted_module() -> Iterator[dict[str, int]]:
    """A module ``lazy_target`` whose attribute ``thing`` counts how often it is read."""
    reads = {"thing": 0}
    module = types.ModuleType("lazy_target")

    def __getattr__(name: str) -> Any:
        if name != "thing":
            raise AttributeError(name)
        reads["thing"] += 1
        return object.__new__(object)

    module.__getattr__ = __getattr__  # type: ignore[method-assign]
    sys.modules[module.__name__] = module
    yield reads
    del sys.modules[module.__name__]


def test_a_lazy_module_attr_resolves_once_on_first_use(counted_module: dict[str, int]) -> None:
    lazy: Lazy[object] = Lazy("lazy_target:thing")
    assert not lazy.loaded and counted_module["thing"] == 0
    first = lazy.get()
    assert lazy.get() is first and lazy.get() is first
    assert counted_module["thing"] == 1 and lazy.loaded
    assert lazy.ref == "lazy_target:thing"


def test_a_lazy_object_given_as_itself_is_at_hand_and_equals_its_name() -> None:
    assert Lazy(Registry).get() is Registry and Lazy(Registry).loaded
    assert Lazy(Registry) == Lazy("dali_pipes.registry:Registry")
    assert Lazy(Registry).ref == "dali_pipes.registry.Registry"
    assert identity(Lazy("a.b:c")) == identity(Lazy("a.b:c"))


def test_a_lazy_name_not_module_attr_or_missing_is_one_line() -> None:
    for bad in ("no_colon", ":attr", "module:", "a:b:c"):
        with pytest.raises(ConfigError, match=r"names no object: expected 'module:attr'"):
            Lazy(bad)
    with pytest.raises(ConfigError) as info:
        Lazy("dali_pipes.registry:Nope").get()
    assert (
        str(info.value)
        == "dali_pipes.registry:Nope: module dali_pipes.registry has no attribute 'Nope'"
    )


def test_register_op_source_backend_and_source_are_exported_lazily_from_dali_pipes() -> None:
    import dali_pipes
    from dali_pipes import Source, register_backend, register_op, register_source
    from dali_pipes.augment.base import register_op as op
    from dali_pipes.backends.registry import register_backend as backend
    from dali_pipes.data.interface import Source as interface
    from dali_pipes.data.registry import register_source as source

    assert (register_op, register_source, register_backend, Source) == (
        op,
        source,
        backend,
        interface,
    )
    assert {"register_op", "register_source", "register_backend", "Source"} <= set(
        dali_pipes.__all__
    )
    assert not {"register_op", "register_source", "register_backend", "Source"} & set(
        vars(dali_pipes)
    )  # resolved on use, by the package's __getattr__
    code = "import sys, dali_pipes; print('nvidia.dali' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert done.stdout.strip() == "False"  # import dali_pipes stays light: no DALI
