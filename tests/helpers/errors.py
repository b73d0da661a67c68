"""Small trees, a folder config, and the one-line check of an error message."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import write_jpeg
from omegaconf import DictConfig

from dali_pipes import compose_config


def folder_cfg(root: Path | str, *extra: str, backend: str = "dali") -> DictConfig:
    return compose_config(
        [
            "data=folder",
            f"data.root={root}",
            f"backend={backend}",
            "backend.device=cpu",
            "data.batch_size=2",
            "augment.train.crop.size=16",
            "augment.val.crop.resize=16",
            "augment.val.crop.size=16",
            *(["backend.num_workers=0"] if backend == "torch" else []),
            *extra,
        ]
    )


def one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    message = str(exc.value)
    assert "\n" not in message, message
    return message


def small_tree(root: Path, classes: dict[str, int]) -> Path:
    rng = np.random.default_rng(1)
    for name, count in classes.items():
        (root / name).mkdir(parents=True, exist_ok=True)
        for i in range(count):
            write_jpeg(
                root / name / f"{i}.jpg", rng.integers(0, 255, size=(24, 32, 3), dtype=np.uint8)
            )
    return root
