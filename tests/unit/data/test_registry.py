"""One registry each for sources and backends, the Hydra schemas derived from them
(dali_pipes/data/registry.py, dali_pipes/backends/registry.py, config/schemas.py).

Registering a taken name again replaced the entry silently before the registries became
:class:`dali_pipes.registry.Registry`; it is refused now unless ``replace=True``, which
test_a_schema_is_stored_once_and_again_when_it_was_removed_or_its_class_changed passes."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pytest
from hydra.core.config_store import ConfigStore

from dali_pipes import ConfigError, build_loader, compose_config
from dali_pipes.backends import registry as backends
from dali_pipes.backends.specs import DaliBackend, SyntheticBackend, TorchBackend
from dali_pipes.backends.synthetic import SyntheticLoader
from dali_pipes.backends.torch import TorchLoader
from dali_pipes.config.schemas import config_dir, schemas
from dali_pipes.data import registry as sources
from dali_pipes.data.registry import open_source, register_source, source_kinds
from dali_pipes.data.specs import DataSpec, FolderData, SyntheticData
from dali_pipes.errors import NameTaken


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
def registered() -> Iterator[None]:
    """``data=counted`` and ``backend=echo`` for one test (the registries restored after)."""
    with sources.SOURCES.restored(), backends.BACKENDS.restored():
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

    register_source(
        "counted", CountMore, lambda data, split: Counted(data.count, data.classes), replace=True
    )
    assert compose_config(["data=counted", "data.step=3"]).data.step == 3
    assert repo["schema"]["data"]["counted.yaml"] is not entry


def test_a_second_source_under_a_taken_name_fails_in_one_line_naming_the_name_and_its_holder(
    registered: None,
) -> None:
    with pytest.raises(NameTaken) as info:
        register_source("folder", CountData, f"{__name__}:Counted")
    message = str(info.value)
    assert "\n" not in message and message.startswith(
        "data source 'folder' is already registered (held by schema "
        "dali_pipes.data.specs.FolderData, opened by dali_pipes.data.sources:open_folder)"
    )
    assert sources.SOURCES["folder"].spec is FolderData


def test_a_second_backend_under_a_taken_name_fails_in_one_line_naming_the_name_and_its_holder(
    registered: None,
) -> None:
    with pytest.raises(NameTaken) as info:
        backends.register_backend("torch", EchoBackend, EchoLoader)
    message = str(info.value)
    assert "\n" not in message and message.startswith(
        "backend 'torch' is already registered (held by options "
        "dali_pipes.backends.specs.TorchBackend, loader dali_pipes.backends.torch:TorchLoader)"
    )
    assert backends.backend_kind("torch").spec is TorchBackend


def test_replace_true_replaces_a_source_and_a_backend(registered: None) -> None:
    def opener(data: DataSpec, split: str) -> Counted:
        return Counted(3, 3)

    register_source("counted", CountMore, opener, replace=True)
    backends.register_backend("echo", SyntheticBackend, SyntheticLoader, replace=True)
    assert sources.SOURCES["counted"].spec is CountMore
    assert len(open_source(CountMore(), "train")) == 3
    assert backends.loader_class("echo") is SyntheticLoader


def test_a_source_or_backend_registered_again_from_the_same_place_is_accepted(
    registered: None,
) -> None:
    """A module imported again (its classes and functions made anew) registers the same."""
    register_source("folder", FolderData, "dali_pipes.data.sources:open_folder")
    backends.register_backend("torch", TorchBackend, TorchLoader)  # the class its string names
    register_source("counted", CountData, sources.SOURCES["counted"].opener.get())


def test_source_and_backend_names_are_listable(registered: None) -> None:
    assert sources.SOURCES.names()[:5] == ("folder", "sample", "shards", "parquet", "synthetic")
    assert sources.SOURCES.names()[-1] == "counted"
    assert backends.names() == ("dali", "torch", "synthetic", "echo")
    assert [k.name for k in source_kinds()] == list(sources.SOURCES)


def test_an_opener_or_loader_named_by_module_attr_is_imported_once_on_first_use(
    registered: None,
) -> None:
    register_source("lazy", CountData, f"{__name__}:open_counted")
    kind = sources.SOURCES["lazy"]
    assert not kind.opener.loaded
    assert len(kind.open(CountData(count=4), "train")) == 4
    assert kind.opener.loaded and kind.opener.get() is open_counted
    with pytest.raises(ConfigError, match=r"names no object: expected 'module:attr'"):
        backends.register_backend("bad", EchoBackend, "no_colon")


def test_backends_and_data_say_what_they_know_about_themselves() -> None:
    """Whether a backend reads images and the knobs doctor tunes live on its options' class;
    whether data has images, on its schema."""
    assert [k.spec.reads_images for k in backends.backend_kinds()] == [True, True, False]
    assert [name for name, _ in DaliBackend().knobs(4, gpu=True)] == [
        "num_threads", "prefetch_queue_depth", "hw_decoder_load",
    ]  # fmt: skip
    assert dict(TorchBackend().knobs(4, gpu=False)) == {
        "num_workers": [0, 1, 2, 4, 5, 8], "prefetch_factor": [2, 4, 8],
    }  # fmt: skip
    assert SyntheticBackend().knobs(4, gpu=True) == []
    assert [DaliBackend(device="gpu").placement, TorchBackend(device="gpu").placement] == [
        "dali-gpu", "torch",
    ]  # fmt: skip
    assert FolderData.has_images and not SyntheticData.has_images


def open_counted(data: CountData, split: str) -> Counted:
    """An opener a test names by ``module:attr``."""
    return Counted(data.count, data.classes)
