"""The embedded default dataset: real JPEG files, generated deterministically, no download.

Six classes of drawn shapes and textures (circle, ring, square, triangle, horizontal and
vertical stripes) on noisy gradient backgrounds, with random colours, positions, sizes
(112-320 px per side) and aspect ratios. A small CNN tells them apart well above chance
within a few CPU minutes, which is what the default ``python -m dali_pipes.train`` needs;
they are encoded as ordinary baseline JPEGs so every decoder in the project is exercised.

Generation writes into a temporary directory and renames it into place, so a crash never
leaves a half-written dataset and several processes (torchrun ranks) may race safely: the
content is a pure function of the parameters, and the first rename wins.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

CLASSES = ("circle", "ring", "square", "triangle", "hstripes", "vstripes")
VERSION = 1


def default_cache_dir() -> Path:
    """Where the sample dataset is generated: ``$DALI_PIPES_CACHE`` or ``~/.cache/dali_pipes``."""
    return Path(os.environ.get("DALI_PIPES_CACHE", Path.home() / ".cache" / "dali_pipes"))


def ensure_sample_dataset(
    root: str | os.PathLike[str] | None, train_per_class: int, val_per_class: int
) -> Path:
    """Return the dataset directory (with ``train/`` and ``val/``), generating it if absent."""
    base = Path(root).expanduser() if root else default_cache_dir()
    target = base / f"sample-v{VERSION}-{train_per_class}x{val_per_class}"
    if not target.is_dir():
        write_sample_dataset(target, train_per_class, val_per_class)
    return target


def describe(train_per_class: int, val_per_class: int) -> str:
    """What a written sample dataset holds, as its ``README.txt`` says it."""
    return (
        f"dali_pipes sample dataset, version {VERSION}: {len(CLASSES)} classes "
        f"({', '.join(CLASSES)}) of drawn shapes as JPEG files, "
        f"{train_per_class} per class in train/ and {val_per_class} per class in val/.\n"
    )


def copy_sample_dataset(target: Path, train_per_class: int, val_per_class: int) -> None:
    """Write the dataset to ``target`` as a copy of the one in the cache folder (generated
    there first if absent, where the default training job finds it too): copying a few
    megabytes of files is faster than drawing and encoding them again."""
    cached = ensure_sample_dataset(None, train_per_class, val_per_class)
    publish(target, describe(train_per_class, val_per_class), lambda tmp: _copy(cached, tmp))


def write_sample_dataset(target: Path, train_per_class: int, val_per_class: int) -> None:
    """Write the dataset to ``target`` (which must not exist yet): ``train/<class>/`` and
    ``val/<class>/`` as torchvision's ``ImageFolder`` reads them, and a ``README.txt``."""

    def draw(tmp: Path) -> None:
        for split, count in (("train", train_per_class), ("val", val_per_class)):
            for label, name in enumerate(CLASSES):
                folder = tmp / split / name
                folder.mkdir(parents=True)
                for i in range(count):
                    seed = (VERSION, 0 if split == "train" else 1, label, i)
                    (folder / f"{name}_{i:04d}.jpg").write_bytes(_render(label, seed))

    publish(target, describe(train_per_class, val_per_class), draw)


def _copy(source: Path, tmp: Path) -> None:
    shutil.copytree(source, tmp, dirs_exist_ok=True)


def publish(target: Path, readme: str, fill: Callable[[Path], None]) -> None:
    """``fill`` a temporary sibling of ``target``, add ``readme`` as its README, and rename
    it into place: ``target`` is either complete or absent, and a lost race with another
    process writing the same dataset is not an error."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        fill(tmp)
        (tmp / "README.txt").write_text(readme)
        try:
            tmp.rename(target)
        except OSError:
            if not target.is_dir():  # not a lost race: a real failure
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _render(label: int, seed: tuple[int, ...]) -> bytes:
    rng = np.random.default_rng(seed)
    h, w = (int(v) for v in rng.integers(112, 321, size=2))
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    c0, c1 = rng.uniform(0, 255, size=(2, 3)).astype(np.float32)
    t = (xx / w if rng.random() < 0.5 else yy / h)[..., None]
    img = c0 * (1 - t) + c1 * t
    fg = contrasting(rng, img.reshape(-1, 3).mean(axis=0))

    short = min(h, w)
    cy, cx = rng.uniform(0.35, 0.65) * h, rng.uniform(0.35, 0.65) * w
    r = rng.uniform(0.22, 0.4) * short
    name = CLASSES[label]
    if name == "circle":
        mask = (yy - cy) ** 2 + (xx - cx) ** 2 <= r**2
    elif name == "ring":
        d = np.sqrt((yy - cy) ** 2 + (xx - cx) ** 2)
        mask = (d <= r) & (d >= r * rng.uniform(0.5, 0.7))
    elif name == "square":
        mask = (np.abs(yy - cy) <= r * 0.85) & (np.abs(xx - cx) <= r * 0.85)
    elif name == "triangle":
        rel = (yy - (cy - r)) / (2 * r)  # 0 at the apex, 1 at the base
        mask = (rel >= 0) & (rel <= 1) & (np.abs(xx - cx) <= rel * r)
    else:
        period = rng.uniform(10, 22)
        axis = yy if name == "hstripes" else xx
        mask = np.sin(2 * np.pi * axis / period + rng.uniform(0, 2 * np.pi)) > 0
    img[mask] = fg
    img += rng.normal(0, 8, size=img.shape).astype(np.float32)
    pixels = torch.from_numpy(np.clip(img, 0, 255).astype(np.uint8)).permute(2, 0, 1)
    from torchvision.io import encode_jpeg  # on first use: see augment.tv_functional

    return bytes(encode_jpeg(pixels.contiguous(), quality=int(rng.integers(80, 96))).numpy())


def contrasting(rng: np.random.Generator, background: np.ndarray) -> np.ndarray:
    """A colour at least 100 levels (Euclidean) away from the background's mean."""
    for _ in range(100):
        colour = rng.uniform(0, 255, size=3).astype(np.float32)
        if np.linalg.norm(colour - background) > 100:
            return colour
    return (255 - background).astype(np.float32)
