"""One registry type for everything registered by name: augment ops, batch ops, auto-augment
operations, data sources (``data=<name>``) and backends (``backend=<name>``).

A :class:`Registry` maps names to entries, in registration order, and lists them (it is a
read-only mapping: ``names()``, ``in``, iteration, ``registry[name]``). A name registers
once: registering another thing under a taken name is refused with a one-line
:class:`~dali_pipes.errors.NameTaken` naming the name and what holds it, unless the call
says ``replace=True``. Registering the same thing again is accepted (a module imported a
second time makes new objects of the same classes and functions: the same thing, defined
at the same place).

An entry that would import heavy code (DALI, pyarrow) when the registry is filled names
that code as ``"module:attr"``, wrapped in :class:`Lazy`: imported on first use, once.
This module sits below ``data``, ``augment`` and ``backends`` (it imports only
:mod:`dali_pipes.errors`), so each of them keeps its registry here.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import fields, is_dataclass
from typing import Any, Generic, TypeVar, cast

from dali_pipes.errors import ConfigError, NameTaken

T = TypeVar("T")

_UNSET: Any = object()
#: The package's registries by what they hold (those made by dali_pipes' own modules): what
#: a worker process started afresh is given, so that it knows a plug-in's names too.
_PACKAGE: dict[str, Registry[Any]] = {}


def where(obj: Any) -> str:
    """Where a class or function is defined, as ``module.qualname``; anything else as its
    ``repr``."""
    qualname = getattr(obj, "__qualname__", None)
    if qualname is not None and (isinstance(obj, type) or callable(obj)):
        return f"{getattr(obj, '__module__', '?')}.{qualname}"
    return repr(obj)


def identity(obj: Any) -> Any:
    """What makes two registrations the same thing: a class or a named function by the
    place it is defined at (a module imported again makes new objects of the same ones), a
    :class:`Lazy` by what it names, a dataclass record by its fields' identities, anything
    else by equality. (A lambda is itself: its name does not tell it from the others.)"""
    if isinstance(obj, Lazy):
        return obj.key
    if isinstance(obj, type) or inspect.isfunction(obj):
        qualname = obj.__qualname__
        return obj if "<lambda>" in qualname else ("defined at", obj.__module__, qualname)
    if is_dataclass(obj):
        return (identity(type(obj)), tuple(identity(getattr(obj, f.name)) for f in fields(obj)))
    return obj


class Lazy(Generic[T]):
    """An object given as itself, or named by ``"module:attr"`` and imported the first
    time :meth:`get` is called (then kept: the import happens once)."""

    __slots__ = ("_ref", "_value")

    def __init__(self, target: T | str) -> None:
        if isinstance(target, str):
            module, _, attr = target.partition(":")
            if not module or not attr or ":" in attr:
                raise ConfigError(
                    f"{target!r} names no object: expected 'module:attr' "
                    "(e.g. 'my_package.sources:open_csv')"
                )
            self._ref: str | None = target
            self._value: Any = _UNSET
        else:
            self._ref, self._value = None, target

    @property
    def ref(self) -> str:
        """What it names: ``module:attr`` (for an object given as itself, where it is
        defined)."""
        return self._ref if self._ref is not None else where(self._value)

    @property
    def key(self) -> Any:
        """What tells two of them apart: the ``module:attr`` string, or the object's
        :func:`identity` (a class named by string and given as itself are the same)."""
        if self._ref is not None:
            module, _, attr = self._ref.partition(":")
            return ("defined at", module, attr)
        return identity(self._value)

    @property
    def loaded(self) -> bool:
        """Whether the object is at hand (given as itself, or imported already)."""
        return self._value is not _UNSET

    def get(self) -> T:
        """The object, importing its module the first time."""
        if self._value is _UNSET:
            assert self._ref is not None
            module, _, attr = self._ref.partition(":")
            loaded = importlib.import_module(module)
            try:
                self._value = getattr(loaded, attr)
            except AttributeError:
                raise ConfigError(
                    f"{self._ref}: module {module} has no attribute {attr!r}"
                ) from None
        return cast(T, self._value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Lazy) and self.key == other.key

    def __hash__(self) -> int:
        try:
            return hash(self.key)
        except TypeError:
            return id(self._value)

    def __repr__(self) -> str:
        return f"Lazy({self.ref!r})"


class Registry(Mapping[str, T]):
    """Entries by name, in registration order (a read-only mapping; :meth:`register` adds).

    Args:
        what: what an entry is, in messages ("op", "data source", "backend").
        describe: an entry in words, for the message naming what holds a name (default:
            where it is defined, :func:`where`).
    """

    def __init__(self, what: str, describe: Callable[[T], str] = where) -> None:
        self.what = what
        self._describe = describe
        self._entries: dict[str, T] = {}
        if str(sys._getframe(1).f_globals.get("__name__", "")).startswith("dali_pipes."):
            _PACKAGE.setdefault(what, self)

    def register(self, name: str, entry: T, *, replace: bool = False) -> T:
        """Put ``entry`` under ``name``.

        Args:
            name: the name configs and code use.
            entry: what the name stands for.
            replace: put it there even when another entry holds the name.

        Returns:
            ``entry``.

        Raises:
            NameTaken: another entry holds ``name`` and ``replace`` is false (the same
                entry again, by :func:`identity`, is accepted).
        """
        if not isinstance(name, str) or not name:
            raise ConfigError(f"a {self.what} needs a non-empty name, got {name!r}")
        held = self._entries.get(name, _UNSET)
        if held is not _UNSET and not replace and identity(held) != identity(entry):
            raise NameTaken(
                f"{self.what} {name!r} is already registered (held by "
                f"{self._describe(held)}); choose another name, or pass replace=True "
                "to replace it"
            )
        self._entries[name] = entry
        return entry

    def names(self) -> tuple[str, ...]:
        """The registered names, in registration order."""
        return tuple(self._entries)

    def __getitem__(self, name: str) -> T:
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.what!r}: {', '.join(self._entries)})"

    @contextmanager
    def restored(self) -> Iterator[Registry[T]]:
        """A block whose registrations are undone at its end (for tests): the entries as
        they were before it come back."""
        saved = dict(self._entries)
        try:
            yield self
        finally:
            self._entries.clear()
            self._entries.update(saved)


def plugin_modules() -> set[str]:
    """The modules outside dali_pipes that defined entries of the package's registries (a
    plug-in's ops, sources, auto-augment operations): what a process started afresh (not
    forked) imports to know the same names. ``"__main__"`` stands for an entry whose
    module cannot be told or imported by name."""
    found: set[str] = set()
    for registry in _PACKAGE.values():
        for entry in registry._entries.values():
            found |= {m for m in _defined_in(entry) if m.partition(".")[0] != "dali_pipes"}
    return found


def _defined_in(entry: Any) -> set[str]:
    """The modules that define ``entry``: a class's or a function's own, a :class:`Lazy`'s
    target's, a record's fields' (a record of plain values: ``"__main__"``, unknown)."""
    if isinstance(entry, Lazy):  # named by "module:attr" until it is imported
        return _defined_in(entry.get()) if entry.loaded else {entry.ref.partition(":")[0]}
    if isinstance(entry, type) or callable(entry):
        return {str(getattr(entry, "__module__", None) or "__main__")}
    if is_dataclass(entry):
        inner = [_defined_in(getattr(entry, f.name)) for f in fields(entry)]
        found = set().union(*inner) if inner else set()
        return found or {"__main__"}
    return set()
