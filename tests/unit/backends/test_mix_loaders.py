"""``data=mix`` through the loaders: every backend reads the mix's order, an epoch resumed
part-way continues batch for batch, a sample read twice in an epoch is augmented afresh
alike on every backend, ``DALIIterator`` mixes a list of datasets, and a state saved with
other weights is refused."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import BUNDLED_PHOTOS
from helpers.identity import SIZE, epoch, ids, levels

from dali_pipes import DALIIterator, build_loader, compose_config
from dali_pipes.errors import ConfigError
from dali_pipes.selfcheck.bounds import DALI_CPU_VS_TORCH, figures

SEED = 4


def sources(*entries: tuple[Path, Any]) -> str:
    """``data.sources=[...]`` of folders, each with its weight (None: none given)."""
    items = [
        f"{{name: folder, root: '{root}'" + ("" if w is None else f", weight: {w}") + "}"
        for root, w in entries
    ]
    return f"data.sources=[{', '.join(items)}]"


def loader(mix: str, *extra: str, backend: str = "torch", **kw: Any) -> Any:
    overrides = [
        "data=mix",
        mix,
        "data.batch_size=4",
        f"seed={SEED}",
        f"augment.train.crop.size={SIZE}",
        f"backend={backend}",
        "backend.device=cpu",
        *(["backend.num_workers=0"] if backend == "torch" else []),
        *extra,
    ]
    return build_loader(compose_config(overrides), "train", **kw)


@pytest.mark.parametrize("backend", ["torch", "dali"])
def test_a_mix_epoch_reads_each_sources_share_in_the_mix_order(
    identity_parts: tuple[Path, Path], backend: str
) -> None:
    """ant and bee (12 images) weight 1, cat (5 images) weight 3, 20 an epoch: 5 of the
    first, 15 of the second (each cat 3 times), in the sampler's order, on every backend."""
    a, b = identity_parts
    mix = sources((a, 1), (b, 3))
    with loader(mix, "data.epoch_size=20", backend=backend) as mixed:
        assert len(mixed) == 5 and mixed.classes == ("0/ant", "0/bee", "1/cat")
        for number in (0, 3):
            images, labels = epoch(mixed, number)
            got = ids(images)
            assert got == mixed.rank_sampler.indices(number).tolist()
            assert Counter(k >= 12 for k in got) == {False: 5, True: 15}
            assert labels.tolist() == [0 if k < 5 else 1 if k < 12 else 2 for k in got]


@pytest.mark.parametrize("backend", ["torch", "dali"])
def test_a_mix_epoch_resumed_part_way_gives_the_rest_of_its_batches(
    identity_parts: tuple[Path, Path], backend: str
) -> None:
    a, b = identity_parts
    mix = sources((a, 2), (b, 1))
    with loader(mix, "data.epoch_size=24", backend=backend) as first:
        first.set_epoch(5)
        whole = [ids(images) for images, _ in first]
        first.set_epoch(5)
        for k, _ in enumerate(first):
            if k == 2:
                break
        state = first.state_dict()
    assert state["sampler"] == "mix 16/12+8/5"
    with loader(mix, "data.epoch_size=24", backend=backend) as again:
        again.load_state_dict(state)
        rest = [ids(images) for images, _ in again]
    assert rest == whole[3:]


def test_a_state_saved_with_other_weights_is_refused(identity_parts: tuple[Path, Path]) -> None:
    a, b = identity_parts
    with loader(sources((a, 1), (b, 1))) as even:
        state = even.state_dict()
    with (
        loader(sources((a, 1), (b, 3))) as uneven,
        pytest.raises(
            ConfigError, match=r"sampler='mix 9/12\+8/5' differs .*sampler='mix 4/12\+13/5'"
        ),
    ):
        uneven.load_state_dict(state)


def test_a_photo_read_twice_in_a_mix_epoch_is_augmented_afresh_alike_on_every_backend(
    identity_parts: tuple[Path, Path],
) -> None:
    """The 13 photos shipped in the package up-sampled (weight 1; the identity images
    weight 0) to three times their number: each copy of a photo gets its own crop; the
    decode-once cache gives the torch backend's batches, DALI on the CPU gives them within
    its parity bound."""
    count = sum(p.suffix in (".jpg", ".jpeg") for p in BUNDLED_PHOTOS.glob("*/*"))
    mix = sources((BUNDLED_PHOTOS, 1), (identity_parts[1], 0))
    common = [f"data.epoch_size={3 * count}", "augment.train.crop.size=48"]
    with loader(mix, *common) as ref:
        images, _ = epoch(ref, 1)
        order = ref.rank_sampler.indices(1)
    first = {int(k): i for i, k in reversed(list(enumerate(order)))}
    again = [(first[int(k)], i) for i, k in enumerate(order) if first[int(k)] != i]
    assert len(again) == 2 * count
    assert all(not torch.equal(images[i], images[j]) for i, j in again)
    with loader(mix, *common, "data.cache=ram") as cache:
        assert torch.equal(epoch(cache, 1)[0], images)
    with loader(mix, *common, backend="dali") as dali:
        assert DALI_CPU_VS_TORCH.admits(figures(levels(epoch(dali, 1)[0]), levels(images)))


def test_dali_iterator_mixes_a_list_of_datasets_by_their_weights(
    identity_parts: tuple[Path, Path],
) -> None:
    a, b = identity_parts
    common: dict[str, Any] = {"batch_size": 5, "device": "cpu", "image_size": SIZE}
    mixed = DALIIterator([str(a), str(b)], weights=[3, 1], labels=["cat", "bee", "ant"], **common)
    with mixed:
        assert mixed.classes == ("cat", "bee", "ant") and len(mixed) == 4
        for number in range(3):
            images, labels = epoch(mixed, number)
            got = ids(images)
            assert Counter(k >= 12 for k in got) == {False: 13, True: 4}
            assert labels.tolist() == [2 if k < 5 else 1 if k < 12 else 0 for k in got]
    with DALIIterator([str(a), str(b)], train=False, weights=[3, 1], **common) as val:
        assert sorted(ids(epoch(val, 0)[0])) == list(range(17)), "each image once"


def test_a_mix_without_sources_is_one_line() -> None:
    with pytest.raises(ConfigError, match=r"data\.sources") as err:
        build_loader(compose_config(["data=mix", "backend=torch"]), "train")
    assert "\n" not in str(err.value)


def test_sampling_beside_a_mix_is_refused_in_one_line(identity_parts: tuple[Path, Path]) -> None:
    mix = sources((identity_parts[0], 1), (identity_parts[1], 1))
    with pytest.raises(ConfigError, match="sampling=class_balanced and a mix of datasets"):
        loader(mix, "sampling=class_balanced")


def test_a_state_saved_with_the_datasets_in_another_order_is_refused(
    identity_parts: tuple[Path, Path],
) -> None:
    """Both orders read 8 of each dataset an epoch: the sizes tell the states apart."""
    a, b = identity_parts
    with loader(sources((a, 1), (b, 1)), "data.epoch_size=16") as ab:
        state = ab.state_dict()
    with (
        loader(sources((b, 1), (a, 1)), "data.epoch_size=16") as ba,
        pytest.raises(ConfigError, match=r"sampler='mix 8/12\+8/5' differs"),
    ):
        ba.load_state_dict(state)


def test_dali_iterator_takes_the_one_transform_its_image_folders_share(
    identity_parts: tuple[Path, Path],
) -> None:
    from torchvision import transforms
    from torchvision.datasets import ImageFolder

    def folder(root: Path, size: int) -> ImageFolder:
        pipeline = [transforms.RandomResizedCrop(size), transforms.ToTensor()]
        return ImageFolder(str(root), transform=transforms.Compose(pipeline))

    a, b = identity_parts
    with DALIIterator([folder(a, 24), folder(b, 24)], batch_size=17, device="cpu") as mixed:
        images, _ = next(iter(mixed))
        assert images.shape == (17, 3, 24, 24)
    for given in ([folder(a, 24), folder(b, 32)], [folder(a, 24), str(b)]):
        with pytest.raises(ConfigError, match="different transforms"):
            DALIIterator(given, device="cpu")
    with pytest.raises(ConfigError, match="different transforms"):
        DALIIterator([folder(a, 24), folder(b, 24)], device="cpu", augment="small")


def test_dali_iterator_refuses_a_mix_whose_datasets_disagree_or_whose_epoch_is_empty(
    identity_parts: tuple[Path, Path],
) -> None:
    from dali_pipes.data.specs import FolderData

    a, b = identity_parts
    disagree = [FolderData(root=str(a), batch_size=8), FolderData(root=str(b), batch_size=4)]
    cases: list[tuple[Any, dict[str, Any], str]] = [
        (disagree, {}, r"the datasets to mix say batch_size=\[8, 4\]"),
        ([str(a), str(b)], {"epoch_size": 0}, "epoch_size=0 is invalid"),
        ([str(a), str(b)], {"weights": [0, 0]}, "weights are all 0"),
        ([str(a), str(b)], {"weights": [1]}, "holds 1 weights for 2 datasets"),
        ([str(a), str(b)], {"labels": ["ant", "ant"]}, "names a class twice"),
        ([str(a), str(b)], {"train": False, "weights": [1, -1]}, "give each a number >= 0"),
    ]
    for given, keys, message in cases:
        with pytest.raises(ConfigError, match=message) as err:
            DALIIterator(given, device="cpu", **keys)
        assert "\n" not in str(err.value)


def test_pack_refuses_a_mix_in_one_line(identity_parts: tuple[Path, Path], tmp_path: Path) -> None:
    from dali_pipes.tools.pack import run_pack

    cfg = compose_config(
        ["data=mix", sources((identity_parts[0], None)), f"out={tmp_path / 'p'}"],
        config_name="pack",
    )
    with pytest.raises(ConfigError, match="pack each of its datasets on its own"):
        run_pack(cfg)
