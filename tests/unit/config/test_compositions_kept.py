"""A composition made once in a process is given again as a copy, and made afresh when
what it depends on changes: a YAML file under ``conf/``, a ConfigStore node, a registry."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from hydra.core.config_store import ConfigStore

from dali_pipes.augment import register_op
from dali_pipes.augment.base import OPS
from dali_pipes.augment.ops.flip import HorizontalFlip
from dali_pipes.config import compose as composition
from dali_pipes.config.compose import compose_config, config_dir
from dali_pipes.errors import ConfigError


def test_a_composition_given_again_is_a_copy_the_caller_may_change() -> None:
    first = compose_config(["augment=deit", "data.batch_size=24"])
    first.data.batch_size = 7
    again = compose_config(["augment=deit", "data.batch_size=24"])
    assert again.data.batch_size == 24 and again is not first
    assert again == compose_config(["augment=deit", "data.batch_size=24"])


def test_a_changed_yaml_file_is_composed_afresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf = shutil.copytree(config_dir(), tmp_path / "conf")
    monkeypatch.setattr(composition, "config_dir", lambda: conf)
    assert compose_config(["data=sample"]).data.batch_size == 32
    sample = conf / "data" / "sample.yaml"
    sample.write_text(sample.read_text().replace("batch_size: 32", "batch_size: 320"))
    assert compose_config(["data=sample"]).data.batch_size == 320


def test_a_changed_configstore_node_is_composed_afresh() -> None:
    store = ConfigStore.instance()
    try:
        store.store(group="kept_probe", name="one", node={"value": 1})
        assert compose_config(["+kept_probe=one"]).kept_probe.value == 1
        store.store(group="kept_probe", name="one", node={"value": 2})
        assert compose_config(["+kept_probe=one"]).kept_probe.value == 2
    finally:
        store.repo.pop("kept_probe", None)


def test_an_op_unregistered_since_is_refused_although_the_composition_was_kept() -> None:
    overrides = ["+augment.train.ops.kept_probe_op={}"]
    with OPS.restored():

        @register_op
        @dataclass(frozen=True)
        class KeptProbeOp(HorizontalFlip):
            name = "kept_probe_op"

        assert "kept_probe_op" in compose_config(overrides).augment.train.ops
    with pytest.raises(ConfigError, match="kept_probe_op"):
        compose_config(overrides)
