"""``data.root=s3://bucket/prefix``: against a real S3 server (moto's, a separate process on
127.0.0.1), the loaders give exactly the local copy's batches, resume mid-epoch, ride out
the server going away and coming back, treat a deleted object as a bad file and name a
wrong bucket or key in one line."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import BUNDLED_PHOTOS
from helpers.batches import assert_same, batches, epoch_with, lazy
from helpers.runs import torchrun_command
from helpers.s3server import S3Server, relayed
from helpers.warm import python

from dali_pipes import build_loader, compose_config
from dali_pipes.data.manifest import read_manifest
from dali_pipes.data.s3 import forget_clients
from dali_pipes.data.sources import discover_folder, open_source
from dali_pipes.data.specs import FolderData
from dali_pipes.errors import DataError
from dali_pipes.tools.scan import run_scan

BACKENDS = ["torch", "dali-cpu"]
BUCKET = "datasets"


def upload(server: S3Server, prefix: str) -> str:
    """The shipped photos (3 class folders, one with a subfolder) under ``prefix``."""
    server.upload(Path(BUNDLED_PHOTOS), BUCKET, prefix)
    return f"s3://{BUCKET}/{prefix}"


def make(kind: str, root: str | Path, *extra: str, rank: int = 1, world_size: int = 2) -> Any:
    """A training loader over ``root``: rank 1 of 2, batches of 3 (sharding and padding)."""
    backend = kind.partition("-")[0]
    overrides = [
        "data=folder",
        f"data.root={root}",
        "data.batch_size=3",
        "seed=7",
        f"backend={backend}",
        "backend.device=cpu",
        "augment=imagenet",
        *([] if any(e.startswith("augment.train.crop.") for e in extra) else SIZE),
        *(["backend.num_workers=1"] if backend == "torch" else []),
        *extra,
    ]
    return build_loader(compose_config(overrides), "train", rank=rank, world_size=world_size)


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_bucket_gives_exactly_the_local_copys_batches_for_two_epochs(
    kind: str, s3: S3Server
) -> None:
    url = upload(s3, f"same-{kind}")
    with make(kind, BUNDLED_PHOTOS) as local, make(kind, url) as remote:
        assert remote.classes == local.classes
        for epoch in (0, 1):
            local.set_epoch(epoch)
            remote.set_epoch(epoch)
            assert_same(batches(remote), batches(local))


PRESETS = sorted(p.stem for p in (Path(__file__).parents[2] / "conf" / "augment").glob("*.yaml"))
SIZE = ["augment.train.crop.size=64"]
#: Each preset's crop at about 64 px (the multi-scale one's sides and crop branch scaled;
#: the one that keeps each image whole has no size: its padding to a stride instead).
SMALL = {
    "hflip": ["augment.train.crop.pad_multiple=32"],
    "detr": [
        "augment.train.crop.min_size=[48,64]",
        "augment.train.crop.max_size=96",
        "augment.train.crop.crop_sizes=[64]",
        "augment.train.crop.crop_range=[32,64]",
    ],
}


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("kind", BACKENDS)
def test_every_augmentation_preset_gives_from_a_bucket_the_local_copys_batches(
    kind: str, preset: str, s3: S3Server
) -> None:
    """The presets' random ops, batch stage (mixup, cutmix, erasing) included, are drawn
    from (seed, epoch, sample): where the bytes came from does not show."""
    url = upload(s3, f"presets-{kind}-{preset}")
    extra = [f"augment={preset}", *SMALL.get(preset, SIZE)]
    with make(kind, BUNDLED_PHOTOS, *extra) as local, make(kind, url, *extra) as remote:
        local.set_epoch(1)
        remote.set_epoch(1)
        assert_same(batches(remote), batches(local))


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_run_resumed_mid_epoch_from_a_bucket_continues_the_local_epoch_exactly(
    kind: str, s3: S3Server
) -> None:
    url = upload(s3, f"resume-{kind}")
    with make(kind, BUNDLED_PHOTOS) as local:
        whole = batches(local)
    with make(kind, url) as first:
        batches(first, 1)
        state = first.state_dict()
    with make(kind, url) as resumed:
        resumed.load_state_dict(state)
        assert_same(batches(resumed), whole[1:])


@pytest.mark.parametrize("kind", BACKENDS)
def test_an_epoch_from_a_bucket_saved_on_2_ranks_finishes_on_3_as_from_local_disk(
    kind: str, s3: S3Server
) -> None:
    """Elastic resume: the state two ranks saved after a batch, loaded by each of three
    ranks, gives from the bucket exactly the batches it gives from the local copy."""
    url = upload(s3, f"elastic-{kind}")
    with make(kind, url, rank=0, world_size=2) as first:
        batches(first, 1)
        state = first.state_dict()
    for rank in range(3):
        with make(kind, BUNDLED_PHOTOS, rank=rank, world_size=3) as local:
            local.load_state_dict(state)
            expected = batches(local)
        with make(kind, url, rank=rank, world_size=3) as remote:
            remote.load_state_dict(state)
            assert_same(batches(remote), expected)


def test_imagenet_layout_reads_train_and_val_under_the_prefix(s3: S3Server) -> None:
    s3.upload(Path(BUNDLED_PHOTOS), BUCKET, "imagenet/train")
    s3.upload(Path(BUNDLED_PHOTOS), BUCKET, "imagenet/val")
    cfg = compose_config(["data=imagenet", f"data.root=s3://{BUCKET}/imagenet", "backend=torch"])
    for split in ("train", "val"):
        with build_loader(cfg, split) as loader:
            assert len(loader) == 1 and sum(len(y) for _, y in loader) == 13
        files = open_source(
            FolderData(root=f"s3://{BUCKET}/imagenet/", train_dir="train", val_dir="val"), split
        ).files  # type: ignore[attr-defined]
        assert len(files) == 13 and all(
            f.startswith(f"s3://{BUCKET}/imagenet/{split}/") for f in files
        )


def test_training_on_an_imagenet_layout_in_a_bucket_writes_no_credentials(
    s3: S3Server, tmp_path: Path
) -> None:
    """``python -m dali_pipes.train data=imagenet data.root=s3://...`` trains and
    validates from the bucket; neither the key nor the secret shows in what it prints or
    in anything it writes (config.yaml, run.json, train.log, metrics, checkpoints)."""
    s3.upload(Path(BUNDLED_PHOTOS), BUCKET, "job/train")
    s3.upload(Path(BUNDLED_PHOTOS), BUCKET, "job/val")
    out = tmp_path / "run"
    command = [python(), "-m", "dali_pipes.train", "data=imagenet"]
    command += [f"data.root=s3://{BUCKET}/job", "data.batch_size=4", "augment=small"]
    command += ["model=small_cnn", "trainer=quick", "trainer.epochs=1", "backend.device=cpu"]
    done = subprocess.run(
        [*command, f"output_dir={out}"],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    [row] = list(csv.DictReader((out / "metrics.csv").open()))
    assert int(row["samples"]) == 13
    written = [p for p in out.rglob("*") if p.is_file()]
    assert {"config.yaml", "metrics.csv"} <= {p.name for p in written}
    secrets = [v.encode() for k, v in s3.env().items() if k.startswith("AWS_") and "KEY" in k]
    assert len(secrets) == 2
    for name, data in [("stdout", done.stdout), ("stderr", done.stderr)] + [
        (str(p), p.read_bytes()) for p in written
    ]:
        assert not any(secret in data for secret in secrets), name


def assert_same_bytes(got: list[Any], expected: list[Any]) -> None:
    """Each read gave the bytes expected (none is an error)."""
    assert len(got) == len(expected) > 0
    for a, b in zip(got, expected, strict=True):
        assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray), a
        assert np.array_equal(a, b)


def test_the_run_goes_on_when_the_server_stops_and_comes_back_mid_epoch(
    s3: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server, behind a relay on a port of its own, goes away after the first batch
    (open connections reset, new ones refused) and comes back a second later: the epoch
    ends with the same batches as from local disk; the reads in between were retried."""
    url = upload(s3, "restart")
    with make("torch", BUNDLED_PHOTOS, *lazy("torch")) as local:
        whole = batches(local)
    with relayed(s3, monkeypatch) as relay, make("torch", url, *lazy("torch")) as remote:
        down = time.monotonic()
        got = epoch_with(remote, lambda: relay.away_for(1.0))  # reads meet a closed port
        assert time.monotonic() - down >= 1.0  # they waited for the server
        assert remote.skipped == 0
    assert_same(got, whole)


@pytest.mark.parametrize("kind", BACKENDS)
def test_the_run_goes_on_when_the_server_process_freezes_and_resumes_mid_epoch(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server process itself stopped (SIGSTOP: connections still accepted by the
    kernel, nothing answered) for 2 s after the first batch, then continued: the stalled
    requests time out and are sent again, and the epoch is the local copy's."""
    server = S3Server().start()
    assert server.proc is not None
    pid = server.proc.pid

    def frozen_for_two_seconds() -> None:
        os.kill(pid, signal.SIGSTOP)
        threading.Timer(2.0, os.kill, (pid, signal.SIGCONT)).start()

    try:
        for name, value in server.env().items():
            monkeypatch.setenv(name, value)
        forget_clients()
        url = upload(server, f"frozen-{kind}")
        extra = [*lazy(kind), "data.read_timeout=8"]  # requests time out after 2 s
        with make(kind, BUNDLED_PHOTOS, *extra, rank=0, world_size=1) as local:
            whole = batches(local)
        with make(kind, url, *extra, rank=0, world_size=1) as remote:
            frozen = time.monotonic()
            got = epoch_with(remote, frozen_for_two_seconds)
            assert time.monotonic() - frozen >= 2.0  # they waited for the server
            assert remote.skipped == 0
        assert_same(got, whole)
    finally:
        os.kill(pid, signal.SIGCONT)
        server.stop()
        forget_clients()


def test_throttling_replies_are_retried_and_past_the_bound_are_one_line(
    s3: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``503 SlowDown`` on the next connections: a few are retried away and the bytes are
    the local files'; more than ``AWS_MAX_ATTEMPTS`` stop the read with one line."""
    url = upload(s3, "throttled")
    expected = discover_folder(BUNDLED_PHOTOS).read(list(range(13)))
    with relayed(s3, monkeypatch) as relay:
        remote = discover_folder(url)
        relay.throttle = 6
        assert_same_bytes(remote.read(list(range(len(remote)))), expected)
        assert relay.throttle == 0
        monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")
        forget_clients()
        relay.throttle = 1000
        with pytest.raises(DataError) as info:
            remote.read([0])
    line = str(info.value)
    assert remote.files[0] in line and "SlowDown" in line and "\n" not in line


def test_a_request_or_a_body_that_stalls_is_sent_again_within_the_read_deadline(
    s3: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that swallows requests (the connection held open, no reply), then one whose
    replies stop after their head: each stalled GET times out after a quarter of
    ``data.read_timeout`` and is sent again, so the bytes are the local files' and no read
    misses its deadline; a server that never answers is one line within the bound."""
    url = upload(s3, "stalled")
    expected = discover_folder(BUNDLED_PHOTOS).read(list(range(13)))
    with relayed(s3, monkeypatch) as relay:
        remote = discover_folder(url, read_timeout=4.0)  # requests time out after 1 s
        for requests, bodies in ((3, 0), (0, 3)):
            relay.stall_next(requests, bodies)
            start = time.monotonic()
            assert_same_bytes(remote.read(list(range(13))), expected)
            assert relay.stall == relay.stall_body == 0, "every stall met a read"
            assert time.monotonic() - start >= 1.0
        monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")
        forget_clients()
        # The client of the new settings made before the clock starts: making one costs a
        # second or more of CPU on a loaded machine, which is not the retries' time.
        assert_same_bytes(remote.read([0]), expected[:1])
        relay.stall = 1000
        start = time.monotonic()
        with pytest.raises(DataError) as info:
            remote.read([0])
        assert time.monotonic() - start < 4.0  # the retries' bound, before the deadline
    line = str(info.value)
    assert remote.files[0] in line and "no answer" in line and "ReadTimeoutError" in line
    assert "\n" not in line


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_run_goes_on_with_the_local_batches_when_requests_stall_mid_epoch(
    kind: str, s3: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = upload(s3, f"stalls-{kind}")
    # Requests time out after 2 s: a read that meets both stalls ends 4 s before its deadline.
    extra = [*lazy(kind), "data.read_timeout=8", "data.on_error=skip"]
    with make(kind, BUNDLED_PHOTOS, *extra, rank=0, world_size=1) as local:
        whole = batches(local)
    with (
        relayed(s3, monkeypatch) as relay,
        make(kind, url, *extra, rank=0, world_size=1) as remote,
    ):
        got = epoch_with(remote, lambda: relay.stall_next(requests=1, bodies=1))
        assert relay.stall == relay.stall_body == 0, "every stall met a read"
        assert remote.skipped == 0, remote.bad_files
    assert_same(got, whole)


@pytest.mark.parametrize("kind", BACKENDS)
def test_an_object_deleted_mid_epoch_is_a_bad_file_under_on_error(kind: str, s3: S3Server) -> None:
    url = upload(s3, f"deleted-{kind}")
    files = discover_folder(url).files
    with make(kind, url, "data.on_error=skip", rank=0, world_size=1) as loader:
        gone = files[-1]
        s3.client().delete_object(Bucket=BUCKET, Key=gone[len(f"s3://{BUCKET}/") :])
        seen = sum(len(labels) for _, labels in batches(loader))
        assert seen == len(files) and loader.skipped == 1  # a substitute took its slot
        assert gone in loader.bad_files and "gone" in loader.bad_files[gone]
    with make(kind, url, rank=0, world_size=1) as loader:  # on_error=raise: the run stops
        gone = files[0]
        s3.client().delete_object(Bucket=BUCKET, Key=gone[len(f"s3://{BUCKET}/") :])
        with pytest.raises(DataError, match=f"{gone}: the object is gone"):
            batches(loader)


def test_a_wrong_bucket_is_one_line_naming_the_url(s3: S3Server) -> None:
    with pytest.raises(DataError) as info:
        make("torch", "s3://no-such-bucket/photos")
    assert "s3://no-such-bucket/photos" in str(info.value) and "does not exist" in str(info.value)
    assert "\n" not in str(info.value)


def test_a_missing_prefix_is_one_line_naming_the_url(s3: S3Server) -> None:
    upload(s3, "present")
    with pytest.raises(DataError, match=f"s3://{BUCKET}/absent has no class folders"):
        make("torch", f"s3://{BUCKET}/absent")


def test_a_wrong_key_is_one_line_naming_the_url(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that checks credentials (moto with its IAM on): an unknown key is refused."""
    server = S3Server(auth=True).start()
    try:
        for name, value in server.env().items():
            monkeypatch.setenv(name, value)
        forget_clients()
        with pytest.raises(DataError) as info:
            make("torch", f"s3://{BUCKET}/photos")
        line = str(info.value)
        assert f"s3://{BUCKET}/photos" in line and "AWS_ACCESS_KEY_ID" in line and "\n" not in line
    finally:
        server.stop()
        forget_clients()


def test_scan_of_a_bucket_lists_its_bad_objects_by_url_for_data_exclude(
    s3: S3Server, tmp_path: Path
) -> None:
    url = upload(s3, "scanned")
    bad = f"{url}/crabs/broken.jpg"
    s3.client().put_object(Bucket=BUCKET, Key="scanned/crabs/broken.jpg", Body=b"not a jpeg")
    out = tmp_path / "bad.csv"
    cfg = compose_config(
        ["data=folder", f"data.root={url}", f"scan.out={out}", "scan.splits=[train]"],
        config_name="scan",
    )
    report = run_scan(cfg)
    assert report["files"] == 14 and list(read_manifest(out)) == [bad]
    kept = discover_folder(url, exclude=str(out))
    assert len(kept) == 13 and bad not in kept.files


def test_a_bucket_is_listed_once_per_job_and_sent_to_the_other_ranks(
    s3: S3Server, tmp_path: Path
) -> None:
    url = upload(s3, "ranks")
    probe = Path(__file__).resolve().parents[1] / "probes" / "listing_probe.py"
    done = subprocess.run(
        torchrun_command(2, str(probe), url, str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    files = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert files[0] == files[1] == list(discover_folder(url).files)
