"""The embedded dataset is deterministic, complete and safe to generate concurrently."""

from __future__ import annotations

import hashlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from torchvision.datasets import ImageFolder

from dali_pipes.data.sample_set import CLASSES, ensure_sample_dataset


def digest(root: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.jpg")):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def test_generation_is_deterministic_and_laid_out_as_imagefolder(tmp_path: Path) -> None:
    a = ensure_sample_dataset(tmp_path / "a", 3, 2)
    b = ensure_sample_dataset(tmp_path / "b", 3, 2)
    assert digest(a) == digest(b)
    train, val = ImageFolder(str(a / "train")), ImageFolder(str(a / "val"))
    assert tuple(train.classes) == tuple(sorted(CLASSES))
    assert len(train) == 3 * len(CLASSES) and len(val) == 2 * len(CLASSES)
    sizes = {train.loader(p).size for p, _ in train.samples}
    assert len(sizes) > 10, "sizes and aspect ratios should vary"


def test_concurrent_generation_leaves_one_complete_dataset(tmp_path: Path) -> None:
    with ThreadPoolExecutor(4) as pool:
        roots = list(pool.map(lambda _: ensure_sample_dataset(tmp_path, 2, 1), range(4)))
    assert len(set(roots)) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [roots[0].name], "no temporary leftovers"
    assert len(list(roots[0].rglob("*.jpg"))) == 3 * len(CLASSES)
