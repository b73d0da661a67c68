"""Every config option composes into a valid spec; the packaged wheel carries conf/."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from dataclasses import asdict
from pathlib import Path

import pytest
from conftest import REPO, identity_colour, write_jpeg
from omegaconf import OmegaConf, ValidationError

from dali_pipes import DALIIterator, compose_config
from dali_pipes.augment.spec import AugmentSpec
from dali_pipes.backends.specs import BackendSpec
from dali_pipes.config.compose import config_dir, load_saved_config
from dali_pipes.config.specs import loader_spec, to_spec
from dali_pipes.data.sources import FolderSource
from dali_pipes.data.specs import DataSpec, SyntheticData

ROOT = REPO


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (config_dir() / group).glob("*.yaml"))


#: ``data=mix`` lists its datasets, as ``data=imagenet`` names its root.
MIXED = "data.sources=[{name: folder, root: /some/where}]"


def every_pair() -> list[tuple[str, str, str]]:
    """(data, backend, augment) choices in which every pair of options of two groups
    composes together: each data option with each augment option, the backend turning
    with both: a third of the compositions of every triple. An option's defaults are its
    own schema, options of its own group it extends, or a choice of one other group
    (``data=sample`` picks an augment, which a command-line choice overrides), and it
    interpolates nothing: what options do to each other, two of them do."""
    datas, backends, augments = options("data"), options("backend"), options("augment")
    return [
        (data, backends[(i + j) % len(backends)], augment)
        for i, data in enumerate(datas)
        for j, augment in enumerate(augments)
    ]


def test_the_chosen_triples_hold_every_pair_of_options() -> None:
    chosen = every_pair()
    groups = [options(g) for g in ("data", "backend", "augment")]
    for a, b in ((0, 1), (0, 2), (1, 2)):
        pairs = {(t[a], t[b]) for t in chosen}
        assert pairs == {(x, y) for x in groups[a] for y in groups[b]}


def test_an_option_of_these_groups_refers_to_no_other_group() -> None:
    """What :func:`every_pair` rests on: each option's defaults are its own schema, itself,
    options of its own group it extends, or one choice of another group each, and it
    interpolates nothing."""
    for group in ("data", "backend", "augment"):
        for name in options(group):
            text = (config_dir() / group / f"{name}.yaml").read_text()
            loaded = OmegaConf.to_container(OmegaConf.create(text), resolve=False)
            assert isinstance(loaded, dict)
            for entry in loaded.get("defaults", []):
                own = entry == "_self_" or entry in options(group)  # itself, one it extends
                own = own or str(entry).startswith(f"/schema/{group}/")
                other = isinstance(entry, dict) and all(
                    key.startswith("override /") for key in entry
                )
                assert own or other, f"{group}/{name}.yaml: {entry}"
            assert "${" not in text, f"{group}/{name}.yaml interpolates"


@pytest.mark.parametrize(("data", "backend", "augment"), every_pair())
def test_every_config_option_composes_into_a_valid_spec(
    data: str, backend: str, augment: str
) -> None:
    needs = {"folder": "data.root=/some/where", "imagenet": "data.root=/some/where", "mix": MIXED}
    chosen = [f"data={data}", f"backend={backend}", f"augment={augment}"]
    cfg = compose_config(chosen + ([needs[data]] if data in needs else []))
    assert to_spec(cfg.data, DataSpec).name == data
    assert to_spec(cfg.backend, BackendSpec).name == backend
    to_spec(cfg.augment, AugmentSpec)


def test_default_config_trains_on_the_sample_data_with_small_images() -> None:
    cfg = compose_config()
    assert cfg.data.name == "sample" and cfg.backend.name == "dali"
    assert cfg.augment.train.crop.size == 64
    spec = loader_spec(cfg, "train")
    assert len(spec.source.classes) == 6 and len(spec.source) == 6 * cfg.data.train_per_class
    assert len(loader_spec(cfg, "val").source) == 6 * cfg.data.val_per_class


def test_imagenet_config_reads_train_and_val_subfolders(tmp_path: Path) -> None:
    for split, k in (("train", 0), ("val", 1)):
        write_jpeg(
            tmp_path / split / "n01" / "a.JPEG",
            identity_colour(k)[None, None].repeat(8, 0).repeat(8, 1),
        )
    cfg = compose_config(["data=imagenet", f"data.root={tmp_path}"])
    assert cfg.augment.train.crop.size == 224 and cfg.data.batch_size == 256
    for split in ("train", "val"):
        source = loader_spec(cfg, split).source
        assert isinstance(source, FolderSource)
        assert source.files[0].endswith(f"{split}/n01/a.JPEG")


def test_dali_iterator_keyword_defaults_equal_the_config_defaults(identity_tree: Path) -> None:
    from_kwargs = DALIIterator(identity_tree, device="cpu").spec
    cfg = compose_config(
        ["data=folder", f"data.root={identity_tree}", "augment=imagenet", "backend.device=cpu"]
    )
    from_cfg = DALIIterator.from_config(cfg).spec
    assert asdict(from_kwargs.augment) == asdict(from_cfg.augment)
    assert asdict(from_kwargs.backend) == asdict(from_cfg.backend)
    assert asdict(from_kwargs.sampling) == asdict(from_cfg.sampling)
    assert from_kwargs.batch_size == from_cfg.batch_size
    assert isinstance(from_kwargs.source, FolderSource) and isinstance(
        from_cfg.source, FolderSource
    )
    assert from_kwargs.source.files == from_cfg.source.files


def test_dali_iterator_from_config_refuses_another_backend(identity_tree: Path) -> None:
    cfg = compose_config(["data=folder", f"data.root={identity_tree}", "backend=torch"])
    with pytest.raises(ValueError, match="backend=dali"):
        DALIIterator.from_config(cfg)


@pytest.mark.slow
def test_an_installed_wheel_finds_its_configs(wheel: Path, tmp_path: Path) -> None:
    """The wheel is the session's (helpers/shared.py: built once from a clean copy)."""
    names = zipfile.ZipFile(wheel).namelist()
    for required in (
        "dali_pipes/conf/train.yaml",
        "dali_pipes/conf/data/imagenet.yaml",
        "dali_pipes/conf/backend/dali.yaml",
    ):
        assert required in names
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    probe = (
        "import dali_pipes.config.compose as c; d = c.config_dir(); "
        f"assert str(d).startswith({str(site)!r}), d; "
        "cfg = c.compose_config(['data=imagenet', 'data.root=/x']); print(cfg.data.train_dir)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
        check=True,
        capture_output=True,
        text=True,
    )
    assert out.stdout.strip() == "train"


@pytest.mark.parametrize(("on_error", "yielded"), [("skip", 18), ("drop", 17)])
def test_dali_iterator_skips_bad_files_when_asked(
    identity_tree: Path, tmp_path: Path, on_error: str, yielded: int
) -> None:
    """17 good files and a broken one: skip yields 18 (a substitute in its slot), drop 17."""
    import shutil

    root = tmp_path / "data"
    shutil.copytree(identity_tree, root)
    (root / "ant" / "broken.jpg").write_bytes(b"not a jpeg")
    loader = DALIIterator(
        root,
        device="cpu",
        train=False,
        batch_size=8,
        image_size=32,
        resize_size=36,
        on_error=on_error,
    )
    assert sum(len(labels) for _, labels in loader) == yielded
    assert list(loader.bad_files) == [str(root / "ant" / "broken.jpg")]


@pytest.mark.parametrize("tool", ["train", "bench", "doctor", "scan", "pack"])
@pytest.mark.parametrize("data", ["sample", "folder", "imagenet", "shards", "synthetic"])
def test_every_tool_composes_with_every_data_config(tool: str, data: str) -> None:
    cfg = compose_config(
        [f"data={data}", "out=/tmp/unused"] if tool == "pack" else [f"data={data}"],
        config_name=tool,
    )
    assert cfg.data.name == data


def test_a_saved_run_config_loads_back_into_the_typed_schemas_with_its_values(
    tmp_path: Path,
) -> None:
    cfg = compose_config(
        [
            "data=synthetic",
            "backend=synthetic",
            "data.num_samples=7",
            "augment.train.ops.hflip.p=0.25",
        ]
    )
    OmegaConf.save(cfg, tmp_path / "config.yaml")
    loaded = load_saved_config(tmp_path / "config.yaml")
    assert OmegaConf.to_container(loaded) == OmegaConf.to_container(cfg, resolve=True)
    assert OmegaConf.get_type(loaded, "data") is SyntheticData
    with pytest.raises(ValidationError):  # still the schema's node: a typed field
        loaded.data.num_samples = "seven"
