"""The backends there are: ``backend=<name>`` -> its options' schema and its loader class.

Each backend is registered once, here or by a user (:func:`register_backend`, also
``dali_pipes.register_backend``): its name, the schema of its ``backend.*`` options (a
frozen :class:`~dali_pipes.backends.specs.BackendSpec` subclass, which also says what the
backend knows about itself: whether it reads images, the knobs ``doctor`` tunes) and its
:class:`~dali_pipes.backends.base.Loader` class. A second registration of a taken name is
refused in one line unless it says ``replace=True`` (:class:`dali_pipes.registry.Registry`).
The Hydra schemas (``schema/backend/<name>``) are derived from this registry
(:func:`dali_pipes.config.schemas.register`). A loader named by a ``module:Class`` string
is imported on first use (:class:`~dali_pipes.registry.Lazy`), so choosing the torch
backend never imports DALI.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from dali_pipes.backends.specs import BackendSpec, DaliBackend, SyntheticBackend, TorchBackend
from dali_pipes.errors import ConfigError
from dali_pipes.registry import Lazy, Registry, where

if TYPE_CHECKING:
    from dali_pipes.backends.base import Loader


@dataclass(frozen=True)
class BackendKind:
    """One ``backend=<name>``: its options' schema and its loader class (imported on first
    use when it was named by ``module:Class``)."""

    name: str
    spec: type[BackendSpec]
    loader: Lazy[type[Loader]]

    def loader_class(self) -> type[Loader]:
        """The loader class, imported now if it was named by a string."""
        return self.loader.get()


def _describe(kind: BackendKind) -> str:
    return f"options {where(kind.spec)}, loader {kind.loader.ref}"


#: Every ``backend=<name>``, built-in ones first.
BACKENDS: Registry[BackendKind] = Registry("backend", _describe)


def register_backend(
    name: str, spec: type[BackendSpec], loader: type[Loader] | str, *, replace: bool = False
) -> None:
    """Make ``backend=<name>`` available.

    Args:
        name: the config's name for it (``backend=<name>``).
        spec: its options' schema, a frozen
            :class:`~dali_pipes.backends.specs.BackendSpec` subclass whose ``name`` field
            defaults to ``name``.
        loader: a :class:`~dali_pipes.backends.base.Loader` subclass built from a
            :class:`~dali_pipes.backends.specs.LoaderSpec`, or its ``"module:Class"``,
            imported on first use.
        replace: put it there even when another backend holds ``name``.

    Returns:
        None.

    Raises:
        NameTaken: another backend holds ``name`` (the same one again is accepted).
        ConfigError: ``spec`` is not a BackendSpec subclass.
    """
    if not (isinstance(spec, type) and issubclass(spec, BackendSpec)):
        raise ConfigError(f"register_backend({name!r}): the schema must subclass BackendSpec")
    BACKENDS.register(name, BackendKind(name, spec, Lazy(loader)), replace=replace)


def backend_kinds() -> tuple[BackendKind, ...]:
    """Every registered backend, built-in ones first."""
    return tuple(BACKENDS.values())


def names() -> tuple[str, ...]:
    """The backend names ``backend.name`` takes."""
    return BACKENDS.names()


def check_name(name: str) -> str:
    """``name`` if a backend has it, else the one-line error listing the ones there are."""
    if name not in BACKENDS:
        raise ConfigError(f"backend={name!r} is unknown: choose one of {', '.join(BACKENDS)}")
    return name


def backend_kind(name: str) -> BackendKind:
    """The backend ``name`` names (or the one-line error of :func:`check_name`)."""
    return BACKENDS[check_name(name)]


def loader_class(name: str) -> type[Loader]:
    """The loader class of backend ``name`` (imported now: DALI only when it is DALI's)."""
    return backend_kind(name).loader_class()


for _name, _spec, _loader in (
    ("dali", DaliBackend, "dali_pipes.backends.dali.loader:DaliLoader"),
    ("torch", TorchBackend, "dali_pipes.backends.torch:TorchLoader"),
    ("synthetic", SyntheticBackend, "dali_pipes.backends.synthetic:SyntheticLoader"),
):
    register_backend(_name, _spec, _loader)
