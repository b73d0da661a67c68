"""The backends there are: ``backend=<name>`` -> its options' schema and its loader class.

Each backend is registered once, here or by a user (:func:`register_backend`): its name,
the schema of its ``backend.*`` options (a frozen
:class:`~dali_pipes.backends.specs.BackendSpec` subclass) and its
:class:`~dali_pipes.backends.base.Loader` class. The Hydra schemas
(``schema/backend/<name>``) are derived from this registry
(:func:`dali_pipes.config.schemas.register`). A loader named by a ``module:Class`` string
is imported on first use, so choosing the torch backend never imports DALI.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dali_pipes.backends.specs import BackendSpec, DaliBackend, SyntheticBackend, TorchBackend
from dali_pipes.errors import ConfigError

if TYPE_CHECKING:
    from dali_pipes.backends.base import Loader


@dataclass(frozen=True)
class BackendKind:
    """One ``backend=<name>``: its options' schema and its loader (a class, or
    ``module:Class``)."""

    name: str
    spec: type[BackendSpec]
    loader: type[Loader] | str

    def loader_class(self) -> type[Loader]:
        """The loader class, imported now if it was named by a string."""
        if not isinstance(self.loader, str):
            return self.loader
        module, _, attr = self.loader.partition(":")
        cls: type[Loader] = getattr(importlib.import_module(module), attr)
        return cls


_BACKENDS: dict[str, BackendKind] = {
    kind.name: kind
    for kind in (
        BackendKind("dali", DaliBackend, "dali_pipes.backends.dali.loader:DaliLoader"),
        BackendKind("torch", TorchBackend, "dali_pipes.backends.torch:TorchLoader"),
        BackendKind("synthetic", SyntheticBackend, "dali_pipes.backends.synthetic:SyntheticLoader"),
    )
}


def register_backend(name: str, spec: type[BackendSpec], loader: type[Loader] | str) -> None:
    """Make ``backend=<name>`` available: ``spec`` is its options' schema (its ``name``
    field defaulting to ``name``), ``loader`` a :class:`~dali_pipes.backends.base.Loader`
    subclass built from a :class:`~dali_pipes.backends.specs.LoaderSpec`. Registering a
    name again replaces it."""
    if not (isinstance(spec, type) and issubclass(spec, BackendSpec)):
        raise ConfigError(f"register_backend({name!r}): the schema must subclass BackendSpec")
    _BACKENDS[name] = BackendKind(name, spec, loader)


def backend_kinds() -> tuple[BackendKind, ...]:
    """Every registered backend, built-in ones first."""
    return tuple(_BACKENDS.values())


def names() -> tuple[str, ...]:
    """The backend names ``backend.name`` takes."""
    return tuple(_BACKENDS)


def check_name(name: str) -> str:
    """``name`` if a backend has it, else the one-line error listing the ones there are."""
    if name not in _BACKENDS:
        raise ConfigError(f"backend={name!r} is unknown: choose one of {', '.join(_BACKENDS)}")
    return name


def loader_class(name: str) -> type[Loader]:
    """The loader class of backend ``name`` (imported now: DALI only when it is DALI's)."""
    return _BACKENDS[check_name(name)].loader_class()
