"""Hydra composition: ``conf/`` found (a checkout or the wheel), a config composed with
command-line style overrides, a preset looked up by name.

The schemas every YAML option in ``conf/`` extends are in :mod:`dali_pipes.config.schemas`
(registered when ``dali_pipes`` is imported); a config becomes specs in
:mod:`dali_pipes.config.specs`. ``conf/`` sits at the top of the repository and ships
inside the wheel as ``dali_pipes.conf``; :func:`config_dir` finds it either way.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import is_dataclass
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig, ListConfig, OmegaConf

from dali_pipes.augment.spec import AugmentSpec
from dali_pipes.config.overrides import assign, split
from dali_pipes.config.schemas import config_dir, register
from dali_pipes.config.specs import check_augment, config_error, to_spec
from dali_pipes.errors import ConfigError

__all__ = ["augment_preset", "compose_config", "config_dir", "load_saved_config"]


def compose_config(overrides: Sequence[str] = (), config_name: str = "train") -> DictConfig:
    """Compose ``conf/<config_name>.yaml`` with command-line style overrides (for tests,
    notebooks, and inside a tool's ``@hydra.main``, whose search path is ``conf/`` too).

    Outside ``@hydra.main`` a composition already made in this process is given again as
    a copy (:class:`_Compositions`): Hydra reads and merges every YAML file of the
    config's defaults on each call, and a notebook or a test suite composes the same
    few configs again and again."""
    register()  # done by ``import dali_pipes``; again in case the ConfigStore was cleared
    try:
        if GlobalHydra.instance().is_initialized():  # inside a tool's @hydra.main: conf/
            cfg = compose(config_name=config_name, overrides=list(overrides))
        else:
            cfg = _COMPOSITIONS.get(config_name, tuple(overrides))
    except Exception as exc:
        error = config_error(exc)
        if error is None:
            raise
        raise error from None
    check_augment(cfg)
    return cfg


class _Compositions:
    """Hydra's compositions of ``conf/`` made in this process, the last :data:`KEPT`,
    each given out as a deep copy (a caller may change what it gets).

    A composition depends on the config's name, the overrides, the YAML files under
    ``conf/`` and the nodes in Hydra's ConfigStore (our schemas and the plug-ins
    registered with them), so each is kept with a fingerprint of the last two: every
    file's size and modification time, and the identity of every ConfigStore node (an
    entry holds on to the nodes it was made with, so no later node can take the identity
    of one of them). A changed file or node is a miss and composes afresh. A failed
    composition is not kept; checks that depend on registries (:func:`check_augment`)
    run on every copy given out. What is kept is the composition of the overrides that
    choose configs; the plain values are set on each copy."""

    KEPT = 256

    def __init__(self) -> None:
        self._made: OrderedDict[tuple[Any, ...], tuple[DictConfig, list[Any]]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, config_name: str, overrides: tuple[str, ...]) -> DictConfig:
        """The composition of ``config_name`` with ``overrides``: of those that choose what
        is composed, made or kept, then the plain ``key=value`` ones set as Hydra sets them
        (:mod:`dali_pipes.config.overrides`), so that a new data root or output folder
        does not read and merge every file again."""
        root = config_dir()
        composed, plain = split(root, overrides)
        cfg = self._composed(root, config_name, composed)
        assign(cfg, plain)
        return cfg

    def _composed(self, root: Path, config_name: str, overrides: tuple[str, ...]) -> DictConfig:
        """The composition of ``config_name`` with ``overrides`` (under ``root``), made or
        kept."""
        nodes = _store_nodes(ConfigStore.instance().repo)
        key = (str(root), config_name, overrides, _files(root), tuple(id(n) for n in nodes))
        with self._lock:
            kept = self._made.get(key)
            if kept is not None:
                self._made.move_to_end(key)
                return copy.deepcopy(kept[0])
        with initialize_config_dir(config_dir=str(root), version_base="1.3"):
            cfg = compose(config_name=config_name, overrides=list(overrides))
        with self._lock:
            self._made[key] = (copy.deepcopy(cfg), nodes)
            while len(self._made) > self.KEPT:
                self._made.popitem(last=False)
        return cfg


def _files(root: Path) -> tuple[tuple[str, int, int], ...]:
    """Every YAML file under ``root`` with its size and modification time."""
    found = []
    for path in sorted(root.rglob("*.yaml")):
        stat = path.stat()
        found.append((str(path), stat.st_size, stat.st_mtime_ns))
    return tuple(found)


def _store_nodes(held: dict[str, Any]) -> list[Any]:
    """Every node in (a group of) Hydra's ConfigStore, in the store's order."""
    nodes: list[Any] = []
    for entry in held.values():
        nodes.extend(_store_nodes(entry) if isinstance(entry, dict) else [entry])
    return nodes


_COMPOSITIONS = _Compositions()


def augment_preset(name: str) -> AugmentSpec:
    """The ``conf/augment/<name>.yaml`` preset as a spec (for use without Hydra)."""
    presets = sorted(p.stem for p in (config_dir() / "augment").glob("*.yaml"))
    if name not in presets:
        raise ConfigError(f"augment={name!r} is unknown: choose one of {', '.join(presets)}")
    return to_spec(compose_config([f"augment={name}"]).augment, AugmentSpec)


def load_saved_config(path: Path) -> DictConfig:
    """A ``config.yaml`` a training run saved, typed again: composed with the run's
    ``data``, ``backend`` and ``model`` options, then every saved value put in place (a
    node of a schema key by key, any other value replaced whole, so an op the run had
    removed stays removed). A file that is missing or not such a config is one line."""
    try:
        saved = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read the run's config ({exc})") from None
    if not isinstance(saved, dict) or not {"data", "backend", "model"} <= set(saved):
        raise ConfigError(
            f"{path} is not a config a training run saved (python -m dali_pipes.train)"
        )
    groups = [f"{group}={saved[group].get('name')}" for group in ("data", "backend", "model")]
    typed = compose_config(groups)
    try:
        _fill(typed, OmegaConf.create(saved))
    except Exception as exc:
        error = config_error(exc)
        if error is None:
            raise
        raise ConfigError(f"{path}: {error}") from None
    check_augment(typed)
    return typed


def _fill(typed: DictConfig, saved: DictConfig) -> None:
    """``saved``'s values into ``typed``: schema nodes key by key, anything else whole."""
    for key, value in saved.items_ex(resolve=False):  # sub-nodes as they are, unresolved
        held = OmegaConf.get_type(typed, str(key)) if key in typed else None
        if held is not None and is_dataclass(held) and isinstance(value, DictConfig):
            node = typed[key]
            assert isinstance(node, DictConfig)
            _fill(node, value)
        elif isinstance(value, DictConfig | ListConfig):
            typed[key] = OmegaConf.to_container(value)
        else:
            typed[key] = saved[key]
