"""After DALI failed on the batches in flight: which file its own decoder rejects.

Each file is decoded alone by a :class:`Probe` with the graph's own decoding op, options,
device and crop window (:meth:`~dali_pipes.backends.dali.graph.DaliGraph.decode`), so a
file is named only when that very decoder rejects it; the search is bounded in files and
seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dali_pipes.backends.dali import lifecycle
from dali_pipes.backends.dali.failures import Failure, failure_kind, reason, sample_paths
from dali_pipes.backends.dali.feed import InFlight
from dali_pipes.backends.dali.graph import DaliGraph
from dali_pipes.data.interface import Source
from dali_pipes.errors import DataError
from dali_pipes.image.decode import decode_bytes

#: The note a memory or GPU failure gets (the loader's, which knows its devices).
Hint = Callable[[Failure], str]


@dataclass
class BadFileSearch:
    """The search over ``source``'s files with ``probe`` (its graph's decoder), within
    ``limit`` files and ``seconds``. The probe is the caller's, kept from one search to the
    next: on a GPU each build of its pipeline costs about as much as decoding hundreds of
    files, and only a file that fails it needs a new one."""

    probe: Probe
    source: Source
    max_pixels: int
    limit: int = 1024
    seconds: float = 60.0

    def culprits(self, suspects: list[InFlight], why: str) -> list[tuple[str, DataError]]:
        """The files DALI had in flight that its decoder rejects, each with a one-line error.

        Each file is decoded alone by :class:`Probe` with the graph's own decoding op,
        options, device and crop window, oldest batch first (the one DALI was delivering
        failed); the search ends with the first batch that holds a culprit -- another bad
        file further on fails again and is found then. It is bounded by
        :attr:`limit` files and :attr:`seconds`; past that, a one-line error
        names the batch's failure and its suspects. An empty list: every file decodes alone.
        """
        source = self.source
        todo = [
            (int(i), batch.anchor[k], batch.shape[k], n)
            for n, batch in enumerate(suspects)
            for k, i in enumerate(batch.indices)
        ]
        found: list[tuple[str, DataError]] = []
        deadline = time.monotonic() + self.seconds
        for done, (i, anchor, shape, n) in enumerate(todo):
            if found and n != todo[done - 1][3]:
                break  # the batch with the culprits is done
            if done >= self.limit or time.monotonic() > deadline:
                if found:
                    break
                left = [source.name(t[0]) for t in todo[done:]]
                raise DataError(
                    f"DALI failed on a batch ({why}); the search for the file stopped "
                    f"after {done} of {len(todo)} files (limits: {self.limit} files, "
                    f"{self.seconds:g} s); suspects: {sample_paths(left)}; find bad "
                    "files with python -m dali_pipes.scan, then data.exclude=<its manifest>"
                )
            path, blob = source.name(i), source.read([i])[0]
            if isinstance(blob, DataError):
                found.append((path, blob))
                continue
            rejected = self.probe(blob, anchor, shape)
            if rejected:
                found.append((path, self.decode_error(path, blob, rejected)))
        return found

    def decode_error(self, path: str, blob: np.ndarray, why: str) -> DataError:
        """The one-line error for a file DALI's decoder rejects, with torchvision's reason
        when it rejects the file too (more readable than nvImageCodec's status)."""
        try:
            decode_bytes(blob, path, self.max_pixels)
        except DataError as exc:
            return exc
        return DataError(f"{path}: DALI cannot decode it ({why}); remove or replace it")


class Probe:
    """Decodes one file at a time with a graph's decoder (:meth:`DaliGraph.decode`).

    One batch-of-one pipeline serves every file of every search of its loader and is
    rebuilt only after it fails (a DALI pipeline is unusable after an error), so searches
    cost one build per bad file found, not one per file or per search.
    """

    def __init__(self, graph: DaliGraph, hint: Hint) -> None:
        self.graph = graph
        self.hint = hint
        self._pipe: Any = None

    def _build(self) -> Any:
        pipe = self.graph.define_decoder()
        pipe.build()
        return lifecycle.hold(pipe)

    def __call__(self, blob: np.ndarray, anchor: np.ndarray, shape: np.ndarray) -> str:
        """Why the decoder rejects this file ("" when it decodes it).

        A memory or GPU failure is no verdict on the file: it is raised (with the same note
        as in the main pipeline) and ends the search, as does a failure to build the probe.
        """
        try:
            if self._pipe is None:
                self._pipe = self._build()
            self._pipe.run(
                encoded=[np.asarray(blob, dtype=np.uint8)],
                anchor=[np.asarray(anchor, dtype=np.float32)],
                shape=[np.asarray(shape, dtype=np.float32)],
            )
        except Exception as exc:
            built = self._pipe is not None
            lifecycle.end(self._pipe, exc)
            self._pipe = None  # its last reference: DALI shuts it down here, not with the error
            kind = failure_kind(exc)
            if kind in ("memory", "device"):
                exc.add_note(self.hint(kind))
                raise
            if not built or kind == "other":
                raise
            return reason(exc)
        return ""

    def close(self) -> None:
        """Release the probe's pipeline."""
        lifecycle.let_go(self._pipe)
        self._pipe = None

    def orphan(self) -> None:
        """Hand the pipeline to :func:`lifecycle.orphan` (its owner is collected on a thread
        that must not destroy a pipeline: see :mod:`.lifecycle`)."""
        if self._pipe is not None:
            lifecycle.orphan(self._pipe)
            self._pipe = None
