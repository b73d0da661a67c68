"""Command-line overrides split the way Hydra itself treats them: those that choose what is
composed, and plain ``key=value`` ones it applies to the composed config afterwards.

Hydra composes a config in two steps: the overrides that pick or change configs (a group
option such as ``data=folder``, ``+``/``++``/``~``, ``@package``) shape the defaults list
and the merge of its YAML files; the others set values, applied in order with
``OmegaConf.update(cfg, key, value, merge=True)`` once everything is merged. Only the
first step reads and merges files (a tenth of a second per composition), and most
compositions differ in the second alone (a data root, an output folder, a batch size), so
:mod:`dali_pipes.config.compose` keeps a composition of the first step and applies the
second itself (:func:`assign`), as Hydra does, errors included.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, OverrideType
from hydra.errors import ConfigCompositionException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

__all__ = ["assign", "split"]


def split(root: Path, overrides: Sequence[str]) -> tuple[tuple[str, ...], tuple[Override, ...]]:
    """``overrides`` as (those Hydra must compose with, the plain ones after them) for the
    configs under ``root``.

    A plain override sets a value (``key=value``, a key that is no config group, or any key
    to a dict) outside ``hydra``; it is split off only when no override that Hydra applies
    as a value too (``+``, ``++``, ``~``, ...) comes after it, so the order in which values
    are set stays Hydra's. Group choices go to Hydra wherever they are: it reads them all
    before it sets any value. Overrides that do not parse all go to Hydra, which says why."""
    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except Exception:  # Hydra parses them again and reports the mistake
        return tuple(overrides), ()
    composed: list[str] = []
    plain: list[Override] = []
    ordered = True  # no value that Hydra sets comes after this one
    for text, override in reversed(list(zip(overrides, parsed, strict=True))):
        kind = _kind(root, override)
        if kind == "plain" and ordered:
            plain.insert(0, override)
            continue
        composed.insert(0, text)
        if kind != "choice":
            ordered = False
    return tuple(composed), tuple(plain)


def assign(cfg: DictConfig, plain: Sequence[Override]) -> None:
    """Set each plain override's value in ``cfg`` (a composed config, in struct mode), in
    order, as Hydra sets it; a key that does not exist or a value of the wrong type raises
    Hydra's own error, with its message."""
    for override in plain:
        try:
            try:
                OmegaConf.update(cfg, override.key_or_group, override.value(), merge=True)
            except (ConfigAttributeError, ConfigKeyError) as exc:
                raise ConfigCompositionException(
                    f"Could not override '{override.key_or_group}'."
                    f"\nTo append to your config use +{override.input_line}"
                ) from exc
        except OmegaConfBaseException as exc:
            raise ConfigCompositionException(
                f"Error merging override {override.input_line}"
            ) from exc


def _kind(root: Path, override: Override) -> str:
    """``plain`` (a value Hydra sets after composing, and this module may), ``choice``
    (a group option: shapes what is composed), or ``other`` (left to Hydra)."""
    if override.type is not OverrideType.CHANGE or override.package is not None:
        return "other"
    if override.is_sweep_override():
        return "other"
    key = override.key_or_group
    try:
        value: Any = override.value()
    except Exception:  # a value Hydra must interpret: leave it to Hydra
        return "other"
    if _is_group(root, key):
        return "plain" if isinstance(value, dict) and not _hydras(key) else "choice"
    return "other" if _hydras(key) else "plain"


def _is_group(root: Path, key: str) -> bool:
    """Whether ``key`` names a config group: a folder under ``root`` or a group of Hydra's
    ConfigStore (ours and Hydra's own)."""
    if (root / key).is_dir():
        return True
    node: Any = ConfigStore.instance().repo
    for part in key.split("/"):
        node = node.get(part) if isinstance(node, dict) else None
    return isinstance(node, dict)


def _hydras(key: str) -> bool:
    """Whether ``key`` is in Hydra's own node (``hydra.*``, ``hydra/...``)."""
    return key.split("/")[0].split(".")[0] == "hydra"
