"""Each sample's image size, read from its header once and kept.

The crop windows are drawn in NumPy from each image's size (:meth:`Pipeline.draw`), so the
feed needs the sizes of a batch before DALI decodes it. Parsing a header is Python work per
image; the sizes are therefore kept per sample, filled the first time a sample's bytes are
read (on the feed's read threads, a batch at a time, so a million-file dataset costs no
start-up scan) and read again only when the bytes' length changes (the file was replaced).
The header check (an image at all, its size, ``data.max_pixels``) is the one every reader
makes (:func:`dali_pipes.image.decode.header_size`), made once per sample too.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dali_pipes.errors import DataError
from dali_pipes.image.decode import Blob, header_size


class HeaderSizes:
    """The (height, width) of each of ``n`` samples, from its header."""

    def __init__(self, n: int, max_pixels: int | None) -> None:
        self.max_pixels = max_pixels
        self.hw = np.zeros((n, 2), np.int64)
        #: The length of the bytes each size was read from; -1: not read yet.
        self.nbytes = np.full(n, -1, np.int64)

    def check(
        self, indices: np.ndarray, blobs: list[Blob], name: Callable[[int], str]
    ) -> tuple[np.ndarray, np.ndarray]:
        """The sizes of samples ``indices`` whose bytes are ``blobs`` ([n, 2], zero for a
        bad one) and which are bad: a blob whose header fails its check is replaced, in
        ``blobs``, by the error naming it (``name(i)``: sample ``i``'s path)."""
        lengths = np.fromiter(
            (len(b) if isinstance(b, np.ndarray) else -1 for b in blobs), np.int64, len(blobs)
        )
        bad = lengths < 0
        for p in np.flatnonzero(bad | (self.nbytes[indices] != lengths)):
            i = int(indices[p])
            try:
                self.hw[i] = header_size(blobs[p], name(i), self.max_pixels)
            except DataError as exc:
                blobs[p], bad[p] = exc, True
                continue
            self.nbytes[i] = lengths[p]
        return np.where(bad[:, None], 0, self.hw[indices]), bad
