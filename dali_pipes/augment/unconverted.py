"""Graph code that DALI's AutoGraph calls as it is, not rewritten.

A graph with ``enable_conditionals`` (an op that chooses per sample, on the GPU) is
defined through AutoGraph: DALI rewrites the graph function, and every function it calls
down the call tree, so that an ``if`` on a DataNode becomes a DALI conditional. Each
rewrite parses and transforms the function's source (once per process), and each call of
a rewritten function goes through AutoGraph. A function that only chains operators, with
no ``if`` on a DataNode, needs none of it: :func:`unconverted` marks it with DALI's
``do_not_convert``, and AutoGraph calls it, and what it calls, as plain Python. Operators
it creates inside a conditional's branch still belong to that branch (DALI tracks that
when an operator is called, as for its own unconverted functions).

DALI is imported on the marked function's first call, so marking one imports nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

#: Each marked function as DALI's ``do_not_convert`` wraps it, made on its first call.
_PLAIN: dict[Callable[..., Any], Callable[..., Any]] = {}


def unconverted(func: F) -> F:
    """``func`` (graph code with no ``if`` on a DataNode), called by AutoGraph unchanged."""

    @functools.wraps(func)
    def call(*args: Any, **kwargs: Any) -> Any:
        plain = _PLAIN.get(func)
        if plain is None:
            from nvidia.dali.pipeline import do_not_convert

            plain = _PLAIN[func] = do_not_convert(func)
        return plain(*args, **kwargs)

    return call  # type: ignore[return-value]
