"""How ``pack`` stores each image: at most ``pack.max_side`` pixels on its long side if
asked, then, for a JPEG, baseline with optimised Huffman tables where that is lossless.

Both make every epoch after the pack cheaper to decode
(:mod:`dali_pipes.image.stored_size`, :mod:`dali_pipes.image.baseline`). A file that
cannot be decoded is stored as it is, so reading it from the pack meets the data's
bad-file policy exactly as reading it from the folder does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal

from dali_pipes.data.shards import ShardSample
from dali_pipes.errors import DataError
from dali_pipes.image.baseline import rewrite
from dali_pipes.image.stored_size import shrunk
from dali_pipes.runtime.distributed import cpu_share

#: What happened to one image: resized (and maybe optimised), converted to baseline,
#: optimised (baseline already), or kept byte for byte.
Stored = Literal["resized", "converted", "optimised", "kept"]


@dataclass(frozen=True)
class Storing:
    """How images are stored: ``jpegtran`` (its path; None: JPEGs as they are), and
    ``max_side`` (None: every size kept) with the JPEG ``quality`` of a resized image."""

    jpegtran: str | None
    max_side: int | None
    quality: int

    @property
    def changes_files(self) -> bool:
        """Whether any file may be stored other than byte for byte."""
        return self.jpegtran is not None or self.max_side is not None

    def image(self, data: bytes, path: str) -> tuple[bytes, Stored]:
        """``data`` (the file at ``path``) as stored, and what was done to it."""
        change: Stored = "kept"
        if self.max_side is not None:
            try:
                smaller = shrunk(data, path, self.max_side, self.quality)
            except DataError:  # decoding it for training meets the bad-file policy then
                smaller = None
            if smaller is not None:
                data, change = smaller, "resized"
        if self.jpegtran is not None:
            done = rewrite(data, path, self.jpegtran)
            data = done.data
            if change == "kept":
                change = done.change
        return data, change

    def samples(
        self, samples: Sequence[ShardSample | None], tally: Tally
    ) -> list[ShardSample | None]:
        """The samples as stored, in threads (jpegtran runs in a process of its own and
        decoding, resizing and the pixel check outside the GIL); counted in ``tally``."""

        def store(sample: ShardSample | None) -> tuple[ShardSample | None, Stored]:
            if sample is None:
                return None, "kept"
            data, change = self.image(sample.data, sample.source)
            ext = "jpg" if change == "resized" else sample.ext
            return dataclasses.replace(sample, data=data, ext=ext), change

        with ThreadPoolExecutor(cpu_share()) as pool:
            done = list(pool.map(store, samples))
        for before, (after, change) in zip(samples, done, strict=True):
            if before is not None and after is not None:
                tally.add(change, len(before.data), len(after.data))
        return [after for after, _ in done]


@dataclass
class Tally:
    """What storing changed in a shard, or a pack: images resized, JPEGs converted to
    baseline (progressive or arithmetic-coded) or made smaller (baseline already), and
    the bytes read and stored."""

    resized: int = 0
    converted: int = 0
    optimised: int = 0
    bytes_before: int = 0
    bytes_after: int = 0

    def add(self, change: Stored, before: int, after: int) -> None:
        """Count one image of ``before`` bytes stored in ``after`` bytes."""
        if change in ("resized", "converted", "optimised"):
            setattr(self, change, getattr(self, change) + 1)
        self.bytes_before += before
        self.bytes_after += after

    def record(self) -> dict[str, Any]:
        """The manifest's entry (and a shard sidecar's)."""
        return dataclasses.asdict(self)

    def merge(self, record: dict[str, Any] | None) -> None:
        """Add a shard's :meth:`record` (None: a shard packed without storing changes)."""
        for name, value in (record or {}).items():
            setattr(self, name, getattr(self, name) + int(value))

    def line(self, max_side: int | None) -> str:
        """One line for the user."""
        parts = []
        if max_side is not None:
            parts.append(f"{self.resized} images resized to at most {max_side} px")
        parts.append(f"{self.converted} JPEGs converted to baseline")
        parts.append(f"{self.optimised} baseline JPEGs made smaller")
        return (
            f"stored: {', '.join(parts)}; "
            f"{self.bytes_before / 1e6:.1f} -> {self.bytes_after / 1e6:.1f} MB"
        )


__all__ = ["Storing", "Tally"]
