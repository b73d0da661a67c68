"""``_target_`` nodes: the class or function a node names, resolved and checked.

The trainer's ``optimizer`` and ``schedule`` are Hydra-style nodes, so a recipe can name
``torch.optim.AdamW``, :class:`dali_pipes.train.optimizers.LARS` or its own class without
code here:

- ``trainer.optimizer``: ``_target_`` is called with the parameter groups (weight decay
  ``trainer.weight_decay`` on conv/linear weights, none on norm/bias), ``lr`` (the peak
  learning rate), ``momentum`` / ``nesterov`` from ``trainer.momentum`` /
  ``trainer.nesterov`` when its constructor takes them, and the node's other keys.
- ``trainer.schedule``: ``_target_`` is called with the optimizer, whichever of
  ``total_steps``, ``warmup_steps`` and ``steps_per_epoch`` it takes, and the node's other
  keys, and returns a scheduler stepped once per iteration.

:func:`check_trainer_targets` imports both and checks the node's keys against the
constructor's signature when a config node becomes a
:class:`~dali_pipes.config.trainer.TrainerSpec`, so a misspelt class or argument fails in
one line before any data is read. Module paths that configs written before the package's
layout changed name (``dali_pipes.recipe.warmup_cosine``, ``dali_pipes.optim.LARS``,
``dali_pipes.models.SmallCNN``) still resolve: ``dali_pipes`` maps them
(``dali_pipes.LEGACY_MODULES``).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping
from typing import Any

from hydra.utils import get_object

from dali_pipes.config.trainer import OPTIMIZER_SUPPLIED, SCHEDULE_SUPPLIED, TrainerSpec
from dali_pipes.errors import ConfigError, require


def locate(node: Mapping[str, Any], key: str) -> Callable[..., Any]:
    """The callable a ``_target_`` node names (imported as Hydra's ``instantiate`` does), or
    a one-line :class:`ConfigError` naming ``<key>._target_``."""
    target = node.get("_target_")
    if not isinstance(target, str) or not target:
        raise ConfigError(
            f"{key}._target_={target!r} is invalid: must name a class or function, "
            "e.g. torch.optim.SGD"
        )
    try:
        obj = _get_object(target)
    except Exception as exc:  # ImportError, or whatever the imported module raises
        reason = [ln.strip() for ln in str(exc).splitlines() if ln.strip()] or [type(exc).__name__]
        raise ConfigError(
            f"{key}._target_={target!r} is invalid: cannot import it ({reason[-1]})"
        ) from None
    require(callable(obj), f"{key}._target_", target, "is not a class or function")
    fn: Callable[..., Any] = obj
    return fn


def _get_object(target: str) -> Any:
    """Hydra's public lookup of a dotted path (what ``instantiate`` imports), without the
    error record it logs before raising: the caller raises that error in one line."""
    log = logging.getLogger("hydra.utils")
    log.addFilter(_drop)
    try:
        return get_object(target)
    finally:
        log.removeFilter(_drop)


def _drop(record: logging.LogRecord) -> bool:
    return False


def parameters(fn: Callable[..., Any]) -> Mapping[str, inspect.Parameter] | None:
    """``fn``'s parameters, or None when it accepts any keyword or has no signature."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return None
    return params


def takes(fn: Callable[..., Any], name: str) -> bool:
    """Whether ``fn`` has a parameter ``name`` (a ``**kwargs`` catch-all does not count)."""
    params = parameters(fn)
    return params is not None and name in params


def node_kwargs(node: Mapping[str, Any]) -> dict[str, Any]:
    """A ``_target_`` node's own arguments (everything but ``_target_``)."""
    return {k: v for k, v in node.items() if k != "_target_"}


def check_target(node: Any, key: str, supplied: Mapping[str, str]) -> None:
    """Check node ``key`` before building it: a mapping with an importable ``_target_``,
    none of the arguments the trainer supplies (``supplied``), only arguments the target takes."""
    require(
        isinstance(node, Mapping),
        key,
        node,
        "must be a node with a _target_ (e.g. {_target_: torch.optim.SGD})",
    )
    fn = locate(node, key)
    for name in node_kwargs(node):
        require(
            name not in supplied,
            f"{key}.{name}",
            node[name],
            f"is set by the trainer from {supplied.get(name)}; remove it from {key}",
        )
    params = parameters(fn)
    if params is not None:
        for name in node_kwargs(node):
            require(
                name in params,
                f"{key}.{name}",
                node[name],
                f"{node['_target_']} takes no such argument "
                f"(it takes {', '.join(p for p in params if p not in supplied and p != 'self')})",
            )


def build(node: Mapping[str, Any], key: str, fn: Callable[..., Any], **supplied: Any) -> Any:
    """``fn(**supplied, **node's arguments)``; a value it refuses is a one-line ConfigError."""
    try:
        return fn(**supplied, **node_kwargs(node))
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"{key}={dict(node)!r} cannot be built: {reason}") from None


def check_trainer_targets(spec: TrainerSpec) -> None:
    """The optimizer and schedule ``_target_`` nodes: importable, known arguments only,
    none of those the trainer supplies itself."""
    check_target(spec.optimizer, "trainer.optimizer", OPTIMIZER_SUPPLIED)
    check_target(spec.schedule, "trainer.schedule", SCHEDULE_SUPPLIED)
