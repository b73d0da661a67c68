"""Hydra composition: ``conf/`` found (a checkout or the wheel), a config composed with
command-line style overrides, a preset looked up by name.

The schemas every YAML option in ``conf/`` extends are in :mod:`dali_pipes.config.schemas`
(registered when ``dali_pipes`` is imported); a config becomes specs in
:mod:`dali_pipes.config.specs`. ``conf/`` sits at the top of the repository and ships
inside the wheel as ``dali_pipes.conf``; :func:`config_dir` finds it either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import is_dataclass
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig, ListConfig, OmegaConf

from dali_pipes.augment.spec import AugmentSpec
from dali_pipes.config.schemas import config_dir, register
from dali_pipes.config.specs import check_augment, config_error, to_spec
from dali_pipes.errors import ConfigError

__all__ = ["augment_preset", "compose_config", "config_dir", "load_saved_config"]


def compose_config(overrides: Sequence[str] = (), config_name: str = "train") -> DictConfig:
    """Compose ``conf/<config_name>.yaml`` with command-line style overrides (for tests,
    notebooks, and inside a tool's ``@hydra.main``, whose search path is ``conf/`` too)."""
    register()  # done by ``import dali_pipes``; again in case the ConfigStore was cleared
    try:
        if GlobalHydra.instance().is_initialized():  # inside a tool's @hydra.main: conf/
            cfg = compose(config_name=config_name, overrides=list(overrides))
        else:
            with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
                cfg = compose(config_name=config_name, overrides=list(overrides))
    except Exception as exc:
        error = config_error(exc)
        if error is None:
            raise
        raise error from None
    check_augment(cfg)
    return cfg


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
