"""Hydra composition: ``conf/`` found (a checkout or the wheel), a config composed with
command-line style overrides, a preset looked up by name.

The schemas every YAML option in ``conf/`` extends are in :mod:`dali_pipes.config.schemas`
(registered when ``dali_pipes`` is imported); a config becomes specs in
:mod:`dali_pipes.config.specs`. ``conf/`` sits at the top of the repository and ships
inside the wheel as ``dali_pipes.conf``; :func:`config_dir` finds it either way.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from dali_pipes.augment.spec import AugmentSpec
from dali_pipes.config.schemas import register
from dali_pipes.config.specs import check_augment, config_error, to_spec
from dali_pipes.errors import ConfigError


def config_dir() -> Path:
    """``conf/``: packaged as ``dali_pipes.conf`` in a wheel, top-level in a checkout."""
    spec = importlib.util.find_spec("dali_pipes.conf")
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(__file__).resolve().parents[2] / "conf"


def compose_config(overrides: Sequence[str] = (), config_name: str = "train") -> DictConfig:
    """Compose ``conf/<config_name>.yaml`` with command-line style overrides (for tests,
    notebooks and tools that do not go through ``@hydra.main``)."""
    register()  # done by ``import dali_pipes``; again in case the ConfigStore was cleared
    try:
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
