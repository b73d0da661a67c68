"""One registry each for sources and backends, the Hydra schemas derived from them
(dali_pipes/data/registry.py, dali_pipes/backends/registry.py, config/schemas.py)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pytest
from hydra.core.config_store import ConfigStore

from dali_pipes import ConfigError, build_loader, compose_config
from dali_pipes.backends import registry as backends
from dali_pipes.backends.specs import SyntheticBackend
from dali_pipes.backends.synthetic import SyntheticLoader
from dali_pipes.config.schemas import config_dir, schemas
from dali_pipes.data import registry as sources
from dali_pipes.data.registry import open_source, register_source, source_kinds
from dali_pipes.data.specs import DataSpec


@dataclass(frozen=True)
class CountData(DataSpec):
    """A source of labels only: ``count`` samples of ``classes`` classes."""

    name: str = "counted"
    count: int = 6
    classes: int = 2


class Counted:
    def __init__(self, count: int, classes: int) -> None:
        self.classes = tuple(f"c{i}" for i in range(classes))
        self.labels = np.arange(count, dtype=np.int64) % classes

    def __len__(self) -> int:
        return len(self.labels)


@dataclass(frozen=True)
class EchoBackend(SyntheticBackend):
    """The synthetic loader under another name, with an option of its own."""

    name: str = "echo"
    loud: bool = False


class EchoLoader(SyntheticLoader):
    pass


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``data=counted`` and ``backend=echo`` for one test (the registries restored after)."""
    monkeypatch.setattr(sources, "_KINDS", dict(sources._KINDS))
    monkeypatch.setattr(backends, "_BACKENDS", dict(backends._BACKENDS))
    register_source("counted", CountData, lambda data, split: Counted(data.count, data.classes))
    backends.register_backend("echo", EchoBackend, EchoLoader)
    yield
    repo = ConfigStore.instance().repo
    for group, name in (("data", "counted"), ("backend", "echo")):
        repo.get(group, {}).pop(f"{name}.yaml", None)
        repo["schema"].get(group, {}).pop(f"{name}.yaml", None)


def test_every_option_of_the_data_and_backend_groups_extends_a_registered_schema() -> None:
    derived = schemas()
    for group in ("data", "backend"):
        for option in (config_dir() / group).glob("*.yaml"):
            text = option.read_text()
            used = [
                name for (g, name) in derived if g == group and f"/schema/{group}/{name}@" in text
            ]
            assert used, f"{option.name} extends no registered {group} schema"
    assert {name for g, name in derived if g == "data"} == {k.name for k in source_kinds()}
    assert {name for g, name in derived if g == "backend"} == set(backends.names())


def test_a_registered_source_and_backend_compose_without_yaml_and_build_a_loader(
    registered: None,
) -> None:
    cfg = compose_config(["data=counted", "data.count=9", "backend=echo", "backend.loud=true"])
    with build_loader(cfg, "train") as loader:
        assert isinstance(loader, EchoLoader) and loader.classes == ("c0", "c1")
        assert sorted(int(v) for _, y in loader for v in y) == [0] * 5 + [1] * 4
    with pytest.raises(ConfigError, match=r"Key 'cuont' not in 'CountData'"):
        compose_config(["data=counted", "data.cuont=9"])


def test_a_spec_no_source_is_registered_for_is_one_line() -> None:
    @dataclass(frozen=True)
    class Unknown(DataSpec):
        name: str = "unknown"

    with pytest.raises(ConfigError, match=r"data='unknown' has no source: use one of folder, "):
        open_source(Unknown(), "train")
    with pytest.raises(ConfigError, match=r"split='test' is invalid"):
        open_source(Unknown(), "test")
    with pytest.raises(ConfigError, match=r"the schema must subclass DataSpec"):
        register_source("bad", dict, lambda d, s: Counted(1, 1))  # type: ignore[arg-type]


@dataclass(frozen=True)
class CountMore(CountData):
    """``counted`` registered again, with one more option."""

    step: int = 1


def test_a_schema_is_stored_once_and_again_when_it_was_removed_or_its_class_changed(
    registered: None,
) -> None:
    repo = ConfigStore.instance().repo
    compose_config(["data=counted"])
    entry = repo["schema"]["data"]["counted.yaml"]
    compose_config(["data=counted"])
    assert repo["schema"]["data"]["counted.yaml"] is entry, "made again with nothing changed"

    repo["schema"]["data"].pop("counted.yaml")  # what a test's clean-up does
    assert compose_config(["data=counted", "data.count=4"]).data.count == 4

    register_source("counted", CountMore, lambda data, split: Counted(data.count, data.classes))
    assert compose_config(["data=counted", "data.step=3"]).data.step == 3
    assert repo["schema"]["data"]["counted.yaml"] is not entry
