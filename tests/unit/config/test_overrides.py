"""Plain ``key=value`` overrides set on a kept composition give what Hydra's composition of
every override gives, errors included, and need no composition of their own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from dali_pipes.config import compose as composition
from dali_pipes.config.compose import compose_config, config_dir
from dali_pipes.config.overrides import split
from dali_pipes.config.specs import config_error
from dali_pipes.errors import ConfigError

CASES = {
    "values": ["data.root=/tmp/x", "trainer.epochs=3", "seed=7"],
    "a group, then values": ["augment=deit", "data.batch_size=24", "output_dir=/o"],
    "values, then a group": ["data.root=/p", "augment.train.crop.size=96", "data=folder"],
    "null removes an op": ["augment.train.ops.hflip=null", "data.batch_size=4"],
    "added, then changed": [
        "+augment.train.ops.grayscale={p: 0.2}",
        "augment.train.ops.grayscale.p=0.5",
    ],
    "changed, then added": [
        "augment.train.ops.grayscale.p=0.5",
        "+augment.train.ops.grayscale={p: 0.2}",
    ],
    "deleted, then a value": ["~augment.train.ops.hflip", "seed=3"],
    "a list of dicts": [
        "data=mix",
        "data.sources=[{name: sample, weight: 3}, {name: sample, root: /x, weight: 1, tag: s}]",
    ],
    "a dict into a group's node": ["data={batch_size: 8}", "data.name=other"],
    "the last of two wins": ["seed=1", "seed=2"],
    "an interpolation kept": ["output_dir=${data.name}-x", "data.batch_size=2"],
    "quoted": ["data.root='/a path/with spaces'", "resume=auto"],
    "a task": ["task=detection", "data.train_images=4", "trainer.epochs=1"],
    "hydra's own node": ["hydra.job.name=x", "seed=4"],
    "a misspelt key": ["data.batch_size=4", "trainer.epocs=2"],
    "a wrong type": ["data.batch_size=many"],
    "an unknown option": ["data=nonexistent", "seed=1"],
    "a sweep": ["seed=1,2"],
    "a parse error": ["data.batch_size=[1", "seed=2"],
}


def hydras(overrides: list[str]) -> Any:
    """Every override composed by Hydra itself: the config as a container, or the error."""
    try:
        with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
            cfg = compose(config_name="train", overrides=overrides)
    except Exception as exc:
        error = config_error(exc)
        assert error is not None, exc
        return str(error)
    assert OmegaConf.is_struct(cfg)
    return OmegaConf.to_container(cfg, resolve=False)


def ours(overrides: list[str]) -> Any:
    try:
        cfg = compose_config(overrides)
    except ConfigError as exc:
        return str(exc)
    assert OmegaConf.is_struct(cfg)
    return OmegaConf.to_container(cfg, resolve=False)


@pytest.mark.parametrize("overrides", CASES.values(), ids=CASES.keys())
def test_plain_values_set_on_a_kept_composition_give_hydras_config_or_its_error(
    overrides: list[str],
) -> None:
    assert ours(overrides) == hydras(overrides)


def test_values_before_an_override_hydra_sets_stay_with_hydra_so_their_order_holds() -> None:
    root = config_dir()
    composed, plain = split(root, ["data=folder", "data.root=/x", "+a.b=1", "seed=2", "task=x"])
    assert composed == ("data=folder", "data.root=/x", "+a.b=1", "task=x")
    assert [o.input_line for o in plain] == ["seed=2"]
    composed, plain = split(root, ["hydra/job_logging=none", "hydra.job.name=x", "seed=1"])
    assert composed == ("hydra/job_logging=none", "hydra.job.name=x")


def test_a_new_data_root_or_output_folder_needs_no_composition_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[list[str]] = []
    hydra_compose = composition.compose

    def counted(config_name: str, overrides: list[str]) -> Any:
        made.append(overrides)
        return hydra_compose(config_name=config_name, overrides=overrides)

    monkeypatch.setattr(composition, "compose", counted)
    roots = [tmp_path / f"data{k}" for k in range(3)]
    for root in roots:
        cfg = compose_config(["augment=small", f"data.root={root}", f"output_dir={root}/out"])
        assert cfg.data.root == str(root) and cfg.output_dir == f"{root}/out"
    assert len(made) <= 1 and all(o == ["augment=small"] for o in made)
