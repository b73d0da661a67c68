"""python -m dali_pipes.show: previews on every backend, exact replay of a run's step, the
op gallery; each a real PNG of the size its layout gives, with content."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import torch
from conftest import BUNDLED_PHOTOS, REPO
from helpers.png import check_png
from helpers.warm import python
from omegaconf import DictConfig, OmegaConf

from dali_pipes import compose_config
from dali_pipes.augment.auto import slots
from dali_pipes.augment.base import op_names
from dali_pipes.errors import ConfigError
from dali_pipes.tools.grid import PAD
from dali_pipes.tools.show import label_text, run_show
from dali_pipes.train.run import train

# The batch stage is part of what a step trained on: RandAugment per sample, then mixup or
# cutmix and random erasing on the batch.
AUGMENT = [
    "augment=small",
    "augment.train.crop.size=48",
    "+augment.train.ops.randaugment={num_ops: 2, magnitude: 9}",
    "+augment.train.batch.random_erasing={p: 0.5}",
    "+augment.train.batch.mixup={mixup_alpha: 0.8, cutmix_alpha: 1.0}",
]
DATA = ["data=folder", f"data.root={BUNDLED_PHOTOS}", "data.batch_size=4"]
BACKENDS = {
    "torch": ["backend=torch", "backend.device=cpu", "backend.num_workers=0"],
    "dali-cpu": ["backend=dali", "backend.device=cpu", "backend.num_threads=1"],
}


def first_batch_in_tensorboard(run: Path, size: int) -> None:
    """The run logged its first batch's images (un-normalised) to TensorBoard at step 0."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run / "tensorboard"), size_guidance={"images": 0})
    events.Reload()
    (image,) = events.Images("train/first_batch")
    assert image.step == 0 and image.height >= size and image.width >= 4 * size
    png = run / "first_batch.png"
    png.write_bytes(image.encoded_image_string)
    check_png(png, width=image.width, height=image.height)


def grid_width(columns: int, tile: int) -> int:
    return columns * (tile + PAD) + PAD


def preview_config(out: Path, *overrides: str, samples: int, tile: int) -> DictConfig:
    """``show``'s config for a preview of ``samples`` samples on dali-cpu and torch, one DALI
    thread, written to ``out``."""
    return compose_config(
        [
            *overrides,
            f"show.samples={samples}",
            f"show.tile={tile}",
            "show.backends=[dali-cpu,torch]",
            f"show.out={out}",
            "backend.num_threads=1",
        ],
        config_name="show",
    )


def test_a_preview_draws_each_sample_on_every_backend_and_their_difference(
    tmp_path: Path,
) -> None:
    out = tmp_path / "show.png"
    cfg = preview_config(out, *DATA, *AUGMENT, samples=3, tile=64)
    shown = run_show(cfg)["shown"]
    assert [s.column for s in shown] == ["dali-cpu", "torch"]
    for s in shown:  # soft targets from mixup, on both backends the same
        assert s.images.shape == (3, 3, 48, 48) and s.labels.shape == (3, 3)
    torch.testing.assert_close(shown[0].labels, shown[1].labels)
    pixels = check_png(out, width=grid_width(3, 64))
    assert pixels.shape[0] > 3 * 64


def test_a_soft_target_is_labelled_with_its_two_largest_classes() -> None:
    classes = ("birds", "crabs", "subsampled")
    assert label_text(torch.tensor(2), classes) == "subsampled"
    assert label_text(torch.tensor([0.1, 0.7, 0.2]), classes) == "crabs 0.70\nsubsampled 0.20"


@pytest.mark.slow
@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_show_replays_exactly_the_batch_a_run_trained_on(tmp_path: Path, backend: str) -> None:
    """A run saves the batches it trained on (trainer.save_batches); show renders step k
    from the run's directory and its tensors equal the saved ones, batch stage included.
    Three steps per epoch (max_steps_per_epoch) of four batches: step 4 is epoch 1's
    second batch."""
    run = tmp_path / "run"
    cfg = compose_config(
        [
            *DATA,
            *AUGMENT,
            *BACKENDS[backend],
            "augment.val.crop.size=48",
            "augment.val.crop.resize=56",
            "model=small_cnn",
            "model.arch.width=4",
            "trainer=quick",
            "trainer.epochs=2",
            "trainer.max_steps_per_epoch=3",
            "trainer.save_batches=6",
            "seed=3",
            f"output_dir={run}",
        ]
    )
    train(cfg)
    first_batch_in_tensorboard(run, size=48)
    saved = sorted(p.name for p in (run / "batches").glob("*.pt"))
    assert saved == [f"step_{k:07d}_rank_0.pt" for k in range(6)]
    for step, (epoch, batch) in ((4, (1, 1)), (2, (0, 2))):
        out = tmp_path / f"step{step}.png"
        show = compose_config(
            [
                f"show.run={run}",
                f"show.step={step}",
                f"show.backends=[{backend}]",
                "show.tile=48",
                f"show.out={out}",
            ],
            config_name="show",
        )
        (shown,) = run_show(show)["shown"]
        kept = torch.load(run / "batches" / f"step_{step:07d}_rank_0.pt", weights_only=True)
        assert (kept["epoch"], kept["batch"]) == (epoch, batch)
        assert shown.labels.shape == (4, 3)  # soft targets: the batch stage ran
        assert torch.equal(shown.images, kept["images"]), (backend, step)
        assert torch.equal(shown.labels, kept["labels"]), (backend, step)
        check_png(out, width=grid_width(1, 48))
    # A neighbouring step is another batch (the comparison can fail).
    other = torch.load(run / "batches" / "step_0000003_rank_0.pt", weights_only=True)
    assert not torch.equal(other["images"], kept["images"])


def test_replaying_a_missing_run_a_step_it_never_reached_or_another_rank_is_one_line(
    tmp_path: Path,
) -> None:
    def show(*extra: str) -> None:
        run_show(compose_config([f"show.run={tmp_path}", *extra], config_name="show"))

    with pytest.raises(ConfigError, match=r"config\.yaml"):
        show()
    # what a run writes: its config, and its world size and epoch length
    saved = compose_config([*DATA, "trainer=quick", "trainer.epochs=2"])
    OmegaConf.save(saved, tmp_path / "config.yaml")
    (tmp_path / "run.json").write_text('{"world_size": 2, "batches_per_epoch": 2}')
    with pytest.raises(ConfigError, match=r"show\.step=4 is invalid: the run.s last step is 3"):
        show("show.step=4")
    with pytest.raises(ConfigError, match=r"show\.rank=2 is invalid: the run had 2 rank"):
        show("show.rank=2")


@pytest.mark.slow
def test_the_gallery_draws_every_registered_op_and_auto_augment_operation(
    tmp_path: Path,
) -> None:
    out = tmp_path / "gallery.png"
    cfg = compose_config(
        ["show.gallery=true", "show.tile=48", f"show.out={out}"], config_name="show"
    )
    titles = run_show(cfg)["rows"]
    operations = list(slots.table("standard"))
    assert titles == ["original", *op_names(crop=False), *operations]
    pixels = check_png(out)
    assert pixels.shape[0] > len(titles) * 48  # one row of tiles per op or operation


def test_show_runs_from_the_command_line(tmp_path: Path) -> None:
    out = tmp_path / "cli.png"
    done = subprocess.run(
        [
            python(),
            "-m",
            "dali_pipes.show",
            *DATA,
            "augment=small",
            "show.samples=2",
            "show.tile=32",
            "show.backends=[torch]",
            "backend=torch",
            "backend.num_workers=0",
            f"show.out={out}",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"written to {out}" in done.stdout
    check_png(out, width=grid_width(1, 32))
