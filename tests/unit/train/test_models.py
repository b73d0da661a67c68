"""``model.weights_file``: a local state dict loaded into the built model, tensors of
another shape (a head for other classes) left fresh; a bad file is one line."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch

from dali_pipes import compose_config
from dali_pipes.errors import ConfigError
from dali_pipes.train.models import build_model


def segmenter(*extra: str) -> torch.nn.Module:
    return build_model(compose_config(["task=segmentation", *extra]), num_classes=5)


def test_a_weights_file_fills_every_tensor_that_fits_and_leaves_the_head_fresh(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    torch.manual_seed(0)
    other = build_model(compose_config(["task=segmentation"]), num_classes=9)  # another head
    path = tmp_path / "weights.pth"
    torch.save({"model": other.state_dict()}, path)  # a dali_pipes checkpoint's layout
    with caplog.at_level(logging.INFO, "dali_pipes.train"):
        model = segmenter(f"model.weights_file={path}")
    own, theirs = model.state_dict(), other.state_dict()
    assert all(torch.equal(own[k], theirs[k]) for k in own if not k.startswith("classifier"))
    assert own["classifier.weight"].shape[0] == 5
    assert not torch.equal(own["classifier.bias"][:5], theirs["classifier.bias"][:5])
    assert f"of the model's {len(own)} tensors from {path}" in caplog.text
    assert "kept fresh (not in the file or another shape): classifier.bias" in caplog.text


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "is not a file; give a local .pth file"),
        (b"not a pickle", "cannot be read as weights"),
        ({"x": torch.zeros(1)}, "has no tensor that fits"),
    ],
    ids=["missing", "not-weights", "other-architecture"],
)
def test_a_weights_file_that_cannot_serve_is_one_line_naming_it(
    tmp_path: Path, content: object, message: str
) -> None:
    path = tmp_path / "weights.pth"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        torch.save(content, path)
    with pytest.raises(ConfigError, match=message) as caught:
        segmenter(f"model.weights_file={path}")
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)
