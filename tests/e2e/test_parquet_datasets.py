"""``data=parquet`` end to end: Parquet datasets in the Hugging Face Hub layout, written with
pyarrow from real photos (../shared/data/photos, or the shipped ones in a bare clone) and
from the flat-colour identity tree, read by every backend like the folder they came from.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import torch
from conftest import gpu
from helpers.identity import ids
from helpers.parquet import IMAGE, folder_table, photo_subset, write_hub, write_split

from dali_pipes import DataError, build_loader, compose_config
from dali_pipes.backends import create_loader
from dali_pipes.config.specs import loader_spec
from dali_pipes.data.substitutes import substitute
from dali_pipes.selfcheck.bounds import DALI_CPU_VS_TORCH

SMALL = (
    "augment=imagenet",
    "augment.train.crop.size=32",
    "augment.val.crop.resize=36",
    "augment.val.crop.size=32",
)
BACKENDS = ["torch", "dali-cpu", "dali-twin", "cache-ram", pytest.param("dali-gpu", marks=gpu)]


@pytest.fixture(scope="module")
def photo_folder(real_photos: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Nine real photos, three classes: the folder both datasets hold."""
    return photo_subset(real_photos, tmp_path_factory.mktemp("photos"))


@pytest.fixture(scope="module")
def photo_hub(photo_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The nine photos as train and validation splits: 2 files each, row groups of 2."""
    return write_hub(photo_folder, tmp_path_factory.mktemp("hub"), rows_per_group=2)


@pytest.fixture(scope="module")
def colour_hub(identity_tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 17 flat-colour images (a batch names its samples) in the Hub layout."""
    return write_hub(identity_tree, tmp_path_factory.mktemp("colours"), files=3, rows_per_group=2)


def config(data: list[str], kind: str, *extra: str) -> Any:
    backend, _, where = kind.partition("-")
    overrides = [*data, "data.batch_size=4", "seed=5", *SMALL, *extra]
    if backend == "cache":
        overrides += ["backend=torch", "backend.device=cpu", "data.cache=ram"]
    else:
        device = "gpu" if where == "gpu" else "cpu"
        overrides += [f"backend={backend}", f"backend.device={device}"]
    if backend == "torch":
        overrides.append("backend.num_workers=1")
    return compose_config(overrides)


def loader(cfg: Any, split: str, kind: str, **where: int) -> Any:
    if kind == "dali-twin":  # the GPU's graph, every operator on the CPU
        from dali_pipes.backends.dali.loader import DaliLoader

        return DaliLoader(loader_spec(cfg, split, **where), twin=True)
    return build_loader(cfg, split, **where)


def epoch(built: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
    with built:
        return [(images.cpu(), labels.cpu()) for images, labels in built]


@pytest.mark.parametrize("kind", BACKENDS)
def test_validation_batches_equal_the_folders_on_each_backend(
    kind: str, photo_folder: Path, photo_hub: Path
) -> None:
    folder = epoch(loader(config(["data=folder", f"data.root={photo_folder}"], kind), "val", kind))
    parquet = epoch(loader(config(["data=parquet", f"data.root={photo_hub}"], kind), "val", kind))
    assert [len(y) for _, y in parquet] == [4, 4, 1]
    for (a, y), (b, z) in zip(folder, parquet, strict=True):
        assert torch.equal(y, z)
        assert torch.equal(a, b), f"{kind}: a Parquet row decodes unlike its file"


def test_training_batches_of_dali_cpu_and_torch_agree_within_the_cpu_parity_bound(
    photo_hub: Path,
) -> None:
    """Same row-group order, same crop windows and flips; only resampling may differ
    (compared on the 0-255 scale)."""
    data = ["data=parquet", f"data.root={photo_hub}", "data.shuffle_buffer=3"]
    batches = []
    for kind in ("dali-cpu", "torch"):
        spec = loader_spec(config(data, kind), "train")
        raw = replace(spec.augment, mean=(0.0, 0.0, 0.0), std=(1 / 255, 1 / 255, 1 / 255))
        batches.append(epoch(create_loader(replace(spec, augment=raw))))
    dali, ref = batches
    assert [y.tolist() for _, y in dali] == [z.tolist() for _, z in ref]
    diff = (torch.cat([a for a, _ in dali]) - torch.cat([b for b, _ in ref])).abs()
    assert diff.mean().item() <= DALI_CPU_VS_TORCH.mean
    assert diff.max().item() <= DALI_CPU_VS_TORCH.max


def colours(hub: Path | str, kind: str, *extra: str) -> Any:
    cfg = config(["data=parquet", f"data.root={hub}", "data.batch_size=3"], kind, *extra)
    cfg.data.batch_size = 3
    return cfg


@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("world_size", [2, 3])
def test_ranks_read_disjoint_shards_of_equal_length(
    world_size: int, drop_last: bool, colour_hub: Path
) -> None:
    cfg = colours(colour_hub, "torch", f"data.drop_last={drop_last}", "backend.num_workers=0")
    shards = []
    for rank in range(world_size):
        with build_loader(cfg, "train", rank=rank, world_size=world_size) as built:
            built.set_epoch(2)
            batches = [ids(images) for images, _ in built]
            assert len(batches) == len(built)
            shards.append([i for batch in batches for i in batch])
    assert len({len(shard) for shard in shards}) == 1, "ranks must yield as many samples"
    seen = [i for shard in shards for i in shard]
    if drop_last:
        assert len(seen) == len(set(seen)), "shards overlap"
    else:
        assert set(seen) == set(range(17))
        assert len(seen) - len(set(seen)) == -17 % world_size  # the padding, nothing more


@pytest.mark.parametrize("kind", ["torch", "dali-cpu"])
def test_an_epoch_resumes_mid_way_with_the_same_batches(kind: str, colour_hub: Path) -> None:
    cfg = colours(colour_hub, kind)
    whole = loader(cfg, "train", kind)
    whole.set_epoch(3)
    expected = epoch(whole)
    first = loader(cfg, "train", kind)
    first.set_epoch(3)
    it = iter(first)
    next(it), next(it)
    state = first.state_dict()
    first.close()
    again = loader(cfg, "train", kind)
    again.load_state_dict(state)
    rest = epoch(again)
    assert len(rest) == len(expected) - 2
    for (a, y), (b, z) in zip(expected[2:], rest, strict=True):
        assert torch.equal(y, z) and torch.equal(a, b)
    other = build_loader(cfg, "train", rank=0, world_size=2)
    with pytest.raises(
        Exception, match=r"cannot resume a packed dataset \(data=shards\) or Parquet"
    ):
        other.load_state_dict(state)
    other.close()


@pytest.fixture(scope="module")
def corrupt_hub(identity_tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The identity tree whose row 4 (of file 0) holds bytes that are not an image."""
    table = folder_table(identity_tree)
    images = table.column("image").to_pylist()
    images[4] = {"bytes": b"this is no image", "path": "img_04.jpg"}
    broken = table.set_column(0, "image", pa.array(images, type=IMAGE))
    out = tmp_path_factory.mktemp("corrupt")
    for split in ("train", "validation"):
        write_split(broken, out, split, files=1, rows_per_group=4)
    return out


@pytest.mark.parametrize("kind", ["torch", "dali-cpu", "cache-ram"])
def test_a_corrupt_row_under_raise_is_one_line_naming_the_file_and_row(
    kind: str, corrupt_hub: Path
) -> None:
    with pytest.raises(DataError) as exc:
        epoch(loader(colours(corrupt_hub, kind), "val", kind))
    message = str(exc.value)
    row = f"{corrupt_hub}/data/validation-00000-of-00001.parquet row 4"
    assert message.startswith(f"{row}: not a JPEG, PNG or WebP image"), message
    assert "\n" not in message


@pytest.mark.parametrize("kind", ["torch", "dali-cpu", "cache-ram"])
def test_a_corrupt_row_under_skip_gets_the_same_substitute_on_every_backend(
    kind: str, corrupt_hub: Path
) -> None:
    built = loader(colours(corrupt_hub, kind, "data.on_error=skip"), "val", kind)
    batches = epoch(built)
    assert [len(y) for _, y in batches] == [3] * 5 + [2]
    got = [i for images, _ in batches for i in ids(images)]
    assert got[:4] + got[5:] == [i for i in range(17) if i != 4]
    # (seed, epoch 0, position 4) draws the same substitute in every backend
    assert got[4] == SUBSTITUTE and got[4] != 4
    assert list(built.bad_files) == [f"{corrupt_hub}/data/validation-00000-of-00001.parquet row 4"]


#: The sample data.on_error=skip puts in slot 4 of epoch 0 with seed 5 (17 samples): the
#: first draw for that slot that is not the bad sample itself.
SUBSTITUTE = next(s for a in range(64) if (s := substitute(5, 0, 4, a, 17)) != 4)


def test_scan_names_the_corrupt_row_and_its_manifest_leaves_it_out(
    corrupt_hub: Path, tmp_path: Path
) -> None:
    from dali_pipes.tools.scan import run_scan

    out = tmp_path / "bad.csv"
    cfg = compose_config(
        ["data=parquet", f"data.root={corrupt_hub}", f"scan.out={out}", "scan.workers=1"],
        config_name="scan",
    )
    report = run_scan(cfg)
    rows = [f"{corrupt_hub}/data/{s}-00000-of-00001.parquet row 4" for s in ("train", "validation")]
    assert sorted(report["bad_files"]) == rows and report["good"] == 32
    excluded = colours(corrupt_hub, "torch", f"data.exclude={out}", "backend.num_workers=0")
    got = [i for images, _ in epoch(build_loader(excluded, "val")) for i in ids(images)]
    assert got == [i for i in range(17) if i != 4]


def test_pack_of_a_parquet_dataset_keeps_each_rows_image_label_and_identity(
    colour_hub: Path, tmp_path: Path
) -> None:
    """``pack`` reads the source through the interface: every row lands in a shard, where
    the same sample (by identity: its colour) decodes to the same pixels and label."""
    from dali_pipes.tools.pack import run_pack

    out = tmp_path / "packed"
    run_pack(
        compose_config(
            ["data=parquet", f"data.root={colour_hub}", f"out={out}", "pack.shard_size_mb=0.004"],
            config_name="pack",
        )
    )
    workers = "backend.num_workers=0"
    parquet = epoch(build_loader(colours(colour_hub, "torch", workers), "val"))
    shards = epoch(
        build_loader(config(["data=shards", f"data.root={out}"], "torch", workers), "val")
    )

    def by_sample(batches: list[tuple[torch.Tensor, torch.Tensor]]) -> dict[int, Any]:
        return {
            i: (images[k], int(labels[k]))
            for images, labels in batches
            for k, i in enumerate(ids(images))
        }

    ours, packed = by_sample(parquet), by_sample(shards)
    assert sorted(ours) == sorted(packed) == list(range(17))
    for i, (image, label) in ours.items():
        assert label == packed[i][1] and torch.equal(image, packed[i][0])


@pytest.mark.slow
def test_a_dataset_in_a_bucket_gives_the_local_copys_batches(
    colour_hub: Path, s3_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dali_pipes.data.s3 import forget_clients

    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    forget_clients()
    s3_server.upload(colour_hub, "datasets", "hub-colours")
    try:
        for kind in ("torch", "dali-cpu"):
            local = epoch(loader(colours(colour_hub, kind), "train", kind))
            remote = loader(colours("s3://datasets/hub-colours", kind), "train", kind)
            assert remote.spec.source.root == "s3://datasets/hub-colours"
            for (a, y), (b, z) in zip(local, epoch(remote), strict=True):
                assert torch.equal(y, z) and torch.equal(a, b)
    finally:
        forget_clients()


def test_show_draws_the_first_rows_of_the_training_order_on_both_cpu_backends(
    colour_hub: Path, tmp_path: Path
) -> None:
    from dali_pipes.tools.show import run_show

    cfg = compose_config(
        [
            "data=parquet",
            f"data.root={colour_hub}",
            *SMALL,
            "show.samples=3",
            "show.tile=32",
            "show.backends=[dali-cpu,torch]",
            f"show.out={tmp_path / 'show.png'}",
        ],
        config_name="show",
    )
    shown = run_show(cfg)["shown"]
    assert [s.column for s in shown] == ["dali-cpu", "torch"]
    assert ids(shown[0].images) == ids(shown[1].images) and len(ids(shown[0].images)) == 3
    assert (tmp_path / "show.png").stat().st_size > 0
